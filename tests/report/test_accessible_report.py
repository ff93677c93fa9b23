"""The HTML report read by a screen reader, at 400% zoom and by an HTML validator: each test failed on the tree before
the fix it guards (two charts sharing ids, charts without a text alternative, headers without scope, a sticky header
taking 80% of a phone's screen, grey text under 4.5:1)."""

from __future__ import annotations

import re
from collections import Counter
from html.parser import HTMLParser

import pytest

from dlperf.report import html, load


class Page(HTMLParser):
    """Every start tag of a page, in order, with each `<svg>`'s own tags apart."""

    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.svgs: list[list[tuple[str, dict]]] = []
        self._depth = 0

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "svg":
            self.svgs.append([])
        if tag == "svg" or self._depth:
            self._depth += 1
            self.svgs[-1].append((tag, dict(attrs)))

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        self.handle_endtag(tag)

    def handle_endtag(self, tag):
        if self._depth:
            self._depth -= 1


@pytest.fixture
def page(report_db) -> tuple[str, Page]:
    text = html.render(load.load(str(report_db)))
    parsed = Page()
    parsed.feed(text)
    return text, parsed


def test_no_two_elements_share_an_id_and_each_charts_references_stay_in_it(page):
    text, parsed = page
    assert len(parsed.svgs) >= 2
    ids = Counter(a["id"] for _, a in parsed.tags if "id" in a)
    assert [i for i, n in ids.items() if n > 1] == []
    for svg, source in zip(parsed.svgs, re.findall(r"<svg.*?</svg>", text, re.S), strict=True):
        own = {a["id"] for _, a in svg if "id" in a}
        referenced = set(re.findall(r'url\(#([^)]+)\)|href="#([^"]+)"', source))
        assert {r for pair in referenced for r in pair if r} <= own
