"""A model file that starts a measurement at its top level (`dlperf.run(...)` without `if __name__ == "__main__":`,
the layout of a researcher's one script) started it again in every probe that imported the file, each probe a child
of the last: nine levels and 1.8 GB after 20 s, without end and without a word. It is one line now."""

from __future__ import annotations

import textwrap

import pytest

from conftest import dlperf, one_line_error, require
from dlperf.errors import UsageError
from dlperf.protocol import PARENT_VAR
from dlperf.runner import lifeline

GUARD = 'put it under `if __name__ == "__main__":`'


def test_only_dlperfs_own_children_are_refused(monkeypatch):
    monkeypatch.delenv(PARENT_VAR, raising=False)
    lifeline.not_nested()  # the command's own process: measured as ever
    monkeypatch.setenv(PARENT_VAR, "1")
    with pytest.raises(UsageError, match="started inside one of dlperf's own processes"):
        lifeline.not_nested()


def test_a_model_file_that_runs_dlperf_at_import_is_one_line(tmp_path):
    require("torch")
    model = tmp_path / "noguard.py"
    model.write_text(textwrap.dedent(f"""\
        import torch, dlperf

        def batch(b, device):
            return torch.randn(b, 8, device=device), torch.randint(0, 2, (b,), device=device)

        def make():
            return dlperf.user_workload("noguard", torch.nn.Linear(8, 2), batch, torch.nn.functional.cross_entropy,
                                        batch_size=4)

        dlperf.run([make], threads=[1], db={str(tmp_path / "inner.db")!r})
        """))  # fmt: skip
    said = dlperf("run", "--workloads", f"{model}:make", "--threads", "1", "--dry-run", db=tmp_path / "d.db",
                  cwd=tmp_path, timeout=180)  # fmt: skip
    one_line_error(said, "started inside one of dlperf's own processes", GUARD)
    assert not (tmp_path / "inner.db").exists()
