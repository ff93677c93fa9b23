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
        "proc/cpuinfo": "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel\t\t: 2\n"
        "model name\t: Test CPU 9000\nstepping\t: 1\nmicrocode\t: 0x1000065\ncpu MHz\t\t: 2596.096\n"
        "flags\t\t: sse2 avx2 avx512f\n",
        "sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq": "3700000\n",
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
    assert {k: env["cpu"][k] for k in ("vendor", "family", "model_number", "stepping", "microcode")} == {
        "vendor": "AuthenticAMD", "family": 26, "model_number": 2, "stepping": 1, "microcode": "0x1000065"
    }  # fmt: skip
    assert env["cpu"]["clock_mhz"] == 2596.1 and env["cpu"]["max_clock_mhz"] == 3700.0
    assert env["cpu"]["flags"] == ["avx2", "avx512f", "sse2"]
    assert env["cpu"]["isa"]["avx512f"] and not env["cpu"]["isa"]["amx_tile"]
    assert env["cores"] == {"physical": 1, "affinity": 2, "cgroup": 2.0, "cores": 1}
    assert env["memory_total_bytes"] == 16 * 2**30
    assert env["thread_env"] == {"OMP_NUM_THREADS": "2"}
    assert env["dlperf_version"] == dlperf.__version__
    assert env["python"]["implementation"] and env["os"]["kernel"] and env["hostname"]
    assert env["frameworks"] == frameworks and env["frameworks"] is not frameworks
    assert env["gpus"] is None


def test_env_show_names_the_cpu_by_its_numbers(fake_root, monkeypatch, capsys):
    from dlperf.commands.env import print_env

    monkeypatch.setattr(envinfo, "gpu_info", lambda: None)
    print_env(envinfo.capture(root=fake_root))
    out = capsys.readouterr().out.splitlines()
    assert out[:8] == [
        "cpu:",
        "  model: Test CPU 9000",
        "  vendor: AuthenticAMD",
        "  family: 26 (0x1a)",
        "  model_number: 2 (0x2)",
        "  stepping: 1",
        "  microcode: 0x1000065",
        "  clock_mhz: 2596.1",
    ]
    assert "  flags: 3 flags (see --format json)" in out


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
    "cpu": {"model": "AMD EPYC", "vendor": "AuthenticAMD", "family": 25, "model_number": 1, "stepping": 1,
            "microcode": "0xa0011d1", "isa": {},
            "flags": ["avx2", "avx512f", "fma", "sme", "sme_coherent", "smep", "sse2", "vmx"]},
    "cores": {"physical": 4, "affinity": 4, "cgroup": None, "cores": 4},
    "memory_total_bytes": int(15.8 * 2**30),
    "hostname": "box",
    "python": {"version": "3.11.7", "implementation": "CPython"},
    "gpus": [{"name": "Tesla K80", "driver_version": "470.1", "memory_total_mib": 11441}],
    "frameworks": {"torch": {"version": "2.13.0", "devices": ["cpu", "cuda:0"]}},
    "thread_env": {"OMP_NUM_THREADS": "4"},
}  # fmt: skip


def test_fingerprint():
    assert envinfo.fingerprint(ENV) == {
        "cpu_model": "AMD EPYC",
        "cpu_id": {"vendor": "AuthenticAMD", "family": 25, "model_number": 1, "stepping": 1},
        "cpu_isa": ["avx2", "avx512f", "fma", "sse2"],  # not vmx, smep nor sme (x86's memory encryption, not ARM's SME)
        "cores": {"physical": 4, "affinity": 4, "cgroup": None, "cores": 4},
        "memory_gib": 16,
        "hostname": "box",
        "gpus": ["Tesla K80"],
        "python": "3.11",
        "frameworks": {"torch": "2.13.0"},
    }


def test_a_run_stored_with_x86s_memory_encryption_flags_compares_alike():
    """`sme` on x86 is AMD's Secure Memory Encryption, switched by firmware: a fingerprint stored when it was still
    counted as a CPU extension is of the same machine, and one whose extensions truly changed is not."""
    now = envinfo.fingerprint(ENV)
    stored = {**now, "cpu_isa": ["avx2", "avx512f", "fma", "sme", "sme_coherent", "sse2"]}
    assert envinfo.fingerprint_diff(stored, now) == []
    assert envinfo.fingerprint_diff({**stored, "cpu_isa": ["avx2", "fma", "sse2"]}, now) == [
        "CPU extensions gained avx512f"
    ]


def test_fingerprint_ignores_what_may_change():
    other = copy.deepcopy(ENV)
    other["memory_total_bytes"] += 3 * 2**20
    other["thread_env"] = {}
    other["gpus"][0]["driver_version"] = "480.0"
    other["cpu"]["microcode"] = "0xa0011d5"  # a BIOS update
    other["cpu"]["flags"] = [*other["cpu"]["flags"], "user_shstk"]  # a newer kernel names another flag
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
    # A run recorded before a field existed must still compare, not raise; only the keys both sides have are compared.
    assert envinfo.fingerprint({})["frameworks"] == {}
    assert envinfo.fingerprint_diff({}, {"hostname": "box"}) == []
    assert envinfo.fingerprint_diff({"hostname": None}, {"hostname": "box"}) == ["hostname none -> box"]


