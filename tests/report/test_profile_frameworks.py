"""The modes a profile's verdict advises are those the cell's framework runs (`report/profile.py`): a jax cell,
whose backend ran fp32 only, was told to try --modes bf16, channels_last and fused; it runs fp32 and bf16 now, and is
told to try bf16 alone."""

from dlperf.envinfo import fingerprint
from dlperf.protocol import Cell, Profiled
from dlperf.report.cell_profile import describe
from dlperf.report.profile import verdict, verdicts
from dlperf.store import Store
from dlperf.store.process import ProcessMeasurement
from dlperf.store.records import CellFigures, PlannedCell, ProfileOutcome
from dlperf.vocab import Bound, Status

MEMORY_BOUND = {"matmul": 0.43, "elementwise": 0.29, "pooling": 0.25, "copy": 0.02, "host": 0.01}
LAUNCH_BOUND = {"host": 0.62, "elementwise": 0.2, "matmul": 0.18}
IMAGES = {"batch": 16, "input": {"kind": "image", "shape": [3, 32, 32]}, "optimizer": {"name": "sgd"}}


def profiled(categories: dict[str, float]) -> Profiled:
    return Profiled(steps=5, step_s=sum(categories.values()), categories=categories, ops_per_step=4100)


def test_a_backend_that_runs_fp32_only_is_advised_no_mode_and_told_why():
    v = verdict(profiled(MEMORY_BOUND), framework="mxnet")
    assert v.bound is Bound.MEMORY and v.modes == ()
    assert dict(v.left_out) == dict.fromkeys(("bf16", "channels_last", "fused"), "the mxnet backend runs fp32 only")


def test_a_backend_is_advised_the_modes_it_runs_and_torch_every_one():
    v = verdict(profiled(LAUNCH_BOUND), framework="tensorflow")
    assert v.bound is Bound.LAUNCH and v.modes == ("compile",)  # TensorFlow's XLA step
    assert verdict(profiled(MEMORY_BOUND), framework="mxnet").modes == ()
    jax = verdict(profiled(MEMORY_BOUND), framework="jax")  # fp32 and bf16 (Flax's mixed precision)
    assert jax.modes == ("bf16",)
    assert dict(jax.left_out) == dict.fromkeys(("channels_last", "fused"), "the jax backend does not implement it (its "
                                               "modes: bf16, fp32)")  # fmt: skip
    assert verdict(profiled(MEMORY_BOUND), framework="torch").modes == ("bf16", "channels_last", "fused")
    assert verdict(profiled(MEMORY_BOUND)).modes == ("bf16", "channels_last", "fused")  # no framework: any mode


def test_dlperf_profile_and_table_explain_advise_a_jax_cell_only_what_jax_runs(tmp_path):
    env = {"cpu": {"model": "Test CPU"}, "frameworks": {"jax": {"version": "0.10.2"}}}
    planned = PlannedCell(Cell("alexnet-r", "jax", "cpu", 1, "fp32"), IMAGES)
    store = Store.open(tmp_path / "p.db", create=True)
    try:
        run_id = store.create_run({}, env, fingerprint(env), ["dlperf", "profile"], [planned])
        samples = [0.0110, 0.0112, 0.0108, 0.0111, 0.0109]
        figures = CellFigures(status=Status.OK, median_s=0.011, n=len(samples))
        store.record(run_id, planned.cell.key, 0, ProcessMeasurement(status=Status.OK, samples=samples), figures)
        store.record_profile(run_id, planned.cell.key, ProfileOutcome(Status.OK, None, 1.0, profiled(MEMORY_BOUND)))
        [cell] = store.cells(run_id)
        profile = store.profiles(run_id)[cell.key]
        lines = describe(cell, profile, {}, env=env)
        found = verdicts(store, fingerprint(env), [cell])[cell.key]
    finally:
        store.close()
    text = "\n".join(lines)
    assert "  try: --modes bf16 (with dlperf run or profile)" in lines, text  # not "optimize tries each": torch only
    assert "left out: channels_last: the jax backend does not implement it (its modes: bf16, fp32)" in text
    assert found.modes == ("bf16",)


