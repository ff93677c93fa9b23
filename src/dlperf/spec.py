"""What the user asked for, parsed and validated once, at the edge. Bad input stops here with a message naming the flag.

`make_spec` parses the flags' text into values; `RunSpec` checks them at construction, so a spec read back from the
store (`--resume`) is checked as one typed on the command line. Nothing here imports a framework: checks that need
the machine (does this device exist? does this factory build?) are planning's (`dlperf.plan`, through a probe child).
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from dataclasses import fields as fields_of
from pathlib import Path

from dlperf import parallel as strategies
from dlperf.defaults import (  # the bounds the parsers' help quotes, there; here for spec's importers too
    CROSSOVER_TIMING,
    FIT_MAX_BATCH,
    FIT_TIMING,
    INT64_MAX,
    MAX_COMPILE_AT_ONCE,
    MAX_PROFILE_STEPS,
    MAX_SECONDS,
    MAX_TRACE_CAP_MIB,
    OPTIMIZE_TIMING,
    TRACE_CAP_MIB,
)
from dlperf.errors import UsageError, why_unwritable
from dlperf.flagtext import as_listed, parse_size, path_text, positive_ints, split_list, suggest, type_of
from dlperf.frameworks.common import capabilities
from dlperf.loaders import DATA_DATASET, DATA_SYNTHETIC, keyword_folder, parse_loaders
from dlperf.measure.timer import TimerConfig, as_flags
from dlperf.modes import MODE_ORDER, Mode, exclusive_groups
from dlperf.vocab import DeviceKind, Framework, Parallel
from dlperf.workloads import BUILTIN, SUITE
from dlperf.workloads.base import split_variant
from dlperf.workloads.user import (
    choices,
    factories_in_file,
    looks_like_source,
    normalize_source,
    source_of,
    split_source,
)

# each search's timer, its figures in defaults.py (which --help quotes)
OPTIMIZE_TIMER = TimerConfig(**OPTIMIZE_TIMING)
CROSSOVER_TIMER = TimerConfig(**CROSSOVER_TIMING)
FIT_TIMER = TimerConfig(**FIT_TIMING)

_DEVICE = re.compile(r"^(cpu|mps|cuda(:[0-9]+)?)$", re.ASCII)


@dataclass(frozen=True)
class RunSpec:
    workloads: tuple[str, ...]  # built-in names, or normalized `file.py:factory` sources
    frameworks: tuple[str, ...] = ("torch",)
    devices: tuple[str, ...] | None = None  # None: cpu and every visible accelerator
    threads: tuple[int, ...] | None = None  # None: 1, 2, 4, ... up to the cores
    modes: tuple[str, ...] = (Mode.FP32.value,)
    repeats: int = 1  # fresh processes per cell, interleaved with the other cells
    timeout: float = 600.0  # seconds per child process, start-up included
    compile_timeout: float | None = None  # seconds for a compiled cell's first step (compilation); None: no own limit
    compile_at_once: int = 1  # compiled cells on one device compiling side by side, each timed alone
    pin: bool = False  # pin each child to `threads` cores of the allowed affinity mask
    loss_check: bool = True  # every mode but fp32 also checks that it still trains (untimed)
    timer: TimerConfig = field(default_factory=TimerConfig)
    nprocs: tuple[int, ...] | None = None  # DDP processes per node, e.g. (1, 2); None: plain cells, no DDP
    scaling: str = "strong"  # DDP: "strong" splits the protocol's total batch, "weak" gives each process the batch
    parallel: tuple[str, ...] = ()  # with nprocs: the strategies (`dlperf.parallel`); (): each framework's default
    microbatches: tuple[int, ...] = ()  # a pipeline's micro-batches per step; (): `parallel.DEFAULT_MICROBATCHES`
    nnodes: int = 1  # DDP over several machines: each runs the same command with its --node-rank
    node_rank: int = 0
    rdzv_endpoint: str | None = None  # host:port of torchrun's c10d rendezvous; None on one node
    profile: bool = False  # after each cell's timed processes, one untimed profiled process (`runner/profile.py`)
    profile_steps: int = 5  # profiled steps of that process
    trace_dir: str | None = None  # where its gzip Chrome traces go (None: beside the database, `<db>.traces`)
    max_trace_mib: float = TRACE_CAP_MIB  # a trace larger than this, compressed, is not kept (the profile is)
    nvtx: bool = False  # NVTX ranges around each step's phases, for an Nsight Systems capture (not in the cell key)
    data: str = DATA_SYNTHETIC  # "synthetic", "dataset" (a user workload's own), or the datasets' directory, absolute
    loaders: tuple[str, ...] | None = None  # with real data: the loader settings measured; None: `default_loaders`
    predict: bool = True  # each plain GPU cell's step predicted for its GPU before any cell runs (predict/cells.py)
    max_memory: int | None = None  # bytes: each CPU cell process's data limit (RLIMIT_DATA), `dlperf fit --max-memory`
    campaign: str | None = None  # the fleet this run belongs to (`--campaign`): `dlperf table --campaign` groups them

    def __post_init__(self) -> None:
        """Every check the fields allow, each a UsageError naming the flag; what needs the machine (a device
        present, a GPU per process, a factory that builds) is checked by planning."""
        _check_switches(self)  # first: profile="no" is true, and would be profiled
        _check_limits(self)
        _check_lists(self)
        _check_processes(self)
        _check_strategies(self)
        if self.profile:
            _check_profile(self)
        _check_data(self)
        _check_memory(self)
        _check_campaign(self.campaign)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> RunSpec:
        """A stored spec (`--resume`), checked as the flags were."""
        d = dict(d)
        try:
            d["timer"] = TimerConfig(**d["timer"])
        except ValueError as exc:  # its message names the field, which the run was given as a flag
            raise UsageError(as_flags(str(exc))) from None
        for key in ("workloads", "frameworks", "devices", "threads", "modes", "nprocs", "loaders", "parallel",
                    "microbatches"):  # fmt: skip
            if d.get(key) is not None:
                d[key] = tuple(d[key])
        return cls(**d)


def _check_switches(s: RunSpec) -> None:
    """Each yes/no field a bool: a Python caller's pin="false" or profile="no" was stored as given, and its truth
    switched profiling on. Only a Python caller can give another type (each is a flag without a value), so the
    argument is named."""
    for name in (f.name for f in fields_of(s) if f.type == "bool"):
        if not isinstance(value := getattr(s, name), bool):
            raise UsageError(f"{name}={value!r}: expected True or False, not {type_of(value)}")


def _not_a_number(value: object, wanted: str = "an int") -> str:
    """What ends a number flag's message where a Python caller gave no number: repeats="3" was told to give a whole
    number, which "3" looks like."""
    return "" if isinstance(value, int | float) else f" ({wanted}, not {type_of(value)})"


def _check_limits(s: RunSpec) -> None:
    # no bool: Python counts True as 1 (a Python caller's timeout=True was one second); nan fails every comparison
    if isinstance(s.repeats, bool) or not isinstance(s.repeats, int) or not 1 <= s.repeats <= INT64_MAX:
        said = _not_a_number(s.repeats)
        raise UsageError(f"--repeats {str(s.repeats)!r}: expected a whole number of at least 1{said}")
    for flag, value in (("--timeout", s.timeout), ("--compile-timeout", s.compile_timeout)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)
                                  or not 0 < value <= MAX_SECONDS):  # fmt: skip
            raise UsageError(f"{flag} {str(value)!r}: expected a number of seconds above 0, at most {MAX_SECONDS:.0f}"
                             f"{_not_a_number(value, 'an int or float')}")  # fmt: skip
    if s.timeout <= s.timer.min_time:  # every cell process killed before its last timed step, certainly
        raise UsageError(f"--timeout {s.timeout:g} is not above --min-time {s.timer.min_time:g}: each cell "
                         "process times steps for at least --min-time seconds; raise --timeout or lower "
                         "--min-time")  # fmt: skip
    if not isinstance(s.compile_at_once, int) or not 1 <= s.compile_at_once <= MAX_COMPILE_AT_ONCE:
        raise UsageError(f"--compile-at-once must be a whole number from 1 to {MAX_COMPILE_AT_ONCE}"
                         f"{_not_a_number(s.compile_at_once)}")  # fmt: skip


def _check_lists(s: RunSpec) -> None:
    """Each list field as its flag's parser takes it: the values a parser gives back parse again."""
    for name in s.workloads:
        if looks_like_source(base := split_variant(name)[0]):
            split_source(base)  # its file is looked for by the probe that builds it: the machine's check
        else:
            parse_workload(name, variant=True)
    parse_frameworks(_text(s.frameworks))
    parse_modes(_text(s.modes))
    parse_scaling(s.scaling)
    # loaders () (advise's thread search, its factory given --data DIR): no loader setting, none to check
    for parse, values in ((parse_devices, s.devices), (parse_threads, s.threads), (parse_nprocs, s.nprocs),
                          (parse_loaders, s.loaders or None)):  # fmt: skip
        if values is not None:
            parse(_text(values))
    for parse, values in ((parse_parallel, s.parallel), (parse_microbatches, s.microbatches)):
        if values:
            parse(_text(values))


