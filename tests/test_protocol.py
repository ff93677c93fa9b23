"""The seam between parent and children (`dlperf.protocol`): every task survives its trip through JSON, every event
is read back as its type, and what a kill leaves half-written is dropped, never misread."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest

from conftest import ROOT
from dlperf.answers import WorkloadRequest
from dlperf.figures import CommFigures, LoaderFigures, LossCheckFigures
from dlperf.measure.timer import TimerConfig
from dlperf.protocol import (
    EVENTS,
    MEMORY_KINDS,
    TASKS,
    Answer,
    AnswerPart,
    Cell,
    CellTask,
    Comm,
    CommTask,
    DDPTask,
    Done,
    Error,
    Event,
    Joined,
    Loader,
    LossCheck,
    PeakTask,
    ProbeTask,
    ProfileTask,
    Reporter,
    Sample,
    Start,
    StopRule,
    decode,
    events_file,
    first,
    read_events,
    read_task,
    write_task,
)

CELL = Cell("tiny-fcn-r", "torch", "cpu", 2, "bf16")
EXAMPLES = [
    CellTask(CELL, 1, {"name": "tiny-fcn-r"}, TimerConfig(min_steps=3), pin_cpus=[0, 1], loss_check=True,
             check_if_faster_than_s=0.5, stop=StopRule(0.5, 2.0, "the mode it would replace")),
    DDPTask(dataclasses.replace(CELL, nproc=2, scaling="strong"), 0, {}, TimerConfig(), group_timeout_s=30,
            rank_cpus={"0": [0], "1": [1]}),
    PeakTask("torch", "cpu", 1, ["fp32", "bf16"], [64, 128], 8 * 2**20, 0.2),
    CommTask("gloo", 1, [4096, 2**20], 20, 5, 60.0),
    ProbeTask("torch", WorkloadRequest("/x.py:make")),
    ProfileTask(CELL, {"name": "tiny-fcn-r"}, steps=3, warmup=2, trace_dir="/tmp/t", max_trace_bytes=2**20),
]  # fmt: skip


def test_there_is_one_task_type_per_kind_of_child():
    assert sorted(TASKS) == ["cell", "comm", "ddp", "multiworker", "peak", "probe", "profile"]
    assert {t.WORKER for t in TASKS.values()} == {
        f"dlperf.worker.{m}" for m in ("cell", "ddp", "multiworker", "peak", "comm", "probe", "profile")
    }
    assert [k for k, t in TASKS.items() if t.DISTRIBUTED] == ["ddp", "multiworker", "comm"]


@pytest.mark.parametrize("task", EXAMPLES, ids=lambda t: t.KIND)
def test_every_task_survives_json(task, tmp_path):
    write_task(task, tmp_path / "task.json")
    assert read_task(tmp_path / "task.json") == task
    assert json.loads((tmp_path / "task.json").read_text())["kind"] == task.KIND


def test_a_probe_task_names_its_question_on_the_wire_and_an_unknown_one_is_refused(tmp_path):
    write_task(ProbeTask("torch", WorkloadRequest("/x.py:make")), tmp_path / "task.json")
    wire = json.loads((tmp_path / "task.json").read_text())
    assert wire == {
        "kind": "probe",
        "framework": "torch",
        "request": {"what": "workload", "source": "/x.py:make", "data_dir": None},
    }
    (tmp_path / "task.json").write_text(json.dumps({**wire, "request": {"what": "nosuch"}}))
    with pytest.raises(ValueError, match="unknown probe request 'nosuch'"):
        read_task(tmp_path / "task.json")


def test_every_event_reads_back_as_its_type():
    examples = [Start(7, "/py", rank=1, world=2, local_rank=1, host="h"), Sample(0.25),
                LossCheck(None, "not checked", LossCheckFigures(seconds=1.5)), Answer({"x": [1, 2]}), Joined(),
                AnswerPart({"sizes": [{"bytes": 4}]}),
                Done("2.0x slower"), Error("RuntimeError: x", "tb", rank=1, usage=True),
                Comm(CommFigures(gradient_bytes=40, stage_s=[0.1, 0.2], split=["layer2"])),
                Loader(LoaderFigures(setting="w2+pin", wait_s=[0.01], h2d={"bytes": 4096.0}))]  # fmt: skip
    for event in examples:
        assert decode(event.to_line()) == event
    assert set(EVENTS) >= {type(e).NAME for e in examples}
    assert all(name == cls.NAME for name, cls in EVENTS.items())


def test_a_sample_writes_the_line_every_event_writes():
    """Sample has a line of its own (one per timed step, without asdict); it must stay the generic line."""
    for t in (0.25, 1e-7, float("inf")):
        sample = Sample(t)
        assert json.loads(sample.to_line()) == json.loads(Event.to_line(sample))
        assert decode(sample.to_line()).at == sample.at


def test_a_torn_line_and_an_unknown_event_are_dropped_not_misread(tmp_path):
    path = tmp_path / "e.jsonl"
    path.write_text(Sample(1.0).to_line() + "\n" + '{"event": "no such event"}\n' + Sample(2.0).to_line()[:12])
    assert read_events(path) == [Sample(1.0)]
    assert read_events(tmp_path / "missing.jsonl") == []
    assert decode('{"event": "sample"}') is None  # a required field missing


def test_the_reporter_flushes_each_event_as_it_happens(tmp_path):
    path = tmp_path / "e.jsonl"
    emit = Reporter(path)
    emit(Sample(1.0))
    assert read_events(path) == [Sample(1.0)]  # on disk before the next event, as a kill would find it
    emit(Done())
    assert [type(e) for e in read_events(path)] == [Sample, Done] and first(read_events(path), Done) == Done()


def test_errors_carry_the_time_so_the_first_failure_of_a_job_is_known():
    early, late = Error("the cause", rank=1), Error("connection reset by peer", rank=0)
    assert early.at <= late.at and min([late, early], key=lambda e: e.at) is early


def test_each_rank_of_a_distributed_job_has_its_own_file():
    assert events_file("/t/events.jsonl", None) == "/t/events.jsonl"
    assert events_file("/t/events.jsonl", 3) == "/t/events.jsonl.rank3"


def test_the_stop_rule_applies_only_above_its_bar():
    rule = StopRule(reference_s=1.0, factor=2.0, reference="the mode it would replace")
    assert rule.applies(2.5) and not rule.applies(2.0) and not rule.applies(None)


def test_memory_kinds_name_every_figure_a_cell_can_take_its_peak_from():
    assert set(MEMORY_KINDS.values()) == {"cuda_allocator", "live_tensors", "xla_buffers", "process_rss"}


def test_a_child_reports_its_start_and_a_failure_as_events(tmp_path):
    """The shared child main (`worker/child.py`): a task that cannot run ends in an Error event and exit code 1."""
    write_task(PeakTask("nosuch", "cpu", 1, ["fp32"], [64], 1024, 0.1), tmp_path / "task.json")
    cmd = [sys.executable, "-m", "dlperf.worker.peak", str(tmp_path / "task.json"), str(tmp_path / "e.jsonl")]
    done = subprocess.run(cmd, env={"PYTHONPATH": str(ROOT / "src")}, capture_output=True)
    [start, error] = read_events(tmp_path / "e.jsonl")
    assert done.returncode == 1 and isinstance(start, Start) and "dlperf.frameworks.nosuch" in error.error
    assert error.traceback and "Traceback" in error.traceback


def test_a_child_that_answers_no_question_never_creates_the_answers_classes():
    """Every child imports this module; the answers' 32 records (`answers.py`: about 23 ms of the 115 ms of CPU a
    child spent importing dlperf's side, each frozen dataclass compiling six methods) are created only where a child
    answers once (probe, peak, comm). A cell's child, the most frequent, created them all for nothing."""
    loads = {}
    for worker in sorted({t.WORKER for t in TASKS.values()}):
        code = f"import sys, {worker}; print('dlperf.answers' in sys.modules)"
        out = subprocess.run([sys.executable, "-P", "-c", code], env={"PYTHONPATH": str(ROOT / "src")},
                             capture_output=True, text=True, check=True)  # fmt: skip
        loads[worker] = out.stdout.strip() == "True"
    answering = {"dlperf.worker.probe", "dlperf.worker.peak", "dlperf.worker.comm"}
    assert loads == {w: w in answering for w in loads} and "dlperf.worker.cell" in loads
