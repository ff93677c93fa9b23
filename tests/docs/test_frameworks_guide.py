"""What the guides say a user's own model runs in: PyTorch only. The frameworks guide said so in the middle of its
cross-checks and the own-model guide not at all, so a user who swept a factory over four frameworks learnt it from
three `unsupported` cells."""

from __future__ import annotations

import re

from conftest import ROOT
from dlperf.frameworks import builtin_only

GUIDES = ROOT / "docs" / "guides"


def flat(path) -> str:
    return re.sub(r"\s+", " ", path.read_text())


def test_the_frameworks_guide_says_a_users_model_is_pytorchs_in_words_the_cells_print():
    text = flat(GUIDES / "frameworks.md")
    assert "**Your own model is measured in PyTorch only.**" in text
    assert f'"{builtin_only("jax")}"' in text  # the note of a jax cell of a user's workload, as the table prints it


def test_the_own_model_guide_says_it_before_its_first_command():
    text = flat(GUIDES / "own-model.md")
    head = text[: text.index("```")]
    assert "with a PyTorch model" in head and "(frameworks.md)" in head


def test_the_frameworks_guide_shows_the_fastest_framework_lines_as_the_table_prints_them():
    from dlperf.report.fastest import HEAD

    text = (GUIDES / "frameworks.md").read_text()
    assert HEAD in text and "\n- tiny-fcn-r cpu:1: jax, " in text  # its head, then a line per comparison