def _check_processes(s: RunSpec) -> None:
    """--nproc and the flags of several nodes: a framework that has a multi-process strategy."""
    from dlperf.parallel import Rendezvous

    Rendezvous(s.nnodes, s.node_rank, s.rdzv_endpoint, s.timeout)  # validates --nnodes, --node-rank, --rdzv-endpoint
    if s.nprocs is None:
        if s.nnodes > 1 or s.rdzv_endpoint:
            raise UsageError("--nnodes and --rdzv-endpoint are for data-parallel cells: add --nproc N")
        return
    if missing := [f for f in s.frameworks if capabilities.of(f).data_parallel is None]:
        having = " or ".join(row.framework for row in capabilities.TABLE.values() if row.data_parallel)
        raise UsageError(f"--nproc: {', '.join(missing)} has no multi-process strategy dlperf measures (see dlperf "
                         f"list --parallel); use --frameworks {having}")  # fmt: skip


def _check_strategies(s: RunSpec) -> None:
    """The strategies and micro-batch counts of --parallel and --microbatches, checked against the rest."""
    if s.nprocs is None:
        if s.parallel or s.microbatches:
            flag = "--parallel" if s.parallel else "--microbatches"
            raise UsageError(f"{flag}: strategies spread a step over processes; add --nproc N")
        if s.scaling != "strong":
            raise UsageError(f"--scaling {s.scaling}: scaling sets the batch of a job of several processes; add "
                             "--nproc N")  # fmt: skip
        return
    chosen = parse_parallel(_text(s.parallel)) if s.parallel else default_parallel(s.frameworks)
    strategies.check(chosen, s.frameworks, s.scaling, bool(s.microbatches))
    for f in s.frameworks:
        if not strategies.for_framework(chosen, f):
            raise UsageError(f"--parallel {','.join(chosen)}: none is {f}'s; leave {f} out of --frameworks")
    if s.nnodes > 1 and Parallel.MIRRORED in chosen:
        raise UsageError("--parallel mirrored: MirroredStrategy runs its replicas in one process on one node")
    if Parallel.MULTIWORKER in chosen and max(s.nprocs) * s.nnodes < 2:
        raise UsageError("--parallel multiworker --nproc 1: one worker has none to all-reduce with; add a count "
                         "above 1 (--nproc 1,2 keeps one worker as the baseline)")  # fmt: skip


