"""A newcomer's questions, each one click from the README to the page that answers it with a command to run. The
README and the home page asked whether a fused optimizer helps, and the page they led to showed bf16,
channels-last and compile for a model of yours, the optimizer's implementations only in the modes table."""

from __future__ import annotations

import re

import pytest

from conftest import ROOT

QUESTIONS = {
    "is a GPU worth it, which one, will it fit, what will it cost": (
        "docs/guides/gpu.md",
        ["dlperf advise examples/my_model.py:make --samples", "--memory", "--cost"],
    ),
    "how many CPU threads": ("docs/guides/own-model.md", ["### How many threads should it use?", "--repeats 3"]),
    "do bf16, compile, channels-last or a fused optimizer help my model": (
        "docs/guides/optimize.md",
        ["--modes fp32,bf16,channels_last,compile", "--modes fp32,foreach,fused"],
    ),
    "which framework is fastest": ("docs/guides/frameworks.md", ["dlperf run --frameworks torch,jax,tensorflow,mxnet"]),
    "where does the time go, and why": ("docs/guides/profile.md", ["dlperf profile examples/my_model.py", "verdict"]),
    "is my input pipeline holding training back": ("docs/guides/data.md", ["dlperf run --workloads tiny-fcn-r --data"]),
    "a sweep over several machines": ("docs/guides/parallel.md", ["dlperf run --ray auto"]),
    "interrupted: what is kept, how to go on": ("docs/concepts/store.md", ["dlperf run --resume", "Ctrl-C"]),
}


@pytest.mark.parametrize("question", QUESTIONS)
def test_the_readme_links_the_page_that_answers_it_with_its_commands(question):
    page, commands = QUESTIONS[question]
    assert f"]({page}" in (ROOT / "README.md").read_text(), f"README.md does not link {page}"
    text = re.sub(r"[ \t]*\n[ \t]*", " ", (ROOT / page).read_text())
    missing = [command for command in commands if command not in text]
    assert not missing, f"{page} ({question}) does not show {missing}"


def test_the_home_pages_question_names_what_its_page_shows():
    row = next(line for line in (ROOT / "docs" / "index.md").read_text().splitlines() if "Which settings" in line)
    assert "a fused optimizer" in row and "torch.compile" in row
