"""table7.md quotes `dlperf table --paper --format md` and the report's paper row with bare seconds ("0.988 n=9",
"Torch 1.670 desktop"), where dlperf prints each with its unit (`report.format.table_seconds`: "0.988 s n=9")."""

from __future__ import annotations

import re

from conftest import ROOT

GUIDE = ROOT / "docs" / "guides" / "table7.md"


def test_the_quoted_paper_figures_say_their_unit():
    text = GUIDE.read_text()
    rows = [line for line in text.splitlines() if re.match(r"\| (fcn-r|resnet-56|lstm) \| torch \|", line)]
    assert len(rows) == 6, rows
    report = [line for line in text.splitlines() if line.startswith("FCN-R | 1024 |")]
    assert report, "the report's paper row"
    for line in rows + report:
        bare = re.findall(r"\d+\.\d{3}(?! s)", line)
        assert not bare, (bare, line)
