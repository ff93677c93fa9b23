"""A file whose size reads 0 but that holds bytes (/proc/self/status) opens in SQLite as an empty database: `dlperf
table --db /proc/self/status` said "no dlperf runs in it (schema version 0)"; it is named as no SQLite file at all."""

import os

import pytest

from dlperf.errors import UsageError
from dlperf.store import Store
from dlperf.store.location import not_sqlite

PROC = "/proc/self/status"


@pytest.mark.skipif(not os.path.isfile(PROC), reason="no /proc on this system")
def test_a_proc_file_is_not_a_dlperf_database():
    with pytest.raises(UsageError) as caught:
        Store.open(PROC, create=False)
    assert str(caught.value).endswith(f"'{PROC}': not a dlperf database (not an SQLite file)")


def test_an_empty_file_still_holds_no_dlperf_runs(tmp_path):
    (path := tmp_path / "empty.db").write_bytes(b"")
    with pytest.raises(UsageError, match=r"no dlperf runs in it \(schema version 0\)$"):
        Store.open(path, create=False)


def test_only_bytes_without_sqlites_header_are_no_sqlite_file(tmp_path):
    (text := tmp_path / "notes").write_text("Name:\tpython\n")
    (empty := tmp_path / "empty.db").write_bytes(b"")
    Store.open(db := tmp_path / "runs.db", create=True).close()
    assert not_sqlite(text) == "not a dlperf database (not an SQLite file)"
    assert not_sqlite(empty) is None and not_sqlite(db) is None and not_sqlite(tmp_path / "absent.db") is None
