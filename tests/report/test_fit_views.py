"""A `dlperf fit` run's out-of-memory tries read as tries in every view, not as failures (helper 134: after fb7282f
`dlperf report` said so, but `list --runs` counted "4 failed, 6 ok" and `dlperf table` showed "failed"), and the words
"out of memory" that mark such a try are defined once, where the worker that writes them and the views can import."""

import re

from conftest import ROOT
from dlperf import vocab
from dlperf.report import fit


def test_out_of_memory_is_defined_once_and_the_worker_writes_it():
    from dlperf import fit as fit_command
    from dlperf.worker.cell import oom_reason

    sources = (ROOT / "src" / "dlperf").rglob("*.py")
    defined = [p for p in sources if re.search(r"^OUT_OF_MEMORY = ", p.read_text(), re.M)]
    assert defined == [ROOT / "src" / "dlperf" / "vocab.py"]
    assert fit.OUT_OF_MEMORY is vocab.OUT_OF_MEMORY and fit_command.OUT_OF_MEMORY is vocab.OUT_OF_MEMORY
    assert oom_reason(MemoryError(), 8, None).startswith(vocab.OUT_OF_MEMORY)
