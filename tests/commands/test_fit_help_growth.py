"""`dlperf fit --help` says what c85b386 made true: a try whose memory grows past the limit over its timed steps
(run without the limit) does not fit; the help said only that the limit is lifted before the steps are timed."""

from dlperf.commands import fit


def test_fit_help_says_a_try_growing_past_the_limit_over_its_timed_steps_does_not_fit():
    text = " ".join(fit.DESCRIPTION.split())
    assert "lifted before its steps are timed" in text
    assert "a try whose memory grows past the limit over its timed steps" in text
    assert "does not fit either" in text
