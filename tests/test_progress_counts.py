"""The progress lines a search prints: one count over all its displays (`dlperf fit` printed `[1/1]` for every try,
`optimize` restarted its count each round), and a repeat's line saying whose median it shows (it showed the cell's
pooled figure beside `(repeat 2)`, as if that process's own)."""

from types import SimpleNamespace

from dlperf.progress import Running
from dlperf.store.process import ProcessMeasurement
from dlperf.store.records import CellFigures
from dlperf.vocab import Status

OK = ProcessMeasurement(status=Status.OK, samples=[1.0] * 10, duration_s=2.0)


def _task(repeat: int = 0):
    return SimpleNamespace(cell=SimpleNamespace(label="tiny-fcn-r torch cpu:1 fp32"), repeat=repeat)


def _finished(capsys, running: Running, calls: list[int]) -> list[str]:
    """Each of `calls` a display of `running`, as `Session.measure` opens one, finishing that many processes."""
    for items in calls:
        with running(items) as progress:
            for i in range(items):
                progress.start(i, _task())
                progress.finish(i, _task(), OK, CellFigures(median_s=1.0, n=10))
    return [line.split()[0] for line in capsys.readouterr().err.splitlines() if "median" in line]


def test_a_search_of_unknown_length_counts_on_across_its_displays(capsys):
    assert _finished(capsys, Running(), [1, 2, 1]) == ["[1/?]", "[2/?]", "[3/?]", "[4/?]"]


def test_a_search_that_knows_its_total_counts_to_it_across_its_displays(capsys):
    """`dlperf crossover`: the thread search's processes, then the batches', one count to the whole."""
    assert _finished(capsys, Running(3), [2, 1]) == ["[1/3]", "[2/3]", "[3/3]"]


def test_with_no_total_the_live_line_gives_no_time_left(capsys):
    progress = Running()(2)
    progress.start(0, _task())
    progress.finish(0, _task(), OK, CellFigures(median_s=1.0, n=10))
    assert progress.eta_s(1) is None
    assert progress._render().plain.startswith("cell 1 of ?: ")


def test_a_repeats_line_gives_its_own_median_beside_the_cells_so_far(capsys):
    own = ProcessMeasurement(status=Status.OK, samples=[493e-6] * 389, duration_s=2.0)
    pooled = CellFigures(median_s=472e-6, n=849, per_process_medians=[451e-6, 493e-6])
    progress = Running(8)(8)
    progress.finish(4, _task(repeat=1), own, pooled)
    assert capsys.readouterr().err.splitlines() == [
        "[5/8] tiny-fcn-r torch cpu:1 fp32 (repeat 2): this process: median 493 µs, n=389; "
        "the cell so far (2 processes): median 472 µs, n=849"
    ]


def test_a_first_process_or_a_repeat_after_a_failed_one_gives_the_cells_median_alone(capsys):
    own = ProcessMeasurement(status=Status.OK, samples=[493e-6] * 3, duration_s=2.0)
    progress = Running(2)(2)
    progress.finish(1, _task(repeat=1), own, CellFigures(median_s=493e-6, n=3, per_process_medians=[493e-6]))
    assert capsys.readouterr().err.splitlines() == [
        "[2/2] tiny-fcn-r torch cpu:1 fp32 (repeat 2): median 493 µs, n=3 (few samples)"
    ]


def test_a_resumed_run_numbers_its_processes_on_from_those_it_had_measured(capsys, monkeypatch):
    """`dlperf run --resume` of a run of 4 processes interrupted after 1 printed `[1/3]`, `[2/3]`, `[3/3]`: as if a
    new sweep of three. Its default display counts the stored processes first (`api._execute`'s `before`)."""
    from dlperf import api

    def measure(tasks, display, to_profile=()):
        with display(len(tasks)) as progress:
            for i, task in enumerate(tasks):
                progress.start(i, task)
                progress.finish(i, task, OK, CellFigures(median_s=1.0, n=10))
        return [Status.OK] * len(tasks)

    session = SimpleNamespace(measure=measure, run_id=1)
    outcome = api._execute(session, [_task()] * 3, None, None, "r.db", (), before=1)
    assert outcome.exit_code == 0
    lines = [line.split()[0] for line in capsys.readouterr().err.splitlines() if "median" in line]
    assert lines == ["[2/4]", "[3/4]", "[4/4]"]
