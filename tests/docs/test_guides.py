"""The guides cannot rot: every shell block of docs/**/*.md marked runnable runs, on tiny workloads.

A block is marked by `<!-- runnable -->` on the line just before its ```` ```bash ```` fence. Its lines are commands
only (no `$ ` prompt, no output); each runs with `bash -e` in one scratch directory per page, in order, so a page's
later blocks see the store its earlier blocks wrote, with `DLPERF_DB` unset, this checkout's `dlperf` first on the
PATH and the session's DLPERF_DATA_DIR (where the frameworks' environments are). Each must exit 0, or the code its
line ends with (`# exit 1`). A line ending in `\\` goes on on the next one.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import ROOT

MARK = "<!-- runnable -->"
FENCE = re.compile(r"^```(?P<lang>\S*)\s*$")
EXPECTED = re.compile(r"#\s*exit\s+(?P<code>\d+)\s*$")
LINE_TIMEOUT_S = 300  # one command of a guide: tiny workloads, short timers


@dataclass(frozen=True)
class Command:
    text: str
    line: int  # where it starts in the page, from 1
    exit_code: int = 0


def runnable(text: str, page: str = "page") -> list[Command]:
    """The commands of a page's marked blocks, in order; a marker before anything but a ```bash fence, a fence never
    closed, or a `$ ` line in a marked block is a ValueError naming the page and the line."""
    lines, commands, i = text.splitlines(), [], 0
    while i < len(lines):
        if lines[i].strip() != MARK:
            i += 1
            continue
        fence = FENCE.match(lines[i + 1]) if i + 1 < len(lines) else None
        if fence is None or fence["lang"] != "bash":
            raise ValueError(f"{page}:{i + 1}: {MARK} must be followed by a ```bash fence")
        i, block = block_commands(lines, i + 2, page)
        commands += block
    return commands


def block_commands(lines: list[str], start: int, page: str) -> tuple[int, list[Command]]:
    """The commands of the block whose first line is `start`, and the index after its closing fence."""
    commands, pending, first = [], "", start
    for i in range(start, len(lines)):
        line = lines[i]
        if line.strip() == "```":
            if pending:
                raise ValueError(f"{page}:{first + 1}: a command continued past the end of its block")
            return i + 1, commands
        if line.startswith("$ "):
            raise ValueError(f"{page}:{i + 1}: a runnable block holds commands only, not a `$ ` prompt: {line!r}")
        if not pending:
            first = i
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        text, pending = (pending + line).strip(), ""
        if text and not text.startswith("#"):
            expected = EXPECTED.search(text)
            commands.append(Command(text, first + 1, int(expected["code"]) if expected else 0))
    raise ValueError(f"{page}:{start}: a runnable block never closed")


def pages() -> list[Path]:
    """Every page of the site with a marked block."""
    return [p for p in sorted((ROOT / "docs").rglob("*.md")) if MARK in p.read_text(encoding="utf-8")]


def checkout_bin(folder: Path) -> Path:
    """A folder holding `dlperf` and `python` that run this checkout's dlperf with this interpreter."""
    folder.mkdir()
    for name, line in (
        ("dlperf", f'exec "{sys.executable}" -m dlperf "$@"'),
        ("python", f'exec "{sys.executable}" "$@"'),
    ):
        script = folder / name
        script.write_text(f"#!/bin/sh\n{line}\n")
        script.chmod(0o755)
    return folder


def guide_env(bin_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "DLPERF_DB"}
    env["PATH"] = os.pathsep.join([str(bin_dir), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    return env


@pytest.mark.slow
@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT / "docs")))
def test_a_guides_runnable_commands_run(page, tmp_path):
    env, work = guide_env(checkout_bin(tmp_path / "bin")), tmp_path / "work"
    work.mkdir()
    commands = runnable(page.read_text(encoding="utf-8"), str(page.relative_to(ROOT)))
    for command in commands:
        done = subprocess.run(["bash", "-e", "-c", command.text], cwd=work, env=env, capture_output=True, text=True,
                              timeout=LINE_TIMEOUT_S, stdin=subprocess.DEVNULL)  # fmt: skip
        assert done.returncode == command.exit_code, (
            f"{page.relative_to(ROOT)}:{command.line}: {command.text!r} exited {done.returncode}, expected "
            f"{command.exit_code}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        )


PAGE = """# A guide

Shown, not run:

```bash
dlperf run  # a long real example
```

<!-- runnable -->
```bash
dlperf run --workloads tiny-fcn-r --threads 1 --max-time 1
# a comment line is not a command

dlperf compare 1 2  # exit 1
dlperf table --run 1 \\
    --format md
```

Output, not run:

```text
$ dlperf table
```
"""


def test_the_marked_blocks_commands_are_collected_and_the_rest_left_alone():
    assert runnable(PAGE) == [
        Command("dlperf run --workloads tiny-fcn-r --threads 1 --max-time 1", 11),
        Command("dlperf compare 1 2  # exit 1", 14, exit_code=1),
        Command("dlperf table --run 1      --format md", 15),
    ]


@pytest.mark.parametrize(
    ("page", "message"),
    [
        ("<!-- runnable -->\n```bash\n$ dlperf table\n```\n", r"page:3: .*`\$ ` prompt"),
        ("<!-- runnable -->\n```text\ndlperf table\n```\n", r"page:1: .*```bash fence"),
        ("<!-- runnable -->\n\n```bash\ndlperf table\n```\n", r"page:1: .*```bash fence"),
        ("<!-- runnable -->\n```bash\ndlperf table\n", r"never closed"),
        ("<!-- runnable -->\n```bash\ndlperf table \\\n```\n", r"continued past the end"),
    ],
)
def test_a_marked_block_that_is_not_commands_only_is_refused(page, message):
    with pytest.raises(ValueError, match=message):
        runnable(page)


def test_a_marked_command_runs_in_the_scratch_directory_with_this_checkouts_dlperf_and_no_dlperf_db(
    tmp_path, monkeypatch
):
    """What the slow test runs a guide's line with: the checkout's `dlperf` (its version), DLPERF_DB unset."""
    monkeypatch.setenv("DLPERF_DB", str(tmp_path / "elsewhere.db"))
    env = guide_env(checkout_bin(tmp_path / "bin"))
    line = 'dlperf --version && test -z "${DLPERF_DB:-}" && python -c "import dlperf; print(dlperf.__file__)"'
    done = subprocess.run(["bash", "-e", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    from dlperf.version import VERSION

    assert done.stdout.splitlines() == [f"dlperf {VERSION}", str(ROOT / "src/dlperf/__init__.py")]
