"""Cells known to be unsupported before any child starts (`plan/unsupported.py`): a user's model on a backend other
than PyTorch's, a mode the backend lacks, a network only PyTorch defines. Each started a child that imported its
framework (1.9-7.5 s) to say what the parent could know; they are stored with the same status and reason, without
one. What depends on the machine (a device, PyTorch's refusals, multi-process cells) is still asked of the child."""

import json
import sys
from types import SimpleNamespace

import pytest

from conftest import run_in
from dlperf.measure.timer import TimerConfig
from dlperf.plan import Plan
from dlperf.plan import estimate as est
from dlperf.plan.unsupported import reason
from dlperf.protocol import Cell
from dlperf.runner import sweep
from dlperf.spec import make_spec
from dlperf.vocab import Status
from dlperf.workloads import BUILTIN
from dlperf.workloads.base import InputSpec, OptimizerSpec, Workload

USER = Workload("mine", "user", {}, InputSpec("vector", (8,)), 3, 4, OptimizerSpec(), source="m.py:make")
ADAM_PUBLISHED = Workload("pub", "fcn", {"widths": [4, 2]}, InputSpec("vector", (4,)), 2, 4, OptimizerSpec("adam"),
                          extra={"torch_only": True})  # fmt: skip
TF32_CPU = "tf32 applies to CUDA GPUs only; this cell runs on cpu"
USER_REASON = "user workloads are PyTorch models; the {} backend trains the built-in workloads only"
# (workload, framework, device, mode): what each backend's build raises first, in its order
CASES = [
    (USER, "jax", "cpu", "fp32"), (USER, "tensorflow", "cpu", "fp32"), (USER, "mxnet", "cpu", "fp32"),
    (BUILTIN["tiny-fcn-r"], "jax", "cpu", "bf16"), (BUILTIN["tiny-fcn-r"], "jax", "cpu", "compile"),
    (BUILTIN["tiny-fcn-r"], "tensorflow", "cpu", "bf16+compile"), (BUILTIN["tiny-fcn-r"], "mxnet", "cpu", "compile"),
    (USER, "jax", "cpu", "bf16"), (USER, "tensorflow", "cpu", "bf16"), (USER, "mxnet", "cpu", "bf16"),
    (BUILTIN["resnet-18"], "jax", "cpu", "fp32"), (BUILTIN["resnet-18"], "tensorflow", "cpu", "fp32"),
    (BUILTIN["resnet-18"], "mxnet", "cpu", "fp32"), (BUILTIN["resnet-18"], "jax", "cpu", "bf16"),
    (BUILTIN["tiny-fcn-r"], "torch", "cpu", "tf32"), (BUILTIN["tiny-fcn-r"], "torch", "cpu", "bf16+cuda_graphs"),
    (BUILTIN["tiny-fcn-r"], "torch", "cpu", "compile+cuda_graphs"), (USER, "torch", "cpu", "dataparallel"),
    (BUILTIN["tiny-fcn-r"], "torch", "cpu", "fp32"),
]  # fmt: skip


def said(w, framework, device, mode):
    return reason(Cell(w.name, framework, device, 1, mode), w)


def test_what_a_backend_refuses_whatever_the_machine_is_known_in_its_words_and_order():
    for fw in ("jax", "tensorflow", "mxnet"):
        assert said(USER, fw, "cpu", "fp32") == USER_REASON.format(fw)
        assert said(BUILTIN["resnet-18"], fw, "cpu", "fp32") == "resnet-18 is defined for PyTorch only"
    assert said(BUILTIN["tiny-fcn-r"], "jax", "cpu", "compile") == (
        "compile: jax: every step is already XLA-compiled by jax.jit; the same mode without compile (fp32, bf16) is "
        "the compiled one"
    )
    assert said(USER, "jax", "cpu", "bf16") == USER_REASON.format("jax")  # jax asks of the workload first
    assert said(USER, "tensorflow", "cpu", "fp16").startswith("fp16: the tensorflow backend's mixed")  # the mode first
    assert said(BUILTIN["resnet-18"], "jax", "cpu", "fp16").startswith("fp16: the jax backend's mixed precision is")


