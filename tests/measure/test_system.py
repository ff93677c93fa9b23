"""dlperf.measure.system against fake /proc and /sys trees, plus a few checks on the real machine."""

import json
import os
import subprocess
import sys
import threading

import pytest

from dlperf.measure import system


def write(root, files: dict[str, str]) -> str:
    """Create ``files`` (relative path -> text) under ``root``; returns root as a str for the ``root=`` arguments."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return str(root)


def topology(cores: dict[int, tuple[int, int]]) -> dict[str, str]:
    """sysfs topology files for {cpu: (package id, core id)}."""
    files = {}
    for cpu, (package, core) in cores.items():
        base = f"sys/devices/system/cpu/cpu{cpu}/topology"
        files[f"{base}/physical_package_id"] = f"{package}\n"
        files[f"{base}/core_id"] = f"{core}\n"
    return files


# Intel-style numbering: cpu N and cpu N+4 are SMT siblings on a 4-core, 8-thread package.
SMT_SPLIT = topology({cpu: (0, cpu % 4) for cpu in range(8)})
# Numbering where siblings are adjacent: (0, 1), (2, 3).
SMT_ADJACENT = topology({cpu: (0, cpu // 2) for cpu in range(4)})


# --- cores ---------------------------------------------------------------------------------------------------------


def test_physical_cores_counts_smt_siblings_once(tmp_path):
    assert system.physical_cores(write(tmp_path, SMT_SPLIT)) == 4


def test_physical_cores_distinguishes_packages(tmp_path):
    two_sockets = topology({0: (0, 0), 1: (0, 1), 2: (1, 0), 3: (1, 1)})
    assert system.physical_cores(write(tmp_path, two_sockets)) == 4


def test_physical_cores_falls_back_to_cpuinfo(tmp_path):
    blocks = [f"processor\t: {cpu}\nphysical id\t: 0\ncore id\t\t: {cpu % 2}\n" for cpu in range(4)]
    assert system.physical_cores(write(tmp_path, {"proc/cpuinfo": "\n".join(blocks)})) == 2


def test_physical_cores_falls_back_to_cpu_count(tmp_path):
    arm = "processor\t: 0\nFeatures\t: fp asimd\n\nprocessor\t: 1\nFeatures\t: fp asimd\n"
    assert system.physical_cores(write(tmp_path, {"proc/cpuinfo": arm})) == os.cpu_count()


CGROUP_V2_SELF = "0::/user.slice/app.scope\n"
CGROUP_V1_SELF = "4:memory:/x\n3:cpu,cpuacct:/docker/abc\n1:name=systemd:/\n"


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"sys/fs/cgroup/cpu.max": "max 100000\n"}, None),
        ({"sys/fs/cgroup/cpu.max": "200000 100000\n"}, 2.0),
        ({"sys/fs/cgroup/cpu.max": "max\n"}, None),
        # Own cgroup below the root, found through /proc/self/cgroup.
        (
            {
                "proc/self/cgroup": CGROUP_V2_SELF,
                "sys/fs/cgroup/cpu.max": "max 100000\n",
                "sys/fs/cgroup/user.slice/app.scope/cpu.max": "150000 100000\n",
            },
            1.5,
        ),
        # A parent's tighter quota caps the child.
        (
            {
                "proc/self/cgroup": CGROUP_V2_SELF,
                "sys/fs/cgroup/user.slice/cpu.max": "50000 100000\n",
                "sys/fs/cgroup/user.slice/app.scope/cpu.max": "400000 100000\n",
            },
            0.5,
        ),
        # Container without a cgroup namespace: our path isn't mounted, the root file is our cgroup.
        ({"proc/self/cgroup": CGROUP_V2_SELF, "sys/fs/cgroup/cpu.max": "300000 100000\n"}, 3.0),
        ({"proc/self/cgroup": "0::/../../other\n", "sys/fs/cgroup/cpu.max": "100000 100000\n"}, 1.0),
        (
            {"sys/fs/cgroup/cpu/cpu.cfs_quota_us": "-1\n", "sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000\n"},
            None,
        ),
        (
            {
                "proc/self/cgroup": CGROUP_V1_SELF,
                "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "-1\n",
                "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n",
                "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "250000\n",
                "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000\n",
            },
            2.5,
        ),
        ({}, None),
    ],
)
def test_cgroup_cpu_limit(tmp_path, files, expected):
    assert system.cgroup_cpu_limit(write(tmp_path, files)) == expected


@pytest.mark.parametrize(("quota", "cores"), [("max 100000", 4), ("150000 100000", 1), ("20000 100000", 1)])
def test_usable_cores_floors_the_quota(tmp_path, monkeypatch, quota, cores):
    monkeypatch.setattr(system, "affinity_cpus", lambda: list(range(6)))
    root = write(tmp_path, {**SMT_SPLIT, "sys/fs/cgroup/cpu.max": quota})
    usable = system.usable_cores(root)
    assert usable["physical"] == 4 and usable["affinity"] == 6
    assert usable["cores"] == cores


def test_usable_cores_affinity_is_the_bound(tmp_path, monkeypatch):
    monkeypatch.setattr(system, "affinity_cpus", lambda: [3])
    assert system.usable_cores(write(tmp_path, SMT_SPLIT)) == {"physical": 4, "affinity": 1, "cgroup": None, "cores": 1}


@pytest.mark.parametrize(
    ("cores", "counts"),
    [(1, [1]), (2, [1, 2]), (3, [1, 2, 3]), (6, [1, 2, 4, 6]), (8, [1, 2, 4, 8]), (12, [1, 2, 4, 8, 12]), (0, [1])],
)
def test_default_thread_counts(cores, counts):
    assert system.default_thread_counts(cores) == counts


def test_pin_cpus_avoids_smt_siblings(tmp_path):
    root = write(tmp_path, SMT_ADJACENT)
    assert system.pin_cpus(2, allowed=[0, 1, 2, 3], root=root) == [0, 2]
    assert system.pin_cpus(1, allowed=[1, 2, 3], root=root) == [1]


def test_hold_threads_holds_every_thread_to_physical_cores_first(tmp_path, monkeypatch):
    """A held cell (JAX's, TensorFlow's, MXNet's) at 2 threads on CPUs 0-3 whose siblings are numbered side by side
    was held to 0 and 1, one core's two hyperthreads, where PyTorch's 2 threads float over two cores."""
    root = write(tmp_path, SMT_ADJACENT)
    held: dict[int, list[int]] = {}
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.setattr(os, "sched_setaffinity", lambda pid, cpus: held.__setitem__(pid, sorted(cpus)))
    assert system.hold_threads(2, root) == [0, 2]
    assert os.getpid() in held and all(cpus == [0, 2] for cpus in held.values())  # every thread
    assert system.hold_threads(4, root) is None


def test_hold_threads_takes_the_least_busy_cpus(tmp_path, monkeypatch):
    """Each held cell took CPU 0: two at once (the test suite's two workers, a second command) shared it while CPU 1
    idled. Held to the CPUs least busy over a moment, the second goes to CPU 1."""
    root = write(tmp_path, SMT_ADJACENT)  # CPUs 0-1 one core's siblings, 2-3 another's
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.setattr(os, "sched_setaffinity", lambda pid, cpus: None)
    monkeypatch.setattr(system, "HOLD_LOOK_S", 0.0)
    readings = iter([{0: 100, 1: 100, 2: 100, 3: 100}, {0: 105, 1: 100, 2: 100, 3: 101}])  # CPU 0 busy, 3 a little
    monkeypatch.setattr(system, "cpu_busy_ticks", lambda root: next(readings))
    assert system.hold_threads(1, root) == [1]  # CPU 0's sibling idles: one CPU, any core
    readings = iter([{0: 0, 1: 0, 2: 0, 3: 0}, {0: 5, 1: 0, 2: 0, 3: 1}])
    assert system.hold_threads(2, root) == [1, 2]  # one per core, each core's least busy CPU
    (tmp_path / "proc").mkdir(exist_ok=True)
    (tmp_path / "proc" / "stat").write_text("cpu  9 0 9 90 0 0 0 0\ncpu0 4 1 2 50 7 1 1 0\ncpu1 5 0 7 40 0 0 0 0\n")
    monkeypatch.undo()
    assert system.cpu_busy_ticks(str(tmp_path)) == {0: 9, 1: 12}  # user nice system irq softirq: not idle, iowait


def test_pin_cpus_uses_siblings_only_when_cores_run_out(tmp_path):
    root = write(tmp_path, SMT_ADJACENT)
    assert system.pin_cpus(3, allowed=[0, 1, 2, 3], root=root) == [0, 1, 2]
    assert system.pin_cpus(4, allowed=[0, 1, 2, 3], root=root) == [0, 1, 2, 3]


def test_pin_cpus_split_numbering(tmp_path):
    root = write(tmp_path, SMT_SPLIT)
    assert system.pin_cpus(4, allowed=list(range(8)), root=root) == [0, 1, 2, 3]
    assert system.pin_cpus(3, allowed=[2, 3, 6, 7], root=root) == [2, 3, 6]


def test_pin_cpus_returns_fewer_when_mask_is_small(tmp_path):
    assert system.pin_cpus(4, allowed=[5, 7], root=write(tmp_path, SMT_SPLIT)) == [5, 7]


def test_pin_cpus_without_topology_takes_mask_in_order(tmp_path):
    assert system.pin_cpus(2, allowed=[9, 4, 6], root=str(tmp_path)) == [4, 6]


# --- CPU identity ----------------------------------------------------------------------------------------------------

X86_CPUINFO = (
    "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n"
    "flags\t\t: fpu sse2 avx2 avx512f avx512_bf16 avx512_vnni amx_tile amx_bf16 amx_int8\n\n"
    "processor\t: 1\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\nflags\t\t: fpu sse2 avx2\n"
)


def test_cpu_model_and_flags(tmp_path):
    root = write(tmp_path, {"proc/cpuinfo": X86_CPUINFO})
    assert system.cpu_model(root) == "Intel(R) Xeon(R) Platinum 8480+"
    flags = system.cpu_flags(root)
    assert flags == sorted(flags) and "amx_tile" in flags and "fpu" in flags


def test_isa_summary():
    summary = system.isa_summary(["avx2", "avx512f", "sse2"])
    assert list(summary) == list(system.ISA_FLAGS)
    assert summary["avx2"] and summary["avx512f"] and not summary["amx_bf16"] and not summary["avx512_fp16"]


def test_cpu_model_arm(tmp_path):
    arm = "processor\t: 0\nFeatures\t: fp asimd sve\nCPU implementer\t: 0x41\nCPU part\t: 0xd40\n"
    root = write(tmp_path, {"proc/cpuinfo": arm})
    assert "implementer 0x41 part 0xd40" in system.cpu_model(root)
    assert system.cpu_flags(root) == ["asimd", "fp", "sve"]


def test_missing_cpuinfo(tmp_path):
    assert system.cpu_flags(str(tmp_path)) == []
    assert system.cpu_model(str(tmp_path))


# --- memory and CPU time ---------------------------------------------------------------------------------------------


def test_memory_total_bytes(tmp_path):
    root = write(tmp_path, {"proc/meminfo": "MemTotal:       16318012 kB\nMemFree:         1000 kB\n"})
    assert system.memory_total_bytes(root) == 16318012 * 1024
    assert system.memory_total_bytes(str(tmp_path / "nowhere")) is None


def test_cpu_times_with_steal(tmp_path):
    tick = os.sysconf("SC_CLK_TCK")
    stat = f"cpu  {tick * 10} 0 {tick * 5} {tick * 80} 0 0 0 {tick * 5} 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\nintr 1\n"
    times = system.cpu_times(write(tmp_path, {"proc/stat": stat}))
    assert list(times) == list(system.CPU_TIME_FIELDS)
    assert times["user"] == 10 and times["idle"] == 80 and times["steal"] == 5


def test_cpu_times_without_steal(tmp_path):
    times = system.cpu_times(write(tmp_path, {"proc/stat": "cpu  100 0 50 900 0 0 0\n"}))
    assert "steal" not in times and "softirq" in times
    assert system.steal_fraction(times, times) is None


def test_steal_fraction():
    before = dict.fromkeys(system.CPU_TIME_FIELDS, 10.0)
    after = {**before, "user": 16.0, "idle": 12.0, "steal": 12.0}
    assert system.steal_fraction(before, after) == pytest.approx(0.2)
    assert system.steal_fraction(before, before) is None


def test_thread_times_read_each_threads_cpu_and_wait_and_fall_back_to_ticks_without_schedstat(tmp_path):
    tick = os.sysconf("SC_CLK_TCK")
    stat = f"12 (a (b) c) R 1 1 1 0 -1 0 0 0 0 0 {3 * tick} {tick} 0 0 20 0 1 0\n"  # a command with ") " in it
    root = write(tmp_path, {"proc/self/task/11/schedstat": "1500000000 250000000 7\n", "proc/self/task/12/stat": stat})
    assert system.thread_times(root) == {11: (1.5, 0.25), 12: (4.0, None)}
    assert system.thread_times(str(tmp_path / "nowhere")) == {}
    mine = system.thread_times()  # this thread, on the real machine
    assert threading.get_native_id() in mine and mine[threading.get_native_id()][0] > 0


def test_rss_from_status(tmp_path):
    root = write(tmp_path, {"proc/self/status": "Name:\tpython\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n"})
    assert system.rss_bytes(root) == 1024 * 1024
    assert system.rss_hwm_bytes(root) == 2048 * 1024


def test_the_data_segments_peak_is_its_size_now_plus_the_address_spaces_high_water_mark_above_its_own(tmp_path):
    status = "Name:\tpython\nVmPeak:\t  500000 kB\nVmSize:\t  400000 kB\nVmData:\t  300000 kB\n"
    assert system.data_peak_bytes(write(tmp_path, {"proc/self/status": status})) == 400_000 * 1024
    assert system.data_peak_bytes(write(tmp_path, {"proc/self/status": "VmData:\t  300000 kB\n"})) is None


def test_reset_rss_hwm_on_fake_tree(tmp_path):
    assert system.reset_rss_hwm(str(tmp_path)) is False  # no clear_refs: refused, not raised
    root = write(tmp_path, {"proc/self/clear_refs": ""})
    assert system.reset_rss_hwm(root) is True
    assert (tmp_path / "proc/self/clear_refs").read_text() == "5"


# --- environment variables -------------------------------------------------------------------------------------------


def test_inherited_thread_env():
    environ = {
        "OMP_NUM_THREADS": "4",
        "KMP_AFFINITY": "compact",
        "ONEDNN_MAX_CPU_ISA": "AVX2",
        "OPENBLAS_CORETYPE": "Haswell",
        "ATEN_CPU_CAPABILITY": "avx2",
        "LD_PRELOAD": "libjemalloc.so",
        "PATH": "/usr/bin",
        "MY_OMP_SETTING": "1",
        "TORCH_NUM_THREADS": "3",  # not read by anything
    }
    assert system.inherited_thread_env(environ) == {
        "ATEN_CPU_CAPABILITY": "avx2",
        "KMP_AFFINITY": "compact",
        "LD_PRELOAD": "libjemalloc.so",
        "OMP_NUM_THREADS": "4",
        "ONEDNN_MAX_CPU_ISA": "AVX2",
        "OPENBLAS_CORETYPE": "Haswell",
    }


def test_thread_env_sets_only_thread_counts():
    env = system.thread_env(3)
    assert env == {"OMP_NUM_THREADS": "3", "MKL_NUM_THREADS": "3", "OPENBLAS_NUM_THREADS": "3"}
    assert "OPENBLAS_CORETYPE" not in env


# --- the real machine ------------------------------------------------------------------------------------------------


def test_real_usable_cores():
    usable = system.usable_cores()
    assert usable["cores"] >= 1
    assert usable["cores"] <= min(usable["physical"], usable["affinity"])


def test_real_pin_cpus_stays_in_mask():
    mask = system.affinity_cpus()
    pinned = system.pin_cpus(len(mask))
    assert pinned and set(pinned) <= set(mask)


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs Linux /proc")
def test_real_reset_rss_hwm():
    """In a fresh interpreter: the test process, hundreds of MB large after the frameworks' tests and with their
    threads still running, once read the same high-water mark before and after the reset (CI, 686 MB)."""
    code = """
import json
from dlperf.measure import system
size = 64 * 2**20
block = bytearray(size)  # zero-filled by CPython, so every page is touched
peak = system.rss_hwm_bytes()
del block
reset = system.reset_rss_hwm()
print(json.dumps({"size": size, "peak": peak, "reset": reset, "after": system.rss_hwm_bytes()}))
"""
    out = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                    timeout=60).stdout)  # fmt: skip
    if not out["reset"]:
        pytest.skip("writing /proc/self/clear_refs is not permitted here")
    assert out["after"] < out["peak"] - out["size"] // 2, out


BURN = "import time, sys\nwhile time.process_time() < {cpu}: pass\nprint('burnt', flush=True)\n{after}"


def test_a_process_familys_cpu_counts_its_running_and_its_ended_children():
    """A DataLoader's workers are processes the cell started: their CPU is the cell's own, not another process's
    (the H200 check's loader cells said other processes used 16-26% of the CPUs, their own two workers). A child still
    running counts from /proc, one that ended and was waited for from the process's children times; this process's
    own CPU time alone sees neither."""
    own, family = os.times(), system.family_cpu_s()
    running = subprocess.Popen([sys.executable, "-c", BURN.format(cpu=0.3, after="time.sleep(60)")],
                               stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert running.stdout.readline().strip() == "burnt"
        assert system.family_cpu_s() - family >= 0.25
    finally:
        running.kill()
        running.wait()
    family = system.family_cpu_s()
    subprocess.run([sys.executable, "-c", BURN.format(cpu=0.3, after="")], check=True, capture_output=True)
    assert system.family_cpu_s() - family >= 0.25
    now = os.times()
    assert (now.user + now.system) - (own.user + own.system) < 0.25  # the children's CPU was not this process's


def test_others_cpu_share_takes_the_familys_cpu_as_its_own():
    """Busy time beyond what the family used is the others' share of the machine's capacity."""
    cores = os.cpu_count() or 1
    before, after = {"user": 10.0, "system": 1.0}, {"user": 10.0 + 1.5 * cores, "system": 1.0}
    assert system.others_cpu_share(before, after, 0.5 * cores, 1.0) == pytest.approx(1.0)
    assert system.others_cpu_share(before, after, 1.5 * cores, 1.0) == 0.0


def test_others_cpu_share_is_none_for_a_window_shorter_than_its_ticks_and_never_above_the_machine():
    """A cell timed for a few milliseconds (--max-time 0.002) read "other processes used 198% of the CPUs": one tick
    of the busy counters (10 ms) against a 20 ms window is half of it per CPU."""
    cores = os.cpu_count() or 1
    tick = 1 / os.sysconf("SC_CLK_TCK")
    before, after = {"user": 10.0}, {"user": 10.0 + 2 * tick * cores}  # two ticks of each CPU in a 20 ms window
    assert system.others_cpu_share(before, after, 0.0, 0.02) is None
    assert system.others_cpu_share(before, {"user": 10.0 + 3.0 * cores}, 0.0, 1.0) == 1.0  # ticks beyond the wall
    assert system.others_cpu_share(before, {"user": 10.0 + 0.2 * cores}, 0.0, 1.0) == pytest.approx(0.2)
