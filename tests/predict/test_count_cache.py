"""The operator count's cache and its scaling in the batch (predict/count.py, predict/cache.py), on the parent's side:
the probe child is replaced by a fake that counts a made-up affine step, and every question it is asked is kept."""

import json
import os
import shutil
import threading

import pytest

from dlperf.answers import OpCount, OpsAnswer
from dlperf.frameworks.common.ops import Affine, Op, grouped
from dlperf.predict import cache, count
from dlperf.worker import sources
from dlperf.workloads import BUILTIN

W = BUILTIN["tiny-fcn-r"]


def calls_at(batch: int, bend: int | None = None) -> list[tuple]:
    """A made-up step's kernel calls at `batch`: a product and an element-wise op that grow with it, an update that
    does not; past `bend` one more kernel (a step that is not affine in the batch)."""
    calls = [("matmul", "fp32", 64 * batch, 40 + 8 * batch, 1, "forward", 1, (1, 4 * batch, 4, 2))]
    calls += [("memory", "fp32", 0, 8 * batch, 1, "forward", 1, ())]
    calls += [("memory", "fp32", 0, 400, 1, "optimizer", 1, ())] * 3
    if bend is not None and batch > bend:
        calls.append(("memory", "fp32", 0, 4, 1, "backward", 1, ()))
    return calls


class FakeProbe:
    """What `probe.ask` would answer, counting `calls_at` (fitted as the child fits, `ops.fit`)."""

    def __init__(self, bend: int | None = None) -> None:
        self.asked: list = []  # every OpRequest, in order
        self.bend = bend

    def __call__(self, counter, request, python, timeout, timeout_flag=None, stopped=None):
        self.asked.extend(request.requests)
        files = {r.workload["source"].rpartition(":")[0] for r in request.requests if r.workload.get("source")}
        return OpsAnswer([self.answer(r) for r in request.requests], {f: sources.described(f) for f in files})

    def answer(self, r) -> OpCount:
        ops = [op.to_json() for op in grouped(calls_at(r.batch, self.bend))]
        found = OpCount(r.workload["name"], r.mode, r.batch, ops=ops, input_bytes=4 * r.batch, params=100)
        if r.fit:
            points = [(b, calls_at(b, self.bend), 4 * b) for b in (*r.fit, r.batch)]
            fitted = Affine.fit(r.workload["name"], r.mode, 100, points)
            key = "not_affine" if isinstance(fitted, str) else "affine"
            found = OpCount(**{**found.__dict__, key: fitted if isinstance(fitted, str) else fitted.to_json()})
        return found


