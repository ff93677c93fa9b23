"""The progress display's time left: the items left at the average of the items whose process ran. A cell known
unsupported before any child starts (`Task.unsupported`, plan/unsupported.py) is stored at once, in 0 s: averaged in,
it pulled the estimate down."""

from types import SimpleNamespace

from rich.console import Console

from dlperf.progress import Progress
from dlperf.store.process import ProcessMeasurement
from dlperf.store.records import CellFigures
from dlperf.vocab import Status

MEASURED = ProcessMeasurement(status=Status.OK, duration_s=10.0)
KNOWN = ProcessMeasurement(status=Status.UNSUPPORTED, error="jax has no bf16 here", duration_s=0.0)


def _task(unsupported: str | None = None):
    return SimpleNamespace(cell=SimpleNamespace(label="tiny-fcn-r jax cpu:1"), repeat=0, unsupported=unsupported)


def _progress(total: int = 5) -> Progress:
    return Progress(total=total, console=Console(stderr=True, force_terminal=False))


def test_cells_known_unsupported_are_left_out_of_the_average(capsys):
    progress = _progress()
    progress.finish(0, _task(), MEASURED, CellFigures(median_s=1.0, n=10))
    for i in (1, 2):
        progress.finish(i, _task("jax has no bf16 here"), KNOWN, CellFigures(status=Status.UNSUPPORTED))
    assert progress.eta_s(3) == 2 * 10.0  # two items left at the measured cell's 10 s (not 10 / 3 each)
    assert "3 done · about 20 s left" in progress._render().plain


def test_only_cells_known_unsupported_done_give_no_time_left_yet(capsys):
    progress = _progress()
    progress.finish(0, _task("jax has no bf16 here"), KNOWN, CellFigures(status=Status.UNSUPPORTED))
    assert progress.eta_s(1) is None
    assert progress._render().plain.endswith("1 done")


def test_a_cell_whose_child_said_unsupported_took_its_time_and_is_averaged(capsys):
    """A refusal only the child knows (a device, PyTorch's own) cost a child's life: it is in the average."""
    progress = _progress(3)
    progress.finish(0, _task(), MEASURED, CellFigures(median_s=1.0, n=10))
    refused = ProcessMeasurement(status=Status.UNSUPPORTED, error="no CUDA device", duration_s=2.0)
    progress.finish(1, _task(), refused, CellFigures(status=Status.UNSUPPORTED))
    assert progress.eta_s(2) == (10.0 + 2.0) / 2


def test_cells_known_unsupported_still_to_come_get_no_time_left():
    """The time left counted every item still to come at the measured average, those known unsupported (0 s each)
    included: a sweep of torch and jax cells whose jax modes are refused said twice the time it took."""
    progress = _progress()
    progress.ahead([_task(), _task("jax has no bf16 here"), _task("jax has no bf16 here"), _task(), _task()])
    progress.finish(0, _task(), MEASURED, CellFigures(median_s=1.0, n=10))
    assert progress.eta_s(1) == 2 * 10.0  # the two measured cells left, not the four items
    for i in (1, 2):
        progress.finish(i, _task("jax has no bf16 here"), KNOWN, CellFigures(status=Status.UNSUPPORTED))
    assert progress.eta_s(3) == 2 * 10.0


def _cell_task(threads: int, repeat: int = 0):
    cell = SimpleNamespace(label=f"fcn-r torch cpu:{threads}", workload="fcn-r", framework="torch", device="cpu",
                           threads=threads, mode="fp32")  # fmt: skip
    return SimpleNamespace(cell=cell, repeat=repeat, unsupported=None)


def _with_extras(duration_s: float, flops_s: float, memory_s: float) -> ProcessMeasurement:
    m = ProcessMeasurement(status=Status.OK, duration_s=duration_s)
    m.detail.phases = {"flops_s": flops_s, "memory_s": memory_s, "loss_check_s": None, "timed_s": 3.0}
    return m


def test_the_first_process_extras_are_not_charged_to_every_later_one():
    """A sibling group's first process counts the FLOPs and measures the memory step (fcn-r, 1 thread: 2-3 s); its
    whole life taken as every process's over-estimated the repeats that run neither."""
    tasks = [_cell_task(1, r) for r in range(4)]
    progress = _progress(4)
    progress.ahead(tasks)
    progress.start(0, tasks[0])
    progress.finish(0, tasks[0], _with_extras(9.0, 2.0, 1.0), CellFigures(median_s=1.0, n=10))
    assert progress.eta_s(1) == 3 * 6.0  # not 3 * 9 s: the repeats run no extras
    progress.start(1, tasks[1])
    progress.finish(1, tasks[1], ProcessMeasurement(status=Status.OK, duration_s=5.0), CellFigures(median_s=1.0, n=9))
    assert progress.eta_s(2) == 2 * 5.0  # from the later process, where there is one


def test_a_sibling_group_still_to_start_is_charged_its_extras_once():
    """Two workloads: the second's first process will run the extras as the first's did, its repeat none."""
    other = [SimpleNamespace(cell=SimpleNamespace(**{**vars(t.cell), "workload": "fcn-s"}), repeat=t.repeat,
                             unsupported=None) for t in (_cell_task(1, 0), _cell_task(1, 1))]  # fmt: skip
    tasks = [_cell_task(1, 0), other[0], _cell_task(1, 1), other[1]]
    progress = _progress(4)
    progress.ahead(tasks)
    progress.start(0, tasks[0])
    progress.finish(0, tasks[0], _with_extras(9.0, 2.0, 1.0), CellFigures(median_s=1.0, n=10))
    assert progress.eta_s(1) == 3 * 6.0 + 3.0  # fcn-s's first process counts its FLOPs and memory too
    progress.start(1, tasks[1])
    progress.finish(1, tasks[1], _with_extras(9.0, 2.0, 1.0), CellFigures(median_s=1.0, n=10))
    assert progress.eta_s(2) == 2 * 6.0  # both groups started: the repeats left run none


def test_the_warm_parents_start_is_charged_once_not_to_every_process():
    """A PyTorch cell's first process forked from a warm parent waits for its import of torch (fcn-r: 12.6 s of a
    34 s process, the later ones 0.1-0.2 s): not a cost of every process left."""
    tasks = [_cell_task(1, r) for r in range(3)]
    progress = _progress(3)
    progress.ahead(tasks)
    first = _with_extras(20.0, 2.0, 1.0)
    first.detail.phases["startup_s"], first.detail.started = 10.0, "warm"
    progress.finish(0, tasks[0], first, CellFigures(median_s=1.0, n=10))
    assert progress.eta_s(1) == 2 * 7.0  # 20 s less 3 s of extras and the 10 s start
    later = ProcessMeasurement(status=Status.OK, duration_s=6.0)
    later.detail.phases, later.detail.started = {"startup_s": 0.2}, "warm"
    progress.finish(1, tasks[1], later, CellFigures(median_s=1.0, n=10))
    assert progress.eta_s(2) == 6.0  # a later fork's start is its own: the parent is up