def default_parallel(frameworks: Sequence[str]) -> tuple[Parallel, ...]:
    """What --nproc measures without --parallel: each framework's data parallelism (`_check_processes`: none)."""
    return tuple(p for f in frameworks if (p := capabilities.of(f).data_parallel) is not None)


def _check_profile(s: RunSpec) -> None:
    """--profile needs a profilable framework, plain cells, 1 to MAX_PROFILE_STEPS steps, a writable trace directory."""
    check_profilable(s.frameworks)
    if s.nprocs is not None:
        raise UsageError("--profile: data-parallel cells (--nproc) are not profiled; profile a plain cell")
    if not isinstance(s.profile_steps, int) or not 1 <= s.profile_steps <= MAX_PROFILE_STEPS:
        said = _not_a_number(s.profile_steps)
        raise UsageError(f"--steps must be a whole number from 1 to {MAX_PROFILE_STEPS}{said}")
    if not isinstance(s.max_trace_mib, int | float) or not 0 < s.max_trace_mib <= MAX_TRACE_CAP_MIB:  # nan fails too
        raise UsageError(f"--max-trace-mib must be a number of MiB above 0 and at most {MAX_TRACE_CAP_MIB:.0f}"
                         f"{_not_a_number(s.max_trace_mib, 'an int or float')}")  # fmt: skip
    if s.trace_dir is not None:
        check_trace_dir(s.trace_dir)


