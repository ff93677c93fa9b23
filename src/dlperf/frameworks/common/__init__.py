"""What every backend shares, written once: the exposed-communication measurement of a multi-process step
(`comm.py`), the base of the strategies' steps (`strategy.py`), the profilers' scaffold (`profiling.py`), the loss
check's comparison (`losscheck.py`), the backend interface (`interface.py`) and the table of what each backend can do
(`capabilities.py`).

Standard library and dlperf's standard-library-only modules only: the JAX, TensorFlow and MXNet backends import these
in their own environments, and the parent reads the capability table without importing any framework.
"""
