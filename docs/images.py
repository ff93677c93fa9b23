"""The documentation's pictures, made from one small run, never drawn by hand: `make docs-images`.

    python docs/images.py [--out DIR]      (default: docs/images)

In a temporary store it measures tiny workloads with short timers (a minute or two on 2 cores), then writes each
picture of `IMAGES` with dlperf's own commands: the HTML report's sections as screenshots in headless Chromium (found
as the report's browser test finds it: `chromium` and `chromedriver` on PATH, selenium installed), the charts of
`dlperf plot`, a profile's stacked bar (`dlperf plot profile`) and a crossover chart (`dlperf crossover --plot`).
Every PNG is shrunk with Pillow (a palette of 256 colours) so that all of them together stay a few hundred KB.

Everything is made in a temporary directory first and copied into DIR only when all of it was made: a failed step
leaves DIR as it was, and the script exits 1 with the step's command and its error output.

It lives beside the pages it illustrates, not under benchmarks/: its output is part of docs/, its list of images is
what the docs tests compare with docs/images/, and mkdocs.yml keeps it out of the site (exclude_docs).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "images"

# the small run behind every picture (each a command of dlperf, run with this checkout's sources)
THREADS = "1,2"
RUN = ["run", "--workloads", "tiny-fcn-r,tiny-resnet-56", "--threads", THREADS, "--modes", "fp32,bf16",
       "--max-time", "1"]  # fmt: skip
# one of the paper's networks at its batch, for the report's "Against the paper" (about 20 s: 1 s a step at 1 thread)
PAPER = ["run", "--workloads", "fcn-r", "--threads", "1", "--max-time", "1"]
PROFILE = ["profile", "tiny-alexnet-r", "--threads", THREADS, "--max-time", "1"]
PEAK = ["peak", "--threads", THREADS, "--dtypes", "fp32,bf16", "--sizes", "256,512", "--bandwidth-mib", "32",
        "--copies-mib", "0", "--max-time", "1"]  # fmt: skip
CROSSOVER = ["crossover", "tiny-fcn-r", "--batches", "1,16,256,1024,4096", "--threads", "1", "--max-time", "1"]

# each picture: its file name in docs/images, and what it shows (the guides' captions say the same, and which run)
REPORT_SECTIONS = {  # file name -> the report's <section id>
    "report-table.png": "table",
    "report-scaling.png": "scaling",
    "report-variants.png": "variants",
    "report-utilization.png": "utilization",
    "report-profile.png": "profile",
    "report-paper.png": "paper",
    "report-warnings.png": "warnings",
    "report-environment.png": "environment",
}
PLOTS = {
    "plot-scaling.png": "scaling",
    "plot-variants.png": "variants",
    "plot-utilization.png": "utilization",
    "plot-paper.png": "paper",
}
IMAGES = {
    "report-table.png": "the report's Table-7 view: seconds per mini-batch, per workload, mode and thread count",
    "report-scaling.png": "the report's thread scaling: each workload's step against the CPU threads",
    "report-variants.png": "the report's frameworks and modes: fp32 against bf16, and the best of each",
    "report-utilization.png": "the report's utilization: each cell's FLOP rate against this machine's measured peak",
    "report-profile.png": "the report's where the time goes: a profiled cell's bar, its verdict and its trace",
    "report-paper.png": "the report's against the paper: fcn-r here beside the paper's best CPU and GPU figures",
    "report-warnings.png": "the report's warnings: every disturbed, noisy or short cell, one line each",
    "report-environment.png": "the report's environment: the machine, the software and the command of each run",
    "plot-scaling.png": "dlperf plot scaling: step time against threads",
    "plot-variants.png": "dlperf plot variants: each mode's step side by side",
    "plot-utilization.png": "dlperf plot utilization: the share of the measured peak each cell reached",
    "plot-paper.png": "dlperf plot paper: this machine against Shi et al. (2016)",
    "profile-bar.png": "dlperf plot profile: each profiled step, 100% long, by kind of operator",
    "crossover.png": "dlperf crossover --plot: this CPU measured against GPUs predicted, by batch",
}
WIDTH = 1100  # the browser window's width in CSS pixels: the report's tables fit without wrapping much
MAX_HEIGHT = 900  # a section taller than this is cut here (the warnings and environment can run long)
DPI = "100"  # the plots' resolution: 640 x 400 pixels a chart of lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help=f"where the PNGs go (default: {OUT.relative_to(ROOT)})")
    out = parser.parse_args(argv).out
    chromium, driver = browser()
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="dlperf-docs-images-") as tmp:
        work = Path(tmp)
        made = work / "images"
        made.mkdir()
        try:
            make(work, made, chromium, driver)
        except Step as failed:
            print(f"docs/images.py: {failed}", file=sys.stderr)
            return 1
        missing = sorted(set(IMAGES) - {p.name for p in made.iterdir()})
        if missing:
            print(f"docs/images.py: not made: {', '.join(missing)}", file=sys.stderr)
            return 1
        out.mkdir(parents=True, exist_ok=True)
        for name in IMAGES:
            shutil.copyfile(made / name, out / name)
    sizes = {name: (out / name).stat().st_size for name in IMAGES}
    for name, size in sizes.items():
        print(f"{out / name}: {size / 1024:.0f} KiB")
    print(f"{len(sizes)} images, {sum(sizes.values()) / 1024:.0f} KiB in all, in {time.monotonic() - start:.0f} s")
    return 0


class Step(Exception):
    """A command that failed: what ran and what it said."""


def browser() -> tuple[str, str]:
    """(chromium, chromedriver), as tests/conftest.py's `browser_paths` finds them; exit 2 saying what is missing."""
    import importlib.util

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not (chromium and driver):
        sys.exit("docs/images.py: headless Chromium is not installed (Debian: apt install chromium chromium-driver)")
    if importlib.util.find_spec("selenium") is None or importlib.util.find_spec("PIL") is None:
        sys.exit("docs/images.py: selenium or Pillow is not installed (pip install -e '.[dev]')")
    return chromium, driver


