"""The GPU table's tests: a --gpu-specs file's header in the table's own columns, and the built-in table put back
after a test that loads a user's file."""

from __future__ import annotations

import pytest

from dlperf.predict import gpus

HEADER = ",".join(gpus.COLUMNS)  # a --gpu-specs file's header: the shipped table's columns, cuda_gib included
BEFORE_CUDA_GIB = ",".join(c for c in gpus.COLUMNS if c != "cuda_gib")  # the columns before it: a file still read


@pytest.fixture(autouse=True)
def no_user_specs():
    """A test that loads a user's file leaves the built-in table for the next."""
    yield
    gpus.use_specs(None)
