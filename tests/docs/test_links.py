"""Every relative link of the documentation works where people read it: in the repository (GitHub's view of the
Markdown files) as on the site. Three anchors once worked only on the site, whose slugs differed from GitHub's where a
heading held a flag (`--cost`: GitHub keeps each hyphen); the site now makes GitHub's (mkdocs.yml's slugify)."""

import re
from pathlib import Path

from conftest import ROOT, docs_tools

LINK = re.compile(r"(?<!!)\[(?P<text>[^\]]*)\]\((?P<target>[^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")
PAGES = sorted([*ROOT.glob("*.md"), *(p for p in (ROOT / "docs").rglob("*.md") if "hooks" not in p.parts)])


def outside_code(text: str) -> str:
    kept, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            kept.append(line)
    return "\n".join(kept)


def github_slug(heading: str) -> str:
    """GitHub's anchor of a heading: its text (links and code marks dropped) in lower case, every character but
    letters, digits, '_', '-' and spaces dropped, each space a hyphen."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for line in outside_code(path.read_text()).splitlines():
        if match := re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line):
            slug = github_slug(match[1])
            found.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
            seen[slug] = seen.get(slug, 0) + 1
    return found


def test_github_slugs_are_the_sites():
    """The test's slugs are pymdownx's, the site's (where the docs extras are installed)."""
    docs_tools()  # the docs extras: a skip here, a failure where DLPERF_REQUIRE lists docs (CI)
    from pymdownx import slugs

    slugify = slugs.slugify(case="lower")
    for heading in ("What it costs (dlperf predict --cost)", "Beside the paper: dlperf table --paper", "A / B, c.d"):
        assert github_slug(heading) == slugify(heading, "-")
    assert github_slug("What it costs (`dlperf predict --cost`)") == "what-it-costs-dlperf-predict---cost"


def test_every_relative_link_and_anchor_of_the_docs_exists_in_the_repository():
    broken = []
    for page in PAGES:
        for match in LINK.finditer(outside_code(page.read_text())):
            target = match["target"]
            if re.match(r"^[a-z][a-z0-9+.-]*:|^/", target):
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            where = f"{page.relative_to(ROOT)}: {target}"
            if not file.exists():
                broken.append(f"{where} (no such file)")
            elif anchor and file.suffix == ".md" and anchor not in anchors(file):
                broken.append(f"{where} (no such heading in {file.relative_to(ROOT)})")
    assert len(PAGES) > 20 and not broken, "\n".join(broken)
