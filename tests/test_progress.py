from types import SimpleNamespace

from rich.console import Console

from dlperf.progress import Progress


def _finish(capsys, n):
    task = SimpleNamespace(cell=SimpleNamespace(label="resnet-18 torch cpu:1"), repeat=0)
    progress = Progress(total=2, console=Console(stderr=True, force_terminal=False))
    progress.start(0, task)
    progress.finish(0, task, {"status": "ok", "duration_s": 9.0}, {"median_s": 4.2, "n": n})
    return capsys.readouterr().err.splitlines()[-1]


def test_each_finished_cell_shows_its_sample_count_and_flags_few(capsys):
    assert _finish(capsys, 12) == "[1/2] resnet-18 torch cpu:1: median 4.200 s, n=12"
    assert _finish(capsys, 1) == "[1/2] resnet-18 torch cpu:1: median 4.200 s, n=1 (few samples)"
