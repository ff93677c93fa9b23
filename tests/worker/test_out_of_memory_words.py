"""Out of memory outside a cell's measured steps is said in one line, as a cell's is (`worker/cell.oom_reason`):
what was being done, the error's own words, what to try. A bare MemoryError in a child that no worker described
(a probe, the peaks, the all-reduce, a profile) had said "out of memory (MemoryError)" and nothing else; one in
dlperf's own process (planning, a huge input), Python's traceback. And TensorFlow's out-of-memory error,
ResourceExhaustedError "OOM when allocating tensor ...", is read as out of memory (a multi-worker rank's as a
one-process cell's), where it had been a failure like any other ("ResourceExhaustedError: Graph execution error:")."""

from types import SimpleNamespace

import pytest

from dlperf import cli
from dlperf.answers import EnvRequest
from dlperf.measure.timer import TimerConfig
from dlperf.protocol import (
    Cell,
    CommTask,
    Error,
    MultiWorkerTask,
    PeakTask,
    ProbeTask,
    ProfileTask,
    first,
    read_events,
    write_task,
)  # fmt: skip
from dlperf.vocab import ExitCode
from dlperf.worker import child
from dlperf.workloads import BUILTIN

TRY = "; try "
PEAK = PeakTask("numpy", "cpu", 1, ["fp32"], [512, 4096], 256 * 2**20, 0.1)
COMM = CommTask("gloo", 1, [2**10, 64 * 2**20], 5, 1, 60.0)
PROBE = ProbeTask("torch", EnvRequest())
PROFILE = ProfileTask(Cell("tiny-fcn-r", "torch", "cpu", 1, "fp32"), BUILTIN["tiny-fcn-r"].to_json())


def served(task, raised: BaseException, tmp_path, monkeypatch) -> Error:
    """The Error event `child.serve` reports for a body that raises `raised`, and its exit code 1."""
    monkeypatch.setattr(child, "die_with_parent", lambda: None)
    monkeypatch.setattr(child, "own_temp", lambda folder: None)

    scope = {"raised": raised}  # raised from no file of the user's (this test's own would be named as one)
    exec(compile("def body(task, emit):\n    raise raised\n", "<worker>", "exec"), scope)
    write_task(task, tmp_path / "task.json")
    assert child.serve(["worker", str(tmp_path / "task.json"), str(tmp_path / "events.jsonl")], scope["body"]) == 1
    return first(read_events(tmp_path / "events.jsonl"), Error)


@pytest.mark.parametrize(
    ("task", "raised", "said"),
    [
        (PEAK, MemoryError(), "out of memory measuring cpu's peaks (matrices up to 4096, arrays of 256 MiB): "
                              "MemoryError; try smaller --sizes or --bandwidth-mib"),
        (COMM, MemoryError("no room"), "out of memory all-reducing messages up to 64 MiB: MemoryError: no room; "
                                       "try smaller --sizes"),
        (PROBE, MemoryError(), "out of memory: MemoryError; try closing other programs to free memory, or a smaller "
                               "model or batch"),
        (PROFILE, MemoryError(), f"out of memory at batch {PROFILE.workload['batch']} (profiling tiny-fcn-r): "
                                 "MemoryError; try a smaller batch"),
    ],
)  # fmt: skip
def test_a_memory_error_in_a_child_says_what_it_was_doing_and_what_to_try(tmp_path, monkeypatch, task, raised, said):
    error = served(task, raised, tmp_path, monkeypatch)
    assert error.error == said and "\n" not in said
    assert error.error != "out of memory (MemoryError)"  # the words before


