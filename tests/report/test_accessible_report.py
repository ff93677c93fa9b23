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


def test_each_chart_is_named_and_each_of_its_points_keeps_its_text_and_takes_the_focus(page):
    """The `<svg>`s had no role, name or `<title>`; the script took each point's `<title>`, its only text, away. Then
    each `<svg>` had a `<title>` as well as its aria-label: its name heard twice, and shown as a native tooltip over a
    point whose `<title>` the script had taken."""
    text, parsed = page
    for svg in parsed.svgs:
        root = svg[0][1]
        assert root["role"] == "group" and root["aria-label"].startswith("Chart: ")  # not "img": its points stay read
        tips = [a for t, a in svg if t == "g" and "data-tip" in a]
        assert tips and all(a["aria-label"] == a["data-tip"] and a["tabindex"] == "0" for a in tips)
        assert [t for t, _ in svg].count("title") == len(tips)  # its points' only, which the script takes away
    assert "its aria-label stays" in text and "title.remove()" in text  # the script takes the native tooltip only


def test_each_cells_hover_text_describes_it_to_a_screen_reader(page):
    """A cell read "413 µs? n=3411" and nothing of its IQR, processes or why the '?': `#tip`, role=tooltip, was
    referenced by no cell."""
    import html as markup

    text, parsed = page
    cells = [a for t, a in parsed.tags if t == "td" and "data-tip" in a]
    assert cells
    hidden = {m[1]: markup.unescape(m[2]) for m in re.finditer(r'<span id="([^"]+)" hidden>(.*?)</span>', text, re.S)}
    for a in cells:
        assert a["tabindex"] == "0" and hidden[a["aria-describedby"]] == a["data-tip"]
    assert "move the keyboard's focus to it (Tab)" in " ".join(text.split())  # the footer: not hover alone


def test_every_table_is_captioned_and_its_headers_scoped_its_rows_named_by_a_header(page):
    text, parsed = page
    tables = text.count("<table")
    assert tables >= 4 and len(re.findall(r'<caption class="sr" id="caption-\d+">', text)) == tables
    heads = [a for t, a in parsed.tags if t == "th"]
    assert heads and all(a.get("scope") in ("col", "colgroup", "row") for a in heads)
    for body in re.findall(r"<tbody>(.*?)</tbody>", text, re.S):
        assert all(row.startswith('<th scope="row">') for row in re.findall(r"<tr>(.*?)</tr>", body, re.S))


def test_the_header_stops_sticking_and_wide_tables_scroll_on_their_own_on_a_narrow_screen(page):
    """At 320 x 257 CSS px (a phone, 400% zoom) the sticky header took most of the screen and the page was 562 px
    wide (WCAG 1.4.10): the header is not sticky there, and each table scrolls across in a box of its own."""
    from dlperf.report.html_page import CSS

    text, _ = page
    narrow = re.search(r"@media \(max-width:640px\),\(max-height:480px\)\{header\{position:static\}", CSS)
    assert narrow and ".wide{overflow-x:auto;max-width:100%}" in CSS
    boxes = re.findall(r'<div class="wide"><table ', text)  # a tab stop only where it overflows (the script's)
    assert len(boxes) == text.count("<table") >= 4  # each table in its box


def test_at_320_by_257_css_pixels_the_page_is_no_wider_than_the_screen(tmp_path, page):
    from conftest import browser_paths

    chromium, driver_path = browser_paths()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    (tmp_path / "r.html").write_text(page[0])
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=driver_path))
    try:
        driver.set_window_size(320, 257)
        driver.get((tmp_path / "r.html").as_uri())
        width, height = driver.execute_script("return [innerWidth, innerHeight]")
        driver.set_window_size(320 + (320 - width), 257 + (257 - height))  # the viewport, not the window, 320 x 257
        said = driver.execute_script(
            "var h = document.querySelector('header'); return [innerWidth, getComputedStyle(h).position, "
            "document.documentElement.scrollWidth, document.querySelector('.wide').scrollWidth > innerWidth];"
        )
        narrow = driver.execute_script(BOXES)
        driver.set_window_size(1900, 1000)
        wide = driver.execute_script(BOXES)
    finally:
        driver.quit()
    assert said == [320, "static", said[2], True] and said[2] <= 320  # a table wider than the screen, the page not
    for boxes in (narrow, wide):  # a tab stop and a region named by its caption where it overflows; else neither
        assert all(b == ([0, "region", b[3], b[3], True] if b[4] else [-1, None, None, b[3], False]) for b in boxes)
    assert any(b[4] for b in narrow) and not all(b[4] for b in wide)


# each table's box: its tabIndex, role and aria-labelledby, its caption's id, whether it overflows
BOXES = """return Array.from(document.querySelectorAll('div.wide')).map(function (b) {
  return [b.tabIndex, b.getAttribute('role'), b.getAttribute('aria-labelledby'), b.querySelector('caption').id,
          b.scrollWidth > b.clientWidth]; });"""


def contrast(a: str, b: str) -> float:
    """WCAG 2's contrast ratio of two #rgb or #rrggbb colours."""
    from dlperf.report.figure_style import luminance

    full = lambda c: "#" + "".join(2 * x for x in c[1:]) if len(c) == 4 else c  # noqa: E731
    low, high = sorted((luminance(full(a)) + 0.05, luminance(full(b)) + 0.05))
    return high / low


def test_every_text_colour_of_the_report_contrasts_4_5_to_1_with_its_background():
    """td.unsupported and td.oom (#8a9299, 3.16:1 on white) and td.pending (#a86b00, 4.40:1) were below 4.5:1."""
    from dlperf.report.html_page import CSS

    rules = re.findall(r"([^{}]+)\{([^{}]*)\}", CSS)
    colour = lambda decls, name: (re.findall(rf"(?:^|;){name}:(#[0-9a-fA-F]{{3,6}})\b", decls) or [None])[0]  # noqa: E731
    body = colour(dict((s.strip(), d) for s, d in rules)["body"], "color")
    pairs = []
    for selector, decls in rules:
        text, ground = colour(decls, "color"), colour(decls, "background")
        if text or ground:  # a colour on white, or the body's text on a background of its own
            pairs.append((selector.strip(), text or body, ground or "#fff"))
    assert len(pairs) >= 10 and {"td.pending", "td.unsupported,td.oom", "footer", "#tip"} <= {s for s, _, _ in pairs}
    low = {s: round(contrast(t, g), 2) for s, t, g in pairs if contrast(t, g) < 4.5}
    assert low == {}
    assert contrast("#8a9299", "#fff") < 4.5 and contrast("#000", "#fff") == pytest.approx(21.0)  # the measure itself
