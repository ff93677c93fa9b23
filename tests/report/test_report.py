"""`dlperf report` and `dlperf plot` through the real command line, and the report in a real headless Chromium."""

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from conftest import browser_paths, dlperf, one_line_error
from dlperf.envinfo import capture, fingerprint
from dlperf.report.figure_style import PALETTE
from dlperf.report.format import table_seconds
from dlperf.store import Store
from report.pictures import assert_png_draws
from report.synthetic import ERROR, HOSTILE, add_profiles, fill

KNOWN = "fcn-r|torch|cpu|2|fp32"  # 0.45 s in the synthetic run


class Tags(HTMLParser):
    """Every start tag of a page, and the scripts' text."""

    def __init__(self):
        super().__init__()
        self.tags, self.scripts, self._in_script = [], [], False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag):
        self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts.append(data)


def report(tmp_path, report_db, *args):
    out = tmp_path / "r.html"
    done = dlperf("report", "-o", str(out), *args, db=report_db)
    assert done.returncode == 0, done.stderr
    return out.read_text()


def test_report_is_one_offline_file_with_every_section(tmp_path, report_db):
    page = report(tmp_path, report_db)
    tags = Tags()
    tags.feed(page)
    # self-contained: nothing is fetched, from a CDN or anywhere else
    for tag, attrs in tags.tags:
        for name in ("src", "href"):
            assert not attrs.get(name) or attrs[name].startswith("#"), (tag, attrs)
    assert len(tags.scripts) == 1  # ours: the tooltip
    ids = {attrs.get("id") for _, attrs in tags.tags}
    for section in ("table", "scaling", "variants", "ddp", "gpu", "utilization", "paper", "warnings", "environment"):
        assert section in ids
    charts = [attrs["data-chart"] for tag, attrs in tags.tags if tag == "figure"]
    assert charts == ["scaling-fcn-r", "scaling-script-alert-1-script", "variants-fcn-r", "gpu-speedup",
                      "utilization", "paper"]  # fmt: skip
    assert "arXiv:1608.07249" in page and "0.252 s (CNTK, server CPU, 16 threads)" in page
    assert "Test CPU &lt;v2&gt;" in page and "noisy: IQR is 12% of the median" in page


def test_names_and_errors_from_the_store_are_escaped(tmp_path, report_db):
    page = report(tmp_path, report_db)
    assert HOSTILE not in page and "<img" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    tags = Tags()
    tags.feed(page)
    assert [t for t, _ in tags.tags].count("script") == 1
    assert not any(name.startswith("on") for _, attrs in tags.tags for name in attrs)  # no injected handler


def test_an_unfinished_run_says_how_to_resume_it_in_the_same_database(report_db):
    from dlperf.report import html, load

    store = Store.open(report_db, create=False)
    store.conn.execute("UPDATE runs SET status = 'interrupted'")
    store.conn.commit()
    store.close()
    said = html.render(load.load(str(report_db)))  # the synthetic store's machine is not this one
    assert "it was measured on another machine, testhost · Test CPU" in said
    assert "continue it there with `dlperf run --resume` and this store" in said
    store = Store.open(report_db, create=False)
    store.conn.execute("UPDATE runs SET fingerprint_json = ?", (json.dumps(fingerprint(capture())),))
    store.conn.commit()
    store.close()
    assert f"continue it with dlperf run --resume --db {report_db}" in html.render(load.load(str(report_db)))


def test_a_run_whose_process_is_gone_is_stopped_and_a_searchs_run_is_searched_again_not_resumed(report_db):
    """A dlperf killed (SIGKILL, a lost terminal) leaves `running` stored: the report said "the run is running;
    continue it with ...", as `dlperf table` now does not (store/state.py)."""
    import json

    from dlperf.report import html, load

    store = Store.open(report_db, create=False)
    store.conn.execute("UPDATE runs SET status = 'running'")  # no lease: no live process holds it
    store.conn.commit()
    page = " ".join(html.render(load.load(str(report_db))).split())
    assert "unfinished (stopped: its process is gone)" in page and "the run is running" not in page
    env = {**store.run(None).env, "made_by": "fit"}
    store.conn.execute("UPDATE runs SET env_json = ?", (json.dumps(env),))
    store.conn.commit()
    store.close()
    page = " ".join(html.render(load.load(str(report_db))).split())
    assert "a `dlperf fit` search&#x27;s run: run the search again" in page and "--resume" not in page


