"""A DataLoader worker that fails says how, in the cell's reason (`data.Batches`). A worker that died without raising
(a spawned worker that could not import the module of the Dataset it unpickles, os._exit, a signal) was stored as
torch's 'DataLoader worker (pid(s) N) exited unexpectedly' alone, its own traceback only in the cell's log; a user's
`loader=` DataLoader whose worker raised was 'Caught ZeroDivisionError in DataLoader worker process 0.'; neither
named the line of the user's Dataset."""

import dataclasses
import multiprocessing.spawn
import os
import sys
import traceback

import pytest
from test_user_spawn_loader import FACTORY

from conftest import gone, released, require

torch = require("torch")

from dlperf.frameworks.torch import data  # noqa: E402
from dlperf.loaders import LoaderSetting  # noqa: E402
from dlperf.workloads.shi2016 import BUILTIN  # noqa: E402
from dlperf.workloads.user import build_user_workload, user_workload  # noqa: E402

WORKLOAD = dataclasses.replace(BUILTIN["tiny-fcn-r"], batch=4)


class Dies(torch.utils.data.Dataset):
    """Reads in the loading process; in a worker, `how` ends it."""

    def __init__(self, how):
        self.how = how

    def __len__(self):
        return 16

    def __getitem__(self, i):
        if torch.utils.data.get_worker_info() is not None:
            self.how()
        return torch.zeros(8), 0


def divide():
    return 1 / 0


def exit_3():
    os._exit(3)


def import_fails():
    try:
        import no_such_module_of_the_users  # noqa: F401
    except ImportError:
        os.write(2, traceback.format_exc().encode())  # as a spawned worker's unpickling prints it, then exits 1
        os._exit(1)


def first_batch_error(loader, log=None) -> str:
    """The error of the loader's first batch; with `log`, the process's stderr that file meanwhile, as a cell's is
    (its stderr.log, which DataLoader workers inherit; pytest's capture puts its own back between phases)."""
    saved = os.dup(2)
    if log is not None:
        with open(log, "wb") as file:
            os.dup2(file.fileno(), 2)
    try:
        next(iter(loader))
    except Exception as exc:
        said = f"{type(exc).__name__}: {exc}"
        released(exc)
    else:
        pytest.fail("the loader's first batch came without an error")
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    return said


def of_dataset(how):
    user = user_workload("dies", torch.nn.Linear(8, 2), None, torch.nn.functional.cross_entropy, batch_size=4,
                         dataset=Dies(how))  # fmt: skip
    return data.loader(WORKLOAD, "dataset", LoaderSetting(1), torch.device("cpu"), user)


def of_factory(how):
    def factory(batch_size, **kwargs):
        return torch.utils.data.DataLoader(Dies(how), batch_size=batch_size, **kwargs)

    user = user_workload("dies", torch.nn.Linear(8, 2), None, torch.nn.functional.cross_entropy, batch_size=4,
                         loader=factory)  # fmt: skip
    return data.loader(WORKLOAD, "dataset", LoaderSetting(1), torch.device("cpu"), user)


def test_a_released_failure_ends_its_loaders_workers_at_once():
    """What `released` is for: a worker's exception holds the loader's iterator in a reference cycle, and its worker
    lived on until the cycle collector freed it in a later test, 5 s into it (torch's join of a worker that never
    heard to stop: test_torch_data's corrupt image made test_labels_beyond... take 5.02 s). Released, it ends now."""
    batches = iter(of_dataset(divide))
    workers = [w.pid for w in batches.batches._workers]  # torch's own list, as `data.worker_death` reads it
    with pytest.raises(ZeroDivisionError) as caught:  # held, as a test holds what it checks
        next(batches)
    del batches
    released(caught.value)
    assert workers and gone(workers, within_s=2)


@pytest.mark.parametrize("loader", [of_dataset, of_factory])
def test_a_workers_exception_is_its_own_message_and_the_users_line(loader):
    said = first_batch_error(loader(divide))
    assert said.startswith("ZeroDivisionError: division by zero (in DataLoader worker process 0, at "), said
    assert f"{__file__}:" in said and said.endswith(", in divide)") and "\n" not in said, said


@pytest.mark.parametrize("loader", [of_dataset, of_factory])
def test_a_worker_that_exited_says_its_exit_code(loader, tmp_path):
    said = first_batch_error(loader(exit_3), tmp_path / "stderr.log")
    assert said.startswith("RuntimeError: DataLoader worker (pid(s) ") and said.endswith(
        "exited unexpectedly (exit code 3)"
    ), said


