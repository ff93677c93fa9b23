"""A user model's warnings are said beside its cell: a `mse_loss` of a (B,) target against a (B, 1) output trains on
broadcast pairs, and PyTorch's "This will likely lead to incorrect results due to broadcasting" went into the child's
log, unread, while the cell was measured and stored with no word."""

import types
import warnings

import pytest

from dlperf.protocol import Warned
from dlperf.runner.collect import cell_figures, measurement
from dlperf.runner.launch import ChildResult
from dlperf.worker import cell as worker

USER = types.SimpleNamespace(workload={"source": "/home/me/model.py:make"})
BUILTIN = types.SimpleNamespace(workload={"source": None})


def said(task, body):
    emitted = []
    with worker.model_warnings(task, emitted.append):
        body()
    return emitted


def test_a_user_models_warnings_are_emitted_once_each_with_the_users_own_line():
    def steps():
        for _ in range(3):  # once per location, as Python's default filter shows them
            warnings.warn("target size differs", UserWarning, stacklevel=1)  # this file: the user's own line
        warnings.warn_explicit("from inside", UserWarning, worker.__file__, 7)  # dlperf's own: no line to act on

    emitted = said(USER, steps)
    assert len(emitted) == 1 and isinstance(emitted[0], Warned)
    mine, ours = emitted[0].messages
    assert mine.startswith("UserWarning: target size differs (test_model_warnings.py:") and mine.endswith(")")
    assert ours == "UserWarning: from inside"


def test_a_builtin_workloads_warnings_and_none_at_all_emit_nothing_and_the_filters_are_the_callers_again():
    before = warnings.showwarning
    with pytest.warns(UserWarning, match="ours"):  # not taken from the caller: a built-in's are dlperf's own
        assert said(BUILTIN, lambda: warnings.warn("ours", UserWarning, stacklevel=1)) == []
    assert said(USER, lambda: None) == []
    assert warnings.showwarning is before


def test_a_model_warning_at_every_step_is_kept_to_the_first_few_and_emitted_when_the_cell_fails_too():
    def failing():
        for i in range(worker.MODEL_WARNINGS + 3):
            warnings.warn_explicit(f"warning {i}", UserWarning, "model.py", i)
        raise RuntimeError("the step failed")

    emitted = []
    with pytest.raises(RuntimeError), worker.model_warnings(USER, emitted.append):
        failing()
    assert emitted[0].messages == [f"UserWarning: warning {i} (model.py:{i})" for i in range(worker.MODEL_WARNINGS)]


def test_the_cell_notes_say_what_the_model_warned():
    ok = ChildResult(0, False, 3.0, "")
    m = measurement([Warned(["UserWarning: target size differs (model.py:9)"])], ok, timeout=60)
    assert m.detail.notes == ["the model warned: UserWarning: target size differs (model.py:9)"]
    fig = cell_figures([m, m], batch=16, threads=1, cores=2, device="cpu")
    assert fig.warnings.count("the model warned: UserWarning: target size differs (model.py:9)") == 1