@pytest.fixture
def fake(tmp_path, monkeypatch):
    monkeypatch.setenv("DLPERF_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv(cache.BYPASS, raising=False)
    monkeypatch.setattr(count, "torch_version", lambda counter, python: "2.13.0")
    probe = FakeProbe()
    monkeypatch.setattr(count.probe, "ask", probe)
    return probe


def at(*batches, mode="fp32", workload=W):
    return [(count.at(workload, b), mode) for b in batches]


def test_the_second_count_is_read_from_the_cache(fake):
    first = count.counts(at(8))
    assert len(fake.asked) == 1
    again = count.counts(at(8))
    assert len(fake.asked) == 1 and again == first  # no probe the second time, the same count


def test_fp32_and_tf32_are_counted_once(fake):
    fp32, tf32 = count.counts(at(8) + at(8, mode="tf32"))
    assert [(r.mode, r.batch) for r in fake.asked] == [("fp32", 8)]
    assert (fp32.mode, tf32.mode) == ("fp32", "tf32") and fp32.ops == tf32.ops
    count.counts(at(8, mode="tf32"))
    assert len(fake.asked) == 1


@pytest.mark.parametrize(
    "change",
    [
        lambda mp: mp.setattr(cache, "VERSION", "9.9.9"),  # dlperf's version
        lambda mp: mp.setattr(count, "torch_version", lambda counter, python: "2.14.0"),  # torch's
        lambda mp: mp.setattr(cache, "backend_source", lambda counter: "another model definition"),  # the source
    ],
    ids=["dlperf", "torch", "source"],
)
def test_a_version_change_counts_again(fake, monkeypatch, change):
    count.counts(at(8))
    change(monkeypatch)
    count.counts(at(8))
    assert len(fake.asked) == 2


def test_a_user_models_file_is_its_version(fake, tmp_path):
    source = tmp_path / "mine.py"
    source.write_text("def make(): ...\n")
    mine = count.at(W, 8)
    mine = type(mine)(**{**mine.__dict__, "name": "mine", "arch": "user", "source": f"{source}:make"})
    count.counts([(mine, "fp32")])
    count.counts([(mine, "fp32")])
    assert len(fake.asked) == 1
    source.write_text("def make(): ...  # changed\n")
    count.counts([(mine, "fp32")])
    assert len(fake.asked) == 2


def test_a_model_named_by_its_module_is_never_cached(fake):
    mod = type(W)(**{**W.__dict__, "name": "mod", "arch": "user", "source": "some.module:make"})
    count.counts([(mod, "fp32")])
    count.counts([(mod, "fp32")])
    assert len(fake.asked) == 2


@pytest.mark.parametrize("damage", [b"", b"{not json", b"[1, 2]", b'{"format": 1, "key": {}, "count": 3}', b"\xff\xfe"])
def test_a_damaged_entry_is_counted_again_and_rewritten(fake, damage):
    first = count.counts(at(8))
    (entry,) = cache.directory().glob("*.json")
    entry.write_bytes(damage)
    assert count.counts(at(8)) == first and len(fake.asked) == 2
    assert json.loads(entry.read_text())["format"] == cache.FORMAT
    assert count.counts(at(8)) == first and len(fake.asked) == 2


def test_an_entry_under_another_key_is_not_taken(fake):
    """The file name is a hash of the key; the key itself is checked on reading (a collision, a copied file)."""
    count.counts(at(8))
    (entry,) = cache.directory().glob("*.json")
    payload = json.loads(entry.read_text())
    payload["key"]["torch"] = "1.0"
    entry.write_text(json.dumps(payload))
    count.counts(at(8))
    assert len(fake.asked) == 2


def test_the_cache_is_bypassed_by_its_variable(fake, monkeypatch):
    monkeypatch.setenv(cache.BYPASS, "1")
    count.counts(at(8))
    count.counts(at(8))
    assert len(fake.asked) == 2 and not cache.directory().exists()


def test_an_unwritable_cache_still_counts(fake, monkeypatch):
    os.makedirs(cache.directory().parent, exist_ok=True)
    cache.directory().write_text("a file where the folder would be")
    assert count.counts(at(8))[0].batch == 8


def test_an_interrupted_write_leaves_nothing(fake, monkeypatch):
    def interrupted(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(cache.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        count.counts(at(8))
    assert list(cache.directory().iterdir()) == []


def test_the_cache_is_bounded(fake, monkeypatch):
    monkeypatch.setattr(cache, "MAX_BYTES", 3000)
    for b in range(1, 30):
        count.counts(at(b))
    sizes = [p.stat().st_size for p in cache.directory().glob("*.json")]
    assert sum(sizes) <= 3000 and len(sizes) >= 2


# ----------------------------------------------------------------------------------------------------------------------
# Counted at two batches, checked at a third, scaled to the others


def test_many_batches_are_counted_at_three_and_scaled(fake):
    batches = (16, 32, 64, 100, 7)
    found = count.counts(at(*batches))
    assert len(fake.asked) == 1 and fake.asked[0].fit  # one request: two batches fitted, a third checked
    for b, c in zip(batches, found, strict=True):
        assert c.batch == b and c.ops == tuple(grouped(calls_at(b))) and c.input_bytes == 4 * b
    count.counts(at(3, 1000))  # any other batch, later: scaled, no probe
    assert len(fake.asked) == 1


def test_a_step_not_affine_in_the_batch_is_counted_batch_by_batch(fake):
    fake.bend = 40
    batches = (16, 32, 64, 100)
    found = count.counts(at(*batches))
    assert sorted(r.batch for r in fake.asked if not r.fit) == [16, 32, 64]  # the fit's check at 100 failed: direct
    for b, c in zip(batches, found, strict=True):
        assert c.ops == tuple(grouped(calls_at(b, 40)))
    count.counts(at(200))
    assert fake.asked[-1].batch == 200 and not fake.asked[-1].fit  # known not affine: no second fit


def test_affine_ops_scale_as_a_direct_count_groups_them():
    """Two calls equal at one batch and apart at another stay one group where they are equal."""

    def calls(b):
        return [
            ("memory", "fp32", 0, 8 * b, 1, "forward", 1, ()),
            ("memory", "fp32", 0, 64 + 4 * b, 1, "forward", 1, ()),
        ]

    fitted = Affine.fit("w", "fp32", 1, [(4, calls(4), 16), (8, calls(8), 32), (20, calls(20), 80)])
    assert fitted.at(16).ops == (Op("memory", "fp32", 0, 128, calls=2),)
    assert fitted.at(5).ops == tuple(grouped(calls(5)))
    assert "not affine" in Affine.fit("w", "fp32", 1, [(4, calls(4), 16), (8, calls(8), 32), (20, calls(21), 80)])


@pytest.mark.parametrize("value", [3, {"ops": "x"}, {"workload": "w", "mode": "fp32", "batch": 9, "ops": [],
                                                     "input_bytes": 1, "params": 1}])  # fmt: skip
def test_an_entry_under_its_key_with_a_damaged_count_is_counted_again(fake, value):
    first = count.counts(at(8))
    (entry,) = cache.directory().glob("*.json")
    payload = json.loads(entry.read_text())
    entry.write_text(json.dumps({**payload, "value": value}))
    assert count.counts(at(8)) == first and len(fake.asked) == 2


def test_a_products_shape_scales_with_the_batch_and_its_issued_launches_stay():
    """A GEMM's m grows with the batch (m = seq x batch), its n and k do not; a cuDNN call's issued launches stay."""
    calls = lambda b: [("matmul", "fp32", 96 * b, 8 * b, 2, "forward", 0, (1, 6 * b, 4, 4)),  # noqa: E731
                       ("memory", "fp32", 0, 0, 0, "forward", 2, ())]  # fmt: skip
    fitted = Affine.fit("w", "fp32", 1, [(4, calls(4), 16), (8, calls(8), 32), (20, calls(20), 80)])
    assert fitted.at(16).ops == tuple(grouped(calls(16)))
    assert fitted.at(16).ops[0].shape == (1, 96, 4, 4) and fitted.at(16).ops[1].issued == 2
    assert Affine.from_json(json.loads(json.dumps(fitted.to_json()))) == fitted


def test_entries_written_before_shapes_and_issued_launches_load_or_are_counted_again(fake):
    """A count written by an older dlperf (ops without `issued` and `shape`) reads as one issued launch per kernel,
    no shape; an older fit (calls of 9 fields) is a miss, counted again (in practice the counting code's hash in the
    key already sends both to other entries)."""
    first = count.counts(at(8, 9, 10))[2]  # counted at 10, fitted at 8 and 9
    assert len(fake.asked) == 1 and first.ops[0].shape == (1, 40, 4, 2)
    old_count = {**first.to_json(), "ops": [{k: v for k, v in op.to_json().items() if k not in ("issued", "shape")}
                                             for op in first.ops]}  # fmt: skip
    for entry in cache.directory().glob("*.json"):
        payload = json.loads(entry.read_text())
        if entry.name.endswith(".fit.json"):  # the calls as an older dlperf wrote them
            calls = [[*c[:8], c[11]] for c in payload["value"]["affine"]["calls"]]
            payload["value"]["affine"]["calls"] = calls
        elif entry.name.endswith(".b10.json"):
            payload["value"] = old_count
        entry.write_text(json.dumps(payload))
    (again, scaled) = count.counts(at(10, 12))
    assert [(r.batch, r.fit) for r in fake.asked[1:]] == [(12, None)]  # the fit is not read: batch 12 counted
    assert [(op.launches, op.issued, op.shape) for op in again.ops] == [(1, 1, ())] * len(again.ops)
    assert scaled.ops == tuple(grouped(calls_at(12)))


def test_a_change_to_the_counting_code_is_another_key(tmp_path, monkeypatch):
    """A count cached before the counting code changed (e.g. before batch norm recorded its channels) is never read
    as the new code's: the key hashes frameworks/torch/opcount.py and the ops' format."""
    shutil.copytree(cache.FRAMEWORKS, tmp_path / "frameworks", ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(cache, "FRAMEWORKS", tmp_path / "frameworks")
    keys = []
    for path in (None, "torch/opcount.py", "common/ops.py"):
        cache.backend_source.cache_clear()
        if path:
            (tmp_path / "frameworks" / path).write_text((tmp_path / "frameworks" / path).read_text() + "# changed\n")
        keys.append(cache.backend_source("torch"))
    cache.backend_source.cache_clear()
    assert len(set(keys)) == 3


# ----------------------------------------------------------------------------------------------------------------------
# Children counting at once


def test_requests_shared_among_children_are_each_asked_once_and_answered_in_order(fake, monkeypatch):
    """Three children, seven requests (two workloads, batches too few to fit): each request asked of one child once,
    every answer where one child would have put it, and each child asked its share only."""
    shares = []
    monkeypatch.setattr(count, "children", lambda requests, params: 3)
    asking = fake.__call__
    monkeypatch.setattr(count.probe, "ask", lambda *a, **k: shares.append(len(a[1].requests)) or asking(*a, **k))
    other = type(W)(**{**W.__dict__, "name": "other", "config": {**W.config, "widths": [16, 8]}})
    asked = at(4, 8) + at(1, 2, 16, mode="bf16") + at(3, 5, workload=other)
    found = count.counts(asked)
    assert sorted(shares) == [2, 2, 3] and len(fake.asked) == 7
    assert len({(r.workload["name"], r.mode, r.batch) for r in fake.asked}) == 7
    assert [(c.mode, c.batch) for c in found] == [(mode, w.batch) for w, mode in asked]
    assert [c.ops for c in found] == [tuple(grouped(calls_at(w.batch))) for w, _ in asked]


@pytest.mark.parametrize(
    ("requests", "params", "cores", "free", "busy", "expected"),
    [
        (7, [25_000_000] * 7, 16, 64 << 30, 0.3, 7),  # a child per request: idle cores and memory to spare
        (30, [25_000_000], 16, 64 << 30, 0.0, count.MAX_CHILDREN),  # no more than MAX_CHILDREN
        (7, [25_000_000], 2, 64 << 30, 0.4, 2),  # one per usable core
        (7, [25_000_000], 2, 64 << 30, 2.2, 1),  # cores other work keeps busy (tests beside): one child
        (7, [25_000_000], 16, 64 << 30, 12.6, 4),  # one per idle core (a fraction of a core's load: idle)
        (7, [118_000_000, 1_000_000], 16, 3 << 30, 0.0, 2),  # the largest model held by each: 1.2 GiB a child
        (7, [None], 16, 3 << 30, 0.0, 2),  # a user's model, its size unknown: taken as 100M parameters
        (7, [25_000_000], 16, 100 << 20, 0.0, 1),  # memory short: one child all the same
        (1, [25_000_000], 16, 64 << 30, 0.0, 1),
    ],
)
def test_children_are_one_per_idle_core_as_memory_allows(requests, params, cores, free, busy, expected):
    assert count.children(requests, params, cores=cores, free=free, busy=busy) == expected


def test_children_read_this_machines_cores_and_memory(monkeypatch):
    monkeypatch.setattr(count.system, "usable_cores", lambda: {"cores": 3})
    monkeypatch.setattr(count.system, "memory_available_bytes", lambda: 64 << 30)
    monkeypatch.setattr(count.os, "getloadavg", lambda: (0.2, 0.5, 0.5))
    assert count.children(10, [1_000_000]) == 3
    monkeypatch.setattr(count.os, "getloadavg", lambda: (2.1, 0.5, 0.5))
    assert count.children(10, [1_000_000]) == 1
    monkeypatch.setattr(count.system, "memory_available_bytes", lambda: None)  # not known (not Linux): one
    monkeypatch.setattr(count.os, "getloadavg", lambda: (0.2, 0.5, 0.5))
    assert count.children(10, [1_000_000]) == 1


def test_a_child_that_fails_stops_the_others_before_the_error_goes_on(fake, monkeypatch):
    """A share whose child fails (here at once) ends the command: the other children are told to stop (the `stopped`
    each polls, as `probe.ask` does for its child), and the error is the command's."""
    seen = []

    def ask(counter, request, python, timeout, timeout_flag=None, stopped=None):
        if request.requests[0].batch == 4:
            raise count.UsageError("tiny-fcn-r: the torch probe failed")
        for _ in range(200):  # as a child still counting, polled until told to stop
            if stopped():
                seen.append("stopped")
                break
            threading.Event().wait(0.05)
        return fake(counter, request, python, timeout)

    monkeypatch.setattr(count, "children", lambda requests, params: 2)
    monkeypatch.setattr(count.probe, "ask", ask)
    with pytest.raises(count.UsageError, match="probe failed"):
        count.counts(at(4, 8))
    assert seen == ["stopped"]


def test_a_probe_told_to_stop_stops_its_child_and_says_so():
    """The real launcher: a probe child stopped by `stopped` (before PyTorch is even imported) is a UsageError
    saying so, not an answer."""
    from dlperf.answers import EnvRequest

    with pytest.raises(count.UsageError, match="stopped: the command ended"):
        count.probe.ask("torch", EnvRequest(), stopped=lambda: True)
