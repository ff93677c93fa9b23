"""dlperf.envinfo: capturing a run's environment, nvidia-smi parsing, and the --resume fingerprint."""

import copy
import stat

import pytest

import dlperf
from dlperf import envinfo
from dlperf.measure import system


@pytest.fixture
def fake_root(tmp_path):
    files = {
        "proc/cpuinfo": "processor\t: 0\nmodel name\t: Test CPU 9000\nflags\t\t: sse2 avx2 avx512f\n",
        "proc/meminfo": "MemTotal:       16777216 kB\n",
        "sys/fs/cgroup/cpu.max": "200000 100000\n",
        "sys/devices/system/cpu/cpu0/topology/physical_package_id": "0\n",
        "sys/devices/system/cpu/cpu0/topology/core_id": "0\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return str(tmp_path)


def fake_nvidia_smi(tmp_path, monkeypatch, script: str) -> None:
    """Put an executable `nvidia-smi` running ``script`` (sh) first on PATH."""
    exe = tmp_path / "bin" / "nvidia-smi"
    exe.parent.mkdir()
    exe.write_text("#!/bin/sh\n" + script + "\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(exe.parent))


def test_capture(fake_root, monkeypatch):
    monkeypatch.setattr(system, "affinity_cpus", lambda: [0, 1])
    monkeypatch.setattr(envinfo, "gpu_info", lambda: None)
    frameworks = {"torch": {"version": "2.13.0", "cuda": None}}
    env = envinfo.capture(frameworks, root=fake_root, environ={"OMP_NUM_THREADS": "2", "HOME": "/root"})
    assert env["cpu"]["model"] == "Test CPU 9000"
    assert env["cpu"]["flags"] == ["avx2", "avx512f", "sse2"]
    assert env["cpu"]["isa"]["avx512f"] and not env["cpu"]["isa"]["amx_tile"]
    assert env["cores"] == {"physical": 1, "affinity": 2, "cgroup": 2.0, "cores": 1}
    assert env["memory_total_bytes"] == 16 * 2**30
    assert env["thread_env"] == {"OMP_NUM_THREADS": "2"}
    assert env["dlperf_version"] == dlperf.__version__
    assert env["python"]["implementation"] and env["os"]["kernel"] and env["hostname"]
    assert env["frameworks"] == frameworks and env["frameworks"] is not frameworks
    assert env["gpus"] is None


def test_capture_real_machine_without_frameworks():
    env = envinfo.capture()
    assert env["frameworks"] == {} and env["cores"]["cores"] >= 1


def test_gpu_info_without_nvidia_smi(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert envinfo.gpu_info() is None


def test_gpu_info_parses_nvidia_smi(tmp_path, monkeypatch):
    lines = ["NVIDIA A100-SXM4-80GB, 550.54.15, 81920", "Tesla K80, 470.1, 11441"]
    fake_nvidia_smi(tmp_path, monkeypatch, "\n".join(f"echo '{line}'" for line in lines))
    assert envinfo.gpu_info() == [
        {"name": "NVIDIA A100-SXM4-80GB", "driver_version": "550.54.15", "memory_total_mib": 81920},
        {"name": "Tesla K80", "driver_version": "470.1", "memory_total_mib": 11441},
    ]


def test_gpu_info_failing_nvidia_smi(tmp_path, monkeypatch):
    fake_nvidia_smi(tmp_path, monkeypatch, "echo 'NVIDIA-SMI has failed' >&2\nexit 9")
    assert envinfo.gpu_info() is None


def test_gpu_info_hanging_nvidia_smi(tmp_path, monkeypatch):
    # exec: the timeout kills the process itself, not a shell whose orphaned child would hold the pipe open.
    fake_nvidia_smi(tmp_path, monkeypatch, "exec sleep 30")
    assert envinfo.gpu_info(timeout=0.2) is None


ENV = {
    "cpu": {"model": "Test CPU 9000", "isa": {}, "flags": []},
    "cores": {"physical": 4, "affinity": 4, "cgroup": None, "cores": 4},
    "memory_total_bytes": int(15.8 * 2**30),
    "hostname": "box",
    "gpus": [{"name": "Tesla K80", "driver_version": "470.1", "memory_total_mib": 11441}],
    "frameworks": {"torch": {"version": "2.13.0", "devices": ["cpu", "cuda:0"]}},
    "thread_env": {"OMP_NUM_THREADS": "4"},
}


def test_fingerprint():
    assert envinfo.fingerprint(ENV) == {
        "cpu_model": "Test CPU 9000",
        "cores": {"physical": 4, "affinity": 4, "cgroup": None, "cores": 4},
        "memory_gib": 16,
        "hostname": "box",
        "gpus": ["Tesla K80"],
        "frameworks": {"torch": "2.13.0"},
    }


def test_fingerprint_ignores_what_may_change():
    other = copy.deepcopy(ENV)
    other["memory_total_bytes"] += 3 * 2**20
    other["thread_env"] = {}
    other["gpus"][0]["driver_version"] = "480.0"
    assert envinfo.fingerprint_diff(envinfo.fingerprint(ENV), envinfo.fingerprint(other)) == []


def test_fingerprint_diff_messages():
    new = copy.deepcopy(ENV)
    new["frameworks"] = {"torch": {"version": "2.14.1"}, "jax": {"version": "0.4.30"}}
    new["cores"]["cgroup"] = 2.0
    new["cores"]["cores"] = 2
    new["gpus"] = None
    new["hostname"] = "other"
    diffs = envinfo.fingerprint_diff(envinfo.fingerprint(ENV), envinfo.fingerprint(new))
    assert diffs == [
        "cgroup CPU limit none -> 2.0",
        "usable cores 4 -> 2",
        "hostname box -> other",
        "GPUs Tesla K80 -> none",
        "torch version 2.13.0 -> 2.14.1",
        "jax version none -> 0.4.30",
    ]


def test_fingerprint_of_sparse_env():
    # A run recorded before a field existed must still compare, not raise.
    assert envinfo.fingerprint({})["frameworks"] == {}
    assert envinfo.fingerprint_diff({}, {"hostname": "box"}) == ["hostname none -> box"]
