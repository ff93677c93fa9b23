"""`dlperf compare`: the folder a user workload read (--data DIR, or its factory's default) is its data, not its model:
two runs of one factory over the same folder compare, and over different folders they compare with a line saying so
(helper 124: a run with --data photos against one without, whose factory defaulted to that folder, was refused as
"not comparable: the workloads differ: extra {'data_dir': ...} -> {}")."""

from dlperf.protocol import Cell
from dlperf.report.compare import Verdict, compare, factory_default_data, summary_lines
from dlperf.store.records import PlannedCell
from report.runs import processes, record


def user_cell(source: str, data_dir: str | None) -> PlannedCell:
    workload = {"batch": 32, "source": source, "extra": {"data_dir": data_dir} if data_dir else {}}
    return PlannedCell(Cell("jpeg-cnn", "torch", "cpu", 1, "fp32"), workload)


def factory(tmp_path, default: str | None) -> str:
    path = tmp_path / "cnn.py"
    argument = f"data_dir={default!r}" if default else "data_dir"
    path.write_text(f"import dlperf\n\n\ndef make({argument}):\n    return None\n")
    return f"{path}:make"


def compared(a, b):
    pa, pb = processes(1, 3, 0.1), processes(2, 3, 0.1)
    return compare([record(a, pa)], [record(b, pb)], {a.cell.key: pa}, {b.cell.key: pb})


def test_data_given_against_the_factorys_default_of_the_same_folder_compares_without_a_note(tmp_path):
    photos = tmp_path / "photos"
    photos.mkdir()
    source = factory(tmp_path, str(photos))
    result = compared(user_cell(source, str(photos)), user_cell(source, None))
    [only] = result.cells
    assert only.verdict == Verdict.SAME and not only.reason
    assert not result.data and not any("data" in line for line in summary_lines(result))


def test_different_folders_compare_with_one_line_naming_both(tmp_path):
    source = factory(tmp_path, None)
    result = compared(user_cell(source, str(tmp_path / "photos")), user_cell(source, str(tmp_path / "more")))
    [only] = result.cells
    assert only.verdict == Verdict.SAME
    [line] = [line for line in summary_lines(result) if "data differs" in line]
    assert line == (f"note: jpeg-cnn: the data differs: A read {tmp_path / 'photos'}, B read {tmp_path / 'more'}; "
                    "each ratio compares the data too")  # fmt: skip


def test_a_default_the_source_does_not_say_is_named_as_such(tmp_path):
    source = factory(tmp_path, None)
    result = compared(user_cell(source, str(tmp_path / "photos")), user_cell(source, None))
    assert result.cells[0].verdict == Verdict.SAME
    assert result.data == [f"jpeg-cnn: the data differs: A read {tmp_path / 'photos'}, B read the factory's default "
                           "folder, which the source does not say; each ratio compares the data too"]  # fmt: skip


def test_the_factorys_default_is_read_from_its_source_without_running_it(tmp_path):
    assert factory_default_data(factory(tmp_path, "/data/photos")) == "/data/photos"
    assert factory_default_data(factory(tmp_path, "photos")) is None  # relative: to a folder the source cannot say
    assert factory_default_data(factory(tmp_path, None)) is None
    assert factory_default_data("package.module:make") is None
    assert factory_default_data(f"{tmp_path / 'gone.py'}:make") is None


def test_a_model_that_differs_besides_the_data_is_still_not_comparable(tmp_path):
    source = factory(tmp_path, None)
    a, b = user_cell(source, str(tmp_path / "a")), user_cell(source, str(tmp_path / "b"))
    b = PlannedCell(b.cell, {**b.workload, "batch": 64})
    [only] = compared(a, b).cells
    assert only.verdict == Verdict.NOT_COMPARABLE and only.reason == "the workloads differ: batch 32 -> 64"
