"""The Ray clusters the docs start work on a machine where Ray never ran. Ray 2.60's `ray start --head` makes no token
(it checks one only where `~/.ray/auth_token` already exists), while a node joining with `RAY_AUTH_MODE=token` stops
when it finds none (`AuthenticationError: ... no authentication token was found`): the README's two nodes on one
machine failed so at their second line in a fresh home directory (helper 141), where the page writing it had a token
left from earlier. So a block that joins with a token writes one first: `ray get-auth-token --generate`, which keeps
a token already there."""

from __future__ import annotations

import re

import pytest

from conftest import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
GENERATE = re.compile(r"\bray get-auth-token\b.*--generate")
HEAD = re.compile(r"\bray start\b.*--head\b")
JOIN = re.compile(r"\bRAY_AUTH_MODE=token ray start\b.*--address\b")
FENCE = re.compile(r"^[ \t]*```.*$", re.MULTILINE)
MAKE, JOINS = "ray get-auth-token --generate >/dev/null", "RAY_AUTH_MODE=token ray start --address H:6379"


def blocks(text: str) -> list[tuple[int, list[str]]]:
    """Each fenced block of a page: the line its fence opens on, and its lines."""
    out, newlines = [], 0
    for i, part in enumerate(FENCE.split(text)):
        if i % 2:  # inside a fence, which opened on the line after the newlines so far
            out.append((newlines + 1, part.strip("\n").splitlines()))
        newlines += part.count("\n")
    return out


def missing_token(text: str) -> list[int]:
    """The line of each block that joins a Ray cluster with a token and makes none before starting its head."""
    bad = []
    for first, lines in blocks(text):
        if not any(JOIN.search(line) for line in lines):
            continue
        head = next((i for i, line in enumerate(lines) if HEAD.search(line)), None)
        before = lines if head is None else lines[: head + 1]
        # the token is made before the head starts (or on the head's own line, before `ray start`)
        made = any(GENERATE.search(line) and not HEAD.search(line.split("get-auth-token")[0]) for line in before)
        if not made:
            bad.append(first)
    return bad


def test_every_block_that_joins_with_a_token_writes_one_before_the_head_starts():
    shown = {page.relative_to(ROOT).as_posix(): page.read_text(encoding="utf-8") for page in PAGES}
    joining = [name for name, text in shown.items() if JOIN.search(text)]
    assert {"README.md", "docs/guides/parallel.md"} <= set(joining)  # the recipes this checks are still there
    bad = {name: lines for name, text in shown.items() if (lines := missing_token(text))}
    assert not bad, f"these blocks join with RAY_AUTH_MODE=token and write no token first (`{MAKE}`): {bad}"


@pytest.mark.parametrize(
    ("block", "bad"),
    [
        (f"ray start --head\n{JOINS}\n", True),
        (f"{MAKE}\nray start --head\n{JOINS}\n", False),
        (f"{MAKE} && ray start --head\n{JOINS}\n", False),
        (f"ray start --head\n{MAKE}\n{JOINS}\n", True),  # too late: the head started without a token
        ("ray start --head\nray start --address H:6379\n", False),  # no token asked for: none needed
    ],
)
def test_a_block_is_judged_by_where_its_token_is_made(block, bad):
    assert bool(missing_token(f"```sh\n{block}```\n")) is bad
