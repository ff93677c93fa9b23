import os
import signal
import sys
import time

import pytest

from conftest import gone
from dlperf.answers import EnvRequest
from dlperf.measure import system
from dlperf.measure.timer import TimerConfig
from dlperf.parallel import Rendezvous
from dlperf.protocol import Cell, CellTask, Compiled, Compiling, DDPTask, ProbeTask
from dlperf.runner.launch import (
    KILL_GRACE_S,
    ChildResult,
    Follower,
    child_command,
    child_env,
    launch,
    run_child,
    signal_reason,
)


def test_child_env_fixes_threads_and_keeps_the_rest():
    env = child_env({"PATH": "/bin", "OMP_NUM_THREADS": "16"}, 2)
    assert env["OMP_NUM_THREADS"] == "2" and env["MKL_NUM_THREADS"] == "2"
    assert env["PATH"] == "/bin"
    assert "PYTHONPATH" not in env  # same interpreter: dlperf is already importable


def test_child_env_for_another_interpreter_makes_dlperf_importable_and_nothing_else(tmp_path, monkeypatch):
    monkeypatch.setenv("DLPERF_DATA_DIR", str(tmp_path))
    env = child_env({"PYTHONPATH": "/x"}, 1, python="/other/venv/bin/python")
    # an inherited path could hold this environment's numpy: the other environment has its own
    assert os.listdir(env["PYTHONPATH"]) == ["dlperf"]


CELL = Cell("tiny-fcn-r", "torch", "cpu", 1, "fp32")


def test_a_task_starts_its_own_worker_and_a_distributed_one_through_torchrun():
    plain = CellTask(CELL, 0, {}, TimerConfig())
    assert child_command("/py", plain, "t.json", "e.jsonl") == [
        "/py",
        "-P",
        "-m",
        "dlperf.worker.cell",
        "t.json",
        "e.jsonl",
    ]
    probe = ProbeTask("torch", EnvRequest())
    assert child_command("/py", probe, "t", "e")[3] == "dlperf.worker.probe"
    ddp = DDPTask(CELL, 0, {}, TimerConfig())
    cmd = child_command("/py", ddp, "/tmp/job/t", "e", nproc=2, rdzv=Rendezvous(), job_id="j")
    # torchrun's agent runs under the lifeline module, so that it dies with dlperf
    assert cmd[:5] == ["/py", "-P", "-m", "dlperf.worker.lifeline", "torch.distributed.run"]
    assert "--nproc-per-node=2" in cmd
    assert "--log-dir=/tmp/job/torchrun" in cmd  # its logs in the launcher's folder, removed with it
    assert cmd[-8:] == ["--no-python", "/py", "-u", "-P", "-m", "dlperf.worker.ddp", "/tmp/job/t", "e"]


