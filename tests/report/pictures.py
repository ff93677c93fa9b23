"""What a drawn file holds, read back for the tests: a PNG's size and the series' colours in it, an SVG's axes, their
text and markers, a PDF's pages and text. A file's header alone would pass an empty canvas.

`figures.save` lays charts out in a grid of two columns (one column for one chart), 4 inches high a row; a chart of
lines is 6.4 inches wide (`figures._size`), so at 150 dpi a chart of lines is 960 x 600 pixels.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
import zlib
from pathlib import Path

SVG = "{http://www.w3.org/2000/svg}"


def grid(charts: int) -> tuple[int, int]:
    """(columns, rows) of `figures.save`'s grid."""
    cols = 1 if charts == 1 else 2
    return cols, math.ceil(charts / cols)


def png_colours(path: Path, colours: list[str], columns: int = 1) -> tuple[tuple[int, int], float, list[list[float]]]:
    """The PNG's size, the share of its pixels that are not white (axes, text, data), and for each of `columns`
    equal strips from left to right the share of its pixels of exactly each of `colours` (the inside of an opaque
    line, marker or bar: antialiased edges and the ideal lines, drawn translucent, do not count)."""
    from PIL import Image

    image = Image.open(path).convert("RGB")
    width, height = image.size
    inked = sum(image.convert("L").histogram()[:240]) / (width * height)
    strips = []
    for k in range(columns):
        strip = image.crop((k * width // columns, 0, (k + 1) * width // columns, height))
        counts = {rgb: n for n, rgb in strip.getcolors(strip.width * strip.height)}
        strips.append([counts.get(_rgb(c), 0) / (strip.width * strip.height) for c in colours])
    return image.size, inked, strips


def assert_png_draws(path: Path, charts: int, colours: list[str], columns: int = 1, chart_px=(960, 600),
                     legend_beside: bool = False) -> None:  # fmt: skip
    """A PNG of `charts` charts of `chart_px` pixels each in `figures.save`'s grid, inked (2% of its pixels or more)
    and with each of `colours` drawn in each of `columns` strips (0.05% of a strip or more: one line of two points is
    about 0.3% of a chart of lines). `legend_beside`: a chart of lines whose legend stands beside its axes, the figure
    wider by the legend's width (its entries' text), so at least `chart_px` wide."""
    cols, rows = grid(charts)
    size, inked, strips = png_colours(path, colours, columns)
    if legend_beside:
        assert size[0] >= cols * chart_px[0] and size[1] == rows * chart_px[1], size
    else:
        assert size == (cols * chart_px[0], rows * chart_px[1]), size
    assert inked > 0.02, f"{inked:.1%} of the picture inked"
    for k, shares in enumerate(strips):
        assert min(shares) > 0.0005, f"strip {k + 1} of {columns}: {dict(zip(colours, shares, strict=True))}"


def _rgb(colour: str) -> tuple[int, int, int]:
    return tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))


def svg_axes(path: Path) -> list[dict]:
    """Each axes of a matplotlib SVG: its text, the colours its paths and markers are filled or stroked with (black,
    white and greys left out: frames, ticks and grid), and the x positions of its coloured markers outside the legend
    (the data points, their error caps at the same x)."""
    root = ET.parse(path).getroot()
    found = []
    for axes in (g for g in root.iter(f"{SVG}g") if (g.get("id") or "").startswith("axes_")):
        legend = {id(e) for g in axes.iter(f"{SVG}g") if (g.get("id") or "").startswith("legend_") for e in g.iter()}
        texts = ["".join(t.itertext()) for t in axes.iter(f"{SVG}text")]
        drawn = [e for e in axes.iter() if e.tag in (f"{SVG}path", f"{SVG}use")]
        colours = {c for e in drawn for c in re.findall(r"(?:fill|stroke): (#[0-9a-f]{6})", e.get("style") or "")}
        markers = {float(e.get("x")) for e in drawn if e.tag == f"{SVG}use" and id(e) not in legend
                   and not _grey(re.search(r"#[0-9a-f]{6}", e.get("style") or "#000000").group())}  # fmt: skip
        found.append({"texts": texts, "colours": {c for c in colours if not _grey(c)}, "marker_xs": sorted(markers)})
    return found


def _grey(colour: str) -> bool:
    return max(_rgb(colour)) - min(_rgb(colour)) < 16


def pdf_pages(path: Path) -> tuple[int, list[str]]:
    """The number of pages of a matplotlib PDF, and the strings its content streams draw (TJ arrays, each joined, in
    their font's encoding)."""
    data = path.read_bytes()
    pages = len(re.findall(rb"/Type /Page\b", data))
    texts = []
    for stream in re.findall(rb"stream\r?\n(.*?)\r?\nendstream", data, re.S):
        try:
            content = zlib.decompress(stream)
        except zlib.error:  # a font program or an image, not page content
            continue
        for array in re.findall(rb"\[(.*?)\]\s*TJ", content, re.S):
            parts = re.findall(rb"\(((?:[^()\\]|\\.)*)\)", array)
            raw = re.sub(rb"\\(.)", rb"\1", b"".join(parts))
            # a TrueType font's text (pdf.fonttype 42) is two bytes a character, a Type 3 font's one
            texts.append(raw.decode("utf-16-be" if raw[:1] == b"\0" and len(raw) % 2 == 0 else "latin-1"))
    return pages, texts
