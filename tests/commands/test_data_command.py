"""`dlperf data synth DIR`: writes the datasets asked for beside whatever is in DIR, refuses to replace a dataset
unless told, and bad flags are one line, exit 2."""

import errno
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import dlperf, one_line_error
from dlperf.cli import main
from dlperf.commands import data
from dlperf.errors import UsageError
from dlperf.workloads.datasets import idx, imagefolder, ptb, synth


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
    # the same data written again: its paragraph is there already, not written twice
    assert main(["data", "synth", str(tmp_path), "--only", "ptb,mnist", "--seed", "1", "--overwrite"]) == 0
    assert (tmp_path / "README.txt").read_text().count("dlperf data synth") == 2


def test_into_a_folder_of_photos_the_closing_line_names_the_folder_that_reads_the_images(tmp_path, capsys):
    """`dlperf data synth photos` ended 'dlperf run --data photos reads them', and that run is refused: photos'
    own class folders and photos/imagenet/train both hold images. The line names the images' folder instead."""
    photos = tmp_path / "photos"
    (photos / "cats").mkdir(parents=True)
    (photos / "cats" / "a.jpg").write_bytes(b"\xff\xd8 not decoded here")
    assert main(["data", "synth", str(photos), "--only", "ptb,imagenet"]) == 0
    said = capsys.readouterr().out.strip().splitlines()[-1]
    images = photos / "imagenet" / "train"
    assert said == (f"dlperf run --data {photos} reads ptb; the images: dlperf run --data {images} ({photos}'s own "
                    f"folders hold images too, and --data {photos} does not guess which to read) (README.txt says "
                    "what they are)")  # fmt: skip
    assert imagefolder.folder(images) == images  # the folder named reads the images written
    with pytest.raises(UsageError, match="does not guess"):
        imagefolder.folder(photos)
    # into a folder of no images of its own, DIR reads them all
    assert data.reads([data.Written("imagenet", images, 1, 1, 0.0)], tmp_path / "empty") == (
        f"dlperf run --data {tmp_path / 'empty'} reads them"
    )


def test_the_closing_line_quotes_a_folder_the_shell_would_split(tmp_path):
    """`dlperf data synth "sp ace ü"` ended 'dlperf run --data /tmp/.../sp ace ü reads them', a command that pasted
    reads two words: quoted now, as run's own hints quote their paths."""
    spaced = tmp_path / "sp ace ü"
    ptb = data.Written("ptb", spaced / "ptb", 3, 1, 0.0)
    assert data.reads([ptb], spaced) == f"dlperf run --data '{spaced}' reads them"
    (spaced / "cats").mkdir(parents=True)
    (spaced / "cats" / "a.jpg").write_bytes(b"\xff\xd8 not decoded here")
    (spaced / "imagenet" / "train" / "n1").mkdir(parents=True)
    (spaced / "imagenet" / "train" / "n1" / "b.JPEG").write_bytes(b"\xff\xd8 not decoded here")
    said = data.reads([ptb, data.Written("imagenet", spaced / "imagenet", 1, 1, 0.0)], spaced)
    assert said.startswith(f"dlperf run --data '{spaced}' reads ptb; the images: dlperf run --data "
                           f"'{spaced / 'imagenet' / 'train'}' ({spaced}'s own folders"), said  # fmt: skip


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--size", "huge"], ["--size 'huge'", "small, medium or paper"]),
        (["--only", "mnist,imagnet"], ["--only", "'imagnet'", "did you mean 'imagenet'"]),
        (["--only", "mnist,,ptb"], ["--only", "an empty item (a doubled comma)"]),
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
    one_line_error(dlperf("data", "make", str(tmp_path), timeout=60), "unknown data action 'make' (known: synth)")


def test_the_command_names_every_dataset_the_writer_writes():
    assert data.DATASETS == synth.DATASETS  # --help lists them without loading the writer


# ----------------------------------------------------------------------------------------------------------------------
# Faults (issue 30): each dataset is written whole or not at all. What a later `--data DIR` reads is either a dataset
# `data synth` finished or nothing: a failure or an interrupt leaves no part of one, and an older one it was replacing
# stays as it was.


SMALL = synth.SIZES["small"]


def files_under(directory: Path) -> dict[str, bytes]:
    """Every file below `directory`, hidden folders included, by its relative path."""
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def no_imagenet(directory: Path) -> None:
    """Nothing a reader would take for an ImageNet-style folder, and no part of one hidden anywhere."""
    assert not (directory / "imagenet").exists() and not list(directory.rglob("*.JPEG"))
    with pytest.raises(UsageError, match=r"imagenet/train|class folders"):
        imagefolder.read_imagefolder(directory)


def fault_line(stderr: str, *words: str) -> None:
    """A fault met while writing: the progress lines so far, then one line of error, the last (no traceback)."""
    lines = stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith("dlperf: error:")]
    assert errors == lines[-1:] and all(w in lines[-1] for w in words) and "Traceback" not in stderr, stderr


def failing_jpeg(monkeypatch, after: int) -> None:
    """The disk fills after `after` JPEGs: the next write raises ENOSPC."""
    real, made = synth.jpeg, []

    def jpeg(rng):
        if len(made) == after:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        made.append(1)
        return real(rng)

    monkeypatch.setattr(synth, "jpeg", jpeg)