def test_a_probe_out_of_memory_is_one_line_exit_1_as_one_the_kernel_killed(tmp_path, monkeypatch, capsys):
    """What the user sees: the probe's question, then the child's words; exit 1 (nothing the user gave was wrong),
    as a probe the out-of-memory killer ended (`tests/runner/test_probe_killed.py`), not 2."""
    from dlperf.runner import probe, probe_cache
    from dlperf.runner.launch import ChildResult

    monkeypatch.setenv(probe_cache.BYPASS, "1")
    oom = child.oom_words(MemoryError(), PROBE)
    launched = SimpleNamespace(main=[Error(oom, "Traceback ...")], child=ChildResult(1, False, 0.1, ""))
    monkeypatch.setattr("dlperf.runner.launch.launch", lambda *a, **k: launched)
    with pytest.raises(probe.ProbeFailed) as raised:
        probe.ask("torch", EnvRequest())
    assert str(raised.value) == f"checking the frameworks and devices: the torch probe failed: {oom}"
    got = cli.dispatch(["run", "--workloads", "tiny-fcn-r", "--dry-run", "--db", str(tmp_path / "x.db")])
    err = capsys.readouterr().err.strip().splitlines()
    assert got == ExitCode.CELLS_FAILED and len(err) == 1 and err[0].endswith(oom), err


def test_a_memory_error_in_dlperfs_own_process_is_one_line_not_a_traceback(tmp_path, monkeypatch, capsys):
    """Planning ran out of memory (a grid too large to hold): the command, where in dlperf, the words, what to try;
    exit 1. It had been Python's traceback, the exception raised out of `cli.dispatch`."""
    import dlperf.plan

    def huge(*args, **kwargs):
        raise MemoryError("no room for the grid")

    monkeypatch.setattr(dlperf.plan, "check_names", huge)
    got = cli.dispatch(["run", "--workloads", "tiny-fcn-r", "--dry-run", "--db", str(tmp_path / "x.db")])
    err = capsys.readouterr().err.strip().splitlines()
    assert got == ExitCode.CELLS_FAILED and len(err) == 1, err
    assert err[0].startswith("dlperf: error: out of memory in dlperf run (at dlperf/plan/"), err
    assert ": MemoryError: no room for the grid" in err[0] and TRY + "closing other programs" in err[0], err


class ResourceExhaustedError(Exception):
    """TensorFlow's out-of-memory error, as tf.errors names it (its type is all that is faked here)."""


GRAPH = (  # a tf.function's step out of memory, on the CPU (TensorFlow 2.x, seen here under a data limit)
    'Graph execution error:\n\nDetected at node Tile defined at (most recent call last):\n  File "m.py", line 7, '
    "in f\n\nOOM when allocating tensor with shape[256000,256000] and type float on /job:localhost/replica:0/task:0/"
    "device:CPU:0 by allocator mklcpu\n\t [[{{node Tile}}]]\nHint: If you want to see a list of allocated tensors "
    "when OOM happens, add report_tensor_allocations_upon_oom to RunOptions for current allocation info.\n"
)
EAGER = (  # an eager op's
    "{{function_node __wrapped__Fill_device_/job:localhost/replica:0/task:0/device:CPU:0}} OOM when allocating tensor "
    "with shape[40000,40000] and type float on /job:localhost/replica:0/task:0/device:CPU:0 by allocator mklcpu "
    "[Op:Fill] name: "
)
SAID = "ResourceExhaustedError: OOM when allocating tensor with shape[{0},{0}] and type float on /job:localhost/"


def test_tensorflows_out_of_memory_error_is_out_of_memory_in_one_line():
    graph, eager = child.describe(ResourceExhaustedError(GRAPH)), child.describe(ResourceExhaustedError(EAGER))
    assert graph.startswith(f"out of memory: {SAID.format(256000)}") and graph.endswith("by allocator mklcpu")
    assert eager.startswith(f"out of memory: {SAID.format(40000)}") and "function_node" not in eager
    assert child.out_of_memory(ResourceExhaustedError(GRAPH)) and child.out_of_memory(ResourceExhaustedError(EAGER))
    assert (
        child.describe(ValueError("Graph execution error:\n\nDetected at node")) == "ValueError: Graph execution error:"
    )


