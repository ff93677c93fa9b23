"""`gpus.lookup` and `gpus.known` build their map of the table's names once per table, not on each call: a prediction's
scope note (`validate.coverage`) looks up the GPU of each of the 225 shipped rows, and rebuilding the map of 58 names
for each was half its CPU. A user's file gives another table, and so another map, at once."""

from __future__ import annotations

from dlperf.predict import gpus

from .conftest import BEFORE_CUDA_GIB

MINE = "My GPU,50,100,200,200,400,1000,32,PCIe Gen5 x16,63,Hopper,100,2000,40,boost,my datasheet"
MY_T4 = "T4,9.9,,70,,,330,16,PCIe Gen3 x16,15.75,Turing,40,1590,4,boost,my T4"


def test_the_names_are_normalized_once_for_many_lookups(monkeypatch):
    gpus.lookup("T4")  # the map of the built-in table, built here if no test built it before
    calls = []
    real = gpus._key
    monkeypatch.setattr(gpus, "_key", lambda name: calls.append(name) or real(name))
    for _ in range(20):
        assert gpus.lookup("T4").name == "T4" and gpus.known("A100-SXM4-80GB") is not None
    assert len(calls) == 40  # the names asked only: before, each call also normalized the table's 58 names


def test_a_users_file_is_looked_up_at_once_and_dropping_it_forgets_its_rows(tmp_path):
    assert gpus.known("My GPU") is None
    path = tmp_path / "mine.csv"
    path.write_text(f"{BEFORE_CUDA_GIB}\n{MINE}\n{MY_T4}\n")
    gpus.use_specs(str(path))
    assert gpus.lookup("my gpu").source == "my datasheet" and gpus.lookup("T4").source == "my T4"
    assert gpus.table() is gpus.table()  # merged once while the file is the same
    gpus.use_specs(None)
    assert gpus.known("My GPU") is None and gpus.lookup("T4").source != "my T4"
