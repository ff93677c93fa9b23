"""Issue 31, item 4: a slow step (seconds, not milliseconds) reads the same in every view: seconds with three
significant figures, ms or µs under 0.1 s, and never a number in scientific notation (`1.46e+04 ms per step`)."""

import re

import pytest

from dlperf.report import best, html, load, predicted, profile, table
from dlperf.report.format import interval, seconds, table_seconds
from dlperf.store import Store
from dlperf.store.machine import MeasuredPeak
from report import synthetic

SCIENTIFIC = re.compile(r"\d[eE][+-]\d")  # 1.46e+04, 2e-05; not a colour such as #dde2e6
SLOW = 32.5  # every synthetic step this many times slower: fcn-r cpu:1 fp32 takes 26 s, cpu:2 14.6 s


@pytest.fixture
def slow_db(tmp_path, monkeypatch):
    cells = [(*c[:6], c[6] * SLOW if isinstance(c[6], float) else c[6]) for c in synthetic.CELLS]
    profiles = [(k, s, {c: v * SLOW for c, v in cats.items()}, ops) for k, s, cats, ops in synthetic.PROFILES]
    monkeypatch.setattr(synthetic, "CELLS", cells)
    monkeypatch.setattr(synthetic, "PROFILES", profiles)
    path = tmp_path / "slow.db"
    store = Store.open(path, create=True)
    run_id = synthetic.fill(store)
    synthetic.add_profiles(store, run_id, tmp_path)
    # a dispatch cost of 20 ms (a loaded machine): the floor of 4100 ops is 82 s
    store.record_peaks(synthetic.fingerprint(synthetic.ENV), synthetic.ENV, [
        MeasuredPeak(framework="torch", framework_version="2.13.0+cpu", device="cpu", threads=2, kind="dispatch",
                     value=0.02)])  # fmt: skip
    store.close()
    return path


def test_seconds_have_three_significant_figures_at_every_size():
    assert [seconds(v) for v in (14.6, 1.4567, 0.5, 0.0042, 146.2, 1460.0)] == [
        "14.6 s", "1.46 s", "0.500 s", "4.20 ms", "146 s", "24.3 min"]  # fmt: skip
    # a time that rounds up to the next unit is said in it, with three figures: not "1000 µs", "100.0 ms"
    assert [seconds(v) for v in (0.0009996, 0.09996, 9.9996e-7, 999.96, 0.00099949)] == [
        "1.00 ms", "0.100 s", "1.00 µs", "16.7 min", "999 µs"]  # fmt: skip
    # under a microsecond in ns: a batch-1 copy over the host link printed "0.00813 µs"
    assert [seconds(v) for v in (8.13e-9, 9.9949e-7, 4e-10)] == ["8.13 ns", "999 ns", "0.400 ns"]


def test_no_view_writes_a_slow_step_in_scientific_notation(slow_db, capsys):
    from dlperf.commands.profile import print_profiles
    from dlperf.commands.table import print_table

    data = load.load(str(slow_db))
    outputs = {"report": html.render(data)}
    print_table(str(slow_db), None, "text")
    print_table(str(slow_db), None, "md", explain=True)
    print_table(str(slow_db), None, "text", best=True)
    print_profiles(str(slow_db), data.runs[-1].id)
    outputs["terminal"] = capsys.readouterr().out
    outputs["best"] = best.render_markdown(best.build(data.cells, data.samples))
    outputs["predicted"] = "\n".join(predicted.lines(predicted.rows(data.cells, data.predictions)))
    outputs["table"] = table.render_markdown(table.build(data.runs[-1].id, data.cells))
    assert "26.000" in outputs["terminal"] and "14.6 s per step" in outputs["terminal"]  # the slow cells are shown
    assert "dispatch floor 82.0 s" in outputs["terminal"] and "x 20.0 ms" in outputs["terminal"]
    for name, text in outputs.items():
        assert not SCIENTIFIC.findall(text), (name, [text[max(0, m.start() - 60) : m.end() + 20]
                                                     for m in SCIENTIFIC.finditer(text)][:3])  # fmt: skip
    assert profile  # the view of `dlperf profile` is reached through print_profiles


def test_rates_keep_three_figures_without_an_exponent():
    from dlperf.report.format import figure

    assert [figure(v) for v in (40.0, 2.5, 14_600.0, 123_456.0, 0.0004)] == ["40", "2.5", "14600", "123000", "0.0004"]


def test_an_interval_has_the_figures_that_tell_its_ends_apart():
    """Thousands of sub-millisecond steps give an interval narrower than three figures: `dlperf advise` printed
    "95% interval of the step 189 µs-189 µs"."""
    assert interval(189.2e-6, 189.4e-6) == "189.2 µs-189.4 µs"
    assert interval(0.189, 0.195) == "0.189 s-0.195 s"  # three figures when they suffice
    assert interval(0.45012, 0.45014) == "0.45012 s-0.45014 s"
    assert interval(2.0, 2.0) == "2.00 s"  # no width at five figures: one figure
    assert interval(0.4501, 0.4504, table_seconds, "–") == "0.4501 s–0.4504 s"
    assert interval(0.0021, 0.00211, table_seconds, "–") == "2.10 ms–2.11 ms"