def check_profilable(frameworks: Sequence[str], asked: Callable[[str], str] = lambda name: "--profile") -> None:
    """A UsageError naming the first of `frameworks` dlperf cannot profile and what asked for it (`asked(name)`)."""
    for name in frameworks:
        if (why := capabilities.of(name).unprofilable) is not None:
            raise UsageError(f"{asked(name)}: {name} cannot be profiled ({why}); profile another framework")


def check_trace_dir(path: str) -> None:
    """--trace-dir: a directory dlperf can write into, or one it can make (made when the first trace is written, so
    that nothing is written before anything runs): its nearest existing folder a directory dlperf may write."""
    try:
        found = next(p for p in (Path(path), *Path(path).parents) if os.path.lexists(p))
    except OSError as exc:
        raise UsageError(f"--trace-dir {path!r}: cannot be looked at ({exc.strerror or exc})") from None
    if found.is_symlink() and not found.exists():
        raise UsageError(f"--trace-dir {path!r}: {str(found)!r} is a link to {os.readlink(found)!r}, which does "
                         "not exist")  # fmt: skip
    if not found.is_dir():
        raise UsageError(f"--trace-dir {path!r}: {str(found)!r} is a file, not a directory")
    if not os.access(found, os.W_OK | os.X_OK):
        raise UsageError(f"--trace-dir {path!r}: {str(found)!r} cannot be written ({why_unwritable(found)}); name "
                         "another")  # fmt: skip


def probe_trace_dir(path: str) -> None:
    """--trace-dir tried before anything runs: the folder made and a file written in it, as the first trace will be,
    then both removed (nothing is left before a trace is). What `check_trace_dir` cannot foresee from permissions is
    then one line rather than a failure after the first cell was measured: root, whom os.access lets write
    anywhere, under /proc; a file system mounted read-only or full."""
    made = [p for p in (Path(path), *Path(path).parents) if not os.path.lexists(p)]  # innermost first
    step = "made"
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
        step = "written into"
        with tempfile.NamedTemporaryFile(dir=path, prefix=".dlperf-probe-"):
            pass
    except OSError as exc:
        raise UsageError(f"--trace-dir {path!r}: cannot be {step} ({exc.strerror or exc}); name another") from None
    finally:
        for folder in made:
            with contextlib.suppress(OSError):  # not made, or since given a file by another process
                folder.rmdir()


def _check_data(s: RunSpec) -> None:
    if s.data == DATA_SYNTHETIC and s.loaders is not None:  # a ./synthetic folder is named: the keyword took it
        here = f"; {folder}" if (folder := keyword_folder(s.data)) else ""
        raise UsageError(f"--loaders: loader settings read real data; name it with --data DIR{here}")
    if s.data != DATA_SYNTHETIC and s.nprocs is not None:
        raise UsageError("--data: data-parallel cells (--nproc) train on synthetic data; measure the loader on "
                         "plain cells")  # fmt: skip


def _check_memory(s: RunSpec) -> None:
    """max_memory, which only a Python caller of `dlperf.run` gives as it is (`dlperf fit --max-memory` checks its
    own, and gives none on a GPU), so the argument is named: `dlperf run` has no such flag."""
    if s.max_memory is None:
        return
    if isinstance(s.max_memory, bool) or not isinstance(s.max_memory, int) or not 0 < s.max_memory <= INT64_MAX:
        raise UsageError(f"max_memory={s.max_memory!r}: expected a size above 0, a whole number of bytes below 8 EiB "
                         "or its text, e.g. '512MiB' or '2GiB'")  # fmt: skip
    if s.devices is not None and any(d != DeviceKind.CPU for d in s.devices):
        raise UsageError(f"max_memory limits a CPU process's memory; on {', '.join(s.devices)} the GPU's own memory "
                         "is the limit: give no max_memory")  # fmt: skip


