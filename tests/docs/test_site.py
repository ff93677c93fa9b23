"""The documentation site builds strictly (a broken link, a missing page or any other warning fails it) and offline,
with the generated pages filled in: what `make docs` and CI run."""

import os
import subprocess

import pytest

from conftest import ROOT, docs_tools


@pytest.mark.slow  # 6 s; CI builds the site strictly too (make docs)
def test_the_site_builds_strictly_with_no_warning_and_the_generated_pages_filled(tmp_path):
    mkdocs = docs_tools()
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=240)  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    assert "WARNING" not in done.stderr, done.stderr[-4000:]
    site = tmp_path / "site"
    cli = (site / "reference/cli/index.html").read_text()
    assert "dlperf crossover" in cli and "--max-time" in cli and "dlperf:cli" not in cli
    assert "INTERRUPTED" in (site / "reference/exit-codes/index.html").read_text()
    assert "median_s" in (site / "reference/export/index.html").read_text()
    assert "user_workload" in (site / "reference/api/index.html").read_text()
    assert "The backend interface" in (site / "architecture/index.html").read_text()


@pytest.mark.slow  # 4-9 s
def test_a_broken_link_fails_the_strict_build(tmp_path):
    """The same configuration over a copy of docs/ where one page links a page that does not exist."""
    import shutil

    mkdocs = docs_tools()
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    with open(tmp_path / "docs/reference/exit-codes.md", "a") as page:
        page.write("\nSee [the missing page](missing.md).\n")
    config = tmp_path / "mkdocs.yml"
    config.write_text(f"INHERIT: {ROOT / 'mkdocs.yml'}\ndocs_dir: {tmp_path / 'docs'}\n"
                      f"hooks: [{ROOT / 'docs/hooks/generated.py'}]\n")  # fmt: skip
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([mkdocs, "build", "--strict", "-f", str(config), "--site-dir", str(tmp_path / "site")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)  # fmt: skip
    assert done.returncode != 0
    assert "missing.md" in done.stderr and "WARNING" in done.stderr, done.stderr[-4000:]


def test_without_mkdocs_the_site_tests_skip_saying_why_or_fail_where_docs_is_required(monkeypatch):
    import importlib.util

    import pytest

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "mkdocs" else real(name, *a))
    monkeypatch.setenv("DLPERF_REQUIRE", "torch")
    with pytest.raises(pytest.skip.Exception, match=r"pip install -e '\.\[docs\]'"):
        docs_tools()
    monkeypatch.setenv("DLPERF_REQUIRE", "torch,docs")
    with pytest.raises(pytest.fail.Exception, match="DLPERF_REQUIRE lists it"):
        docs_tools()
