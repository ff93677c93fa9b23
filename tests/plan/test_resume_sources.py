"""A run keeps the SHA-256 of each user model file it was planned with, and `--resume` refuses to finish it with an
edited one: a user edited the model between an interrupt and `dlperf run --resume`, and the table then mixed two
models under one name, the faster one starred as the best thread count."""

from __future__ import annotations

import hashlib

import pytest

from conftest import require
from dlperf import api
from dlperf.errors import UsageError
from dlperf.plan import make_plan
from dlperf.runner.session import Session
from dlperf.spec import make_spec
from dlperf.store import Store
from dlperf.workloads.base import InputSpec, OptimizerSpec, Workload
from dlperf.workloads.user import changed_sources, source_digests

MODEL = """
import torch, dlperf
SLOW = {slow}
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 2)
    def forward(self, x):
        for _ in range(SLOW):
            x = torch.tanh(x)
        return self.fc(x)
def make():
    return dlperf.user_workload("edited-net", Net(), lambda b, d: (torch.randn(b, 8), torch.randint(0, 2, (b,))),
                                torch.nn.functional.cross_entropy, batch_size=4)
"""


def user(source: str) -> Workload:
    return Workload("m", "user", {}, InputSpec("user", ()), 0, 4, OptimizerSpec("user"), source=source)


def test_a_model_files_digest_is_kept_and_an_edit_or_removal_is_named(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("A = 1\n")
    digests = source_digests([user(f"{path}:make"), user("package.module:make"), user(f"{tmp_path}/gone.py:make")])
    assert digests == {f"{path}:make": hashlib.sha256(b"A = 1\n").hexdigest()}  # a module's file is never looked up
    assert changed_sources(digests) == []
    path.write_text("A = 2\n")
    assert changed_sources(digests) == [f"{path} changed"]
    path.unlink()
    assert changed_sources(digests) == [f"{path} is gone"]
    path.write_text("A = 3\n")  # two factories of one file: it is said once ('m.py changed; m.py changed since...')
    two = {f"{path}:make": digests[f"{path}:make"], f"{path}:other": digests[f"{path}:make"]}
    assert changed_sources(two) == [f"{path} changed"]


def test_the_modules_a_model_file_imports_from_its_directory_are_kept_too_and_read_not_run(tmp_path):
    """A model whose layers live in a neighbour module (`from layers import Block`): editing layers.py changes the
    model as much as editing the factory's file does. Its imports are read, never run (a module that would raise)."""
    tmp_path = tmp_path.resolve()  # the paths kept are resolved
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("from . import blocks\n")
    (tmp_path / "pkg" / "blocks.py").write_text("WIDTH = 8\n")
    (tmp_path / "layers.py").write_text("import pkg\nraise SystemExit('never run')\n")
    (tmp_path / "unused.py").write_text("")
    path = tmp_path / "m.py"
    path.write_text("import os\nimport torch\nimport layers\ndef make(): pass\n")
    digests = source_digests([user(f"{path}:make")])
    kept = {k.removeprefix("file:") for k in digests if k.startswith("file:")}
    assert kept == {str(tmp_path / f) for f in ("layers.py", "pkg/__init__.py", "pkg/blocks.py")}
    assert changed_sources(digests) == []
    (tmp_path / "pkg" / "blocks.py").write_text("WIDTH = 16\n")
    assert changed_sources(digests) == [f"{tmp_path / 'pkg' / 'blocks.py'} changed"]
    (tmp_path / "layers.py").unlink()
    assert f"{tmp_path / 'layers.py'} is gone" in changed_sources(digests)
    path.write_text("def make(: pass\n")  # a syntax error: no neighbours read, the factory's import says it
    assert list(source_digests([user(f"{path}:make")])) == [f"{path}:make"]


def test_a_neighbour_folder_without_init_is_followed_as_python_imports_it(tmp_path):
    """`from models import layers` with no models/__init__.py imports as a namespace package; modulefinder's own lookup
    raised AttributeError there, out of `dlperf run` as a traceback, and layers.py was never kept."""
    tmp_path = tmp_path.resolve()
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "layers.py").write_text("import helpers\nWIDTH = 8\n")
    (tmp_path / "helpers.py").write_text("")
    path = tmp_path / "m.py"
    path.write_text("from models import layers\nimport models.layers\ndef make(): pass\n")
    digests = source_digests([user(f"{path}:make")])
    kept = {k.removeprefix("file:") for k in digests if k.startswith("file:")}
    assert kept == {str(tmp_path / "models" / "layers.py"), str(tmp_path / "helpers.py")}
    (tmp_path / "models" / "layers.py").write_text("import helpers\nWIDTH = 16\n")
    assert changed_sources(digests) == [f"{tmp_path / 'models' / 'layers.py'} changed"]


def test_resume_refuses_a_run_whose_model_file_was_edited_since(tmp_path):
    require("torch")
    path, db = tmp_path / "m.py", tmp_path / "r.db"
    path.write_text(MODEL.format(slow=6))
    plan = make_plan(make_spec([f"{path}:make"], threads=[1]))
    assert plan.env["sources"] == {f"{path}:make": hashlib.sha256(path.read_bytes()).hexdigest()}
    store = Store.open(str(db), create=True)
    session = Session.create(store, plan.spec, plan.env, plan.cores, ["dlperf", "run"], plan.cells, plan.workloads)
    run_id = session.run_id
    store.set_run_status(run_id, "interrupted")
    store.close()
    assert api.resume(str(db), dry_run=True).tasks  # unedited: what is left is planned again
    path.write_text(MODEL.format(slow=0))
    with pytest.raises(UsageError) as refused:
        api.resume(str(db), dry_run=True)
    assert str(refused.value) == (
        f"resume: run {run_id}'s model: {path} changed since the run began, so what is left would train another "
        "model; start a new run instead"
    )


def test_a_neighbour_with_a_syntax_error_behind_a_guarded_import_is_kept_and_the_others_too(tmp_path):
    """The suspicion that one neighbour failing to parse (behind `try: import x / except ...`, so the model still
    loads) dropped every neighbour is refuted: modulefinder sets the bad one aside and reads on. But the bad one was
    not kept itself, so fixing it (the guarded import now succeeds: another model) went unseen by --resume."""
    tmp_path = tmp_path.resolve()
    (tmp_path / "helper.py").write_text("import deep\nWIDTH = 8\n")
    (tmp_path / "deep.py").write_text("")
    (tmp_path / "fast.py").write_text("def fused(:\n")  # a syntax error
    (tmp_path / "other.py").write_text("X = (\n")
    path = tmp_path / "m.py"
    path.write_text("try:\n    import fast\nexcept (ImportError, SyntaxError):\n    fast = None\n"
                    "try:\n    from other import X\nexcept Exception:\n    X = None\n"
                    "import helper\ndef make(): pass\n")  # fmt: skip
    digests = source_digests([user(f"{path}:make")])
    kept = {k.removeprefix("file:") for k in digests if k.startswith("file:")}
    assert kept == {str(tmp_path / f) for f in ("helper.py", "deep.py", "fast.py", "other.py")}
    (tmp_path / "fast.py").write_text("def fused(x):\n    return x\n")
    assert changed_sources(digests) == [f"{tmp_path / 'fast.py'} changed"]
