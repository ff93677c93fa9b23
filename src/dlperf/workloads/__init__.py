"""Framework-neutral workload descriptions: the Shi et al. (2016) suite and the user's own models."""

from dlperf.workloads.base import InputSpec, OptimizerSpec, Workload
from dlperf.workloads.shi2016 import BUILTIN, SUITE, TINY

__all__ = ["BUILTIN", "SUITE", "TINY", "InputSpec", "OptimizerSpec", "Workload"]
