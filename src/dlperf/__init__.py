"""dlperf: measure, explain and speed up deep-learning training on CPUs and GPUs.

Importing this package never imports a deep-learning framework: every framework lives in ``dlperf.frameworks`` and is
imported only inside the child process that measures a cell.
"""

from typing import TYPE_CHECKING

from dlperf.version import VERSION as __version__

if TYPE_CHECKING:  # a type checker's view of the lazy names below (it saw `Any` for each); never run
    from dlperf.api import Outcome, resume, run, training_parts
    from dlperf.errors import RunInterrupted, UsageError
    from dlperf.measure.timer import TimerConfig
    from dlperf.stored import results
    from dlperf.workloads.user import user_workload

__all__ = [
    "Outcome",
    "RunInterrupted",
    "TimerConfig",
    "UsageError",
    "__version__",
    "results",
    "resume",
    "run",
    "training_parts",
    "user_workload",
]


def __getattr__(name: str):
    # Lazy: `import dlperf` in a worker's environment must not need rich or numpy.
    if name in ("run", "resume", "Outcome", "training_parts"):  # the facade, `api.py`
        from dlperf import api

        return getattr(api, name)
    if name == "TimerConfig":  # how each cell is timed: `dlperf.run(..., timer=dlperf.TimerConfig(max_time=2))`
        from dlperf.measure.timer import TimerConfig

        return TimerConfig
    if name in ("UsageError", "RunInterrupted"):  # what `run` and `resume` raise: bad input, an interrupt once stored
        from dlperf import errors

        return getattr(errors, name)
    if name == "results":  # a run's cells as dicts, the columns of `dlperf export`
        from dlperf.stored import results

        return results
    if name == "user_workload":
        from dlperf.workloads.user import user_workload

        return user_workload
    raise AttributeError(f"module 'dlperf' has no attribute {name!r}")


def __dir__() -> list[str]:
    # the lazy names too, which `__getattr__` gives only when asked: tab completion offers `dlperf.run`
    return sorted(set(__all__) | set(globals()))
