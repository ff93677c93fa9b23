"""The export's data_recommendation column is a JSON object whose keys changed with the loader rule (cd40d41: `best`
gone, `enough` and `slower` added, `setting` no longer null where none was enough); its row of the reference names
each key, so a reader of an export knows what to read."""

import importlib.util

from conftest import ROOT
from dlperf.report.data import Recommendation


def test_the_export_reference_names_every_key_of_the_loader_recommendation():
    spec = importlib.util.spec_from_file_location("dlperf_docs_generated", ROOT / "docs/hooks/generated.py")
    generated = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generated)
    said = generated.EXPORT_COLUMNS["data_recommendation"]
    keys = [*Recommendation("w0", "the only setting measured").to_json(), "advice"]  # advice: added by the export
    assert [k for k in keys if k not in said] == []
