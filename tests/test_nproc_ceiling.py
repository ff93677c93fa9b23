"""--nproc 10000 (dlperf run, dlperf comm) would start that many processes, each importing a framework: a count above
MAX_PROCESSES_PER_CORE per usable core is refused before anything starts, in one line naming --nproc and the most."""

import pytest

from dlperf.cli import build_parser
from dlperf.commands import comm
from dlperf.errors import UsageError
from dlperf.measure import system
from dlperf.spec import make_spec


def most() -> int:
    return system.MAX_PROCESSES_PER_CORE * system.usable_cores()["cores"]


def test_run_refuses_more_processes_than_the_machine_holds_in_one_line():
    with pytest.raises(UsageError) as caught:
        make_spec(workloads="fcn-r", frameworks="torch", nprocs=f"1,{most() + 1}")
    message = str(caught.value)
    assert message.startswith(f"--nproc {most() + 1}: at most {most()} processes on this machine")
    assert "\n" not in message


def test_run_keeps_the_most_the_machine_holds():
    assert make_spec(workloads="fcn-r", frameworks="torch", nprocs=f"1,{most()}").nprocs == (1, most())


def test_comm_refuses_ten_thousand_processes():
    with pytest.raises(UsageError, match=r"^--nproc 10000: at most \d+ processes on this machine"):
        comm.options(build_parser().parse_args(["comm", "--nproc", "10000"]))


def test_the_ceiling_is_per_usable_core():
    assert system.too_many_processes([8], cores=2) is None
    assert system.too_many_processes([2, 9], cores=2) == (
        "--nproc 9: at most 8 processes on this machine (4 per usable core, of its 2)"
    )
