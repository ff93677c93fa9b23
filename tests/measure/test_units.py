"""The words around a count: a noun and its ids (`named`), a verb that agrees with them (`agreeing`)."""

from dlperf.measure.units import agreeing, named


def test_things_named_by_their_ids_take_the_singular_for_one():
    assert named("run", [3]) == "run 3" and named("run", (i for i in (1, 2))) == "runs 1, 2"


def test_a_verb_agrees_with_its_count():
    """Built by hand at each place before (keeps for one run, keep for several); now one function, as `named` is."""
    assert [agreeing(n, "keeps", "keep") for n in (0, 1, 2)] == ["keep", "keeps", "keep"]
