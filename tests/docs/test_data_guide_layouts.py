"""docs/guides/data.md's layout section says what `--data DIR` reads of a folder that could be read two ways, as
`imagefolder.folder` decides it."""

import re
from pathlib import Path

import pytest

from dlperf.errors import UsageError
from dlperf.workloads.datasets import imagefolder

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "data.md"


def test_the_guide_says_a_train_class_of_images_in_subfolders_stops_the_run_as_it_does(tmp_path):
    """A class `Train/` whose images are all in `Train/diesel/`, beside `Bus/` and `Car/` of images, stops the run
    (lowercase `train/` did before split names matched in any case): the guide did not say so."""
    text = " ".join(GUIDE.read_text().split())
    [said] = re.findall(r"A class named `train` \(in any case\) whose images are all in its subfolders.*?\. ", text)
    assert "`Train/diesel/*.jpg`" in said and "the run stops" in said and "rename it" in said, said
    for name in ("Bus/a.jpg", "Car/b.jpg", "Train/diesel/c.jpg"):
        (tmp_path / name).parent.mkdir(parents=True)
        (tmp_path / name).write_bytes(b"\xff\xd8")
    with pytest.raises(UsageError, match=f"both {tmp_path / 'Train'} and .*rename Train"):
        imagefolder.read_imagefolder(tmp_path)