def test_two_kvm_guests_of_the_same_name_and_hostname_are_told_apart():
    """On KVM the model string is "AMD EPYC" and the hostname "vm" whatever the host: a Zen 3 and a Zen 5 guest
    differ in their family and model numbers, and in the extensions the frameworks choose kernels by."""
    zen5 = copy.deepcopy(ENV)
    zen5["cpu"] |= {"family": 26, "model_number": 2, "flags": [*ENV["cpu"]["flags"], "avx512bw", "avx_vnni"]}
    zen3 = copy.deepcopy(ENV)
    zen3["cpu"]["flags"] = ["avx2", "fma", "sse2"]
    assert envinfo.fingerprint_diff(envinfo.fingerprint(zen3), envinfo.fingerprint(zen5)) == [
        "CPU family 25 -> 26",
        "CPU model number 1 -> 2",
        "CPU extensions gained avx512bw, avx512f, avx_vnni",
    ]
    assert envinfo.fingerprint_diff(envinfo.fingerprint(zen5), envinfo.fingerprint(zen3)) == [
        "CPU family 26 -> 25",
        "CPU model number 2 -> 1",
        "CPU extensions lost avx512bw, avx512f, avx_vnni",
    ]


def test_another_python_is_another_environment_a_patch_release_is_not():
    """Frameworks' wheels are built for a minor version, and the interpreter's speed changes between them; a patch
    release (an OS update) changes neither."""
    other = copy.deepcopy(ENV)
    other["python"]["version"] = "3.10.0"
    assert envinfo.fingerprint_diff(envinfo.fingerprint(ENV), envinfo.fingerprint(other)) == ["Python 3.11 -> 3.10"]
    other["python"]["version"] = "3.11.9"
    assert envinfo.fingerprint_diff(envinfo.fingerprint(ENV), envinfo.fingerprint(other)) == []


# what dlperf stored as a run's fingerprint before it recorded the CPU's numbers, extensions and Python
OLD_KEYS = ("cpu_model", "cores", "memory_gib", "hostname", "gpus", "frameworks")


def test_a_run_stored_by_an_older_dlperf_is_compared_on_what_its_environment_holds():
    """Its stored fingerprint lacks the newer keys and its environment the CPU's numbers: resumable on the machine
    that measured it, refused where its recorded flags or Python differ from this machine's (as the environment
    recorded them from the start)."""
    old_env = copy.deepcopy(ENV)
    for key in envinfo.CPU_ID:
        del old_env["cpu"][key]
    stored = {k: v for k, v in envinfo.fingerprint(old_env).items() if k in OLD_KEYS}
    recorded = envinfo.recorded(stored, old_env)
    assert "cpu_id" not in recorded and recorded["python"] == "3.11"
    assert envinfo.fingerprint_diff(recorded, envinfo.fingerprint(ENV)) == []
    edited = copy.deepcopy(old_env)
    edited["python"]["version"] = "3.10.0"
    edited["cpu"]["flags"].remove("avx512f")
    assert envinfo.fingerprint_diff(envinfo.recorded(stored, edited), envinfo.fingerprint(ENV)) == [
        "CPU extensions gained avx512f",
        "Python 3.10 -> 3.11",
    ]


def test_the_stored_fingerprint_wins_over_the_environment_beside_it():
    # --resume --ray: the node of the same kind that takes a run up stores its own fingerprint beside the first
    # node's environment
    first = copy.deepcopy(ENV)
    first["hostname"] = "node-a"
    assert envinfo.recorded(envinfo.fingerprint(ENV), first) == envinfo.fingerprint(ENV)


def test_cpu_identity_on_arm(tmp_path):
    """arm64 names its CPU by implementer, part and revision, in hexadecimal; a kernel that gives no numbers: None."""
    cpuinfo = tmp_path / "proc" / "cpuinfo"
    cpuinfo.parent.mkdir()
    cpuinfo.write_text("processor\t: 0\nFeatures\t: fp asimd sve\nCPU implementer\t: 0x41\nCPU variant\t: 0x1\n"
                       "CPU part\t: 0xd0c\nCPU revision\t: 1\n")  # fmt: skip
    found = envinfo.cpu_identity(str(tmp_path))
    assert {k: found[k] for k in envinfo.CPU_ID} == {"vendor": "0x41", "family": None, "model_number": 0xD0C,
                                                       "stepping": 1}  # fmt: skip
    assert envinfo.kernel_isa(system.cpu_flags(str(tmp_path))) == ["asimd", "sve"]
    cpuinfo.write_text("processor\t: 0\n")
    assert set(envinfo.cpu_identity(str(tmp_path)).values()) == {None}
