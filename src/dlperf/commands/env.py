"""`dlperf env`: the environment stored with a run (show), and the frameworks' own environments (list, install)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict

from dlperf.commands.common import add_format, open_store, whole
from dlperf.errors import UsageError
from dlperf.vocab import ExitCode

CPU_NUMBERS = ("family", "model_number")
HELP = "a run's stored environment (show), or the frameworks' own environments (list, install)"
DESCRIPTION = (
    "show: the environment a run was measured in. list: each framework's dedicated environment. "
    "install NAME...: create one (jax, tensorflow, mxnet) under $DLPERF_DATA_DIR (default "
    "~/.local/share/dlperf), install the versions of its committed constraints file, verify with one step."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", nargs="?", choices=["show", "list", "install"], help="show (the default), list or install")
    p.add_argument("names", nargs="*", help="frameworks to install (install only)")
    p.add_argument("--force", action="store_true", help="install: re-create the environment from scratch")
    p.add_argument("--run", type=whole("--run", 1), help="show: run id (default: the latest, the one measured last)")
    add_format(p, "text", "json")


ACTION_FLAGS = (("--force", "force", ("install",)), ("--run", "run", ("show",)), ("--db", "db", ("show",)),
                ("--format", "format", ("show", "list")))  # fmt: skip


def check_action_flags(args) -> None:
    """A flag of another action is refused, naming whose it is, where it would be ignored (`env list --run 3`)."""
    for flag, dest, actions in ACTION_FLAGS:
        value = getattr(args, dest)
        if args.action not in actions and value not in (None, False, "text"):
            takes = "takes" if len(actions) == 1 else "take"
            raise UsageError(f"{flag}: only dlperf env {' and '.join(actions)} {takes} it, not env {args.action}")


def run(args) -> int:
    bare, args.action = args.action is None, args.action or "show"
    check_action_flags(args)
    if args.action == "install":
        return env_install(args.names, args.force)
    if args.names:
        raise UsageError(f"dlperf env {args.action} takes no names (got {' '.join(args.names)}); did you mean "
                         "install?")  # fmt: skip
    if args.action == "list":
        return env_list(args.format)
    try:
        store = open_store(args)
    except UsageError as exc:  # `dlperf env` alone, before any run: what was asked may be the environments
        raise UsageError(f"{exc}; `dlperf env list` shows the frameworks' environments" if bare else str(exc)) from None
    try:
        run = store.run(args.run)
    finally:
        store.close()
    if args.format == "json":
        print(json.dumps(run.env, indent=2))
        return ExitCode.OK
    print(f"run {run.id}  started {run.started_at}  status {run.status}")
    print_env(run.env)
    return ExitCode.OK


def env_list(fmt: str) -> int:
    from dlperf import envs

    rows = envs.listing()
    if fmt == "json":
        print(json.dumps([asdict(r) for r in rows], indent=2))
        return ExitCode.OK
    from dlperf.commands.common import print_rich
    from dlperf.commands.list import columns

    listed = []
    for r in rows:
        if r.used == "current environment":
            listed.append([f"  {r.framework}", "importable in this environment: used directly"])
        elif r.installed:
            versions = ", ".join(f"{k} {v}" for k, v in (r.versions or {}).items() if v)
            listed.append([f"  {r.framework}", f"{r.path}  ({versions}; verified {r.verified_at})"])
            if r.pins_changed:
                listed.append(["", f"installed with other versions than this dlperf pins: dlperf env install "
                                   f"{r.framework} updates it"])  # fmt: skip
        else:
            listed.append([f"  {r.framework}", r.reason or ""])
    print(f"data directory: {envs.data_dir()}")  # one line, its path whole, as a script reads it
    print_rich(columns(["", ""], listed))
    return ExitCode.OK


def env_install(names: list[str], force: bool) -> int:
    from dlperf import envs
    from dlperf.answers import SelftestAnswer, SelftestRequest
    from dlperf.runner import probe

    if not names:
        raise UsageError(f"dlperf env install: name one or more of {', '.join(envs.PACKAGES)}")
    for name in names:
        if name not in envs.PACKAGES:
            raise UsageError(f"dlperf env install {name}: {envs.install_refusal(name)}")
    if why := envs.unusable_data_dir():
        raise UsageError(f"dlperf env install: {why}")
    failed = 0
    for name in names:

        def verify(python: str, framework: str = name) -> SelftestAnswer:
            return probe.ask(framework, SelftestRequest(), python=python)

        try:
            rec = envs.install(name, verify, force=force, log=lambda line, n=name: print(f"{n}: {line}", flush=True))
        except (envs.InstallError, UsageError) as exc:
            print(f"dlperf: error: {name}: {exc}", file=sys.stderr)
            failed += 1
            continue
        versions = ", ".join(f"{k} {v}" for k, v in (rec.versions or {}).items() if v)
        print(f"{name}: ready in {envs.env_dir(name)} ({versions}); installed and verified in {rec.install_s} s")
    return ExitCode.CELLS_FAILED if failed else ExitCode.OK


# what a figure of the stored environment is, where its name does not say (`env show`'s text)
MEANING = {"precision_speed": "a matrix product's speed in each dtype against fp32's, per device; 2 is twice as fast"}


def print_env(env: dict, indent: str = "") -> None:
    """The environment as indented lines; of the top level's `cpu`, the flag list as its count, the family and model
    number in hexadecimal too, as vendors' documents name them (AMD's family 1Ah: Zen 5); a figure whose name does not
    say what it is, what it is (`MEANING`)."""
    for key, value in env.items():
        if key == "cpu" and not indent and isinstance(value, dict):
            value = _cpu_lines(value)
        if isinstance(value, dict):
            print(f"{indent}{key}{f' ({MEANING[key]})' if key in MEANING else ''}:")
            print_env(value, indent + "  ")
        else:
            print(f"{indent}{key}: {value}")


def _cpu_lines(cpu: dict) -> dict:
    shown = {k: f"{v} (0x{v:x})" if k in CPU_NUMBERS and isinstance(v, int) else v for k, v in cpu.items()}
    if "flags" in cpu:
        shown["flags"] = f"{len(cpu['flags'])} flags (see --format json)"
    return shown
