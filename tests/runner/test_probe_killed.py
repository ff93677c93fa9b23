"""A probe child killed by a signal (SIGKILL by hand, the out-of-memory killer) is no bad input: the command says in
one line that it was killed, by which signal, and exits 1 (`ExitCode.CELLS_FAILED`), not 2 (`BAD_INPUT`); one that
ended on its own without an answer stays a refusal (2)."""

import pytest

from dlperf import cli
from dlperf.runner import launch, probe_cache
from dlperf.vocab import ExitCode


@pytest.mark.parametrize(
    ("child", "code", "said"),
    [
        ("kill -KILL $$", ExitCode.CELLS_FAILED, "the torch probe failed: worker killed by SIGKILL"),
        ("exit 3", ExitCode.BAD_INPUT, "the torch probe failed: worker exited with code 3"),
    ],
)
def test_a_probe_killed_by_a_signal_exits_1_saying_which(tmp_path, monkeypatch, capsys, child, code, said):
    monkeypatch.setenv(probe_cache.BYPASS, "1")
    monkeypatch.setattr(launch, "child_command", lambda *a, **k: ["/bin/sh", "-c", child])
    got = cli.dispatch(["run", "--workloads", "tiny-fcn-r", "--dry-run", "--db", str(tmp_path / "x.db")])
    err = capsys.readouterr().err.strip().splitlines()
    assert got == code, err
    assert len(err) == 1 and said in err[0], err


def test_a_data_probe_killed_on_resume_stays_a_failed_measurement(monkeypatch):
    """`--resume` checks the loader cells' data again; a probe killed there says so with exit 1, as at the start."""
    from dlperf import api
    from dlperf.errors import ProbeFailed

    def killed(spec, workloads):
        raise ProbeFailed("photos: the torch probe failed: worker killed by SIGKILL")

    monkeypatch.setattr(api, "check_data_of", killed)
    with pytest.raises(ProbeFailed, match=r"--resume: run 3's --data: photos: .* killed by SIGKILL"):
        api._check_data_again(3, None, [], {}, [])