def test_a_multiworker_rank_out_of_memory_is_said_as_a_one_process_cell_is(tmp_path, monkeypatch):
    """Worker 1 of a MultiWorkerMirroredStrategy cell runs out of memory in its step (TensorFlow raises
    ResourceExhaustedError there); worker 0's collective fails after it. The cell is out of memory on rank 1 at its
    batch, in TensorFlow's words, read so by fit and the views; it had been 'rank 1: ResourceExhaustedError: Graph
    execution error:', a failure like any other, which ended a fit search."""
    from conftest import make_cell
    from dlperf.report.fit import out_of_memory
    from dlperf.runner.collect import ddp_measurement
    from dlperf.runner.launch import ChildResult
    from dlperf.worker import multiworker

    class Step:
        params = 1

        def settings(self):
            return {}

        def step(self):
            raise ResourceExhaustedError(GRAPH)

        def sync(self):
            pass

    engine = SimpleNamespace(configure_threads=lambda threads: {}, init=lambda device, timeout: None,
                             build=lambda workload, cell, group: Step(), version=lambda: "2.x",
                             barrier=lambda group: None, reduce=lambda values, group: values)  # fmt: skip
    monkeypatch.setattr(multiworker, "tensorflow_engine", lambda: engine)
    monkeypatch.setattr(child, "die_with_parent", lambda: None)
    monkeypatch.setattr(child, "own_temp", lambda folder: None)
    workload = BUILTIN["tiny-fcn-r"].to_json()
    cell = Cell("tiny-fcn-r", "tensorflow", "cpu", 1, "fp32", nproc=2, parallel="multiworker")
    write_task(MultiWorkerTask(cell, 0, workload, TimerConfig()), tmp_path / "task.json")
    monkeypatch.setenv("WORLD_SIZE", "2")  # as dlperf's spawner sets it: each worker holds half the batch
    assert multiworker.main(["worker", str(tmp_path / "task.json"), str(tmp_path / "events.jsonl")]) == 1
    said = first(read_events(tmp_path / "events.jsonl"), Error).error
    batch = workload["batch"]
    assert said.startswith(f"out of memory at batch {batch}, {batch // 2} a process: {SAID.format(256000)}"), said
    lost = "UnavailableError: Collective ops is aborted by: the peer left"
    m = ddp_measurement({0: raised(0, lost, 101.0), 1: raised(1, said, 100.0)}, ChildResult(1, False, 1.0, ""), 60)
    assert m.error == "out of memory on rank 1" + said.removeprefix("out of memory")
    assert out_of_memory(make_cell(nproc=2, parallel="multiworker", status="failed", error=m.error))


def raised(rank: int, error: str, at: float) -> list:
    """A rank's events up to its error, raised at `at`."""
    from dlperf.protocol import Built, Start

    return [Start(pid=100 + rank, python="py", rank=rank, host="h"), Built(10, 0.0, {}), Error(error, rank=rank, at=at)]


def test_an_exception_without_a_message_is_its_name_without_a_colon():
    """describe() of an empty message left a trailing colon ("AssertionError:", session 28's note)."""
    assert [child.describe(e) for e in (AssertionError(), RuntimeError("  \n"), StopIteration())] == [
        "AssertionError", "RuntimeError", "StopIteration"]  # fmt: skip
    assert child.describe(ValueError("bad\nmore")) == "ValueError: bad"
    assert child.describe(MemoryError()) == "MemoryError"


def test_dlperfs_own_error_is_its_words_without_its_class_name():
    """A fit try whose factory ran out of memory read "out of memory at batch 32 ...: UsageError: workload
    'big.py:make': the factory raised RuntimeError: ... tried to allocate 4294967296 bytes"."""
    from dlperf.errors import UsageError

    said = "workload 'big.py:make': the factory raised RuntimeError: out of memory: tried to allocate 4294967296 bytes"
    assert child.describe(UsageError("workload 'w': no such file")) == "workload 'w': no such file"
    assert child.describe(UsageError(said)) == f"out of memory: {said}"
