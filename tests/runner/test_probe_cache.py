"""The planning probe's env answers kept between runs (`runner/probe_cache.py`): a second plan on the same machine,
interpreter and version starts no probe child; anything the answer depends on changed, or a damaged entry, re-probes."""

from __future__ import annotations

import json

import pytest

from dlperf import envinfo
from dlperf.answers import EnvAnswer
from dlperf.plan import devices
from dlperf.runner import probe, probe_cache

ANSWER = EnvAnswer("torch", "9.9.9", {"cuda": None}, [{"name": "cpu"}], {"cpu": {"bf16": 0.5, "fp16": 0.1}})


@pytest.fixture
def launches(monkeypatch, tmp_path) -> list[str]:
    """Each probe child started (a fake one: the answer above), the cache in a folder of its own."""
    started: list[str] = []

    def ask(framework, request, python, **_):
        started.append(python)
        return ANSWER

    monkeypatch.setenv("DLPERF_DATA_DIR", str(tmp_path))
    monkeypatch.delenv(probe_cache.BYPASS, raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(probe, "ask", ask)
    monkeypatch.setattr(devices, "interpreter_for", lambda name: "/opt/py/bin/python")
    monkeypatch.setattr(probe_cache, "framework_version", lambda name, python: "9.9.9")
    return started


def plan_info() -> dict:
    return devices.framework_info(["torch"])


def test_a_second_plan_starts_no_probe_and_plans_the_same(launches, monkeypatch):
    first = plan_info()
    second = plan_info()
    assert len(launches) == 1
    assert first == second == {"torch": ANSWER.to_json()}
    monkeypatch.setenv(probe_cache.BYPASS, "1")
    assert plan_info() == first  # what the plan and the stored environment are made of: the same without the cache
    assert envinfo.capture(first)["frameworks"] == envinfo.capture(plan_info())["frameworks"]
    assert len(launches) == 3  # turned off: every plan probes


@pytest.mark.parametrize("change", ["version", "interpreter", "CUDA_VISIBLE_DEVICES", "OMP_PROC_BIND", "PYTHONPATH"])
def test_what_the_answer_depends_on_changed_reprobes(launches, monkeypatch, change):
    plan_info()
    plan_info()
    if change == "version":
        monkeypatch.setattr(probe_cache, "framework_version", lambda name, python: "9.9.10")
    elif change == "interpreter":
        monkeypatch.setattr(devices, "interpreter_for", lambda name: "/opt/other/bin/python")
    else:
        monkeypatch.setenv(change, "1")
    plan_info()
    plan_info()
    assert len(launches) == 2


def test_an_unknown_version_is_never_kept(launches, monkeypatch):
    monkeypatch.setattr(probe_cache, "framework_version", lambda name, python: None)
    plan_info()
    plan_info()
    assert len(launches) == 2
    assert not probe_cache.directory().exists()


@pytest.mark.parametrize("damage", ["truncated", "not json", "another framework", "another key", "bad answer"])
def test_a_damaged_or_foreign_entry_reprobes_and_is_written_over(launches, damage):
    plan_info()
    (entry,) = probe_cache.directory().glob("*.json")
    payload = json.loads(entry.read_text())
    if damage == "truncated":
        entry.write_bytes(entry.read_bytes()[:40])
    elif damage == "not json":
        entry.write_bytes(b"\x00\xff")
    elif damage == "another framework":
        payload["answer"]["framework"] = "jax"
        entry.write_text(json.dumps(payload))
    elif damage == "another key":
        payload["key"]["machine"]["hostname"] = "elsewhere"
        entry.write_text(json.dumps(payload))
    else:
        payload["answer"]["devices"] = "cpu"
        del payload["answer"]["version"]
        entry.write_text(json.dumps(payload))
    assert plan_info() == {"torch": ANSWER.to_json()}
    assert len(launches) == 2
    plan_info()
    assert len(launches) == 2  # written over: kept again
    assert [p.name for p in probe_cache.directory().iterdir()] == [entry.name]  # no temporary file left


def test_two_keys_taken_in_turn_each_keep_their_entry(launches, monkeypatch):
    """A user switching PYTHONPATH back and forth (two checkouts, a benchmark alternating trees) probes each once."""
    for _ in range(3):
        for tree in ("/work/a/src", "/work/b/src"):
            monkeypatch.setenv("PYTHONPATH", tree)
            assert plan_info() == {"torch": ANSWER.to_json()}
    assert len(launches) == 2  # before: one entry an interpreter, written over at each switch, 6 probes


def test_the_folder_keeps_the_most_recently_used_entries(launches, monkeypatch):
    monkeypatch.setattr(probe_cache, "KEEP", 3)
    probe_cache.directory().mkdir(parents=True)
    old_format = probe_cache.directory() / "torch-33f93a6bdb3aa98c.json"  # /opt/py/bin/python's, as 0d35089 named it
    old_format.write_text("{}")  # an entry of the earlier format, one an interpreter: dropped at the next write
    for tree in ("a", "b", "c", "a", "d"):  # a used again after c: b is the least recently used when d comes
        monkeypatch.setenv("PYTHONPATH", tree)
        plan_info()
    assert len(launches) == 4 and len(list(probe_cache.directory().iterdir())) == 3 and not old_format.exists()
    for tree in ("a", "c", "d"):
        monkeypatch.setenv("PYTHONPATH", tree)
        plan_info()
    assert len(launches) == 4  # each still kept
    monkeypatch.setenv("PYTHONPATH", "b")
    plan_info()
    assert len(launches) == 5  # dropped
