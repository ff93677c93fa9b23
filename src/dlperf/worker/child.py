"""What every child process does around its own work: read its task, report its start, turn what it raises into
events, and end. Standard library only, like every module a child imports.

    def main(argv):                  # python -m dlperf.runner.<kind> TASK.json EVENTS.jsonl
        return serve(argv, body)     # body(task, emit) does the work and emits its events

    if __name__ == "__main__":
        exit_now(main(sys.argv))

A NotImplementedError is `unsupported` with its reason (the mode, device or workload does not apply: skipped, not
failed); anything else is an error with its first line and the traceback, and exit code 1.
"""

from __future__ import annotations

import difflib
import os
import re
import signal
import socket
import sys
import tempfile
import traceback
from collections.abc import Callable
from typing import Any

from dlperf import protocol
from dlperf.errors import UsageError, in_user_code, where_in_user_code
from dlperf.measure.system import descendants
from dlperf.protocol import Error, Reporter, Start, Task, Unsupported, events_file, own_rank, read_task
from dlperf.vocab import OUT_OF_MEMORY, OUT_OF_MEMORY_SAID
from dlperf.worker.lifeline import die_with_parent

Body = Callable[[Task, Reporter], None]


def describe(exc: BaseException) -> str:
    """An exception in one line, out-of-memory named as such: its first line, or the line that says it ran out of
    memory where a later one does (TensorFlow's in a tf.function: "Graph execution error:", the node's traceback,
    then "OOM when allocating tensor ..."). TensorFlow's "{{function_node ...}}" before its words is left out, and
    a UsageError's class name (a fit try read "out of memory ...: UsageError: workload ...")."""
    name = type(exc).__name__
    head = "" if isinstance(exc, UsageError) else f"{name}: "  # dlperf's own words, as the parent would say them
    text = _TF_NODE.sub("", (f"{head}{exc}".strip().splitlines() if str(exc).strip() else [name])[0])
    said = next((line.strip() for line in str(exc).splitlines() if says_out_of_memory(line)), None)
    if said is None:
        return text[:500]
    return f"out of memory: {text if says_out_of_memory(text) else head + _TF_NODE.sub('', said)}"[:515]


_TF_NODE = re.compile(r"\{\{function_node [^}]*\}\}\s*")  # TensorFlow's op: "{{function_node __wrapped__Fill_...}}"


def says_out_of_memory(text: str) -> bool:
    lowered = text.lower()
    return any(said in lowered for said in OUT_OF_MEMORY_SAID)


def out_of_memory(exc: BaseException) -> bool:
    return isinstance(exc, MemoryError) or describe(exc).startswith("out of memory")


class OutOfMemory(MemoryError):
    """An out-of-memory error its catcher described (the batch, the limit): reported with its own message."""


def oom_words(exc: BaseException, task: Task) -> str:
    """A MemoryError no worker described (`OutOfMemory`) in one line, as a cell's is (`worker/cell.oom_reason`):
    what the child was doing, the error's own words (where in the user's code), and what to try. Had been the bare
    "out of memory (MemoryError)" of whatever child: a probe, the peaks, the all-reduce, a profile."""
    own = describe(exc).removeprefix(f"{OUT_OF_MEMORY}: ") if str(exc) else type(exc).__name__
    doing, lighter = _doing(task)
    return f"{OUT_OF_MEMORY}{doing}: {own}{where_in_user_code(exc)}; try {lighter}"


def _doing(task: Task) -> tuple[str, str]:
    """What `task`'s child does, said after "out of memory", and what asks less memory of it."""
    if isinstance(task, protocol.ProbeTask):  # the parent says what it asked ("tracing the step's memory: ...")
        return "", "closing other programs to free memory, or a smaller model or batch"
    if isinstance(task, protocol.PeakTask):
        arrays = f"arrays of {_mib(task.bandwidth_bytes)}"
        return f" measuring {task.device}'s peaks (matrices up to {max(task.sizes, default=0)}, {arrays})", (
            "smaller --sizes or --bandwidth-mib")  # fmt: skip
    if isinstance(task, protocol.CommTask):
        return f" all-reducing messages up to {_mib(max(task.sizes, default=0))}", "smaller --sizes"
    what = "profiling" if isinstance(task, protocol.ProfileTask) else "measuring"  # a cell's process, outside its steps
    return f" at batch {task.workload.get('batch')} ({what} {task.cell.workload})", "a smaller batch"


def _mib(n: int) -> str:
    return f"{n / 2**20:,.4g} MiB"


def start_event() -> Start:
    """Who is reporting: the process, its interpreter and, in a distributed job, its rank and host."""
    rank = own_rank()
    if rank is None:
        return Start(pid=os.getpid(), python=sys.executable)
    return Start(
        pid=os.getpid(), python=sys.executable, rank=rank, world=int(os.environ.get("WORLD_SIZE", 1)),
        local_rank=int(os.environ.get("LOCAL_RANK", 0)), host=socket.gethostname(),
    )  # fmt: skip


