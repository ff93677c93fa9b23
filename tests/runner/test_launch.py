import os
import signal
import sys
import time

from conftest import gone
from dlperf.answers import EnvRequest
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
        "-m",
        "dlperf.worker.cell",
        "t.json",
        "e.jsonl",
    ]
    probe = ProbeTask("torch", EnvRequest())
    assert child_command("/py", probe, "t", "e")[2] == "dlperf.worker.probe"
    ddp = DDPTask(CELL, 0, {}, TimerConfig())
    cmd = child_command("/py", ddp, "t", "e", nproc=2, rdzv=Rendezvous(), job_id="j")
    # torchrun's agent runs under the lifeline module, so that it dies with dlperf
    assert cmd[:4] == ["/py", "-m", "dlperf.worker.lifeline", "torch.distributed.run"] and "--nproc-per-node=2" in cmd
    assert cmd[-4:] == ["-m", "dlperf.worker.ddp", "t", "e"]


def test_launch_runs_a_child_reads_its_events_and_leaves_nothing_behind(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    launched = launch(ProbeTask("nosuch", EnvRequest()), sys.executable, 1, 60)  # a framework that does not exist
    [start, error] = launched.main
    assert start.pid > 0 and start.python == sys.executable
    assert error.error == "ValueError: 'nosuch' is not a valid Framework" and not error.usage  # the registry's refusal
    assert error.traceback.rstrip().endswith(error.error)  # the child's own traceback, read back whole
    assert launched.child.returncode == 1 and list(tmp_path.iterdir()) == []


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