def test_report_of_several_runs_and_bad_input(tmp_path, report_db):
    store = Store.open(report_db, create=False)
    fill(store, seed=1)
    store.close()
    store = Store.open(report_db, create=False)
    store.conn.execute("UPDATE runs SET status = 'interrupted', started_at = '2026-01-01T00:00:00' WHERE id = 1")
    store.conn.commit()
    store.close()
    page = report(tmp_path, report_db, "--run", "1,2")
    assert "Runs 1, 2" in page and "run 2" in page
    # the latest run's status and start were the header's, for all: "complete" where run 1 was interrupted
    [summary] = re.findall(r'<p class="summary">(.*?)</p>', page)
    assert summary.startswith("Runs 1, 2 · interrupted (run 1), complete (run 2) · started 2026-01-01T00:00:00 to ")
    one_line_error(dlperf("report", "--run", "9", "-o", str(tmp_path / "x.html"), db=report_db), "--run 9: no such run")
    one_line_error(dlperf("report", "--run", "x", "-o", str(tmp_path / "x.html"), db=report_db), "--run 'x'")
    missing_dir = dlperf("report", "-o", str(tmp_path / "no" / "r.html"), db=report_db)
    one_line_error(missing_dir, "directory", "does not exist")
    assert not (tmp_path / "x.html").exists()


def test_runs_of_two_machines_are_not_mixed_in_one_report_and_the_refusal_names_what_differs(tmp_path, report_db):
    """A hostname alone differs too (two Ray nodes, two VMs of one kind: one picture of the latest cells would hide
    one); the refusal said only "different machines", where the runs may differ by a hostname, a CPU or a version."""
    from report.synthetic import ENV

    store = Store.open(report_db, create=False)
    fill(store, env={**ENV, "hostname": "elsewhere"})
    fill(store, env={**ENV, "cpu": {**ENV["cpu"], "model": "Other CPU"}})
    store.close()
    done = dlperf("report", "--run", "1,2", "-o", str(tmp_path / "x.html"), db=report_db)
    one_line_error(done, "different machines or software (run 1 -> 2: hostname testhost -> elsewhere)")
    done = dlperf("report", "--run", "1,3", "-o", str(tmp_path / "y.html"), db=report_db)
    one_line_error(done, "different machines or software (run 1 -> 3: CPU model Test CPU <v2> -> Other CPU)",
                   "dlperf compare")  # fmt: skip


def test_a_merged_run_says_where_it_came_from(tmp_path, report_db):
    from dlperf.store.merge import merge

    target = tmp_path / "all.db"
    merge([str(report_db)], str(target))
    page = report(tmp_path, target)
    assert f"merged from run 1 of {report_db.resolve()}" in page


def test_a_ray_nodes_run_names_its_node_and_is_not_said_merged():
    """Two nodes' runs of one `dlperf run --ray` sweep, on one host: both reports' headings read the same machine,
    and run 2's Environment said "merged from run 1 of ray:3959d55b...", as if copied from this file's run 1."""
    from types import SimpleNamespace

    from dlperf.report import html
    from dlperf.store.records import Origin

    node, file = Origin("ray:" + "3959d55b" * 7, 1), Origin("/x/all.db", 4, None, Origin("ray:" + "aab62dfa" * 7, 2))
    run = SimpleNamespace(id=2, started_at="2026-12-06T23:30:45", status="complete", argv=["dlperf"], origin=node)
    heading = html._run_heading(run)
    assert "merged" not in heading and "measured by Ray node 3959d55b (dlperf run --ray)" in heading
    assert html._node(run) == " (Ray node 3959d55b)"
    merged = html._run_heading(SimpleNamespace(**{**vars(run), "origin": file}))
    assert "merged from run 4 of /x/all.db; measured by Ray node aab62dfa" in merged


