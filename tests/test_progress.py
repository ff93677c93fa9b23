from types import SimpleNamespace

from rich.console import Console

from dlperf.progress import Progress
from dlperf.protocol import Profiled
from dlperf.store.process import ProcessMeasurement
from dlperf.store.records import CellFigures, ProfileOutcome
from dlperf.vocab import Status

OK = ProcessMeasurement(status=Status.OK, duration_s=9.0)


def _finish(capsys, n):
    task = SimpleNamespace(cell=SimpleNamespace(label="resnet-18 torch cpu:1"), repeat=0)
    progress = Progress(total=2, console=Console(stderr=True, force_terminal=False))
    progress.start(0, task)
    progress.finish(0, task, OK, CellFigures(median_s=4.2, n=n))
    return capsys.readouterr().err.splitlines()[-1]


def test_each_finished_cell_shows_its_sample_count_and_flags_few(capsys):
    assert _finish(capsys, 12) == "[1/2] resnet-18 torch cpu:1: median 4.20 s, n=12"
    assert _finish(capsys, 1) == "[1/2] resnet-18 torch cpu:1: median 4.20 s, n=1 (few samples)"


def test_a_cell_that_does_not_train_says_so_on_its_line(capsys):
    """bf16 of a model whose logits bf16 rounds away read '[2/2] rounded torch cpu:1 bf16: median 610 µs, n=1572'
    and nothing more while the run went on, where the table marked it `!` (its loss check failed)."""
    from dlperf.store.records import LossCheckRecord

    task = SimpleNamespace(cell=SimpleNamespace(label="rounded torch cpu:1 bf16"), repeat=0)
    progress = Progress(total=2, console=Console(stderr=True, force_terminal=False))
    failed = LossCheckRecord(False, "loss did not decrease: 2.3 -> 2.3 while fp32 went 2.25 -> 1.97")
    for said in (dict(loss_check=failed), dict(loss_finite=False), dict(loss_check=LossCheckRecord(True))):
        progress.finish(1, task, OK, CellFigures(median_s=0.00061, n=1572, **said))
    assert capsys.readouterr().err.splitlines() == [
        "[2/2] rounded torch cpu:1 bf16: median 610 µs, n=1572; ! it failed its loss check: it does not train as fp32 "
        "does (the table's notes say why)",
        "[2/2] rounded torch cpu:1 bf16: median 610 µs, n=1572; ! its loss was not finite: it did not train",
        "[2/2] rounded torch cpu:1 bf16: median 610 µs, n=1572",
    ]


HOSTILE = "\x1b[2J\x1b]0;pwned\x07net\x9b31m\x08\r[bold]x[/]"  # clear screen, retitle, CSI, backspace, CR, markup


def _shown(capsys, live: bool) -> str:
    task = SimpleNamespace(cell=SimpleNamespace(label=f"{HOSTILE} torch cpu:1"), repeat=0)
    console = Console(stderr=True, force_terminal=live, width=200)
    with Progress(total=1, console=console) as progress:
        progress.start(0, task)
        failed = ProcessMeasurement(status=Status.FAILED, error=f"RuntimeError: {HOSTILE}", duration_s=1.0)
        progress.finish(0, task, failed, CellFigures(status=Status.FAILED))
    return capsys.readouterr().err


def test_a_hostile_name_or_error_reaches_the_terminal_escaped(capsys):
    """A workload name or an error from the user's model cannot clear the screen, retitle it or move the cursor."""
    for live in (False, True):
        err = _shown(capsys, live)
        assert "\\x1b[2J\\x1b]0;pwned\\x07net\\x9b31m\\x08\\r[bold]x[/] torch cpu:1" in err
        assert "RuntimeError: \\x1b[2J" in err
        for raw in ("\x1b[2J", "\x1b]0", "\x07", "\x9b", "\x08"):
            assert raw not in err, (live, raw)


