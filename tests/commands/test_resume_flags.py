"""`dlperf run --resume` beside the flags of the command that began the run: the command typed again with --resume
added (the shell's last line, edited) was refused for every flag it had, "--workloads, --threads cannot be given with
it". The flags of the values the run began with are taken; one of another value is named, alone."""

from __future__ import annotations

import pytest

from commands.test_table_unfinished import planned_run
from dlperf.cli import build_parser, parse
from dlperf.commands.resume_flags import check_resume_flags
from dlperf.commands.run import add_arguments
from dlperf.errors import UsageError
from dlperf.store import Store

BEGAN = ("run", "--workloads", "fcn-r,alexnet-r,resnet-56", "--threads", "1", "--max-time", "2")


def stored(tmp_path, argv) -> str:
    db = str(tmp_path / "t.db")
    store = Store.open(db, create=True)
    planned_run(store, 1, "interrupted", argv=argv)
    store.close()
    return db


def check(db: str, *words: str) -> None:
    from dlperf.cli import typed_options

    argv = ["--db", db, *words, "--resume"]
    args = parse(build_parser(), argv)
    args.options_typed = typed_options(argv)  # as `cli.dispatch` marks them
    check_resume_flags(args, db, add_arguments)


def test_the_flags_the_run_began_with_are_taken_and_another_value_is_named_alone(tmp_path):
    db = stored(tmp_path, ("dlperf", "--db", "t.db", *BEGAN))
    check(db, *BEGAN)
    check(db, "run", "--threads", "1")  # some of them
    with pytest.raises(UsageError, match=r"so --threads cannot be given with it at other values than the run was "
                       r"planned with; without --resume they start"):  # fmt: skip
        check(db, *BEGAN[:-4], "--threads", "1,2", "--max-time", "2")
    with pytest.raises(UsageError, match=r"so --repeats cannot be given with it at other values"):  # one it had not
        check(db, *BEGAN, "--repeats", "3")


def test_a_run_begun_by_another_command_takes_no_flag(tmp_path):
    """A run begun from Python (its command a kernel's) has no flags to agree with: every one is refused."""
    db = stored(tmp_path, ("ipykernel_launcher.py", "-f", "kernel.json"))
    with pytest.raises(UsageError, match=r"so --workloads, --threads, --max-time cannot be given with it"):
        check(db, *BEGAN)


def test_a_flag_typed_at_its_default_value_is_a_flag_given(tmp_path):
    """`--repeats 1` (the default) on the --resume of a run begun with --repeats 2 went on at 2, saying nothing."""
    db = stored(tmp_path, ("dlperf", "--db", "t.db", *BEGAN, "--repeats", "2"))
    with pytest.raises(UsageError, match=r"so --repeats cannot be given with it at other values"):
        check(db, "run", "--repeats", "1")
    with pytest.raises(UsageError, match=r"so --repeats cannot be given with it at other values"):
        check(db, "run", "--repeats=1")
    check(db, "run", "--repeats", "2")  # the value it began with


def test_the_axes_in_another_order_or_at_what_the_run_planned_are_the_same_run(tmp_path):
    """`--devices cpu` on a CPU-only run begun without --devices was refused "at other values than the command that
    began it gave", though it gave none and planned the CPU alone; `--workloads` reordered was refused too."""
    db = stored(tmp_path, ("dlperf", "--db", "t.db", *BEGAN))
    check(db, *BEGAN, "--devices", "cpu")  # planned_run's cells are CPU cells
    check(db, "run", "--workloads", "resnet-56,fcn-r,alexnet-r", "--threads", "1")
    check(db, "run", "--modes", "fp32", "--frameworks", "torch")
    with pytest.raises(UsageError, match=r"so --devices cannot be given with it at other values than the run was "):
        check(db, "run", "--devices", "cpu,cuda")
    with pytest.raises(UsageError, match=r"so --workloads cannot be given"):
        check(db, "run", "--workloads", "fcn-r,alexnet-r")  # one fewer


def test_a_store_with_nothing_to_resume_says_so_not_that_the_flags_differ(tmp_path):
    """`run --resume --threads 1` on a store whose only run is complete said "--resume continues the latest unfinished
    run as it was planned, so --threads cannot be given with it": there is no such run. It says what --resume alone
    says, as do a missing store and one whose unfinished run is a search's."""
    db = str(tmp_path / "t.db")
    store = Store.open(db, create=True)
    planned_run(store, 1, "complete", argv=("dlperf", "--db", "t.db", *BEGAN))
    store.close()
    with pytest.raises(UsageError, match=rf"^--resume: every run in {db} is complete; nothing to resume$"):
        check(db, *BEGAN)
    with pytest.raises(UsageError, match=r"no such database"):
        check(str(tmp_path / "none.db"), "run", "--threads", "1")
