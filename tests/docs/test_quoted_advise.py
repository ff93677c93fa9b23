"""A quoted `dlperf advise` answer names no timer flag advise does not take. 83d0b7d made advise say a cell's
warm-up note as dlperf run's ('within the warm-up advise gave it (dlperf run --max-warmup and --max-time give
more)'), and gpu.md's two advise outputs kept 'within --max-warmup steps or --max-time', flags advise refuses."""

from __future__ import annotations

import re

from conftest import ROOT
from dlperf.advise_cells import RUN_TIMER_FLAGS

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def advise_outputs(page) -> list[str]:
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", page.read_text(), re.S | re.M)
    return [" ".join(block.split()) for block in blocks if "On this CPU (measured)" in block]


def test_a_quoted_advise_answer_says_the_timers_notes_as_advise_prints_them():
    quoted = [(page, block) for page in PAGES for block in advise_outputs(page)]
    assert len(quoted) >= 3  # gpu.md's outputs of advise
    for page, block in quoted:
        for said, meant in RUN_TIMER_FLAGS.items():
            assert said not in block, f"{page.relative_to(ROOT)}: {said!r}, where advise prints {meant!r}"


def test_a_quoted_thread_note_beside_a_disturbed_cell_says_the_count_is_not_starred():
    """gpu.md's advise outputs said "threads: 1 was fastest of 1 and 2 at batch 16" beside "no fastest thread count
    starred ...: a compared cell was disturbed", where advise says the count is not starred (crossover._fastest_of)."""
    quoted = [block for page in PAGES for block in advise_outputs(page) if "no fastest thread count starred" in block]
    assert len(quoted) >= 2  # gpu.md's two
    for block in quoted:
        note = re.search(r"note: threads: \d+ was fastest of [^:]*: [^)]*\)", block)
        assert note and note[0].endswith("not starred: a compared cell was disturbed (its note says how)"), block
