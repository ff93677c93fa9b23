"""`dlperf data synth DIR`: writes the datasets asked for beside whatever is in DIR, refuses to replace a dataset
unless told, and bad flags are one line, exit 2."""

import pytest

from conftest import dlperf, one_line_error
from dlperf.cli import main
from dlperf.commands import data
from dlperf.workloads.datasets import idx, ptb, synth


def test_it_writes_the_datasets_asked_for_and_says_what(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    proc = dlperf("data", "synth", str(tmp_path), "--only", "ptb,mnist", "--seed", "7", timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.txt", "mnist", "notes.txt", "ptb"]
    assert len(idx.read_mnist(tmp_path / "mnist")) == synth.SIZES["small"].mnist[0]
    assert ptb.read_words(tmp_path / "ptb", "ptb.test.txt")
    table = proc.stdout
    assert "mnist" in table and "ptb" in table and "imagenet" not in table and "cifar" not in table
    assert "ptb     " in proc.stderr  # a progress line per dataset, on stderr
    readme = (tmp_path / "README.txt").read_text()
    assert "mnist, ptb" in readme and "--seed 7" in readme and "random" in readme.lower()


def test_a_dataset_already_there_is_refused_unless_overwrite(tmp_path, capsys):
    assert main(["data", "synth", str(tmp_path), "--only", "ptb"]) == 0
    before = (tmp_path / "ptb" / "ptb.train.txt").read_bytes()
    capsys.readouterr()
    assert main(["data", "synth", str(tmp_path), "--only", "ptb,mnist", "--seed", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "ptb/ptb.train.txt" in err and "--overwrite" in err, err
    assert not (tmp_path / "mnist").exists()  # nothing written
    assert (tmp_path / "ptb" / "ptb.train.txt").read_bytes() == before
    (tmp_path / "mnist").mkdir()
    (tmp_path / "mnist" / "t10k-labels-idx1-ubyte").write_bytes(b"old")  # plain: MNIST's reader takes it first
    assert main(["data", "synth", str(tmp_path), "--only", "mnist"]) == 2
    assert "mnist/t10k-labels-idx1-ubyte" in capsys.readouterr().err
    assert main(["data", "synth", str(tmp_path), "--only", "ptb,mnist", "--seed", "1", "--overwrite"]) == 0
    assert (tmp_path / "ptb" / "ptb.train.txt").read_bytes() != before
    assert not (tmp_path / "mnist" / "t10k-labels-idx1-ubyte").exists()
    assert len(idx.read_mnist(tmp_path / "mnist", "test")) == synth.SIZES["small"].mnist[1]
    assert (tmp_path / "README.txt").read_text().count("dlperf data synth") == 2


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--size", "huge"], ["--size 'huge'", "small or paper"]),
        (["--only", "mnist,imagnet"], ["--only", "'imagnet'", "did you mean 'imagenet'"]),
        (["--only", "mnist,,ptb"], ["--only", "comma-separated"]),
        (["--seed", "-1"], ["--seed"]),
    ],
    ids=["size", "only", "only-empty", "seed"],
)
def test_bad_flags_are_one_line_and_write_nothing(tmp_path, capsys, flags, words):
    assert main(["data", "synth", str(tmp_path / "d"), *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and all(w in err for w in words), err
    assert not (tmp_path / "d").exists()


def test_a_file_for_dir_or_no_action_is_one_line(tmp_path):
    (tmp_path / "f").write_text("")
    one_line_error(dlperf("data", "synth", str(tmp_path / "f"), timeout=60), "not a directory")
    one_line_error(dlperf("data", "synth", str(tmp_path / "f" / "d"), timeout=60), "f/d: cannot be written")
    one_line_error(dlperf("data", "make", str(tmp_path), timeout=60), "invalid choice: 'make'")


def test_the_command_names_every_dataset_the_writer_writes():
    assert data.DATASETS == synth.DATASETS  # --help lists them without loading the writer