def test_a_disk_that_fills_leaves_no_part_of_the_dataset_and_keeps_those_finished(tmp_path, capsys, monkeypatch):
    failing_jpeg(monkeypatch, after=5)
    assert main(["data", "synth", str(tmp_path), "--only", "ptb,imagenet"]) == 2
    no_imagenet(tmp_path)
    fault_line(capsys.readouterr().err, "No space left on device", "nothing of imagenet kept", "ptb written whole")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.txt", "ptb"]  # ptb was finished: kept, whole
    assert len(ptb.read_words(tmp_path)) > synth.SIZES["small"].ptb_words[0]
    assert "wrote ptb here" in (tmp_path / "README.txt").read_text()


def test_a_failed_overwrite_keeps_the_dataset_it_was_replacing(tmp_path, capsys, monkeypatch):
    assert main(["data", "synth", str(tmp_path), "--only", "imagenet"]) == 0
    (tmp_path / "imagenet" / "mine.txt").write_text("the user's own")  # not synth's: stays through an overwrite
    before = files_under(tmp_path)
    failing_jpeg(monkeypatch, after=5)
    assert main(["data", "synth", str(tmp_path), "--only", "imagenet", "--seed", "1", "--overwrite"]) == 2
    assert files_under(tmp_path) == before
    monkeypatch.undo()
    assert main(["data", "synth", str(tmp_path), "--only", "imagenet", "--seed", "1", "--overwrite"]) == 0
    after = files_under(tmp_path)
    jpegs = {k for k in after if k.endswith(".JPEG")}
    assert after["imagenet/mine.txt"] == b"the user's own" and len(jpegs) == synth.files("imagenet", SMALL)
    assert not jpegs & before.keys()  # the new seed's classes alone: nothing of the old dataset mixed in


def test_a_real_full_disk_leaves_no_part_of_the_dataset(tmp_path):
    """A 1 MB tmpfs: PTB fits, the ImageNet-style JPEGs (about 4 MB) do not. Root only (mount)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (not root?): {mounted.stderr.decode().strip()}")
    try:
        proc = dlperf("data", "synth", str(disk), "--only", "ptb,imagenet", timeout=120)
        assert proc.returncode == 2, proc.stderr
        no_imagenet(disk)
        fault_line(proc.stderr, str(disk), "No space left on device", "nothing of imagenet kept")
        assert ptb.read_words(disk) and not [p for p in disk.iterdir() if p.name.startswith(".")]
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def without_root_overrides() -> list[str]:
    """The command prefix that makes a read-only folder read-only to this process's child: as root, the child keeps
    its user (so it still reads the checkout and its venv wherever they are) but loses the capabilities that let root
    write where the permission bits say no."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("root, and no setpriv to drop root's permission overrides")
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]


def test_a_read_only_dir_is_one_line_and_nothing_is_written(tmp_path):
    prefix = without_root_overrides()
    with tempfile.TemporaryDirectory() as name:
        directory = Path(name)
        directory.chmod(0o555)
        (directory / "ptb").mkdir()
        src = Path(data.__file__).parents[2]
        proc = subprocess.run([*prefix, sys.executable, "-m", "dlperf", "data", "synth", str(directory), "--only",
                               "mnist,imagenet"], capture_output=True, text=True, timeout=120,
                              env={**os.environ, "PYTHONPATH": str(src)})  # fmt: skip
        one_line_error(proc, str(directory), "cannot be written", "Permission denied")
        assert [p.name for p in directory.iterdir()] == ["ptb"]
        directory.chmod(0o755)


def test_an_interrupt_exits_130_and_leaves_no_part_of_the_dataset(tmp_path):
    src = Path(data.__file__).parents[2]
    proc = subprocess.Popen([sys.executable, "-m", "dlperf", "data", "synth", str(tmp_path), "--size", "paper",
                             "--only", "imagenet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(src)},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip
    # SIGINT at its default in the child, as in a terminal: under a background shell job SIGINT starts ignored, and
    # Python then installs no KeyboardInterrupt handler
    deadline = time.monotonic() + 60
    while not list(tmp_path.rglob("*.JPEG")) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert list(tmp_path.rglob("*.JPEG")), "no JPEG written within 60 s"
    time.sleep(0.3)  # a few more
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "interrupted" in err, err
    no_imagenet(tmp_path)
    assert not [p for p in tmp_path.iterdir() if p.name != "README.txt"]


def test_an_interrupt_names_what_is_written_and_the_command_that_writes_the_rest(tmp_path, capsys, monkeypatch):
    """Ctrl-C as imagenet was written said only 'dlperf: interrupted'; the same command again was refused for the
    datasets written whole before it ('already there'), and nothing said which those were."""
    real = synth.jpeg

    def jpeg(rng):
        raise KeyboardInterrupt

    monkeypatch.setattr(synth, "jpeg", jpeg)
    assert main(["data", "synth", str(tmp_path), "--only", "ptb,imagenet", "--seed", "3"]) == 130
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"dlperf: interrupted; ptb written whole in {tmp_path}; nothing of imagenet kept. To write the rest: dlperf "
        f"data synth {tmp_path} --size small --seed 3 --only imagenet"
    )
    monkeypatch.setattr(synth, "jpeg", real)
    assert main(["data", "synth", str(tmp_path), "--size", "small", "--seed", "3", "--only", "imagenet"]) == 0


def test_what_a_killed_synth_left_is_removed_by_the_next_and_a_running_ones_is_not(tmp_path):
    dead = tmp_path / f"{synth.STAGING}x"  # a staging folder no synth holds
    (dead / "imagenet" / "train" / "n1").mkdir(parents=True)
    with synth.staged(tmp_path) as live:  # one that a synth (this test) holds
        (live / "ptb").mkdir()
        assert main(["data", "synth", str(tmp_path), "--only", "ptb"]) == 0
        assert not dead.exists() and live.exists()
    assert not live.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["README.txt", "ptb"]