def test_only_a_pytorch_cell_is_told_that_dlperf_optimize_tries_the_modes(tmp_path):
    # a tensorflow cell read "try: --modes compile (with dlperf run or profile; dlperf optimize tries each)", but
    # optimize measures PyTorch only: it has no --framework
    env = {"cpu": {"model": "Test CPU"}, "frameworks": {}}
    lines = {}
    store = Store.open(tmp_path / "p.db", create=True)
    try:
        for framework in ("tensorflow", "torch"):
            planned = PlannedCell(Cell("tiny-alexnet-r", framework, "cpu", 1, "fp32"), IMAGES)
            run_id = store.create_run({}, env, fingerprint(env), ["dlperf", "profile"], [planned])
            figures = CellFigures(status=Status.OK, median_s=1.0, n=50)
            store.record(run_id, planned.cell.key, 0, ProcessMeasurement(status=Status.OK, samples=[1.0]), figures)
            store.record_profile(run_id, planned.cell.key, ProfileOutcome(Status.OK, None, 1.0, profiled(LAUNCH_BOUND)))
            [cell] = store.cells(run_id)
            lines[framework] = describe(cell, store.profiles(run_id)[cell.key], {}, env=env)
    finally:
        store.close()
    assert "  try: --modes compile (with dlperf run or profile)" in lines["tensorflow"]
    assert "  try: --modes compile (with dlperf run or profile; dlperf optimize tries each)" in lines["torch"]


def test_a_cell_is_advised_a_precision_by_its_own_frameworks_product_not_by_pytorchs_peak(tmp_path):
    """`dlperf peak` times PyTorch's products, and each framework's planning probe its own. On an Intel Xeon without
    avx512_bf16 PyTorch's bf16 product ran 0.2x fp32's speed and JAX's 0.7x, and JAX's profile advised bf16 from no
    figure of its own. Here PyTorch's peak has bf16 at 2.6x fp32's: a torch cell is advised bf16 by the peak; a jax
    cell is not, by its own probe's figure, which its left-out line names."""
    from dlperf.store.machine import MeasuredPeak

    env = {"cpu": {"model": "Test CPU"}, "frameworks": {
        "torch": {"version": "2.13.0+cpu", "precision_speed": {"cpu": {"bf16": 0.2}}},
        "jax": {"version": "0.10.2", "precision_speed": {"cpu": {"bf16": 0.716}}}}}  # fmt: skip
    store = Store.open(tmp_path / "p.db", create=True)
    try:
        store.record_peaks(fingerprint(env), env, [
            MeasuredPeak(framework="torch", framework_version="2.13.0+cpu", device="cpu", threads=1, kind="matmul",
                         dtype=dtype, value=value) for dtype, value in (("fp32", 1e11), ("bf16", 2.6e11))])  # fmt: skip
        planned = [PlannedCell(Cell("alexnet-r", fw, "cpu", 1, "fp32"), IMAGES) for fw in ("torch", "jax")]
        run_id = store.create_run({}, env, fingerprint(env), ["dlperf", "profile"], planned)
        for p in planned:
            figures = CellFigures(status=Status.OK, median_s=0.011, n=5)
            store.record(run_id, p.cell.key, 0, ProcessMeasurement(status=Status.OK, samples=[0.011] * 5), figures)
            store.record_profile(run_id, p.cell.key, ProfileOutcome(Status.OK, None, 1.0, profiled(MEMORY_BOUND)))
        cells = {c.framework: c for c in store.cells(run_id)}
        found = verdicts(store, fingerprint(env), list(cells.values()))
    finally:
        store.close()
    assert found[cells["torch"].key].modes == ("bf16", "channels_last", "fused")
    jax = found[cells["jax"].key]
    assert jax.modes == ()
    assert dict(jax.left_out)["bf16"] == ("no fast path for bf16 here: jax's planning probe timed its matrix product "
                                          "1.4x slower than fp32's")  # fmt: skip