def exit_now(code: int) -> None:
    """End a child whose events are on disk, skipping the interpreter's teardown: with torch and its compiler loaded
    that teardown took 0.85 s of every cell (measured here, against 0.03 s), and under gloo and DDP, C++ destructors
    at exit aborted ("terminate called without an active exception") in about 1 job in 5, after the results were
    written. Processes the child started (a compiler's worker pool) are stopped first: none outlives its cell."""
    sys.stdout.flush()
    sys.stderr.flush()
    for pid in descendants(os.getpid()):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    os._exit(code)


_OWN_TEMP: list[str] = []  # the folder `own_temp` set, once a child serves a task


def own_temp(folder: str) -> None:
    """Temporary files in `folder`, the one the launcher gave this child and removes however the child ends. A child
    ends without the interpreter's teardown (`exit_now`), so what a framework removes only at exit would stay in /tmp:
    TensorFlow's AutoGraph left two .py files there per process. TMPDIR covers what the child's own children write."""
    tempfile.tempdir = folder
    os.environ["TMPDIR"] = folder
    _OWN_TEMP[:] = [folder]


def own_temp_folder() -> str | None:
    """The child's own temporary folder, where `own_temp` set one; None in any other process (a test calling a
    worker function in place), whose temporary folder, /tmp itself, holds users' files as well."""
    return _OWN_TEMP[0] if _OWN_TEMP else None


def models_own(exc: NotImplementedError, task: Any) -> bool:
    """Whether a NotImplementedError is the user's model failing, not a mode, device or setting it does not support:
    the user's own `raise NotImplementedError("TODO")` in their code, a module without `forward` (a `foward` typo,
    which torch's Module answers so), or weights left on the meta device. Those were `unsupported`, exit 0: a CI
    check passed a broken model. An operator a device lacks (a CUDA-only kernel on the CPU) stays unsupported."""
    if not _users(task):
        return False  # a built-in's: dlperf's own to say
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return False
    last = frames[-1]
    raised_here = in_user_code(last.filename) and (last.line or "").lstrip().startswith("raise")
    # no mode makes integers: the model fed them in; on the CPU, where every operator has its integer kernels (a
    # GPU may lack one: integer addmm is CPU-only)
    integers = task.cell.device == "cpu" and _INTEGER_KERNEL.search(str(exc)) is not None
    return raised_here or last.name == "_forward_unimplemented" or "meta tensor" in str(exc) or integers


def _users(task: Any) -> bool:
    """Whether `task` is a cell of a user's model (a probe is no cell)."""
    workload = getattr(task, "workload", None)
    return getattr(task, "cell", None) is not None and isinstance(workload, dict) and bool(workload.get("source"))


# an operator given integers where it takes floats: `F.softmax(token_ids)`, or a loss called (targets, outputs), was
# "unsupported: "softmax_lastdim_kernel_impl" not implemented for 'Long'", exit 0
_INTEGER_KERNEL = re.compile(r"not implemented for '(Long|Int|Short|Char|Byte|Bool|UInt\d+)'")


def no_forward(exc: BaseException) -> str:
    """'; ...': the fix where a model has no `forward` (torch's Module calls nothing else), naming the method of the
    model's class that was surely meant (Keras's `call`, a `foward` typo); '' otherwise. Standard library only."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None or tb.tb_frame.f_code.co_name != "_forward_unimplemented":
        return ""
    module = tb.tb_frame.f_locals.get("self")
    own = [
        n for n in vars(type(module)) if callable(getattr(type(module), n, None)) and n != "forward" and n[:2] != "__"
    ]
    meant = ["call"] if "call" in own else difflib.get_close_matches("forward", own, n=1, cutoff=0.6)
    cls = type(module).__name__
    return (
        f"; torch calls a module's forward: rename {cls}.{meant[0]} to forward"
        if meant
        else f"; torch calls a module's forward: define {cls}.forward(self, ...)"
    )


def serve(argv: list[str], body: Body) -> int:
    """Run `body` on the task of argv[1], reporting to argv[2] (one file per rank in a distributed job)."""
    die_with_parent()  # before anything slow: a parent killed meanwhile is noticed here
    own_temp(os.path.dirname(os.path.abspath(argv[1])))
    task = read_task(argv[1])
    emit = Reporter(events_file(argv[2], own_rank()))
    emit(start_event())
    try:
        body(task, emit)
    except NotImplementedError as exc:
        if not models_own(exc, task):  # where the user's model called it, for theirs: "not supported" alone said none
            emit(Unsupported((str(exc) or "not supported") + (where_in_user_code(exc) if _users(task) else "")))
            return 0
        emit(Error(describe(exc) + no_forward(exc) + where_in_user_code(exc), traceback.format_exc(), own_rank()))
        return 1
    except MemoryError as exc:
        said = str(exc) if isinstance(exc, OutOfMemory) else oom_words(exc, task)
        emit(Error(said, traceback.format_exc(), own_rank()))
        return 1
    except Exception as exc:
        emit(Error(describe(exc) + where_in_user_code(exc), traceback.format_exc(), own_rank()))
        return 1
    return 0