CAMPAIGN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+-]{0,63}")


def _check_campaign(name: str | None) -> None:
    """A campaign's name: what `dlperf table --campaign NAME` is typed with, so a word of up to 64 characters."""
    if name is not None and not (isinstance(name, str) and CAMPAIGN.fullmatch(name)):
        raise UsageError(f"--campaign {name!r}: expected a name of letters, digits and ._:@+- (up to 64 "
                         "characters, starting with a letter or digit)")  # fmt: skip


def _text(values: object) -> str | None:
    """A flag's text from a list of values, its comma text or one value (the Python API takes each)."""
    values = as_listed(values)
    return values if values is None or isinstance(values, str) else ",".join(str(v) for v in values)


def make_spec(
    workloads: Sequence[str | Callable] | str | None = None,
    *,
    frameworks: Sequence[str] | str | None = None,
    devices: Sequence[str] | str | None = None,
    threads: Sequence[int] | str | None = None,
    modes: Sequence[str] | str | None = None,
    timer: TimerConfig | None = None,
    nprocs: Sequence[int] | str | None = None,
    scaling: str = "strong",
    parallel: Sequence[str] | str | None = None,
    microbatches: Sequence[int] | str | None = None,
    trace_dir: str | None = None,
    data: str = DATA_SYNTHETIC,
    loaders: Sequence[str] | str | None = None,
    max_memory: int | str | None = None,
    **fields,
) -> RunSpec:
    """What the user asked for, its text parsed into values; `RunSpec` checks them. A list argument also takes one
    value (`threads=1`), and None for its default; `max_memory` bytes or a size's text, as `dlperf fit --max-memory`
    takes it. `fields`: RunSpec's other fields (repeats, timeout, pin, profile, ...), taken as they are. Raises
    UsageError naming the flag."""
    if (workloads := as_listed(workloads)) is not None and not isinstance(workloads, str):
        workloads = ",".join(w if isinstance(w, str) else source_of(w) for w in workloads)
    nprocs = None if nprocs is None else parse_nprocs(_text(nprocs))
    frameworks = parse_frameworks(_text(RunSpec.frameworks if frameworks is None else frameworks))
    if parallel is not None:
        chosen = parse_parallel(_text(parallel))
    else:
        chosen = default_parallel(frameworks) if nprocs is not None else ()
    return RunSpec(
        nprocs=nprocs,
        frameworks=frameworks,
        scaling=parse_scaling(scaling),
        parallel=tuple(p.value for p in chosen),
        microbatches=() if microbatches is None else parse_microbatches(_text(microbatches)),
        data=parse_data(data),
        loaders=None if loaders is None else () if loaders in ((), []) else parse_loaders(_text(loaders)),
        workloads=parse_workloads(workloads),
        devices=None if devices is None else parse_devices(_text(devices)),
        threads=None if threads is None else parse_threads(_text(threads)),
        modes=parse_modes(_text(RunSpec.modes if modes is None else modes)),
        timer=timer or TimerConfig(),
        trace_dir=None if trace_dir is None else os.path.abspath(path_text(trace_dir, "--trace-dir")),
        max_memory=parse_size(max_memory, "max_memory") if isinstance(max_memory, str) else max_memory,
        **fields,
    )


def parse_threads(text: str) -> tuple[int, ...]:
    return tuple(dict.fromkeys(positive_ints(text, "--threads")))


def parse_nprocs(text: str) -> tuple[int, ...]:
    from dlperf.measure import system  # ctypes, platform, glob: not for the parsers `dlperf --help` builds

    if why := system.too_many_processes(nprocs := tuple(dict.fromkeys(positive_ints(text, "--nproc")))):
        raise UsageError(why)
    return nprocs


SCALING = ("strong", "weak")


def parse_scaling(text: str) -> str:
    if text not in SCALING:
        raise UsageError(f"--scaling {text!r}: expected strong (the total batch split) or weak (each process's fixed)")
    return text


