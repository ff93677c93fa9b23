"""What a Python caller gives `dlperf.run` and `dlperf.resume` that no command line can (api.py): checked before
anything is stored, each refusal one line naming the argument; and the lines they say, which name `dlperf run`'s
flags, said to a Python caller as its arguments (`threads='two'`, not `--threads 'two'`)."""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import fields
from types import SimpleNamespace
from typing import Any

from dlperf.errors import UsageError
from dlperf.flagtext import type_of
from dlperf.measure.timer import TimerConfig
from dlperf.spec import RunSpec, make_spec
from dlperf.store.location import as_called

# `run`'s arguments and the flags of `dlperf run` that give them: what the spec's checks, the plan's warnings and its
# refusals name (`--threads 8 exceeds the cores`), said to a Python caller as the argument (`as_called`)
RUN_FLAGS = {"workloads": "--workloads", "frameworks": "--frameworks", "devices": "--devices", "threads": "--threads",
             "modes": "--modes", "repeats": "--repeats", "timeout": "--timeout", "compile_timeout": "--compile-timeout",
             "compile_at_once": "--compile-at-once", "nprocs": "--nproc", "scaling": "--scaling",
             "parallel": "--parallel", "microbatches": "--microbatches", "nnodes": "--nnodes",
             "node_rank": "--node-rank", "rdzv_endpoint": "--rdzv-endpoint", "data": "--data", "loaders": "--loaders",
             "trace_dir": "--trace-dir", "profile_steps": "--steps", "max_trace_mib": "--max-trace-mib",
             "campaign": "--campaign", "pin": "--pin", "profile": "--profile"}  # fmt: skip
RESUME_FLAGS = {"resume": "--resume", **RUN_FLAGS}  # `--resume: run 3's --data ...`: `resume: run 3's data ...`
# what the sweep calls on a `progress=` display (`runner/sweep.py`, `Session.measure`); `ahead`, asked for only where
# a display has it, aside. Checked before anything is stored: one lacking `finish` failed once the first cell ended
DISPLAY_METHODS = ("__enter__", "__exit__", "start", "start_together", "refresh", "finish", "profiling", "profiled")


@contextmanager
def in_callers_terms(flags: Mapping[str, str], given: Mapping[str, Any] | None = None) -> Iterator[None]:
    """Inside, a UsageError naming `flags` names the arguments instead, with the values `given` where it quotes them
    (`--repeats '0'`: `repeats=0`), where a Python caller called (`as_called`; a command's lines keep its flags). Its
    type is kept: a `dlperf.run` told of `--threads 'two'`, `--workloads` and `--resume` where it gave `threads=`."""
    try:
        yield
    except UsageError as exc:
        values = SimpleNamespace(**{**dict.fromkeys(flags), **(given or {})})
        exc.args = (as_called(str(exc), dict(flags), values),)
        raise


def checked_own(dry_run: object, warn: object, argv: object = None) -> list[str] | None:
    """`run`'s and `resume`'s own arguments, each refused in one line naming it before anything is stored: dry_run="no"
    was a dry run (its truth), warn=123 a TypeError at the first warning with an empty store left behind, argv="my
    args" stored as the list of its characters. The command line to store: `argv` as a list, None for this
    process's."""
    if not isinstance(dry_run, bool):
        raise UsageError(f"dry_run={dry_run!r}: expected True or False, not {type_of(dry_run)}")
    if warn is not None and not callable(warn):
        raise UsageError(f"warn={warn!r}: expected a function, called with each warning's text (None: to stderr)")
    if argv is not None and not (isinstance(argv, list | tuple) and all(isinstance(a, str) for a in argv)):
        raise UsageError(f"argv={argv!r}: expected the command line stored with the run as a list of str, e.g. "
                         "['train.py', '--fast'] (None: this process's)")  # fmt: skip
    return None if argv is None else list(argv)


def checked_progress(progress: Any) -> Any:
    """`run`'s and `resume`'s `progress`: None or True, the default display; False, none; else a display with every
    method of dlperf.progress.Progress the sweep calls (`DISPLAY_METHODS`). Any other value a UsageError before
    anything runs, naming the methods a display lacks (`progress=True` was a TypeError once the run was stored, left
    "stopped" in a live notebook; a display with `start` alone an AttributeError at its first cell's end)."""
    if progress is None or progress is True:
        return None
    if isinstance(progress, type):  # its methods are there, unbound: it failed once the run was stored
        raise UsageError(f"progress={progress.__name__}: a display class, not a display: give one made of it "
                         f"(progress={progress.__name__}(...))")  # fmt: skip
    missing = [m for m in DISPLAY_METHODS if not callable(getattr(progress, m, None))]
    if progress is False or not missing:
        return progress
    methods = ", ".join(DISPLAY_METHODS)
    lacks = f": it lacks {', '.join(missing)}" if len(missing) < len(DISPLAY_METHODS) else ""
    raise UsageError(f"progress={progress!r}: expected None or True (the default display), False (none), or a display "
                     f"like dlperf.progress.Progress (a subclass, or an object with its methods {methods})"
                     f"{lacks}")  # fmt: skip


def checked_arguments(spec_kwargs: dict[str, Any]) -> dict[str, Any]:
    """`run`'s keyword arguments, each one it takes: a misspelt one is a TypeError naming `run` and the closest
    (not RunSpec's own constructor), one of the timer's the TimerConfig that takes it (max_time=1 was 'did you mean
    max_memory?'), and a timer not a TimerConfig a UsageError naming `timer` (not an
    AttributeError from inside)."""
    known = {f.name for f in fields(RunSpec) if f.init} | set(inspect.signature(make_spec).parameters) - {"fields"}
    timed = {f.name for f in fields(TimerConfig)}
    for name in spec_kwargs:
        if name not in known and name in timed:  # `dlperf run --max-time 1` is not run(max_time=1)
            raise TypeError(f"run() got an unexpected keyword argument {name!r}: it says how each cell is timed, "
                            f"timer=dlperf.TimerConfig({name}={spec_kwargs[name]!r})")  # fmt: skip
        if name not in known:
            close = difflib.get_close_matches(name, sorted(known), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise TypeError(f"run() got an unexpected keyword argument {name!r}{hint}")
    if (timer := spec_kwargs.get("timer")) is not None and not isinstance(timer, TimerConfig):
        raise UsageError(f"timer={timer!r}: expected a dlperf.TimerConfig, e.g. timer=dlperf.TimerConfig(max_time=2)")
    return spec_kwargs
