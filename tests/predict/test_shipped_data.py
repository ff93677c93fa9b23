"""What the docs name is in the repository (issue 31): README and `predict --help` pointed at
shared/reference/gpu_dev.csv, which is not; the published measurements now ship as package data with their sources,
and `dlperf predict --validate` with no file reads them. README says how `dlperf` gets on PATH after `make run`."""

from __future__ import annotations

import argparse
import csv
import re

from conftest import ROOT
from dlperf.commands import predict
from dlperf.predict import validate
from dlperf.workloads import BUILTIN

README = (ROOT / "README.md").read_text()


def named_csv_files(text: str) -> set[str]:
    return set(re.findall(r"[\w./-]+/[\w.-]+\.csv", text))


def test_every_csv_file_the_readme_and_predict_help_name_is_in_the_repository():
    named = named_csv_files(README) | named_csv_files(predict.DESCRIPTION)
    assert "src/dlperf/data/gpu_dev.csv" in named
    assert sorted(p for p in named if not (ROOT / p).is_file()) == []


def test_validate_with_no_file_reads_the_shipped_measurements_each_with_its_source():
    parser = argparse.ArgumentParser()
    predict.add_arguments(parser)
    assert parser.parse_args(["--validate"]).validate is True
    assert parser.parse_args(["--validate", "mine.csv"]).validate == "mine.csv"
    assert parser.parse_args([]).validate is None
    shipped = validate.shipped()
    with open(shipped, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 225 and all(r["source"].strip() for r in rows)
    cases, skipped = validate.read(shipped, known=lambda name: name in BUILTIN)
    assert (len(cases), len(skipped)) == (209, 16)  # as BENCHMARKS.md's fit says


def test_the_readme_says_how_dlperf_gets_on_path_beside_the_two_commands():
    two_commands = README[README.index("## Two commands") : README.index("## What the table means")]
    assert ". .venv/bin/activate" in two_commands and ".venv/bin/dlperf" in two_commands
