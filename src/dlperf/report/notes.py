"""The notes under a table, grouped: each kind of note once, with the cells it concerns.

A sweep on a busy machine stores the same warning on most of its cells ("other processes used 48% of the CPUs ...");
printed cell by cell, and again per row for the star it withholds, `make run` showed 39 notes for 14 cells. Here a
kind of warning is one line naming its cells, each with its own figure (48%, n=2); any other note is one line per
distinct text, naming the cells that carry it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dlperf.measure.stats import FEW_SAMPLES
from dlperf.vocab import LOAD_UNREAD


@dataclass(frozen=True)
class Kind:
    prefix: str  # how the stored warning starts (runner/collect.py writes them)
    headline: str  # the line's head when several cells carry it
    figure: str = ""  # a pattern for what each cell keeps beside its label (its group 1, or the whole match)
    by: str = ""  # a pattern whose group 1 splits the cells into parts of the line, each headed by it


REMAPPED = "memory mapped afresh each step:"  # a CPU cell's kernel time, with the page faults behind it (`table`)
KERNEL_TOOK = "the kernel took"

KINDS = (
    Kind("other processes used", "other processes used the CPUs while these cells were timed", r"\d+%"),
    Kind(
        LOAD_UNREAD,
        "other processes' load not read: these cells' warm-up and timed steps were too short for the CPUs' busy "
        "counters, so they may have been disturbed (a longer --min-time reads it)",
        r"took (\d+\.\d+ s)",
    ),
    Kind("CPU steal", "CPU steal time: another virtual machine took this machine's CPU", r"\d+%"),
    Kind("few samples", f"few samples: a median of fewer than {FEW_SAMPLES} timed steps", r"of (\d+) timed"),
    Kind("noisy", "noisy: the steps' IQR is wide against the median", r"\d+%"),
    Kind("slow steps", "slow steps now and then: the mean step above the median (a long run pays the mean)", r"\d+%"),
    Kind(
        "processes disagree",
        "processes disagree: a cell's processes' medians far apart, its figure between them",
        r"(\d+\.\d+x) apart",
    ),
    Kind("oversubscribed", "oversubscribed: more threads than usable cores"),
    Kind(
        "more cores busy",
        "more cores busy than threads: the framework ran work on threads beside those asked, "
        "so these cells' thread counts are not alike across frameworks",
        r"(\d+\.\d+) cores",
    ),
    Kind(
        REMAPPED,
        "memory mapped afresh each step, the kernel faulting its pages in (glibc gives large blocks back when freed): "
        "try",
        r"the kernel (\d+%)",
        by=r"; try (--modes \S+)$",
    ),
    Kind(KERNEL_TOOK, "the kernel took a large share of these cells' CPU time", r"\d+%"),
)
FIGURE_NAME = {"few samples": "n={}", "more cores busy": "{} cores", REMAPPED: "{} kernel",
               KERNEL_TOOK: "{} kernel"}  # fmt: skip


def kind_of(text: str) -> Kind | None:
    return next((k for k in KINDS if text.startswith(k.prefix)), None)


def grouped(notes: list[tuple[str, str]]) -> list[str]:
    """(cell label, text) pairs as lines: one per kind of warning, one per other distinct text, in first-seen order;
    a group of one cell keeps its own words ("fcn-s torch cpu:4: oversubscribed: 4 threads on 2 cores")."""
    groups: dict[str, list[tuple[str, str]]] = {}
    for label, text in notes:
        kind = kind_of(text)
        groups.setdefault(kind.prefix if kind else text, []).append((label, text))
    return [_line(key, members) for key, members in groups.items()]


def _line(key: str, members: list[tuple[str, str]]) -> str:
    labels = list(dict.fromkeys(label for label, _ in members))
    if len(members) == 1:
        label, text = members[0]
        return f"{label}: {text}" if label else text
    kind = kind_of(key)
    if kind is None:
        return f"{', '.join(labels)}: {key}"
    if kind.by:  # "try --modes malloc_keep: a (28% kernel), b (30% kernel); --modes bf16+malloc_keep: c (51% ...)"
        parts: dict[str, list[str]] = {}
        for label, text in members:
            found = re.search(kind.by, text)
            parts.setdefault(found.group(1) if found else "", []).append(_with_figure(kind, label, text))
        return f"{kind.headline} " + "; ".join(f"{head}: {', '.join(cells)}" for head, cells in parts.items())
    return f"{kind.headline}: " + ", ".join(_with_figure(kind, label, text) for label, text in members)


def _with_figure(kind: Kind, label: str, text: str) -> str:
    if not kind.figure or not (found := re.search(kind.figure, text)):
        return label
    values = found.groups() or (found.group(),)
    return f"{label} ({FIGURE_NAME.get(kind.prefix, '{}').format(*values)})"