def test_a_worker_that_exited_after_a_traceback_says_its_error_and_the_users_line(tmp_path):
    said = first_batch_error(of_dataset(import_fails), tmp_path / "stderr.log")
    assert said.endswith(
        f"exited unexpectedly (exit code 1): ModuleNotFoundError: No module named 'no_such_module_of_the_users' "
        f"(at {__file__}:{import_fails.__code__.co_firstlineno + 2}, in import_fails)"
    ), said
    assert "Traceback" in (tmp_path / "stderr.log").read_text()  # the full traceback stays in the log


def test_a_death_without_a_log_file_is_said_without_its_error(monkeypatch):
    monkeypatch.setattr(data, "stderr_offset", lambda: None)  # a terminal, a pipe: not read back
    assert first_batch_error(of_dataset(import_fails)).endswith("exited unexpectedly (exit code 1)")


def test_how_a_worker_ended_and_what_its_log_says():
    assert data.ended(3) == "exit code 3" and data.ended(-11) == "killed by SIGSEGV"
    assert data.ended(-9) == "killed by SIGKILL: by the kernel when memory runs out, or by hand"
    log = f'a warning\nTraceback (most recent call last):\n  File "{multiprocessing.spawn.__file__}", '
    log += "line 132, in _main\n    self = reduction.pickle.load(from_parent)\n           ^^^^^^\nOSError: gone\n"
    assert data.last_error(log) == ": OSError: gone"  # no frame of the user's: none named
    assert data.last_error("a warning\n") == ""
    died = RuntimeError("DataLoader worker (pid 12) is killed by signal: Killed. ")
    assert str(data.worker_death(died, None, None)) == (
        "DataLoader worker (pid 12) is killed by signal: Killed (SIGKILL: by the kernel when memory runs out, "
        "or by hand)"
    )
    lost = RuntimeError("DataLoader worker (pid 12) exited unexpectedly with exit code 3. Details are lost due to "
                        "multiprocessing. Rerunning with num_workers=0 may give better error trace.")  # fmt: skip
    assert str(data.worker_death(lost, None, None)) == "DataLoader worker (pid 12) exited unexpectedly with exit code 3"
    other = RuntimeError("shapes differ")
    assert data.worker_death(other, None, None) is other


# the user's file of test_user_spawn_loader, its Dataset unpickled in a spawned worker as an import it cannot make
GONE = (
    FACTORY
    + """

class Gone:
    def __reduce__(self):
        return (__import__, ("a_module_only_the_parent_had",))


def gone(self):
    self.gone = Gone()


Points.__init__ = gone
"""
)


@pytest.mark.slow  # a spawned worker imports torch
def test_a_spawned_worker_that_cannot_import_says_what(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))
    (tmp_path / "points.py").write_text(GONE)
    user = build_user_workload(f"{tmp_path / 'points.py'}:make")
    loader = data.loader(WORKLOAD, "dataset", LoaderSetting(1), torch.device("cpu"), user)
    said = first_batch_error(loader, tmp_path / "stderr.log")
    assert said.endswith("exited unexpectedly (exit code 1): ModuleNotFoundError: No module named "
                         "'a_module_only_the_parent_had'"), said  # fmt: skip


@pytest.mark.parametrize(
    ("before", "now", "said"),
    [
        (
            3,
            3,
            "SIGKILL: sent by a process, by hand say: the kernel's out-of-memory killer counted no kill while it ran",
        ),
        (3, 4, "SIGKILL: out of memory, the kernel's out-of-memory killer killed a process while the loader ran"),
        (None, None, "SIGKILL: by the kernel when memory runs out, or by hand"),  # no count to read: either
    ],
)
def test_a_worker_killed_by_sigkill_is_said_out_of_memory_only_where_the_kernel_counted_it(monkeypatch, before, now,
                                                                                           said):  # fmt: skip
    """A worker killed by hand (kill -9) was said '(SIGKILL, which the kernel sends when memory runs out)'."""
    monkeypatch.setattr(data.system, "oom_kills", lambda: now)
    died = RuntimeError("DataLoader worker (pid 12) is killed by signal: Killed. ")
    assert (
        str(data.worker_death(died, None, None, before))
        == f"DataLoader worker (pid 12) is killed by signal: Killed ({said})"
    )
    assert data.ended(-9, before) == f"killed by {said}"