def test_launch_runs_a_child_reads_its_events_and_leaves_nothing_behind(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    launched = launch(ProbeTask("nosuch", EnvRequest()), sys.executable, 1, 60)  # a framework that does not exist
    [start, error] = launched.main
    assert start.pid > 0 and start.python == sys.executable
    assert error.error == "ValueError: 'nosuch' is not a valid Framework" and not error.usage  # the registry's refusal
    assert error.traceback.rstrip().endswith(error.error)  # the child's own traceback, read back whole
    assert launched.child.returncode == 1 and list(tmp_path.iterdir()) == []


def test_the_first_child_a_process_launches_sweeps_what_a_killed_dlperf_left(tmp_path, monkeypatch):
    """A SIGKILLed `dlperf comm` (or peak, profile) left its child's folder in /tmp until a `dlperf run` swept it: any
    command's first child sweeps, once."""
    import subprocess
    import tempfile

    from dlperf.runner import lifeline

    ended = subprocess.Popen(["true"])
    ended.wait()
    (tmp_path / f"dlperf-{ended.pid}-comm-abc").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(lifeline, "_swept", False)
    launch(ProbeTask("nosuch", EnvRequest()), sys.executable, 1, 60)
    assert list(tmp_path.iterdir()) == [] and lifeline._swept
    (tmp_path / f"dlperf-{ended.pid}-comm-def").mkdir()  # swept once a process: not at every cell
    launch(ProbeTask("nosuch", EnvRequest()), sys.executable, 1, 60)
    assert [p.name for p in tmp_path.iterdir()] == [f"dlperf-{ended.pid}-comm-def"]


def test_crash_reasons():
    assert "SIGSEGV" in signal_reason(signal.SIGSEGV)
    assert "out of memory" in signal_reason(signal.SIGKILL)
    assert ChildResult(-signal.SIGABRT, False, 1.0, "").crashed_reason.startswith("worker killed by SIGABRT")
    assert ChildResult(3, False, 1.0, "").crashed_reason == "worker exited with code 3"
    assert ChildResult(0, False, 1.0, "").crashed_reason is None


def test_timeout_kills_the_whole_tree(tmp_path):
    pidfile = tmp_path / "grandchild.pid"
    script = (
        "import subprocess, sys, time\n"
        f"p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
        "time.sleep(120)\n"
    )
    timeout = 2.0
    start = time.monotonic()
    result = run_child([sys.executable, "-c", script], os.environ, timeout=timeout, log_dir=tmp_path)
    took = time.monotonic() - start
    assert result.timed_out and result.returncode is None
    # stopped by the timeout's SIGTERM (at the latest by the SIGKILL a grace later), long before its 120 s sleep:
    # 1 s for the launcher's 0.25 s polls and a loaded machine's scheduling
    assert timeout <= took < timeout + KILL_GRACE_S + 1, took
    assert gone([int(pidfile.read_text())])  # the grandchild too, in the same process group


def test_stderr_tail_and_exit_code(tmp_path):
    script = "import sys; print('boom happened', file=sys.stderr); sys.exit(3)"
    result = run_child([sys.executable, "-c", script], os.environ, timeout=30, log_dir=tmp_path)
    assert result.returncode == 3 and "boom happened" in result.stderr_tail


def test_kill_tree_also_stops_descendants_that_left_the_process_group(tmp_path):
    from pathlib import Path

    from dlperf.measure.system import descendants

    pid_file = tmp_path / "grandchild.pid"
    script = (
        "import subprocess, sys, time\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], start_new_session=True)\n"
        f"open({str(pid_file)!r}, 'w').write(str(p.pid))\n"
        "time.sleep(60)\n"
    )

    def limit():
        return "enough" if pid_file.exists() and pid_file.read_text() else None

    result = run_child([sys.executable, "-c", script], dict(os.environ), 30, Path(tmp_path), limit=limit)
    assert result.timed_out and result.stop_reason == "enough"
    grandchild = int(pid_file.read_text())
    assert gone([grandchild])
    assert descendants(os.getpid()) == [] or grandchild not in descendants(os.getpid())


def test_cache_env_puts_compiler_caches_in_the_cells_directory(tmp_path):
    from dlperf.runner.launch import cache_env

    env = cache_env(tmp_path)
    assert env["TORCHINDUCTOR_CACHE_DIR"].startswith(str(tmp_path)) and env["TRITON_CACHE_DIR"].startswith(
        str(tmp_path)
    )


def test_the_follower_reads_each_event_once_and_a_line_being_written_later(tmp_path):
    path = tmp_path / "e.jsonl"
    follow = Follower(path)
    assert follow.new() == []  # not written yet
    compiled = Compiled(1.5, {"graphs": 1}).to_line()
    path.write_text(Compiling().to_line() + "\n" + compiled[:10])
    assert follow.new() == [Compiling()]
    with open(path, "a") as f:
        f.write(compiled[10:] + "\n")
    assert follow.new() == [Compiled(1.5, {"graphs": 1})] and follow.new() == []


def test_compile_watch_stops_only_a_compilation_that_runs_too_long():
    from dlperf.runner.sweep import CompileWatch

    watch = CompileWatch(0.2)
    assert watch([]) is None
    assert watch([Compiling()]) is None
    time.sleep(0.3)
    assert watch([]) == "compilation exceeded --compile-timeout 0.2 s"
    assert watch([Compiled(1.0)]) is None  # compiled: the limit no longer applies
    assert CompileWatch(None)([Compiling()]) is None


def sigkilled(tmp_path) -> ChildResult:
    """A child SIGKILLed by another process: this one, as soon as it runs."""
    pid_file = tmp_path / "pid"
    pid_file.unlink(missing_ok=True)
    script = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(120)"

    def kill_it():
        if pid_file.exists() and pid_file.read_text():
            os.kill(int(pid_file.read_text()), signal.SIGKILL)

    return run_child([sys.executable, "-c", script], dict(os.environ), 60, tmp_path, poll=kill_it)


KILLED = "worker killed by SIGKILL"


@pytest.mark.parametrize(
    ("counts", "said"),
    [
        ([3, 3], f"{KILLED} (sent by a process: the kernel's out-of-memory killer counted no kill while it ran)"),
        ([3, 4], f"{KILLED} (out of memory: the kernel's out-of-memory killer killed a process while it ran)"),
        ([None, None], f"{KILLED} (killed: out of memory?)"),  # no counter to read: it may be
    ],
)
def test_a_sigkill_is_out_of_memory_only_where_the_kernels_oom_killer_counted_a_kill(tmp_path, monkeypatch, counts,
                                                                                     said):  # fmt: skip
    reads = iter(counts)  # before the child, after it
    monkeypatch.setattr(system, "oom_kills", lambda: next(reads))
    assert sigkilled(tmp_path).crashed_reason == said


def test_a_sigkill_from_another_process_is_not_called_out_of_memory_where_the_kernel_counts(tmp_path):
    """The machine's own counter, as the launcher reads it: no out-of-memory kill counted, none claimed."""
    if system.oom_kills() is None:
        pytest.skip("no out-of-memory counter readable here (cgroup memory.events or oom_control, /proc/vmstat)")
    result = sigkilled(tmp_path)
    assert result.returncode == -signal.SIGKILL and result.oom_kills is not None
    assert "out of memory?" not in result.crashed_reason
    # "out of memory" only where a kill was counted meanwhile, of another process of this cgroup say
    assert ("sent by a process" in result.crashed_reason) == (result.oom_kills == 0), result


@pytest.mark.parametrize(
    ("files", "want"),
    [
        ({"proc/self/cgroup": "0::/user/me\n", "sys/fs/cgroup/user/me/memory.events": "oom 2\noom_kill 7\n"}, 7),
        # a container without a cgroup namespace: its own cgroup mounted at the root, a deeper path named
        ({"proc/self/cgroup": "0::/docker/abc\n", "sys/fs/cgroup/memory.events": "oom_kill 1\n"}, 1),
        ({"proc/self/cgroup": "4:memory:/jobs/9\n0::/\n",
          "sys/fs/cgroup/memory/jobs/9/memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 5\n"}, 5),
        ({"proc/self/cgroup": "0::/\n", "proc/vmstat": "nr_free_pages 10\noom_kill 12\n"}, 12),  # the machine's
        ({"proc/self/cgroup": "0::/\n"}, None),  # nothing readable: unknown, never 0
    ],
)  # fmt: skip
def test_the_oom_counter_is_the_cgroups_else_the_machines(tmp_path, files, want):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert system.oom_kills(str(tmp_path)) == want


def test_a_suspended_childs_pause_is_not_counted_against_its_timeout(tmp_path, monkeypatch):
    """dlperf stopped with its child (Ctrl-Z) for longer than the child's timeout: the child is not timed out for it."""
    from dlperf.runner import lifeline

    paused_s = [0.0]
    monkeypatch.setattr(lifeline, "paused", lambda: (0, paused_s[0]))

    def pause():  # as if each poll came after a long suspension
        paused_s[0] += 10.0

    script = "import time; time.sleep(1.5)"
    result = run_child([sys.executable, "-c", script], dict(os.environ), 1.0, tmp_path, poll=pause)
    assert not result.timed_out and result.returncode == 0


@pytest.mark.parametrize(("died", "code", "orphaned"), [(True, -9, True), (False, -9, False), (True, 0, False)])
def test_a_forked_child_killed_with_its_warm_parent_is_told_from_one_killed_alone(tmp_path, died, code, orphaned):
    """Its process group's SIGKILL came from its parent's death (`WarmParent.exit_code`), not from the cell:
    `unsuspended` launches it again."""

    class Forked:
        pid, returncode = os.getpid(), code

        def wait(self, timeout=None):
            return code

    class Parent:
        def __init__(self):
            self.died = died

        def serving(self, stop=None):
            return None

        def spawn(self, module, args, env, log_dir, gpu=False):
            return Forked()

    child = run_child([sys.executable, "-m", "dlperf.worker.cell"], {}, 60, tmp_path, parent=Parent())
    assert child.started == "warm" and child.orphaned is orphaned


INTERRUPTED_AT_FORK = """
import os, signal, subprocess, sys
from pathlib import Path
from dlperf.runner import launch, lifeline

os.register_at_fork(after_in_parent=lambda: os.kill(os.getpid(), signal.SIGINT))  # Ctrl-C as the child is forked
log = Path.cwd()  # the test's tmp_path: a folder of mkdtemp's was left in /tmp by every run
with lifeline.sigterm_as_interrupt(to_the_end=True):
    try:
        launch.run_child([sys.executable, "-c", "import time; time.sleep(30)"], dict(os.environ), 60.0, log)
    except KeyboardInterrupt:
        print("interrupted")
        sys.exit(130)
print("not interrupted")
"""


def test_an_interrupt_as_a_child_is_forked_is_not_lost_in_the_at_fork_handlers(tmp_path):
    """Ctrl-C that came while a cell's child was forked was raised inside an at-fork handler (logging's), which
    Python prints as 'Exception ignored' and drops; the first interrupt then marked as handled, every later one was
    dropped as a second (fresh-clone CI: dlperf fit went on through 16 tries after Ctrl-C). It is held until the
    child has started, then raised, and the child is killed."""
    import subprocess

    done = subprocess.run([sys.executable, "-c", INTERRUPTED_AT_FORK], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path)  # fmt: skip
    assert (done.returncode, done.stdout.strip()) == (130, "interrupted"), done.stderr
    assert "Exception ignored" not in done.stderr, done.stderr


INTERRUPTED_AS_A_WARM_PARENT_FORKS = """
import os, signal, subprocess, sys, time
from pathlib import Path
from dlperf.runner import launch, lifeline

class Parent:  # a warm parent whose fork is under way when Ctrl-C comes: the child runs, its pid not yet answered
    died = False

    def serving(self, stop=None):
        return None

    def spawn(self, module, args, env, log_dir, gpu=False):
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        print(child.pid, flush=True)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.5)  # the answer awaited
        return child

with lifeline.sigterm_as_interrupt(to_the_end=True):
    try:
        launch.run_child([sys.executable, "-m", "dlperf.worker.cell"], dict(os.environ), 60.0,
                         Path.cwd(), parent=Parent())  # the test's tmp_path
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        sys.exit(130)
print("not interrupted")
"""


def test_an_interrupt_while_a_warm_parent_forks_the_child_kills_the_child(tmp_path):
    """Ctrl-C while dlperf awaited the warm parent's answer (the child forked, its pid not yet told) was raised there,
    and the forked child measured on to its end, dlperf's launch gone (a Python host's run interrupted: minutes of a
    cell on the CPUs). It is held until the answer came, then raised, and the child is killed."""
    import subprocess

    done = subprocess.run([sys.executable, "-c", INTERRUPTED_AS_A_WARM_PARENT_FORKS], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)  # fmt: skip
    pid, said = done.stdout.split()
    assert (done.returncode, said) == (130, "interrupted"), done.stderr
    assert gone([int(pid)], 5.0)
