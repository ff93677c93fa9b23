"""dlperf started through a relative path to its interpreter (`../venv/bin/python -m dlperf run ...`) printed "measured
with: ... (its own environment, /tmp/venv)" for its own Python: the child reports its interpreter's path made absolute,
which was compared with the parent's sys.executable as text."""

import sys

from dlperf import envs
from dlperf.runner.collect import environment_of
from dlperf.runner.environ import child_env


def test_dlperfs_own_python_is_known_however_its_path_is_spelt(tmp_path, monkeypatch):
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    monkeypatch.setattr(sys, "executable", "../venv/bin/python")  # as the shell started it
    reported = str(venv / "python")  # as a child reports it
    assert envs.is_current(reported) and envs.is_current(f"{tmp_path}/work/../venv/bin/python")
    assert environment_of(reported) == "dlperf"
    assert "PYTHONPATH" not in child_env({}, 1, reported)  # its own paths, not another environment's
    other = str(tmp_path / "jax" / "bin" / "python")
    assert not envs.is_current(other) and environment_of(other) == str(tmp_path / "jax")
    assert child_env({}, 1, other)["PYTHONPATH"] == envs.worker_path()
