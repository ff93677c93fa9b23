"""README is the short way in (issue 36): at most 150 lines, a link to every guide and concept page under docs/, and
every file it links is in the repository (the report's picture is made by `make docs-images`, so it may be absent)."""

from __future__ import annotations

import re

from conftest import ROOT

README = (ROOT / "README.md").read_text()
LINKS = {m.split("#")[0] for m in re.findall(r"\]\(([^)\s]+)\)", README) if "://" not in m}


def test_the_readme_is_at_most_150_lines():
    assert len(README.splitlines()) <= 150


def test_the_readme_links_every_guide_and_concept_page():
    docs = ROOT / "docs"
    pages = sorted(p.relative_to(ROOT).as_posix() for d in ("guides", "concepts") for p in (docs / d).glob("*.md"))
    assert len(pages) >= 13
    assert [p for p in pages if p not in LINKS] == []


def test_every_file_the_readme_links_is_in_the_repository():
    missing = [link for link in LINKS if not link.startswith("docs/images/") and not (ROOT / link).exists()]
    assert missing == []


def commands_table(text: str) -> list[str]:
    """The rows of the table under a page's "## The commands" heading."""
    section = text.split("\n## The commands\n", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("|")]


def test_the_sites_home_page_carries_the_readmes_table_of_commands():
    """docs/index.md holds a copy of README's table (the site does not include README): the two stay the same."""
    index = (ROOT / "docs/index.md").read_text()
    assert len(commands_table(README)) >= 10
    assert commands_table(index) == commands_table(README)
