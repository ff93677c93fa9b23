"""The profile child: launched on a tiny workload it reports Built, Profiled and Done; a backend without a profiler
makes the profile `unsupported`, with the reason."""

import gzip
import json
import os
import sys
import types
from dataclasses import replace

from dlperf.protocol import Built, Cell, Done, Profiled, ProfileTask, Unsupported, first, read_events, write_task
from dlperf.runner.launch import launch
from dlperf.worker import child
from dlperf.worker import profile as profile_worker
from dlperf.workloads import BUILTIN


def task(tmp_path, framework="torch") -> ProfileTask:
    cell = Cell("tiny-fcn-r", framework, "cpu", 1, "fp32")
    return ProfileTask(cell, BUILTIN["tiny-fcn-r"].to_json(), steps=2, warmup=1, trace_dir=str(tmp_path / "traces"))


def test_a_launched_profile_reports_where_the_step_went_and_keeps_its_trace(tmp_path):
    launched = launch(task(tmp_path), sys.executable, 1, 60)
    assert launched.child.returncode == 0, launched.stderr[-2000:]
    events = launched.main
    profiled = first(events, Profiled)
    assert first(events, Built) is not None and first(events, Done) is not None
    assert [type(e) for e in events].index(Profiled) > [type(e) for e in events].index(Built)
    assert profiled.steps == 2 and abs(sum(profiled.categories.values()) - profiled.step_s) < 1e-9 * profiled.step_s
    assert profiled.trace is not None and profiled.trace.startswith(str(tmp_path / "traces"))
    assert "tiny-fcn-r-torch-cpu-t1-fp32" in profiled.trace
    with gzip.open(profiled.trace, "rt") as f:
        assert isinstance(json.load(f)["traceEvents"], list)
    assert os.listdir(tmp_path / "traces") == [os.path.basename(profiled.trace)]  # renamed whole: no partial left
    mask = os.umask(0o022)
    os.umask(mask)
    assert os.stat(profiled.trace).st_mode & 0o777 == 0o666 & ~mask  # the user's umask, as every file dlperf writes


def test_a_trace_over_its_cap_is_not_kept_under_any_name(tmp_path):
    launched = launch(replace(task(tmp_path), max_trace_bytes=1000), sys.executable, 1, 60)
    profiled = first(launched.main, Profiled)
    assert profiled.trace is None and any("above the cap of 1000 bytes" in n for n in profiled.notes)
    assert os.listdir(tmp_path / "traces") == []


def test_a_backend_without_a_profiler_is_unsupported_with_its_reason(tmp_path, monkeypatch):
    def no_profiler(*args):
        raise NotImplementedError("profile: this framework's trace is not mapped")

    class Step:
        params, compiles = 1, False

        def step(self):
            pass

        def sync(self):
            pass

        def settings(self):
            return {}

    fake = types.SimpleNamespace(
        configure_threads=lambda n: {}, build=lambda w, d, m: Step(), version=lambda: "0", profile=no_profiler
    )
    monkeypatch.setattr(profile_worker, "backend", lambda framework: fake)
    monkeypatch.setattr(child, "die_with_parent", lambda: None)
    # a child's own temporary folder is the process's for good (tempfile.tempdir, TMPDIR): pytest's would stay this
    # test's tmp_path, which a plain user may not enter (tests/store/test_faults.py then failed after this test)
    monkeypatch.setattr(child, "own_temp", lambda folder: None)
    write_task(task(tmp_path, "fake"), tmp_path / "task.json")
    assert profile_worker.main(["worker", str(tmp_path / "task.json"), str(tmp_path / "events.jsonl")]) == 0
    events = read_events(tmp_path / "events.jsonl")
    assert first(events, Unsupported).reason == "profile: this framework's trace is not mapped"
    assert first(events, Profiled) is None and first(events, Done) is None


def test_a_loader_cell_is_profiled_with_its_loader_and_its_wait_is_data(tmp_path, torch):
    from conftest import write_datasets

    threads = torch.get_num_threads()
    data = write_datasets(tmp_path / "data")
    cell = Cell("tiny-alexnet-s", "torch", "cpu", 1, "fp32", loader="w0")
    loaded = ProfileTask(cell, BUILTIN["tiny-alexnet-s"].to_json(), steps=3, warmup=1, data=str(data))
    events = []
    try:
        profile_worker.run_profile(loaded, events.append)
    finally:
        torch.set_num_threads(threads)
    profiled = first(events, Profiled)
    assert profiled.categories["data"] > 0  # decoding, cropping and copying the JPEGs of each batch
    assert abs(sum(profiled.categories.values()) - profiled.step_s) < 1e-9 * profiled.step_s
