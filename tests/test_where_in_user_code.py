"""A failure in the user's own model or factory names the line to look at (`errors.where_in_user_code`): the error
once said only `RuntimeError: mat1 and mat2 shapes cannot be multiplied`, and the traceback that said where was kept
in the store, where no command showed it."""

from __future__ import annotations

import pytest

from conftest import FAST, cells, dlperf, one_line_error, require
from dlperf.errors import UsageError, where_in_user_code
from dlperf.workloads.user import build_user_workload

USER = """
import torch
import dlperf


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(7, 8)

    def forward(self, x):
        return self.a(x[:, :7]) @ torch.ones(7, 2)  # (4x8) @ (7x2)


def make():
    return dlperf.user_workload("shapes", Net(), lambda b, device: (torch.randn(b, 9), torch.randint(0, 2, (b,))),
                                torch.nn.CrossEntropyLoss(), batch_size=4)


def boom():
    return helper()


def helper():
    return {}["missing"]
"""


def line_of(text: str) -> int:
    return next(i for i, line in enumerate(USER.splitlines(), 1) if text in line)


def raised(call):
    try:
        call()
    except Exception as exc:
        return exc
    pytest.fail("nothing raised")


def test_the_deepest_frame_in_the_users_own_file_is_named(tmp_path):
    path = tmp_path / "mine.py"
    path.write_text("import json\n\ndef parse(text):\n    return json.loads(text)\n")
    namespace = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    exc = raised(lambda: namespace["parse"]("{"))  # raised inside the standard library, called from line 4
    assert where_in_user_code(exc) == f" (at {path}:4, in parse)"


def test_nothing_is_named_where_no_frame_is_the_users():
    import json

    from dlperf.flagtext import whole_number

    for call in (lambda: json.loads("{"), lambda: whole_number("x", "--n")):  # the standard library's, dlperf's
        exc = raised(call)
        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename == __file__:  # this file's frames: the caller's
            tb = tb.tb_next
        assert tb is not None and where_in_user_code(exc.with_traceback(tb)) == ""
    assert where_in_user_code(ValueError("never raised")) == ""  # no traceback at all


def test_a_factory_that_raises_names_its_line(tmp_path):
    (tmp_path / "user.py").write_text(USER)
    with pytest.raises(UsageError) as caught:
        build_user_workload(f"{tmp_path / 'user.py'}:boom")
    said = str(caught.value)
    assert said.startswith(f"workload '{tmp_path / 'user.py'}:boom': the factory raised KeyError: 'missing'")
    assert said.endswith(f"(at {tmp_path / 'user.py'}:{line_of('missing')}, in helper)") and "\n" not in said


def test_a_cell_whose_model_fails_says_where_and_a_command_line_says_it_in_one_line(tmp_path):
    require("torch")
    (tmp_path / "user.py").write_text(USER)
    db = tmp_path / "u.db"
    proc = dlperf("run", "--workloads", f"{tmp_path / 'user.py'}:make", "--threads", "1", *FAST, db=db)
    assert proc.returncode == 1, proc.stderr
    [cell] = cells(db)
    assert cell["status"] == "failed" and "mat1 and mat2 shapes cannot be multiplied" in cell["error"]
    forward = line_of("torch.ones(7, 2)")
    assert cell["error"].endswith(f"(at {tmp_path / 'user.py'}:{forward}, in forward)"), cell["error"]
    failed = dlperf("run", "--workloads", f"{tmp_path / 'user.py'}:boom", db=db)
    one_line_error(failed, "(at ", f":{line_of('missing')}, in helper)")