class Section(HTMLParser):
    """One section of a page: its start tags, and the text of its SVG `<text>` elements (a chart's labels)."""

    def __init__(self, section_id):
        super().__init__()
        self.id, self.depth, self.tags, self.texts, self._in_text = section_id, 0, [], [], False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "section" and attrs.get("id") == self.id:
            self.depth = 1
        elif tag == "section" and self.depth:
            self.depth += 1
        if self.depth:
            self.tags.append((tag, attrs))
            self._in_text = tag == "text"

    def handle_endtag(self, tag):
        self._in_text = False
        if tag == "section" and self.depth:
            self.depth -= 1

    def handle_data(self, data):
        if self._in_text and data.strip():
            self.texts.append(data.strip())


def profiled_db(tmp_path, report_db) -> list[str]:
    """The synthetic run with its profiles and their traces in tmp_path/traces; returns the traces' paths."""
    (tmp_path / "traces").mkdir()
    store = Store.open(report_db, create=False)
    try:
        return add_profiles(store, 1, tmp_path / "traces")
    finally:
        store.close()


def test_where_the_time_goes_has_a_bar_per_profiled_cell_its_verdict_and_its_trace(tmp_path, report_db):
    without, page = Section("profile"), report(tmp_path, report_db)
    without.feed(page)
    assert without.tags == [] and 'href="#profile"' not in page  # no profiles, no section

    traces = profiled_db(tmp_path, report_db)
    section, page = Section("profile"), report(tmp_path, report_db)
    section.feed(page)
    assert [a["data-chart"] for t, a in section.tags if t == "figure"] == ["profile"]
    bars = {a["data-tip"].splitlines()[1] for t, a in section.tags if t == "g" and "data-tip" in a}
    assert bars == {"fcn-r cpu:2 torch fp32", "fcn-r cpu:2 torch bf16"}  # the unsupported profile has no bar
    names = [t for t in section.texts if t.startswith("fcn-r")]
    assert names == ["fcn-r cpu:2 fp32 (0.450 s)", "fcn-r cpu:2 bf16 (0.200 s)"]
    assert {"compute-bound (highly)", "launch-bound (highly)", "matmul", "host"} <= set(section.texts)
    links = [a["href"] for t, a in section.tags if t == "a" and a.get("class") == "trace"]
    assert links == ["traces/fcn-r_torch_cpu_2_fp32.json.gz", "traces/fcn-r_torch_cpu_2_bf16.json.gz"]
    assert [str(tmp_path / href) for href in links] == traces  # relative to the report, which is in tmp_path
    assert "profile unsupported" in page and "ui.perfetto.dev" in page and "launch-bound (highly)" in page


def test_a_trace_link_without_the_reports_place_is_a_file_url_and_a_missing_trace_is_named(tmp_path):
    from dlperf.report.html import _trace_link

    trace = tmp_path / "a b.json.gz"
    trace.write_bytes(b"")
    assert f'href="{trace.as_uri()}"' in _trace_link(str(trace), None)
    assert _trace_link(str(tmp_path / "gone.json.gz"), tmp_path / "r.html").endswith("gone.json.gz (not found)")


@pytest.mark.parametrize(
    ("kind", "charts"),
    [("scaling", 2), ("variants", 1), ("gpu", 1), ("utilization", 1), ("paper", 1)],  # scaling: fcn-r and HOSTILE's
)
def test_plot_each_kind(tmp_path, report_db, kind, charts):
    out = tmp_path / f"{kind}.png"
    done = dlperf("plot", kind, "-o", str(out), db=report_db)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"wrote {out} ({charts} chart{'s' if charts > 1 else ''})\n"
    # each chart 960 x 600 at the default 150 dpi; the first series in the palette's first colour, in each of two
    # charts of lines side by side
    # utilization: one lying bar per cell, 9 inches wide; a chart of lines or bars wider by its legend, beside its axes
    size = (1350, 600) if kind == "utilization" else (960, 600)
    if kind == "scaling":
        size = (round(150 * (6.4 + 0.7 + 0.06 * len("ideal scaling"))), 600)
    beside = kind in ("variants", "gpu", "paper")
    assert_png_draws(out, charts, colours=[PALETTE[0].lower()], columns=charts, chart_px=size, legend_beside=beside)


