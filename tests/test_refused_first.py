"""Contradictions, stores and budgets that predict, crossover, advise and optimize cannot honour, refused in one line
naming the flags, exit 2, before anything is counted or measured."""

import pytest

from dlperf.cli import main


def error_line(args: list[str], capsys) -> str:
    """The one line a refused command line prints, after checking its exit code 2 and that it printed nothing else."""
    assert main(args) == 2
    out, err = capsys.readouterr()
    [line] = err.strip().splitlines()
    assert out == "" and line.startswith("dlperf: error: "), err
    return line.removeprefix("dlperf: error: ")


LISTING = "--list-gpus lists the GPUs of the table and predicts nothing: give no "


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--cost", "--db", "a" * 300], "--db '{long}': a name longer than this system allows (File name too long)"),
        (
            ["--cost", "--db", "{tmp}/nope/x.db"],
            "--db '{tmp}/nope/x.db': no such database file (leave --db out to predict without this CPU's steps)",
        ),
        (["--cost", "--db", "{tmp}"], "--db '{tmp}': is a directory, not a database file"),
        (["--db", "{tmp}/x.db"], "--db is the store --cost reads this CPU's measured steps from: add --cost"),
    ],
)
def test_predicts_store_is_checked_before_anything_is_counted(args, said, capsys, tmp_path, monkeypatch):
    """predict --cost --db <300 characters> was a traceback from Path.is_file (ENAMETOOLONG) after the count, and a
    --db that is missing or a directory was passed over without a word, as was --db without --cost."""
    from dlperf.commands import predict

    monkeypatch.setattr(predict, "resolved", lambda args: pytest.fail("counted before the store was checked"))
    fill = {"tmp": str(tmp_path), "long": "a" * 300}
    line = error_line(["predict", "tiny-fcn-r", "--gpu", "T4", *(a.format(**fill) for a in args)], capsys)
    assert line == said.format(**fill)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["tiny-fcn-r", "--list-gpus"], LISTING + "WORKLOAD"),
        (["--list-gpus", "--gpu", "T4"], LISTING + "--gpu"),
        (["--list-gpus", "--validate"], LISTING + "--validate"),
        (["--validate", ""], "--validate '': expected a CSV file, got nothing"),
        (["--validate="], "--validate '': expected a CSV file, got nothing"),
    ],
)
def test_predict_refuses_what_list_gpus_or_validate_would_drop(args, said, capsys):
    """predict --list-gpus listed the table over a WORKLOAD or --gpu given beside it, and --validate '' (an unset
    $CSV) said "dlperf predict WORKLOAD --gpu NAME..." as if no --validate were given."""
    assert error_line(["predict", *args], capsys) == said


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["--batch", "1024", "--max-batch", "4"],
            "--batch 1024 is above --max-batch 4: your batch is measured, for the speed-up there; give a --max-batch "
            "from 1024, or a smaller --batch",
        ),
        (
            ["--batches", "1,2", "--batch", "4"],
            "--batch 4 is not among --batches 1,2: your batch is measured, for the speed-up there; add it to --batches",
        ),
        (
            ["--batches", "1,2", "--max-batch", "4"],
            "--batches and --max-batch: give one (--batches names each batch measured, --max-batch caps the default "
            "powers of two)",
        ),
    ],
)
def test_crossover_refuses_batch_flags_that_contradict_each_other(args, said, capsys, tmp_path, monkeypatch):
    """`--batch 1024 --max-batch 4` and `--batches 1,2 --batch 4` both measured (the first without the user's batch,
    the second with a batch --batches left out), and `--batches 1,2 --max-batch 4` took --batches over the cap."""
    from dlperf import crossover

    monkeypatch.setattr(crossover, "make_plan", lambda spec: pytest.fail("planned before the flags were checked"))
    db = tmp_path / "x.db"
    assert error_line(["crossover", "tiny-fcn-r", "--gpu", "T4", *args, "--db", str(db)], capsys) == said
    assert not db.exists()