def test_a_torch_mode_that_never_runs_on_a_cpu_is_known_without_a_child():
    """`dlperf run --dry-run --modes tf32` on a CPU ran a pilot of tiny-fcn-r's tf32 cell (3.4 s for the dry run) to
    say what PyTorch's build says first whatever the machine: "tf32 applies to CUDA GPUs only; this cell runs on cpu"
    (`modes.check_device`); the run started a child for it too (4.2 s). Both now take none (0.5 s, 0.7 s)."""
    assert said(BUILTIN["tiny-fcn-r"], "torch", "cpu", "tf32") == TF32_CPU
    assert said(USER, "torch", "cpu", "bf16+cuda_graphs").startswith("cuda_graphs applies to CUDA GPUs only")
    assert said(BUILTIN["tiny-fcn-r"], "torch", "cpu", "fp32") is None
    spec = make_spec(["tiny-fcn-r"], frameworks="torch", threads=[1], modes="fp32,tf32")
    cells = [Cell("tiny-fcn-r", "torch", "cpu", 1, m) for m in spec.modes]
    plan = Plan(spec, cells, {c.key: BUILTIN["tiny-fcn-r"].to_json() for c in cells}, {}, 2)
    assert [t.unsupported for t in plan.tasks] == [None, TF32_CPU]


def test_what_depends_on_the_machine_is_still_asked_of_the_child():
    assert said(BUILTIN["tiny-fcn-r"], "jax", "cpu", "fp32") is None
    assert said(USER, "torch", "cpu", "bf16") is None  # bf16 on a CPU without it is refused by PyTorch's autocast
    assert said(BUILTIN["tiny-fcn-r"], "torch", "cuda:0", "tf32") is None  # a GPU, and how many: asked of the child
    assert said(BUILTIN["resnet-18"], "jax", "cuda:0", "fp32") is None  # the device is asked first: is there one?
    assert said(ADAM_PUBLISHED, "mxnet", "cpu", "fp32") is None  # mxnet refuses the optimizer first, in its words
    assert reason(Cell("tiny-fcn-r", "tensorflow", "cpu", 1, "fp32", 2, "", "", "mirrored"), BUILTIN["tiny-fcn-r"]) \
        is None  # fmt: skip


def test_a_mode_a_pytorch_strategy_does_not_measure_is_known_before_its_processes_meet():
    """`--nproc 2 --modes compile --dry-run` timed a one-process pilot step (29 s) of a cell whose processes then said
    'compile under DDP is not measured by dlperf yet'; tp and pipelines refuse modes alike. Each is known now, in the
    words of the strategy's own module (`modes.strategy_refusal`); what a strategy refuses of the model is not."""
    w = BUILTIN["tiny-fcn-r"]

    def of(parallel: str, mode: str, nproc: int = 2, workload: Workload = w) -> str | None:
        return reason(Cell(workload.name, "torch", "cpu", 1, mode, nproc, "strong", "", parallel,
                           4 if parallel in ("gpipe", "1f1b") else 0), workload)  # fmt: skip

    assert of("ddp", "compile") == of("", "compile") == "compile under DDP is not measured by dlperf yet"
    assert of("tp", "checkpoint").startswith("checkpoint under tp is not measured by dlperf yet: it changes the module")
    assert of("gpipe", "bf16") == of("1f1b", "bf16") == "bf16 in a pipeline is not measured by dlperf yet (fp32 only)"
    assert of("ddp", "fp32") is None and of("ddp", "bf16") is None and of("gpipe", "fp32") is None
    assert of("fsdp", "compile", nproc=3) is None  # 16 does not split over 3: FSDP says that first, itself
    assert of("fsdp", "compile").startswith("compile under fsdp is not measured")


def plan_of(frameworks: str, workload: Workload) -> Plan:
    spec = make_spec(["tiny-fcn-r"], frameworks=frameworks, threads=[1], repeats=2)  # the cells train `workload`
    cells = [Cell(workload.name, f, "cpu", 1, "fp32") for f in spec.frameworks]
    return Plan(spec, cells, {c.key: workload.to_json() for c in cells}, {}, 2)