def parse_devices(text: str, flag: str = "--devices") -> tuple[str, ...]:
    devices = []
    for item in split_list(text, flag):
        item = item.lower()
        if not _DEVICE.match(item):
            raise UsageError(f"{flag}: unknown device {item!r} (expected cpu, cuda, cuda:N or mps)")
        devices.append(item)
    return tuple(dict.fromkeys(devices))


def parse_frameworks(text: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(split_list(text, "--frameworks")))
    known = [f.value for f in Framework]
    for name in names:
        if name not in known:
            raise UsageError(f"--frameworks: {not_measured(name, known)}")
    return names


def not_measured(name: str, known: list[str]) -> str:
    """Why `name` is not measured: one of the paper's tools that cannot be installed, or a library that cannot, says
    why, as `dlperf list --frameworks` does; any other name is unknown."""
    from dlperf.envs import PAPER_TOOLS, UNINSTALLABLE  # standard library only, like this module

    key = name.lower()
    if key not in UNINSTALLABLE:
        return f"unknown framework {name!r}{suggest(name, known)}"
    what = f"{key} is one of the paper's tools and" if key in PAPER_TOOLS else key
    return f"{what} cannot be measured: {UNINSTALLABLE[key]}; dlperf list --frameworks lists what can"


def parse_modes(text: str) -> tuple[str, ...]:
    """Comma-separated modes, each components joined by '+', put in one canonical order."""
    return tuple(dict.fromkeys(canonical_mode(m) for m in split_list(text, "--modes")))


def canonical_mode(text: str) -> str:
    known = [m.value for m in MODE_ORDER]
    parts = [p.strip().lower() for p in text.split("+")]
    for part in parts:
        if part not in known:
            within = f" in {text!r}" if len(parts) > 1 else ""
            raise UsageError(f"--modes: unknown mode {part!r}{within}{suggest(part, known)} (components: "
                             f"{', '.join(known)})")  # fmt: skip
    for group, members in exclusive_groups().items():
        if sum(p in members for p in parts) > 1:
            raise UsageError(f"--modes {text!r}: at most one {group} ({', '.join(m.value for m in members)})")
    ordered = [m.value for m in MODE_ORDER if m.value in parts]
    if len(ordered) > 1 and Mode.FP32.value in ordered:
        ordered.remove(Mode.FP32.value)  # fp32 is implied: `fp32+channels_last` is `channels_last`
    return "+".join(ordered)


def parse_workloads(text: str | None, flag: str | None = "--workloads") -> tuple[str, ...]:
    """`flag`: the option that gave `text`, named in an error; None for a command's positional WORKLOAD."""
    if text is None:
        return tuple(w.name for w in SUITE)
    return tuple(dict.fromkeys(parse_workload(item, flag, True) for item in split_list(text, flag or "workload")))


def parse_one_workload(text: str) -> str:
    """A command's positional WORKLOAD: one built-in name or one factory, never a list."""
    if "," in text or not text.strip():
        raise UsageError(f"workload {text!r}: give one built-in name (dlperf list) or one path/file.py:factory")
    return parse_workload(text.strip(), None, variant=True)


def parse_workload(item: str, flag: str | None = "--workloads", variant: bool = False) -> str:
    """A built-in name, or a user's `file.py:factory` with its file found and made absolute. `flag`: as above.
    `variant`: either may take a batch of its own (`resnet-50@b64`), where the command measures what it is given."""
    base, batch = split_variant(item)
    if batch is not None:
        if not variant:
            raise UsageError(f"{flag or 'workload'} {item!r}: a batch of its own (NAME@bN) is for run, profile and "
                             f"optimize; here name {base} (with --batch where the command has one)")  # fmt: skip
        if not 1 <= batch <= FIT_MAX_BATCH:
            raise UsageError(f"{flag or 'workload'} {item!r}: the batch after @b must be from 1 to {FIT_MAX_BATCH:,}")
        if (inner := split_variant(base))[1] is not None:  # 'NAME@b8@b16' was told NAME@bN is for run, by run
            raise UsageError(f"{flag or 'workload'} {item!r}: one batch of its own (NAME@bN), not several: list "
                             f"each, {inner[0]}@b{inner[1]},{inner[0]}@b{batch}")  # fmt: skip
        return f"{parse_workload(base, flag)}@b{batch}"
    _check_batch_text(item, flag)
    if looks_like_source(item):
        return normalize_source(item)
    if item.lower() in BUILTIN:
        return item.lower()
    if item.endswith(".py"):
        raise UsageError(f"{flag or 'workload'} {item!r}: {_file_without_factory(item)}")
    form = " (a model of your own: path/to/file.py:factory or package.module:factory)" if "." in item else ""
    raise UsageError(f"{flag + ': ' if flag else ''}unknown workload {item!r}{suggest(item, BUILTIN)}{form}")


