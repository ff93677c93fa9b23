"""The documentation's pictures: every image a page shows exists (a missing one fails the strict build, and the README
is read on GitHub too), the files in docs/images are exactly those `docs/images.py` makes, each shown somewhere, and
the script itself makes them all from its small run (slow: about a minute and a half on 2 cores, in headless Chromium).
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, browser_paths

IMAGE_LINK = re.compile(r"!\[[^\]]*\]\((?P<path>[^)\s]+)(?:\s+\"[^\"]*\")?\)")
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def script():
    """docs/images.py as a module (docs/ is not a package)."""
    spec = importlib.util.spec_from_file_location("docs_images", ROOT / "docs" / "images.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def shown() -> dict[Path, list[str]]:
    """Each image the pages show (Markdown `![...](path)`, not a URL), from its page: the pages showing it."""
    found: dict[Path, list[str]] = {}
    for page in PAGES:
        for match in IMAGE_LINK.finditer(page.read_text()):
            if "://" not in match["path"]:
                target = (page.parent / match["path"].split("#")[0]).resolve()
                found.setdefault(target, []).append(str(page.relative_to(ROOT)))
    return found


def test_every_image_a_page_shows_exists():
    missing = {str(p.relative_to(ROOT)): pages for p, pages in shown().items() if not p.is_file()}
    assert missing == {}


def test_the_committed_images_are_the_scripts_list_each_shown_on_a_page_and_small():
    images = script().IMAGES
    committed = sorted(p.name for p in (ROOT / "docs" / "images").iterdir())
    assert committed == sorted(images)
    unshown = [name for name in images if (ROOT / "docs" / "images" / name).resolve() not in shown()]
    assert unshown == []
    sizes = {name: (ROOT / "docs" / "images" / name).stat().st_size for name in images}
    assert max(sizes.values()) < 120_000 and sum(sizes.values()) < 500_000, sizes


def test_an_image_link_is_found_in_a_page_with_a_title_and_not_in_a_url():
    text = 'a ![The table](../images/report-table.png "run 2") and ![remote](https://x.org/a.png)'
    assert [m["path"] for m in IMAGE_LINK.finditer(text)] == ["../images/report-table.png", "https://x.org/a.png"]


@pytest.mark.slow
def test_the_script_makes_every_image_from_its_small_run(tmp_path):
    browser_paths()  # skips saying why where headless Chromium is missing; fails where DLPERF_REQUIRE lists chromium
    from PIL import Image

    done = subprocess.run([sys.executable, str(ROOT / "docs" / "images.py"), "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(script().IMAGES)
    for png in tmp_path.iterdir():
        with Image.open(png) as image:
            assert image.format == "PNG" and image.width >= 600 and image.height >= 200, (png.name, image.size)
            grey = image.convert("L")
            assert sum(grey.histogram()[:200]) > 0.01 * image.width * image.height, f"{png.name} is blank"
    assert re.search(rf"{len(script().IMAGES)} images, \d+ KiB in all, in \d+ s", done.stdout), done.stdout


def test_a_failed_step_leaves_the_output_folder_as_it_was(tmp_path, monkeypatch, capsys):
    """A dlperf command of the run that fails: exit 1 naming it, and nothing copied into --out."""
    images = script()
    monkeypatch.setattr(images, "browser", lambda: ("chromium", "chromedriver"))
    monkeypatch.setattr(images, "PROFILE", ["run", "--workloads", "no-such-workload"])  # the first step
    out = tmp_path / "out"
    out.mkdir()
    (out / "kept.png").write_bytes(b"x")
    assert images.main(["--out", str(out)]) == 1
    assert "`dlperf run --workloads no-such-workload --db" in capsys.readouterr().err
    assert [p.name for p in out.iterdir()] == ["kept.png"]


def test_shrinking_keeps_a_category_colour_few_pixels_have(tmp_path):
    """report-profile.png's "copy" swatch (olive, a few hundred pixels beside thousands of greys and blues) came out
    orange: the median cut merged it into a neighbour. Every category colour keeps its own entry of the palette."""
    from PIL import Image

    from dlperf.report.figures import CATEGORY_COLORS

    image = Image.new("RGB", (400, 300))
    for x in range(400):  # many colours, as a screenshot's text and anti-aliasing have
        for y in range(300):
            image.putpixel((x, y), (x % 256, y % 256, (x * y) % 256))
    olive = tuple(bytes.fromhex(CATEGORY_COLORS["copy"][1:]))
    for x in range(10):
        for y in range(10):
            image.putpixel((x, y), olive)
    png = tmp_path / "a.png"
    image.save(png)
    script().shrink(png)
    with Image.open(png) as shrunk:
        assert shrunk.mode == "P" and len(shrunk.getpalette()) <= 768
        assert shrunk.convert("RGB").getpixel((5, 5)) == olive