def make(work: Path, made: Path, chromium: str, driver: str) -> None:
    db = str(work / "docs.db")
    dlperf(*PROFILE, "--db", db)
    dlperf(*PAPER, "--db", db)
    dlperf(*RUN, "--db", db)
    dlperf(*PEAK, "--db", db)
    report = work / "report.html"
    dlperf("report", "--run", "all", "-o", str(report), "--db", db)
    for name, kind in PLOTS.items():
        dlperf("plot", kind, "--run", "all", "--dpi", DPI, "-o", str(made / name), "--db", db)
    dlperf("plot", "profile", "--run", "all", "--dpi", DPI, "-o", str(made / "profile-bar.png"), "--db", db)
    # its own store: the crossover's batches are cells of their own that would crowd the report's table
    dlperf(*CROSSOVER, "--plot", str(made / "crossover.png"), "--db", str(work / "crossover.db"))
    screenshots(report, made, chromium, driver)
    for png in made.iterdir():
        shrink(png)


def dlperf(*args: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    env.pop("DLPERF_DB", None)
    command = [sys.executable, "-m", "dlperf", *args]
    print("dlperf " + " ".join(args), flush=True)
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise Step(f"`dlperf {' '.join(args)}` exited {done.returncode}:\n{done.stderr[-3000:]}")


def screenshots(report: Path, made: Path, chromium: str, driver: str) -> None:
    """Each section of `REPORT_SECTIONS`, as the browser draws it, the page's sticky header made static so that it
    covers nothing."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--disable-default-apps",
                 "--disable-extensions", "--disable-sync", "--no-first-run", "--hide-scrollbars",
                 "--force-device-scale-factor=1", f"--window-size={WIDTH},{MAX_HEIGHT + 200}"):  # fmt: skip
        options.add_argument(flag)
    browser = webdriver.Chrome(options=options, service=Service(executable_path=driver))
    try:
        browser.set_page_load_timeout(60)
        browser.get(report.as_uri())
        browser.execute_script("document.querySelector('header').style.position = 'static'")
        for name, section in REPORT_SECTIONS.items():
            element = browser.find_element(By.ID, section)
            browser.execute_script("arguments[0].scrollIntoView()", element)
            (made / name).write_bytes(element.screenshot_as_png)
    finally:
        browser.quit()


def shrink(png: Path) -> None:
    """The PNG cut to `MAX_HEIGHT` pixels and saved with a palette of 256 colours, optimised. The palette holds the
    profile's category colours and the series' palette as they are (`report.figures.CATEGORY_COLORS`,
    `report.figure_style.PALETTE`) and the rest median-cut: cut alone, it merged a colour few pixels have into a
    neighbour's (report-profile.png's "copy" came out orange, not olive)."""
    from PIL import Image

    from dlperf.report.figure_style import PALETTE
    from dlperf.report.figures import CATEGORY_COLORS

    with Image.open(png) as image:
        image = image.convert("RGB")
        if image.height > MAX_HEIGHT and png.name.startswith("report-"):
            image = image.crop((0, 0, image.width, MAX_HEIGHT))
    colours = dict.fromkeys([*CATEGORY_COLORS.values(), *PALETTE])
    kept = [value for colour in colours for value in bytes.fromhex(colour[1:])]
    cut = image.quantize(colors=256 - len(kept) // 3, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    rest = cut.getpalette()[: 3 * len(cut.getcolors())]
    palette = Image.new("P", (1, 1))
    palette.putpalette(rest + kept)
    image.quantize(palette=palette, dither=Image.Dither.NONE).save(png, optimize=True)


if __name__ == "__main__":
    sys.exit(main())