def test_a_profiled_cell_shows_profiling_and_its_time_counts_in_the_eta(capsys):
    """`run --profile`: the display says which cell is being profiled, and the profile child's time joins its cell's,
    so the time left counts the profiles to come; a resumed run's profile is an item of its own."""
    cell = SimpleNamespace(label="resnet-18 torch cpu:1")
    task = SimpleNamespace(cell=cell, repeat=0)
    progress = Progress(total=3, console=Console(stderr=True, force_terminal=False))
    progress.profiling(0, cell)  # a resumed run's cell, measured before the interrupt
    ok = ProfileOutcome(Status.OK, None, 3.0, Profiled(steps=5, step_s=0.1, categories={}, trace="/t/a.json.gz"))
    progress.profiled(0, cell, ok, own_item=True)
    progress.start(1, task)
    progress.finish(1, task, OK, CellFigures(median_s=4.2, n=12))
    progress.profiling(1, cell)
    assert "cell 2 of 3: profiling resnet-18 torch cpu:1" in progress._render().plain
    progress.profiled(1, cell, ProfileOutcome(Status.FAILED, "RuntimeError: x", 3.0))
    assert capsys.readouterr().err.splitlines() == [
        "[1/3] profiling resnet-18 torch cpu:1 ...",
        "[1/3] resnet-18 torch cpu:1: profiled in 3 s, trace /t/a.json.gz",
        "[2/3] resnet-18 torch cpu:1 ...",
        "[2/3] resnet-18 torch cpu:1: median 4.20 s, n=12",
        "[2/3] profiling resnet-18 torch cpu:1 ...",
        "[2/3] resnet-18 torch cpu:1: profile failed: RuntimeError: x",
    ]
    assert progress.eta_s(2) == (3.0 + 12.0) / 2  # two items done: the profile alone, the cell with its profile


def test_cells_compiling_at_once_are_announced_together_and_each_finishes_under_its_own_name(capsys):
    tasks = [SimpleNamespace(cell=SimpleNamespace(label=f"{w} torch compile cpu:1"), repeat=0) for w in ("a", "b")]
    progress = Progress(total=3, console=Console(stderr=True, force_terminal=False))
    progress.start_together(0, tasks)
    progress.finish(1, tasks[1], OK, CellFigures(median_s=4.2, n=12))
    progress.finish(0, tasks[0], OK, CellFigures(median_s=4.2, n=12))
    assert capsys.readouterr().err.splitlines() == [
        "[1-2/3] a torch compile cpu:1, b torch compile cpu:1 (compiling at once, each timed alone) ...",
        "[2/3] b torch compile cpu:1: median 4.20 s, n=12",
        "[1/3] a torch compile cpu:1: median 4.20 s, n=12",
    ]


def test_a_cell_known_unsupported_before_any_child_is_one_line(capsys):
    """No child starts for it (`Task.unsupported`, plan/unsupported.py): its result is its only line, with no `...`
    line for a process that never runs; a cell whose child starts keeps both."""
    why = "bf16: the jax backend runs fp32 only"
    known = SimpleNamespace(cell=SimpleNamespace(label="tiny-fcn-r jax cpu:1 bf16"), repeat=0, unsupported=why)
    task = SimpleNamespace(cell=SimpleNamespace(label="tiny-fcn-r torch cpu:1"), repeat=0, unsupported=None)
    progress = Progress(total=2, console=Console(stderr=True, force_terminal=False))
    progress.start(0, known)
    progress.finish(0, known, ProcessMeasurement(status=Status.UNSUPPORTED, error=why), CellFigures())
    progress.start(1, task)
    progress.finish(1, task, OK, CellFigures(median_s=4.2, n=12))
    assert capsys.readouterr().err.splitlines() == [
        f"[1/2] tiny-fcn-r jax cpu:1 bf16: unsupported: {why}",
        "[2/2] tiny-fcn-r torch cpu:1 ...",
        "[2/2] tiny-fcn-r torch cpu:1: median 4.20 s, n=12",
    ]
