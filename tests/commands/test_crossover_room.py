"""`dlperf crossover` on a model this machine cannot hold (a 1.3B-parameter LM: batch 1 needs 26.4 GiB, predicted, with
about 20 GiB free) started measuring anyway, a process that could only swap or meet the out-of-memory killer. It now
checks the step's predicted peak first, as `dlperf advise` does (`memory.no_room_here`, one check for both): one line
with both figures, and nothing measured or stored."""

from __future__ import annotations

import pytest

from dlperf.errors import UsageError

GIB = 2**30


@pytest.fixture
def machine(monkeypatch):
    """20 GiB available of 23; the GPUs' side and the warm parent left out; each batch's peak from `per_batch`."""
    from dlperf import crossover
    from dlperf.measure import system
    from dlperf.predict import count, memory

    asked = []

    def traces(requests, timeout, flag=None):
        asked.extend(b for _, _, b in requests)
        return [memory.Peak(w.name, m, b, 0, 0, 0, 0, machine.fixed + b * machine.per_batch) for w, m, b in requests]

    machine.fixed, machine.per_batch, machine.asked, machine.started = 0, 0, asked, []
    monkeypatch.setattr(memory, "traces", traces)
    monkeypatch.setattr(system, "memory_available_bytes", lambda root="/": 20 * GIB)
    monkeypatch.setattr(system, "memory_total_bytes", lambda root="/": 23 * GIB)
    monkeypatch.setattr(crossover, "warm_up", lambda *a: machine.started.append("warm parent") or {})
    monkeypatch.setattr(count, "counted", lambda *a, **k: machine.started.append("operator count") or [])
    return machine


def refused(tmp_path) -> str:
    from dlperf import crossover

    db = tmp_path / "x.db"
    with pytest.raises(UsageError) as caught:
        crossover.crossover(crossover.Options("tiny-fcn-r", batches=(1, 2, 8), batch=8), str(db))
    assert not db.exists()  # nothing measured, nothing stored
    return str(caught.value)


def test_a_model_no_batch_of_fits_here_is_refused_with_both_figures(machine, tmp_path):
    machine.fixed = int(26.4 * GIB)
    assert refused(tmp_path) == (
        "tiny-fcn-r: not measured: the fp32 step at batch 1 needs about 27.1 GiB (predicted), more than the 20.0 GiB "
        "of 23.0 GiB this machine has available, so it cannot train here at this batch nor at any: batch 1 is "
        "predicted to need more too (dlperf predict --memory shows where it goes)"
    )
    assert machine.asked == [1, 8]  # the smallest and the largest batch, in one child
    assert machine.started == []  # refused before the warm parent or the (much longer) operator count started


def test_a_largest_batch_that_does_not_fit_says_the_largest_that_does(machine, tmp_path):
    """It said '--max-batch below 8', which left 7 (21 GiB) to fail; and a Python caller never typed --max-batch."""
    machine.per_batch = 3 * GIB  # batch 8: 24 GiB; 6: 18 GiB and the allocator's part, 7: 21 GiB
    said = refused(tmp_path)
    assert said.startswith("tiny-fcn-r: not measured: the fp32 step at batch 8 needs about 24.7 GiB (predicted)")
    # the batches named, so not max_batch=6, which `_batches_agree` refuses beside them
    assert said.endswith(
        "; batches up to 6 with batch up to 6 measures the batches that fit (6: the largest predicted to)"
    )
    assert "\n" not in said and machine.started == []
    assert {6, 7} <= set(machine.asked)  # traced on either side of the answer


def test_the_command_names_its_flag(machine, tmp_path, capsys):
    from dlperf.cli import main

    machine.per_batch = 3 * GIB
    code = main(["crossover", "tiny-fcn-r", "--batches", "1,2,8", "--batch", "8", "--db", str(tmp_path / "x.db")])
    assert (
        code == 2
        and "; --batches up to 6 with --batch up to 6 measures the batches that fit (6: the largest predicted to)"
        in capsys.readouterr().err
    )