def test_plot_profile_draws_a_bar_per_profiled_cell_and_says_when_none_was(tmp_path, report_db):
    svg = tmp_path / "profile.svg"
    one_line_error(dlperf("plot", "profile", "-o", str(svg), db=report_db), "no cell was profiled")
    assert not svg.exists()
    profiled_db(tmp_path, report_db)
    assert dlperf("plot", "profile", "-o", str(svg), db=report_db).returncode == 0
    drawn = svg.read_text()
    assert "Where the time goes" in drawn and "fcn-r cpu:2 bf16 (0.200 s)" in drawn and "launch-bound" in drawn


def test_plot_bad_input(tmp_path, report_db):
    one_line_error(dlperf("plot", "scaling", "-o", str(tmp_path / "x.jpg"), db=report_db), "-o", "x.jpg")
    done = dlperf("plot", "scaling", "--workloads", "nope", "-o", str(tmp_path / "x.svg"), db=report_db)
    one_line_error(done, "--workloads nope", "fcn-r")
    done = dlperf("plot", "paper", "--workloads", "lstm", "-o", str(tmp_path / "x.svg"), db=report_db)
    one_line_error(done, "nothing to draw")
    assert not list(tmp_path.glob("x.*"))
    svg = tmp_path / "one.svg"
    assert dlperf("plot", "scaling", "--workloads", "fcn-r", "-o", str(svg), db=report_db).returncode == 0
    assert "fcn-r: thread scaling" in svg.read_text() and HOSTILE not in svg.read_text()


# ----------------------------------------------------------------------------------------------------------------------
# In a real browser


@pytest.fixture
def browser():
    chromium, driver_path = browser_paths()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--disable-default-apps",
                 "--disable-extensions", "--disable-sync", "--no-first-run", "--window-size=1400,1000"):  # fmt: skip
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=driver_path))
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def test_report_in_headless_chromium(tmp_path, report_db, browser):
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    report(tmp_path, report_db)
    browser.get((tmp_path / "r.html").as_uri())

    errors = [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
    assert errors == []
    with pytest.raises(NoAlertPresentException):  # the hostile workload name ran nothing
        _ = browser.switch_to.alert.text
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0  # offline

    figures = browser.find_elements(By.CSS_SELECTOR, "figure.chart")
    assert len(figures) == 6
    for figure in figures:  # every chart rendered: a sized SVG, every hoverable element drawn
        svg = figure.find_element(By.TAG_NAME, "svg")
        assert svg.size["width"] > 200 and svg.size["height"] > 100, figure.get_attribute("data-chart")
        marks = figure.find_elements(By.CSS_SELECTOR, "g.tip")
        assert len(marks) == int(figure.get_attribute("data-points")) > 0
        assert all(m.size["width"] > 0 and m.size["height"] > 0 for m in marks)

    known = browser.find_element(By.CSS_SELECTOR, f'td[data-key="{KNOWN}"]')
    assert known.text == table_seconds(0.45) + "* n=40 (20%)"
    cells = [td.text for td in browser.find_elements(By.CSS_SELECTOR, "table.table7 td, table.table7 tbody th")]
    assert HOSTILE in cells  # shown as text, in its row's header
    assert any(ERROR in row.text for row in browser.find_elements(By.CSS_SELECTOR, "table.warnings tr"))

    tip = browser.find_element(By.ID, "tip")
    assert not tip.is_displayed()
    point = browser.find_element(By.CSS_SELECTOR, "#chart-scaling-fcn-r g.tip")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", point)
    ActionChains(browser).move_to_element(point).perform()
    assert tip.is_displayed()
    assert re.search(r"median \S+ s · IQR \S+ ms · n 40\nbar \S+ s to \S+ s: the median of the processes' "
                     r"quartiles\n2 processes · run 1", tip.text), tip.text  # fmt: skip
    ActionChains(browser).move_to_element(known).perform()
    assert "fcn-r cpu:2 torch fp32" in tip.text
    assert browser.get_log("browser") == []  # hovering logged nothing either


@pytest.mark.slow  # 6 s; the browser's fast test: test_report_in_headless_chromium
def test_a_campaign_in_headless_chromium(tmp_path, browser):
    """The campaign section (report/fleet.py) renders: a column group per machine, the fastest machine's cell marked."""
    from selenium.webdriver.common.by import By

    from report.campaign import make_lab

    db = make_lab(tmp_path / "lab.db")
    report(tmp_path, db, "--campaign", "lab")
    browser.get((tmp_path / "r.html").as_uri())
    assert [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "ERROR")] == []
    section = browser.find_element(By.ID, "campaign")
    groups = section.find_elements(By.CSS_SELECTOR, "table.fleet th.machine")
    assert [g.get_attribute("colspan") for g in groups] == ["1", "2"] and all(g.is_displayed() for g in groups)
    [best] = section.find_elements(By.CSS_SELECTOR, "td.best")
    assert best.text.startswith("10.0 ms (cuda:0; predicted 12.5 ms") and best.size["width"] > 0
    assert "not told apart" in section.text


