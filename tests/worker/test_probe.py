"""The probe's child (`dlperf.worker.probe`): a backend's answer becomes the question's answer type on the child's
side, so a backend that leaves a key out fails there, naming it, not in the parent on a missing dict key."""

from __future__ import annotations

import types

import pytest

from dlperf import frameworks
from dlperf.answers import EnvAnswer, EnvRequest, WorkloadRequest
from dlperf.worker.probe import respond


def backend_answering(answer: dict, asked: list) -> types.SimpleNamespace:
    return types.SimpleNamespace(probe=lambda request: asked.append(request) or answer)


def test_a_backends_answer_is_read_as_the_questions_answer_type(monkeypatch):
    asked = []
    env = {"framework": "jax", "version": "0.10", "build": {"jaxlib": "0.10"}, "devices": [{"name": "cpu"}]}
    monkeypatch.setattr(frameworks, "backend", lambda name: backend_answering(env, asked))
    assert respond("jax", EnvRequest()) == EnvAnswer("jax", "0.10", {"jaxlib": "0.10"}, [{"name": "cpu"}])
    assert asked == [{"what": "env"}]  # the backend is asked in the JSON it always read


def test_a_key_the_backend_left_out_is_an_error_naming_it(monkeypatch):
    monkeypatch.setattr(frameworks, "backend", lambda name: backend_answering({"name": "mini"}, []))
    with pytest.raises(ValueError, match=r"WorkloadAnswer: no 'framework', 'params', 'batch'"):
        respond("torch", WorkloadRequest("/x.py:make"))
