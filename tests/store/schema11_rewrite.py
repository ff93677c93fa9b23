"""Rewrite what test_schema11.py expects of the old file's rendered views (tables, export, the report's hash) with the
current code, after a change that means to render them differently; the records read are left as they are.

    PYTHONPATH=src:tests COLUMNS=100 python tests/store/schema11_rewrite.py           # which outputs differ
    PYTHONPATH=src:tests COLUMNS=100 python tests/store/schema11_rewrite.py --write   # ... and rewrite them
"""

import gzip
import hashlib
import json
import sys
import tempfile
from pathlib import Path

from store import test_schema11 as old

EXPECTED = old.DATA / "schema11.expected.json.gz"


def rendered(db: Path, run_id: str, tmp: Path) -> dict[str, str]:
    views = {
        f"table_{f}": old.cli("table", "--db", str(db), "--run", run_id, "--format", f) for f in ("text", "json", "csv")
    }
    views["table_explain"] = old.cli("table", "--db", str(db), "--run", run_id, "--explain")
    views["export_jsonl"], views["export_csv"] = old.export(db, run_id, tmp)
    return views


def main(write: bool) -> None:
    expected = json.loads(gzip.decompress(EXPECTED.read_bytes()))
    tmp = Path(tempfile.mkdtemp())
    db = tmp / "schema11.sqlite"
    db.write_bytes(gzip.decompress((old.DATA / "schema11.sqlite.gz").read_bytes()))
    for run_id, want in expected["runs"].items():
        for name, text in rendered(db, run_id, tmp).items():
            if want[name] != text:
                print(f"run {run_id}: {name} differs")
                want[name] = text
    old.cli("report", "--db", str(db), "--run", "all", "-o", str(tmp / "r.html"))
    sha = hashlib.sha256(old.normalized((tmp / "r.html").read_text()).encode()).hexdigest()
    if sha != expected["report_html_sha256"]:
        print("the report differs")
        expected["report_html_sha256"] = sha
    if write:
        EXPECTED.write_bytes(gzip.compress(json.dumps(expected, indent=1, sort_keys=True).encode(), mtime=0))


if __name__ == "__main__":
    main("--write" in sys.argv)