def _check_batch_text(item: str, flag: str | None) -> None:
    """A workload at a batch that is no whole number (`tiny-fcn-r@bx`, `@b-3`, `@b`) is refused as such, not as an
    unknown workload whose closest name drops the batch; a path with "@b" in a folder's name (`/x@bob/m.py:make`)
    is a path."""
    base, at, tail = item.rpartition("@b")
    if at and not any(c in tail for c in "/:") and (base.lower() in BUILTIN or looks_like_source(base)):
        digits = "" if tail.isascii() else " in ASCII digits"  # `@b١٦`, as `--batch ١٦` says it
        raise UsageError(f"{flag or 'workload'} {item!r}: the batch after @b must be a whole number from 1 to "
                         f"{FIT_MAX_BATCH:,}{digits}")  # fmt: skip


def _file_without_factory(item: str) -> str:
    """What a user's file named alone lacks: its factory, with the file's own listed."""
    path = Path(item).expanduser()
    if not path.is_file():
        return f"no such file {str(path)!r}"
    found = factories_in_file(path)
    listed = "" if found is None else choices("", found)
    return f"name the factory in the file, as {item}:FACTORY{listed}"


def parse_parallel(text: str) -> tuple[Parallel, ...]:
    """`--parallel ddp,fsdp,pipeline,tp,mirrored`: `pipeline` is both of its schedules, gpipe and 1f1b."""
    chosen: list[Parallel] = []
    for item in split_list(text, "--parallel"):
        if item == "pipeline":
            chosen += strategies.PIPELINE
            continue
        try:
            chosen.append(Parallel(item))
        except ValueError:
            if item in strategies.NOT_MEASURED:  # horovod: listed, with why it cannot be measured
                from dlperf.envs import UNINSTALLABLE

                raise UsageError(f"--parallel {item}: dlperf lists it (`dlperf list --parallel`) but cannot measure "
                                 f"it: {UNINSTALLABLE[item]}") from None  # fmt: skip
            names = ", ".join(["pipeline", *(p.value for p in Parallel)])
            raise UsageError(f"--parallel {item!r}: expected one of {names}") from None
    return tuple(dict.fromkeys(chosen))


def parse_microbatches(text: str) -> tuple[int, ...]:
    return tuple(dict.fromkeys(positive_ints(text, "--microbatches")))


def parse_data(text: str) -> str:
    """--data: `synthetic`, `dataset` (each user workload's own), or a directory that exists, made absolute (the
    children run elsewhere). What a workload needs in it is checked by the child that reads it."""
    text = path_text(text, "--data", "synthetic, dataset, or a directory of datasets")
    if text in (DATA_SYNTHETIC, DATA_DATASET):
        return text
    path = Path(text).expanduser()
    try:  # '' would be `.`: an unset variable's, not a folder chosen
        what = "an empty path" if not text.strip() else None if path.is_dir() else (
            "not a directory" if path.exists() else "no such directory")  # fmt: skip
    except OSError as exc:  # a name too long to look up (ENAMETOOLONG), which Path.is_dir() raises
        what = f"cannot be looked at ({exc.strerror or exc})"
    if what is not None:
        raise UsageError(f"--data {text!r}: {what} (expected synthetic, dataset, or a directory of datasets, as "
                         "`dlperf data synth DIR` writes)")  # fmt: skip
    return str(path.resolve())


def device_kind(device: str) -> DeviceKind:
    return DeviceKind(device.split(":")[0])
