"""RunSpec checks its own fields, each refusal a UsageError naming the flag: a spec read back from the store
(`run --resume`) is checked as one typed on the command line."""

from types import SimpleNamespace

import pytest

from conftest import one_line_error
from dlperf.errors import UsageError
from dlperf.spec import RunSpec, make_spec
from dlperf.store import Store


def stored(**changes) -> dict:
    """A valid spec as the store holds it, with `changes` made to its JSON."""
    return {**make_spec("tiny-fcn-r", threads=[1]).to_json(), **changes}


@pytest.mark.parametrize(
    ("changes", "flag"),
    [({"repeats": 0}, "--repeats"), ({"timeout": -1.0}, "--timeout"), ({"threads": [0]}, "--threads"),
     ({"modes": ["fp33"]}, "--modes"), ({"frameworks": ["caffe"]}, "--frameworks"), ({"devices": ["tpu"]}, "--devices"),
     ({"workloads": ["no-such-net"]}, "--workloads"), ({"scaling": "both"}, "--scaling"),
     ({"parallel": ["ddp"]}, "--parallel"), ({"nprocs": [2], "frameworks": ["jax"]}, "--nproc"),
     ({"loaders": ["w1"]}, "--loaders"), ({"timer": {**stored()["timer"], "min_time": -1.0}}, "--min-time"),
     ({"profile": True, "profile_steps": 0}, "--steps")],
)  # fmt: skip
def test_a_stored_spec_with_a_bad_value_is_refused_naming_the_flag(changes, flag):
    with pytest.raises(UsageError, match=flag):
        RunSpec.from_json(stored(**changes))


def test_a_spec_round_trips_through_the_store_and_checks_made_by_hand_too():
    spec = make_spec("tiny-fcn-r", threads="1,2", nprocs=[2], parallel="pipeline", microbatches=[4, 8])
    assert spec.parallel == ("gpipe", "1f1b") and RunSpec.from_json(spec.to_json()) == spec
    with pytest.raises(UsageError, match="--microbatches: strategies spread a step over processes; add --nproc N"):
        RunSpec(("tiny-fcn-r",), microbatches=(4,))
    with pytest.raises(UsageError, match="--threads"):
        RunSpec(("tiny-fcn-r",), threads=(0,))


def test_resume_refuses_a_stored_spec_with_a_bad_value_in_one_line(tmp_path, capsys):
    from dlperf.cli import main

    db = tmp_path / "d.db"
    store = Store.open(db, create=True)
    run_id = store.create_run(stored(modes=["fp32+fp16"]), {}, {}, ["dlperf"], [])
    store.close()
    code = main(["run", "--resume", "--db", str(db)])
    one_line_error(SimpleNamespace(returncode=code, stderr=capsys.readouterr().err), "--modes", "at most one precision")
    store = Store.open(db, create=False)
    try:
        assert store.run(run_id).status == "running"  # nothing measured, nothing changed
    finally:
        store.close()


@pytest.mark.parametrize(
    ("frameworks", "says"),
    [
        ("torch,caffe", "caffe is one of the paper's tools and cannot be measured: no release installs on a supported "
                        "Python (last release 1.0, 2017; never on PyPI)"),
        ("Torch7", "torch7 is one of the paper's tools and cannot be measured: Lua, not Python"),
        ("cntk", "cntk is one of the paper's tools and cannot be measured: no release installs on a supported Python"),
        ("horovod", "horovod cannot be measured: no release builds against the pinned frameworks"),
    ],
)  # fmt: skip
def test_a_paper_tool_that_cannot_be_installed_is_refused_saying_why(frameworks, says):
    """`dlperf list --frameworks` knows why Caffe, CNTK and Torch7 cannot be measured: --frameworks says it too, in
    one line, instead of a bare "unknown framework 'caffe'"."""
    with pytest.raises(UsageError) as refused:
        make_spec(["tiny-fcn-r"], frameworks=frameworks)
    message = str(refused.value)
    assert message.startswith(f"--frameworks: {says}") and message.endswith("; dlperf list --frameworks lists what can")
    assert "\n" not in message


def test_an_unknown_framework_is_still_named_with_the_closest():
    with pytest.raises(
        UsageError, match=r"^--frameworks: unknown framework 'tensorfow' \(did you mean 'tensorflow'\?\)$"
    ):
        make_spec(["tiny-fcn-r"], frameworks="tensorfow")


def test_max_time_help_says_it_bounds_the_warm_up_too():
    """The one timer stops a warm-up that never settles at --max-time, as it stops the timed steps; every command's
    help of the flag said "seconds of timed steps at most" only."""
    import argparse
    import itertools

    from dlperf.cli import build_parser
    from dlperf.measure.timer import TimerConfig, warm_up

    ticks = itertools.count()  # a second a look at the clock
    unsettled = itertools.cycle([1.0, 2.0])
    found = warm_up(lambda: next(unsettled), TimerConfig(max_time=5.0, max_warmup=1000), clock=lambda: next(ticks))
    assert not found.steady and found.steps < 10
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    helps = {name: next((a.help for a in p._actions if "--max-time" in a.option_strings), None)
             for name, p in commands.items()}  # fmt: skip
    timed = {name: text for name, text in helps.items() if text and "timed steps" in text}
    assert {"run", "optimize", "fit", "crossover"} <= set(timed)
    assert all("warm-up" in text for text in timed.values()), timed