def test_a_known_unsupported_cell_starts_no_child_and_is_stored_as_its_child_said_it(monkeypatch):
    plan = plan_of("torch,jax", USER)
    tasks = plan.tasks
    assert [t.unsupported for t in tasks] == [None, USER_REASON.format("jax")] * 2  # each process of the cell
    monkeypatch.setattr(sweep, "interpreter_for", lambda framework: sys.executable)
    monkeypatch.setattr(sweep, "launch", lambda *a, **k: pytest.fail("a child was started"))
    m = sweep.run_task(tasks[1], SimpleNamespace(spec=plan.spec), lambda: None)
    assert (m.status, m.error) == (Status.UNSUPPORTED, USER_REASON.format("jax"))
    assert m.detail.python == sys.executable and m.samples == [] and m.duration_s == 0.0


def test_the_dry_run_starts_no_pilot_for_them_and_says_why(monkeypatch):
    plan = plan_of("jax", USER)
    monkeypatch.setattr(est, "run_pilot", lambda *a: pytest.fail("a pilot was started"))
    e = est.estimate(plan.tasks, plan.workloads, {}, timer=TimerConfig(), timeout=60, loss_check=False, cores=2,
                     python_for=lambda f: sys.executable)  # fmt: skip
    assert (e.seconds, e.pilots) == (0.0, 0)
    assert e.unsupported == {est.pilot_key(plan.cells[0]): USER_REASON.format("jax")}


def test_the_dry_run_says_which_processes_are_known_unsupported(capsys):
    from dlperf.commands.dry_run import print_estimate

    plan = plan_of("jax", USER)
    why = {est.pilot_key(plan.cells[0]): USER_REASON.format("jax")}
    print_estimate(
        SimpleNamespace(plan=plan, run_id=None, tasks=plan.tasks, estimate=est.Estimate(0.0, 0.0, 0, 0.0, 0, why))
    )
    assert capsys.readouterr().out.splitlines()[-1].endswith("): 2 known to be unsupported (no process is started)")


BUILD = """
import json, sys
from dlperf.frameworks import backend
from dlperf.workloads.base import Workload
fw = backend(sys.argv[1])
fw.configure_threads(1)
out = []
for w, device, mode in json.loads(sys.argv[2]):
    try:
        fw.build(Workload.from_json(w), device, mode)
        out.append(None)
    except NotImplementedError as exc:
        out.append(str(exc))
print(json.dumps(out))
"""


@pytest.mark.slow  # imports each framework in its own interpreter
@pytest.mark.timeout(600)
@pytest.mark.parametrize("framework", ["torch", "jax", "tensorflow", "mxnet"])
def test_the_plan_says_what_the_backend_itself_says(framework):
    cases = [(w, d, m) for w, f, d, m in CASES if f == framework]
    found = run_in(framework, BUILD, framework, json.dumps([(w.to_json(), d, m) for w, d, m in cases]))
    assert found == [said(w, framework, d, m) for w, d, m in cases]


def test_a_malloc_not_installed_here_is_known_as_the_child_says_it_first(monkeypatch):
    """`--modes tcmalloc` on a machine without libtcmalloc: a dry run counted each such cell as a process and a pilot
    step ('8 cell processes ... from 8 pilot steps', 6 of them unsupported), and the run started a child to say it.
    The child checks the malloc before it imports its framework, so the parent knows it, in the child's words."""
    from dlperf.frameworks.common import heap
    from dlperf.modes import Mode

    monkeypatch.setattr(heap, "library", lambda component: None)  # installed nowhere
    for framework in ("torch", "jax", "tensorflow"):
        for mode in ("tcmalloc", "bf16+jemalloc"):
            component = Mode.TCMALLOC if "tcmalloc" in mode else Mode.JEMALLOC
            with pytest.raises(NotImplementedError) as child:  # what the child raises first
                heap.check_preloaded(component)
            assert said(BUILTIN["tiny-fcn-r"], framework, "cpu", mode) == str(child.value)
    assert said(USER, "jax", "cpu", "tcmalloc").startswith("tcmalloc: libtcmalloc_minimal is not installed here")
    monkeypatch.setattr(heap, "library", lambda component: "libtcmalloc_minimal.so.4")
    assert said(BUILTIN["tiny-fcn-r"], "torch", "cpu", "tcmalloc") is None  # installed: the child measures it
