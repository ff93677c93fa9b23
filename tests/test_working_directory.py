"""A working directory deleted since the shell entered it (`mkdir d; cd d; rmdir ../d`) is refused in one line before
anything runs, by every command and the Python API: `dlperf table` was a FileNotFoundError traceback, and a run with an
absolute --db stored every cell failed ("Cannot load libtorch_cpu.so": its processes start in that folder)."""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import dlperf

GONE = "the working directory no longer exists (deleted since this shell entered it): cd to a folder"


def test_every_command_refuses_a_deleted_working_directory_in_one_line(tmp_path):
    script = Path(sys.executable).parent / "dlperf"  # the installed command, as a user's shell runs it
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # a relative entry would resolve nowhere
    for words in (["table"], ["run", "--db", str(tmp_path / "x.db"), "--workloads", "tiny-fcn-r"], ["list", "--runs"]):
        gone = tmp_path / "gone"
        gone.mkdir()
        line = (
            f"cd {shlex.quote(str(gone))} && rmdir {shlex.quote(str(gone))} && exec {shlex.join([str(script), *words])}"
        )
        proc = subprocess.run(["sh", "-c", line], capture_output=True, text=True, timeout=60, env=env)
        assert proc.returncode == 2 and proc.stderr.startswith(f"dlperf: error: {GONE}"), proc.stderr
        assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert not (tmp_path / "x.db").exists()


def test_the_python_api_refuses_it_too(monkeypatch):
    def gone():
        raise FileNotFoundError(2, "No such file or directory")

    monkeypatch.setattr(os, "getcwd", gone)
    with pytest.raises(dlperf.UsageError, match=f"^{re.escape(GONE)}"):
        dlperf.results()
    with pytest.raises(dlperf.UsageError, match=f"^{re.escape(GONE)}"):
        dlperf.run("tiny-fcn-r", db="/tmp/never.db")
