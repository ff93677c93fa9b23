"""The two sides of `dlperf compare` (`report/compare.py`): a run read from a store as the user named it (`ID`, a
run of --db; `path.db`, its latest run; `path.db:ID`), with its cells, every process's raw steps and its machine, and
what tells the two machines apart."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dlperf.errors import UsageError
from dlperf.flagtext import whole_number
from dlperf.measure.units import plural
from dlperf.report.compare_data import read_apart, run_data
from dlperf.store.records import CellRecord, in_measured_order


def usable(cell: CellRecord) -> bool:
    """A cell whose steps can be compared: measured ok, with a median."""
    return cell.ok and (cell.median_s or 0) > 0


@dataclass(frozen=True)
class Side:
    name: str  # "A" or "B"
    db: str
    run_id: int
    started_at: str
    fingerprint: dict[str, Any]
    cells: list[CellRecord]
    samples: dict[str, list[list[float]]]  # cell key -> raw step times of each process
    unfinished: str = ""  # the run not finished, as the table says it (`store/state.py`); "" when it is
    settings: dict[str, Any] = field(default_factory=dict)  # how it measured (`settings_of`): what a ratio depends on
    data: str | None = None  # its --data folder, which its built-in loader cells read (`compare_data.run_data`)

    def machine(self) -> str:
        f = self.fingerprint
        cores = (f.get("cores") or {}).get("cores")
        host = f" ({f['hostname']})" if f.get("hostname") else ""
        counted = plural(cores, "core") if cores is not None else "? cores"
        return f"{f.get('cpu_model') or 'unknown CPU'}, {counted}{host}"

    def heading(self) -> str:
        return f"{self.name} = run {self.run_id} of {self.db} (started {self.started_at})"

    def to_json(self) -> dict[str, Any]:
        return {
            "db": str(Path(self.db).resolve()),
            "run_id": self.run_id,
            "started_at": self.started_at,
            "machine": self.machine(),
            "fingerprint": self.fingerprint,
        }


def parse_ref(text: str, default_db: str, name: str = "A") -> tuple[str, int | None]:
    """(database path, run id or None for its latest run) of a side as the user typed it."""
    if text.isascii() and text.isdigit():  # not '²' or '٣', which int() reads or refuses
        return default_db, whole_number(text, name, least=1)
    head, sep, tail = text.rpartition(":")
    if sep and head and tail.isascii() and tail.isdigit() and not os.path.exists(text):  # False where unreachable
        return head, whole_number(tail, name, least=1)
    return text, None


def load(text: str, name: str, default_db: str) -> Side:
    from dlperf.store import Store
    from dlperf.store.location import not_a_database_file, unreachable
    from dlperf.store.state import run_state

    path, run_id = parse_ref(text, default_db, name)
    side = f"{name} {text!r}" if path in text else f"{name} {text!r}: {path!r}"  # `ID`: a run of --db, named
    if why := unreachable(path):
        raise UsageError(f"{side}: {why}")
    if why := not_a_database_file(path, missing="no such database file"):
        raise UsageError(f"{name} {text!r}: {why} {path!r}" if why.startswith("no such") else
                         f"{name} {text!r}: {path!r} {why}")  # fmt: skip
    try:
        store = Store.open(path, create=False)
    except UsageError as exc:
        raise UsageError(f"{side}: {str(exc).removeprefix(f'--db {path!r}: ')}") from exc
    try:
        run = _run(store, text, name, run_id)
        cells = store.cells(run.id)
        samples = {c.key: store.samples(run.id, c.key) for c in cells if usable(c)}
        state = run_state(store, run)
    finally:
        store.close()
    version, code = run.env.get("dlperf_version"), run.env.get("dlperf_code")  # the dlperf that measured the run,
    fingerprint = {**run.fingerprint, **({"dlperf": version} if version else {}),  # set beside its machine
                   **({"dlperf_code": code} if isinstance(code, dict) else {})}  # fmt: skip
    return Side(name, path, run.id, run.started_at, fingerprint, cells, samples,
                state.summary() if state.unfinished else "", settings_of(run.spec, run.env),
                run_data(run.spec))  # fmt: skip


# the run's settings that change a step's time or its median, as its flags name them (`RunSpec`, its `timer`)
SETTINGS = {"pin": "--pin", "min_steps": "--min-steps", "min_time": "--min-time", "max_time": "--max-time",
            "max_warmup": "--max-warmup"}  # fmt: skip


def settings_of(spec: dict[str, Any], env: dict[str, Any]) -> dict[str, Any]:
    """How a run measured: its flags of `SETTINGS`, and the inherited variables that change threads or kernels
    (ATEN_CPU_CAPABILITY, OMP_*, as the run recorded them; `measure.system.inherited_thread_env`)."""
    from dlperf.measure.system import THREAD_COUNT_VARS

    flat = {**spec, **(spec.get("timer") or {})}
    found = {flag: flat[key] for key, flag in SETTINGS.items() if key in flat}
    inherited = sorted((env.get("thread_env") or {}).items())  # less the thread counts each cell sets for itself
    return {**found, **{name: value for name, value in inherited if name not in THREAD_COUNT_VARS}}


def setting_lines(a: Side, b: Side) -> list[str]:
    """One line naming the settings the two runs measured with differently ("--max-time 1.0 -> 2.0, ATEN_CPU_CAPABILITY
    unset -> default"): a ratio measures them too. Only variables set in one run are "unset" in the other; a flag one
    run did not record (an older dlperf's) is not compared."""
    changed = [f"{c['setting']} {_shown(c['a'])} -> {_shown(c['b'])}" for c in setting_changes(a, b)]
    return [f"settings differ: {', '.join(changed)}; each ratio measures them too"] if changed else []


def setting_changes(a: Side, b: Side) -> list[dict[str, Any]]:
    """Each setting the runs measured with differently: {"setting", "a", "b"} (None: a variable unset), for JSON."""
    sa, sb = a.settings, b.settings
    variables = [k for k in dict.fromkeys([*sa, *sb]) if not k.startswith("--")]
    flags = [k for k in SETTINGS.values() if k in sa and k in sb]
    return [{"setting": k, "a": sa.get(k), "b": sb.get(k)} for k in (*flags, *variables) if sa.get(k) != sb.get(k)]


def _shown(value: Any) -> str:
    return "unset" if value is None else "on" if value is True else "off" if value is False else f"{value}"


def _run(store, text: str, name: str, run_id: int | None):
    try:
        return store.run(run_id)
    except UsageError:
        what = f"no run {run_id}" if run_id is not None else "no runs"
        raise UsageError(f"{name} {text!r}: {what} in {store.path}") from None


def machine_lines(a: Side, b: Side) -> list[str]:
    """Both machines when the runs come from different ones (or different software): what the ratios compare. Only
    the frameworks both runs measured count: one that a run did not use changed none of its numbers."""
    from dlperf.envinfo import fingerprint_diff

    used = {c.framework for c in a.cells} & {c.framework for c in b.cells}
    differences = fingerprint_diff(_with_only(a.fingerprint, used), _with_only(b.fingerprint, used)) + code_diff(a, b)
    if not differences:
        return []
    return [f"{a.name}: {a.machine()}", f"{b.name}: {b.machine()}", f"differences: {'; '.join(differences)}"]


# a fingerprint's keys of the machine's hardware, as the warning names them
HARDWARE = {"cpu_model": "CPU model", "cpu_id": "CPU identity", "cpu_isa": "instruction sets", "cores": "cores",
            "memory_gib": "memory", "gpus": "GPUs"}  # fmt: skip


def machine_warning(a: Side, b: Side) -> str | None:
    """One line when the runs ran on different hardware: each ratio then measures the machines as much as anything
    that changed between the runs, and a regression may be the machine's. A hostname alone (a CI runner's, a fresh
    cloud machine of the same kind) is no different hardware."""
    differ = hardware_differences(a.fingerprint, b.fingerprint)
    if not differ:
        return None
    return (
        f"A and B ran on different hardware ({', '.join(differ)}): each ratio compares the machines as much as "
        "the runs; compare two runs of one machine to judge a change"
    )


def hardware_differences(fa: dict[str, Any], fb: dict[str, Any]) -> list[str]:
    """The names of the `HARDWARE` two fingerprints both record and record differently ("CPU model", "cores")."""
    from dlperf.envinfo import fingerprint_diff

    return [name for key, name in HARDWARE.items() if key in fa and key in fb and fingerprint_diff(
        {key: fa[key]}, {key: fb[key]})]  # fmt: skip


def measured_before(store, run_id: int) -> tuple[int, int] | None:
    """(the latest earlier run that measured cells of this run on the same hardware, how many): a sweep measured
    again (a second `make run`) ends with the command that tells a change from the noise, `dlperf compare`, rather
    than two tables to read side by side. None where no earlier run of this machine shares an ok cell."""
    shared = store.shared_ok_cells(run_id)
    if not shared:
        return None
    this = store.run(run_id)
    earlier = [r for r in store.runs() if r.id in shared and r.order < this.order]  # measured before it, by its start
    for run in reversed(in_measured_order(earlier)):
        if not hardware_differences(run.fingerprint, this.fingerprint):
            return run.id, shared[run.id]
    return None


def compare_hint(db: str, run_id: int) -> list[str]:
    """A line naming the earlier run of this machine that measured cells of this one, and the command that compares
    them (`measured_before`), and where a loader cell both measured read different folders, which (`read_apart`);
    none for a first run."""
    import shlex

    from dlperf.store import Store
    from dlperf.store.location import db_words, program

    try:
        store = Store.open(db, create=False)
        try:
            found = measured_before(store, run_id)
            runs = [] if found is None else [(store.run(i).spec, store.cells(i)) for i in (found[0], run_id)]
        finally:
            store.close()
    except (UsageError, OSError):  # a store gone or busy since (StoreFault is a UsageError): the run's line alone
        return []
    if found is None:
        return []
    earlier, shared = found
    command = f"{program()} {shlex.join(['compare', str(earlier), str(run_id), *db_words(db)])}"
    verdict = "says whether they changed beyond the noise"
    if min(spec.get("repeats") or 1 for spec, _ in runs) < 3:
        verdict = "compares them (measure both with --repeats 3 for a verdict beyond the noise)"
    # their loader cells' ratios would measure the data too: said, not hidden
    if read := read_apart((runs[0][1], runs[1][1]), tuple(run_data(spec) for spec, _ in runs)):
        verdict += f", though they read different data (run {earlier}: {read[0]}; this run: {read[1]})"
    return [f"run {earlier} measured {shared} of these cells on the same hardware too: {command} {verdict}"]


def code_diff(a: Side, b: Side) -> list[str]:
    """dlperf's timing code where both runs recorded theirs and the two differ, as `--resume` says it ("dlperf's
    timing code 4f1c9a2e0b7d (commit 11eef592) -> 9d03b5e1c2aa (commit 29e29346)"): the same version at two commits
    may time a step otherwise. A run an older dlperf measured, which recorded none, is not compared."""
    from dlperf import envinfo

    both = all(isinstance(s.fingerprint.get("dlperf_code"), dict) for s in (a, b))
    return envinfo.code_diff(a.fingerprint, b.fingerprint) if both else []


def _with_only(fingerprint: dict[str, Any], frameworks: set[str]) -> dict[str, Any]:
    """The fingerprint with these frameworks' versions alone, without dlperf's timing code (`code_diff` says it)."""
    found = fingerprint.get("frameworks") or {}
    kept = {k: v for k, v in fingerprint.items() if k != "dlperf_code"}
    return {**kept, "frameworks": {k: v for k, v in found.items() if k in frameworks}}
