"""The typed questions and answers of the children that answer once (`dlperf.answers`, `dlperf.wire`): each survives
its trip through JSON, reads back as its type, keeps the keys its producer wrote (the wire and the stored figures do
not change), and a missing key or an unknown question is refused by name."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from dlperf.answers import (
    REQUESTS,
    BandwidthPeak,
    CommAnswer,
    CommSize,
    CopyFigure,
    DataAnswer,
    DataCheck,
    DataRequest,
    DispatchCost,
    EnvAnswer,
    EnvRequest,
    MatmulPeak,
    MatmulSize,
    MemoryAnswer,
    MemoryAsk,
    MemoryRequest,
    OpCount,
    OpRequest,
    OpsAnswer,
    OpsRequest,
    PeakAnswer,
    SelftestAnswer,
    SelftestRequest,
    StartAnswer,
    StartRequest,
    StreamKernel,
    StreamKernels,
    ThreadsAnswer,
    ThreadsRequest,
    Timed,
    WorkloadAnswer,
    WorkloadRequest,
    read_request,
)
from dlperf.wire import ABSENT, FLAT, Wire

TIMED = {"median_s": 0.5, "iqr_s": 0.01, "samples": 7, "calls_per_step": 2, "warmup_steps": 3, "warmup_steady": True}

# What each producer writes, as it writes it (frameworks/torch/peak.py, torch/comm.py, the backends' probes)
PEAK_WIRE = {
    "framework": "torch", "framework_version": "2.13.0+cpu", "device": "cpu",
    "matmul": {
        "fp32": {"peak_flops_per_s": 2e11, "best_n": 64,
                 "sizes": [{"n": 64, "flops_per_s": 2e11, **TIMED}, {"n": 8192, "skipped": "one product would take"}]},
        "fp16": {"peak_flops_per_s": None, "best_n": None, "sizes": [{"n": 64, "skipped": "too slow"}]},
        "bool": {"unsupported": "torch.mm in bool on cpu: no kernel"},
    },
    "bandwidth": {"array_bytes": 2**20,
                  "kernels": {"copy": {"bytes_per_call": 2**21, "bytes_per_s": 1e10, **TIMED},
                              "triad": {"bytes_per_call": 3 * 2**20, "bytes_per_s": 2e10, **TIMED}},
                  "peak_bytes_per_s": 2e10, "best_kernel": "triad"},
    "dispatch": {"ops_per_call": 1000, "ops_per_s": 1e6, **TIMED},
    "copies": [{"kind": "memcpy", "pinned": False, "bytes": 4096, "bytes_per_s": 1e10, "best_s": 4e-7, "steps": 5,
                "calls_per_step": 100, "stream_bytes_per_s": 2e10},
               {"kind": "h2d", "pinned": True, "bytes": 4096, "bytes_per_s": 5e9, "best_s": 8e-7, "steps": 5,
                "calls_per_step": 50}],
    "duration_s": 3.5, "others_cpu_share": 0.02, "threads": 1, "settings": {"torch_threads": 1},
}  # fmt: skip
COMM_WIRE = {
    "op": "all_reduce", "dtype": "float32", "backend": "gloo", "device": "cpu", "world": 2, "nnodes": 1, "nproc": 2,
    "threads": 1, "torch_version": "2.13.0+cpu", "iters": 3, "warmup": 1, "settings": {"torch_threads": 1},
    "sizes": [{"bytes": 4096, "count": 1024, "time_s": 1e-4, "algbw": 4.1e7, "busbw": 4.1e7, "wrong": 0,
               "rank_medians_s": [9e-5, 1e-4], "samples_max_s": [1e-4, 1.1e-4, 1e-4]}],
    "duration_s": 2.0,
}  # fmt: skip
ENV_WIRE = {
    "framework": "torch", "version": "2.13.0+cpu", "build": {"cuda": None, "cpu_capability": "AVX2"},
    "devices": [{"name": "cpu"}, {"name": "cuda:0", "model": "H100", "memory_bytes": 8e10, "capability": "9.0"}],
    "precision_speed": {"cpu": {"bf16": 0.1, "fp16": 0.05}},
}  # fmt: skip
WIRES = [
    (PeakAnswer, PEAK_WIRE),
    (CommAnswer, COMM_WIRE),
    (EnvAnswer, ENV_WIRE),
    (EnvAnswer, {"framework": "jax", "version": "0.10", "build": {}, "devices": [{"name": "cpu"}]}),
    (WorkloadAnswer, {"name": "mini", "framework": "torch", "params": 10, "batch": 4, "clip_grad_norm": None,
                      "input_shape": None, "input_dtype": None, "batch_error": "RuntimeError: on the GPU only"}),
    (DataAnswer, {"mnist-lenet": {"samples": 64, "input_shape": [1, 28, 28], "unsupported": None},
                  "tiny-fcn-r": {"samples": None, "unsupported": "built in: no dataset"}}),
    (OpsAnswer, {"counts": [{"workload": "w", "mode": "bf16", "batch": 4, "error": "RuntimeError: reads a value"},
                            {"workload": "w", "mode": "fp32", "batch": 4, "ops": [{"kind": "matmul"}],
                             "input_bytes": 96, "params": 10}]}),
    (SelftestAnswer, {"framework": "mxnet", "python": "3.11.2", "versions": {"mxnet": "1.9.1", "numpy": None},
                      "params": 26874, "losses": [2.3, 2.2], "step_s": 0.4, "settings": {}}),
    (ThreadsAnswer, {"threads": 2, "cpu_s": 3.0, "wall_s": 1.5, "ratio": 2.0, "products": 40,
                     "others_cpu_share": None, "settings": {"torch_threads": 2}}),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "wire"), WIRES, ids=lambda x: x.__name__ if isinstance(x, type) else "")
def test_an_answer_keeps_the_keys_its_producer_wrote_in_their_order(kind, wire):
    answer = kind.from_json(json.loads(json.dumps(wire)))
    assert json.dumps(answer.to_json()) == json.dumps(wire)  # the same keys, values and order: the same JSON
    assert kind.from_json(answer.to_json()) == answer


def test_answers_read_back_by_field():
    peak = PeakAnswer.from_json(PEAK_WIRE)
    fp32, fp16, bad = peak.matmul["fp32"], peak.matmul["fp16"], peak.matmul["bool"]
    assert fp32.sizes[0].timed == Timed(**TIMED) and fp32.sizes[1].timed is None and "take" in fp32.sizes[1].skipped
    assert fp16.peak_flops_per_s is None and fp16.sizes[0].skipped == "too slow" and fp16.unsupported is None
    assert bad == MatmulPeak(unsupported="torch.mm in bool on cpu: no kernel") and bad.sizes == []
    assert peak.bandwidth.kernels.triad.bytes_per_s == 2e10 and peak.dispatch.timed.median_s == 0.5
    assert [(c.kind, c.pinned, c.stream_bytes_per_s) for c in peak.copies] == [
        ("memcpy", False, 2e10),
        ("h2d", True, None),
    ]
    comm = CommAnswer.from_json(COMM_WIRE)
    assert comm.sizes == [CommSize(4096, 1024, 1e-4, 4.1e7, 4.1e7, 0, [9e-5, 1e-4], [1e-4, 1.1e-4, 1e-4])]
    assert EnvAnswer.from_json(ENV_WIRE).device_names == ["cpu", "cuda:0"]


def example_answers() -> list[Wire]:
    """One of every answer type, built by field (each record nested in them too)."""
    timed = Timed(**TIMED)
    peak = PeakAnswer(
        framework="torch", framework_version=None, device="cuda:0",
        matmul={"fp32": MatmulPeak(1e12, 512, [MatmulSize(512, 1e12, timed), MatmulSize(4096, skipped="slow")])},
        bandwidth=BandwidthPeak(8, StreamKernels(StreamKernel(16, 1.0, timed), StreamKernel(24, 2.0, timed)), 2.0,
                                "triad"),
        dispatch=DispatchCost(1000, 1e5, timed), copies=[CopyFigure("d2h", False, 4096, 1e9, 4e-6, 3, 1)],
        duration_s=1.0, others_cpu_share=None, threads=4, settings={},
    )  # fmt: skip
    return [
        EnvAnswer("torch", "2.13", {}, [{"name": "cpu"}]),
        WorkloadAnswer("mini", "torch", 10, 4, 1.0, [8], "float32"),
        DataAnswer({"w": DataCheck(64, [1, 28, 28]), "v": DataCheck(None, unsupported="no data")}),
        OpsAnswer(
            [OpCount("w", "fp32", 2, ops=[{"kind": "conv"}], input_bytes=8, params=3), OpCount("w", "x", 2, "E")]
        ),
        SelftestAnswer("jax", "3.11", {"jax": "0.10"}, 5, [1.0, 0.9], 0.2, {"xla_threads": 1}),
        ThreadsAnswer(1, 1.0, 1.0, 1.0, 10, 0.0, {}),
        peak,
        CommAnswer("all_reduce", "float32", "nccl", "cuda", 4, 2, 2, 1, "2.13", 5, 1, {}, [], 1.0),
    ]


@pytest.mark.parametrize("answer", example_answers(), ids=lambda a: type(a).__name__)
def test_every_answer_survives_json(answer):
    assert type(answer).from_json(json.loads(json.dumps(answer.to_json()))) == answer


REQUEST_EXAMPLES = [
    EnvRequest(),
    WorkloadRequest("/x.py:make"),
    DataRequest("/data", [{"name": "mnist-lenet"}]),
    OpsRequest([OpRequest({"name": "tiny-fcn-r"}, "bf16", 8), OpRequest({"name": "w"}, "fp32", 2)]),
    SelftestRequest(),
    ThreadsRequest(2, seconds=1.5),
    StartRequest(2),
    MemoryRequest([MemoryAsk({"name": "tiny-fcn-r"}, "bf16+checkpoint", [8, 16])]),
]


@pytest.mark.parametrize("request_", REQUEST_EXAMPLES, ids=lambda r: r.KIND)
def test_every_request_survives_json_with_its_kind_as_what(request_):
    wire = json.loads(json.dumps(request_.to_json()))
    assert wire["what"] == request_.KIND and read_request(wire) == request_


def test_there_is_one_request_type_per_question_each_with_its_answer_type():
    assert sorted(REQUESTS) == ["data", "env", "memory", "ops", "selftest", "start", "threads", "workload"]
    assert {r.KIND for r in REQUEST_EXAMPLES} == set(REQUESTS)
    assert {k: r.ANSWER for k, r in REQUESTS.items()} == {
        "env": EnvAnswer, "workload": WorkloadAnswer, "data": DataAnswer, "ops": OpsAnswer,
        "selftest": SelftestAnswer, "threads": ThreadsAnswer, "start": StartAnswer,
        "memory": MemoryAnswer,
    }  # fmt: skip
    assert ThreadsRequest(2).to_json() == {"what": "threads", "threads": 2, "seconds": 1.0}


def test_an_unknown_request_is_refused_by_its_kind():
    with pytest.raises(ValueError, match=r"unknown probe request 'nosuch' \(known: env, workload"):
        read_request({"what": "nosuch"})
    with pytest.raises(ValueError, match="unknown probe request None"):
        read_request({"source": "/x.py:make"})


def test_a_missing_key_is_an_error_naming_it_and_an_unknown_key_is_left_out():
    with pytest.raises(ValueError, match=r"EnvAnswer: no 'build', 'devices' in \['framework', 'version'\]"):
        EnvAnswer.from_json({"framework": "torch", "version": "2.13"})
    kernels = {"copy": PEAK_WIRE["bandwidth"]["kernels"]["copy"]}
    with pytest.raises(ValueError, match="StreamKernels: no 'triad'"):
        PeakAnswer.from_json({**PEAK_WIRE, "bandwidth": {**PEAK_WIRE["bandwidth"], "kernels": kernels}})
    copy = {k: v for k, v in PEAK_WIRE["bandwidth"]["kernels"]["copy"].items() if k != "median_s"}
    with pytest.raises(ValueError, match="Timed: no 'median_s'"):  # a flat record's keys are required with it
        StreamKernel.from_json(copy)
    with pytest.raises(ValueError, match="WorkloadRequest: expected a JSON object, got list"):
        WorkloadRequest.from_json([])
    assert ThreadsRequest.from_json({"what": "threads", "threads": 1, "later": True}) == ThreadsRequest(1)


def test_a_request_names_what_a_failed_probe_was_doing():
    assert EnvRequest().subject() == SelftestRequest().subject() == "checking the frameworks and devices"
    assert WorkloadRequest("/x.py:make").subject() == "workload '/x.py:make'"
    assert DataRequest("/data", []).subject() == "--data /data"
    assert OpsRequest([]).subject() == "counting the step's operators"


@dataclass(frozen=True)
class Inner(Wire):
    a: int
    b: str | None = field(default=None, metadata=ABSENT)


@dataclass(frozen=True)
class Outer(Wire):
    name: str
    inner: Inner | None = field(default=None, metadata=FLAT)
    by_key: dict[str, list[Inner]] = field(default_factory=dict)
    note: str | None = None


def test_the_wire_markers_leave_out_a_none_and_spread_a_flat_record():
    assert Outer("x").to_json() == {"name": "x", "by_key": {}, "note": None}  # note: None, but not marked absent
    both = Outer("x", Inner(1, "y"), {"k": [Inner(2)]})
    assert both.to_json() == {"name": "x", "a": 1, "b": "y", "by_key": {"k": [{"a": 2}]}, "note": None}
    assert Outer.from_json(both.to_json()) == both
    assert Outer.from_json({"name": "x"}) == Outer("x")  # no key of the flat record: None