@pytest.mark.slow  # 4-10 s; the browser's fast test: test_report_in_headless_chromium
def test_where_the_time_goes_in_headless_chromium(tmp_path, report_db, browser):
    from selenium.webdriver.common.by import By

    traces = profiled_db(tmp_path, report_db)
    report(tmp_path, report_db)
    browser.get((tmp_path / "r.html").as_uri())
    assert [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "ERROR")] == []
    figure = browser.find_element(By.CSS_SELECTOR, "#profile figure.chart")
    svg = figure.find_element(By.TAG_NAME, "svg")
    assert svg.size["width"] > 300 and svg.size["height"] > 100
    marks = figure.find_elements(By.CSS_SELECTOR, "g.tip")
    assert len(marks) == int(figure.get_attribute("data-points")) > 0
    assert all(m.size["width"] > 0 and m.size["height"] > 0 for m in marks)
    links = browser.find_elements(By.CSS_SELECTOR, "#profile a.trace")
    assert [a.get_property("href") for a in links] == [Path(t).as_uri() for t in traces]  # they reach the files


def test_the_command_line_loads_no_plotting_or_statistics_library():
    """`dlperf --help` stays fast: matplotlib, numpy and scipy load only when a view draws or tests."""
    import subprocess
    import sys

    code = (
        "import sys, dlperf.cli;"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'matplotlib', 'numpy', 'scipy'}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_the_reports_table_says_which_framework_versions_measured_it_and_from_which_environment():
    # `dlperf table` printed "measured with: jax 0.10.2 (its own environment, ...)" under the table; the report's
    # table did not, and its Environment section named versions but not the environment each framework came from
    from types import SimpleNamespace

    from conftest import make_cell
    from dlperf.report import html
    from dlperf.report.load import Loaded
    from dlperf.store.records import Provenance

    versions = (("torch", 0.4, "2.13.0+cpu", "dlperf"), ("jax", 0.1, "0.10.2", "/envs/jax"))
    cells = [
        make_cell(framework=fw, median_s=m, n=9, provenance=Provenance(fw, v, None, e)) for fw, m, v, e in versions
    ]
    data = Loaded("x.db", [SimpleNamespace(id=1)], cells, {}, False, [])
    page = html._table7(data)
    assert (
        "measured with: torch 2.13.0+cpu (dlperf&#x27;s environment); jax 0.10.2 (its own environment, /envs/jax)"
        in page
    )
