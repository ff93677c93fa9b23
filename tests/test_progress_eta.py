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
