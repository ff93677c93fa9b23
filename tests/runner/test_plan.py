from dlperf.api import make_spec, thread_counts
from dlperf.protocol import Cell
from dlperf.runner.plan import expand, schedule
from dlperf.workloads import BUILTIN


def test_cells_cover_the_product_and_gpus_get_one_column():
    spec = make_spec("fcn-r,lstm", threads="1,2")
    cells = expand(spec, [BUILTIN["fcn-r"], BUILTIN["lstm"]], ["cpu", "cuda:0"], [1, 2], host_threads=2)
    assert [c.column for c in cells] == ["cpu:1", "cpu:2", "cuda:0"] * 2
    assert {c.mode for c in cells} == {"fp32"}
    assert len({c.key for c in cells}) == len(cells)


def test_key_is_stable():
    assert Cell("fcn-r", "torch", "cpu", 2, "fp32").key == "fcn-r|torch|cpu|2|fp32"


def test_repeats_are_interleaved():
    a, b = Cell("a", "torch", "cpu", 1, "fp32"), Cell("b", "torch", "cpu", 1, "fp32")
    tasks = schedule([a, b], 3)
    assert [(t.cell.workload, t.repeat) for t in tasks] == [("a", 0), ("b", 0), ("a", 1), ("b", 1), ("a", 2), ("b", 2)]


def test_more_threads_than_cores_warns_but_is_allowed():
    warnings = []
    assert thread_counts((1, 8), cores=2, warnings=warnings) == [1, 8]
    assert "8" in warnings[0] and "2 usable cores" in warnings[0]
    assert thread_counts(None, cores=4, warnings=[]) == [1, 2, 4]
