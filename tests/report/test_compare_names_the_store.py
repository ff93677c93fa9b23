"""A compare side typed as a run id (`1`) reads --db: where that store cannot be reached (a name too long) or is no
dlperf database, the one line names its path, which the side as typed does not hold ("A '1': a name longer than this
system allows" left it out)."""

import pytest

from dlperf.errors import UsageError
from dlperf.report.compare_side import load


def test_a_store_name_too_long_is_named_for_a_side_typed_as_a_run_id(tmp_path):
    path = str(tmp_path / ("a" * 300 + ".db"))
    with pytest.raises(UsageError) as caught:
        load("1", "A", path)
    assert str(caught.value) == f"A '1': {path!r}: a name longer than this system allows (File name too long)"


def test_a_file_that_is_no_database_is_named_for_a_side_typed_as_a_run_id(tmp_path):
    path = tmp_path / "notes.db"
    path.write_text("not sqlite\n" * 100)
    with pytest.raises(UsageError, match=rf"^B '2': '{path}': not a dlperf database"):
        load("2", "B", str(path))


def test_a_side_that_names_its_store_is_not_named_twice(tmp_path):
    path = str(tmp_path / ("b" * 300 + ".db"))
    with pytest.raises(UsageError) as caught:
        load(f"{path}:1", "A", "other.db")
    assert str(caught.value).count(path) == 1
