"""A profile's figures in machine-readable output: `dlperf profile --format json` and `dlperf export`'s `profile`
column, both the figures the text is printed from (`report.cell_profile.CellProfile`); and the words for a cell
measured without a profile."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

from commands.test_explain import FCN_KEY, profiled_db  # noqa: F401 - profiled_db is a fixture
from conftest import one_line_error
from dlperf.store import Store
from dlperf.store.records import ProfileOutcome
from dlperf.vocab import Status

TIMED_OUT_KEY = "fcn-r|torch|cpu|2|fp32"  # report/synthetic.py's run, 0.45 s per step


def cli(capsys, *args):
    from dlperf.cli import main

    code = main(list(map(str, args)))
    out = capsys.readouterr()
    return SimpleNamespace(returncode=code, stdout=out.out, stderr=out.err)


def printed(db, capsys, fmt: str) -> str:
    from dlperf.commands.run import print_profiles

    print_profiles(str(db), 1, *([fmt] if fmt != "text" else []))  # text: as before --format
    return capsys.readouterr().out


def test_profile_json_holds_each_cells_step_categories_verdict_and_trace_as_text_says(profiled_db, capsys):  # noqa: F811
    store = Store.open(profiled_db, create=False)
    store.record_profile(1, TIMED_OUT_KEY, ProfileOutcome(Status.TIMEOUT, "exceeded --timeout 5 s", 5.0, None))
    store.close()
    data = json.loads(printed(profiled_db, capsys, "json"))
    cells = {c["key"]: c for c in data["cells"]}
    fcn = cells[FCN_KEY]
    # of the timed 0.8 s: the profiler's 0.1 s taken out of host (0.6 of the 0.9 s profiled)
    assert (round(fcn["step_s"], 9), fcn["profiled_step_s"], fcn["profiled_steps"]) == (0.8, 0.9, 5)
    assert round(fcn["categories"]["host"]["seconds"], 9) == 0.5
    assert round(fcn["categories"]["host"]["share"], 3) == 0.625
    assert list(fcn["categories"]) == ["host", "matmul", "elementwise"]  # most time first, as the text
    assert fcn["verdict"]["label"] == "launch-bound (highly)" and fcn["verdict"]["modes"] == ["compile"]
    assert fcn["verdict"]["figure"] == "host/dispatch 62% of the step, 4100 ops per step"
    assert (fcn["ops_per_step"], fcn["trace"], fcn["profile_status"]) == (4100, "/traces/fcn-r.json.gz", "ok")
    assert round(fcn["profiler_overhead"], 3) == 1.125
    timed_out = cells[TIMED_OUT_KEY]
    assert (timed_out["profile_status"], timed_out["error"]) == ("timeout", "exceeded --timeout 5 s")
    assert "categories" not in timed_out
    failed = next(c for c in data["cells"] if c["status"] == "failed")
    assert failed["profile_status"] is None and failed["error"]  # its own error: why it has no profile

    text = printed(profiled_db, capsys, "text")  # the same figures the text says, rounded
    shares = ", ".join(f"{k} {100 * v['share']:.0f}%" for k, v in fcn["categories"].items())
    assert f"  where the timed step goes: {shares}\n" in text
    assert f"  verdict: {fcn['verdict']['label']}: {fcn['verdict']['figure']}\n" in text


def test_profile_takes_format_text_or_json(tmp_path, capsys):
    from dlperf.cli import build_parser, parse

    assert parse(build_parser(), ["profile", "tiny-fcn-r", "--format", "json"]).format == "json"
    assert parse(build_parser(), ["profile", "tiny-fcn-r"]).format == "text"
    db = tmp_path / "d.db"
    one_line_error(cli(capsys, "profile", "tiny-fcn-r", "--format", "yaml", "--db", db), "--format 'yaml'")
    assert not db.exists()


def test_export_carries_each_cells_profile_as_profile_json_gives_it(profiled_db, capsys, tmp_path):  # noqa: F811
    profiles = {c["key"]: c for c in json.loads(printed(profiled_db, capsys, "json"))["cells"]}
    jsonl, csv = tmp_path / "x.jsonl", tmp_path / "x.csv"
    for out in (jsonl, csv):
        proc = cli(capsys, "export", "--db", profiled_db, "-o", out)
        assert proc.returncode == 0, proc.stderr
    records = {r["key"]: r for r in map(json.loads, jsonl.read_text().splitlines())}
    assert records[FCN_KEY]["profile"] == profiles[FCN_KEY]
    assert all(r["profile"] is None for k, r in records.items() if k != FCN_KEY)  # no profile stored
    assert '""bound"": ""launch""' in csv.read_text()  # one column, its object as JSON


def test_a_measured_cell_without_a_profile_is_not_said_to_be_unmeasured(profiled_db, capsys):  # noqa: F811
    """An ok cell of a profiled run with no profile row (the run stopped before it was profiled) read "not
    profiled: the cell was not measured", beside its own median."""
    text = printed(profiled_db, capsys, "text")
    said = re.search(r"fcn-r torch cpu:2 fp32: 0\.450 s per step\n  not profiled: (.*)\n", text)
    assert said and said.group(1) == "measured, but its run stored no profile of it", text
    assert "the cell was not measured" not in text


def test_the_dispatch_floors_cost_says_who_measured_it(profiled_db, capsys):  # noqa: F811
    """`dlperf peak`'s cost for the cell's machine and threads, else the one the profiled process measured after its
    profile (`Profiled.dispatch_s`): a profile without either has no floor."""
    from dataclasses import replace

    from commands.test_explain import LAUNCH
    from dlperf.store.machine import MeasuredPeak

    def floor_of_fcn() -> dict | None:
        cells = json.loads(printed(profiled_db, capsys, "json"))["cells"]
        return next(c for c in cells if c["key"] == FCN_KEY)["dispatch_floor"]

    assert floor_of_fcn() is None
    store = Store.open(profiled_db, create=False)
    own = ProfileOutcome(Status.OK, None, 3.0, replace(LAUNCH, dispatch_s=2e-5))
    store.record_profile(1, FCN_KEY, own)
    store.close()
    floor = floor_of_fcn()
    assert (floor["cost_s"], floor["cost_from"], floor["count"]) == (2e-5, "the profiled process", 4100)
    assert round(floor["seconds"], 9) == 0.082  # 4100 x 20 µs
    store = Store.open(profiled_db, create=False)
    peak = {"framework": "torch", "device": "cpu", "threads": 1, "kind": "dispatch", "value": 1e-4}
    store.record_peaks(store.run(1).fingerprint, {}, [MeasuredPeak(**peak)])
    store.close()
    floor = floor_of_fcn()
    assert (floor["cost_s"], floor["cost_from"]) == (1e-4, "dlperf peak")
