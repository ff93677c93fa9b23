"""Every `dlperf` command the documentation shows parses as written: a flag renamed or removed, a choice or a command
gone, is a failure here, in the fast suite, not a reader's surprise. The runnable blocks (test_guides.py) run a few of
them for real; the rest (real-size sweeps, Ray clusters, GPUs) can at least be parsed by dlperf's own parser.

What counts as shown: each line of a ```sh or ```bash block of README.md and docs/**/*.md, and each `$ ` line of any
other fenced block (an output quoted with the command that printed it); a line ending in `\\` goes on on the next.
Shell words are split as the shell would (quotes, `#` comments, `&&`, `;`, `|`), `VAR=value` before a command is left
out, and `make run RUN_ARGS="..."` is `dlperf run` with those flags, as the Makefile runs it.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

import pytest

from conftest import ROOT
from dlperf.cli import build_parser
from dlperf.errors import UsageError

FENCE = re.compile(r"^\s*```(?P<lang>\S*)")
SHELL = {"sh", "bash", "shell"}
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


@dataclass(frozen=True)
class Example:
    page: str
    line: int
    args: tuple[str, ...]  # after `dlperf`

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: dlperf {shlex.join(self.args)}"


def shell_lines(text: str) -> list[tuple[int, str]]:
    """(line number, command line) of what a page shows being typed, continuations joined."""
    out, lang, inside, pending, first = [], "", False, "", 0
    for number, line in enumerate(text.splitlines(), 1):
        fence = FENCE.match(line)
        if fence:
            inside, lang = not inside, fence["lang"]
            continue
        if not inside:
            continue
        if lang not in SHELL:
            if not line.startswith("$ "):
                continue
            line = line[2:]
        if not pending:
            first = number
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        out.append((first, pending + line))
        pending = ""
    return out


def commands(line: str) -> list[list[str]]:
    """The simple commands of a shell line, each as its words: split at `&&`, `||`, `;` and `|`, comments dropped."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split, lexer.commenters = True, "#"
    out, words = [], []
    for token in lexer:
        if token and set(token) <= set(";&|"):
            out.append(words)
            words = []
        else:
            words.append(token)
    return [*out, words]


def dlperf_args(words: list[str]) -> tuple[str, ...] | None:
    """The arguments after `dlperf` of one command, or None where it runs no dlperf."""
    while words and ASSIGNMENT.match(words[0]):
        words = words[1:]
    if words[:2] == ["make", "run"]:
        run_args = [w.split("=", 1)[1] for w in words[2:] if w.startswith("RUN_ARGS=")]
        return ("run", *shlex.split(run_args[0])) if run_args else None
    if words and words[0].rsplit("/", 1)[-1] == "dlperf":
        return tuple(words[1:])
    return None


def examples(page: str, text: str) -> list[Example]:
    found = []
    for number, line in shell_lines(text):
        for words in commands(line):
            args = dlperf_args(words)
            if args is not None:
                found.append(Example(page, number, args))
    return found


def shown() -> list[Example]:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [e for p in pages for e in examples(str(p.relative_to(ROOT)), p.read_text(encoding="utf-8"))]


def test_every_dlperf_command_the_docs_show_parses_as_written():
    parser, shown_here = build_parser(), shown()
    assert len(shown_here) > 100  # the pages' examples were found, not silently none
    refused = []
    for example in shown_here:
        try:
            parser.parse_args(list(example.args))
        except UsageError as e:
            refused.append(f"{example}\n    {e}")
        except SystemExit as e:  # --help, --version: exit 0
            if e.code:
                refused.append(f"{example}\n    exit {e.code}")
    assert not refused, "\n".join(refused)


PAGE = """Text, not a command: dlperf run --no-such-flag

```sh
dlperf run --workloads fcn-r \\
    --threads 1,2      # a comment
SLOW=0.002 dlperf compare 1 2 && dlperf table --format md | head -2
make run RUN_ARGS="--threads 1,2 --max-time 20"
ray start --head   # not dlperf
```

```
$ .venv/bin/dlperf export --format csv
dlperf run --printed-not-typed
```
"""


def test_the_commands_shown_are_found_and_the_rest_left_alone():
    assert [(e.line, e.args) for e in examples("page", PAGE)] == [
        (4, ("run", "--workloads", "fcn-r", "--threads", "1,2")),
        (6, ("compare", "1", "2")),
        (6, ("table", "--format", "md")),
        (7, ("run", "--threads", "1,2", "--max-time", "20")),
        (12, ("export", "--format", "csv")),
    ]


@pytest.mark.parametrize("line", ["dlperf run --no-such-flag", "dlperf tabel", "make run RUN_ARGS='--threds 1'"])
def test_a_command_dlperf_would_refuse_is_reported(line):
    parser = build_parser()
    (example,) = examples("page", f"```sh\n{line}\n```\n")
    with pytest.raises(UsageError):
        parser.parse_args(list(example.args))
