"""A user's model file given by a symbolic link (`models/current.py -> ../experiments/v3.py`) is found again by its
module name in a process that imports it anew, as a DataLoader's spawned worker does: the folder on its `sys.path`
holds the link, not the file it points to."""

import sys

from dlperf.workloads import userfiles


def test_a_linked_file_is_found_again_through_the_folder_of_its_link(tmp_path, monkeypatch):
    (tmp_path / "experiments").mkdir()
    (tmp_path / "models").mkdir()
    real = tmp_path / "experiments" / "v3.py"
    real.write_text("X = 3\n")
    link = tmp_path / "models" / "current.py"
    link.symlink_to("../experiments/v3.py")
    name = userfiles.module_name(link)
    monkeypatch.setattr(sys, "path", [str(link.parent)])  # the worker's: the link's folder, as the parent put it
    spec = userfiles.Finder.find_spec(name)
    assert spec is not None and spec.origin is not None
    assert userfiles.module_name(real) != name  # the file named by itself is another name, found by its own folder
