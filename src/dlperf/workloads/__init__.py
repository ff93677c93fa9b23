"""Framework-neutral workload descriptions: the Shi et al. (2016) suite, the published benchmarks' networks and the
user's own models."""

from dlperf.workloads.base import InputSpec, OptimizerSpec, Workload
from dlperf.workloads.published import PUBLISHED
from dlperf.workloads.shi2016 import BUILTIN as SHI2016
from dlperf.workloads.shi2016 import SUITE, TINY

# The default sweep stays the paper's seven (SUITE); the published networks are there by name.
BUILTIN = {**SHI2016, **{w.name: w for w in PUBLISHED}}

__all__ = ["BUILTIN", "PUBLISHED", "SUITE", "TINY", "InputSpec", "OptimizerSpec", "Workload"]
