"""The probe: a short child process that answers questions needing a framework, in JSON.

    python -m dlperf.runner.probe FRAMEWORK REQUEST_JSON

The parent never imports a framework; it asks the probe which devices exist, which versions are installed, and what a
user's workload factory builds. The answer is the last line of the child's stdout.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from dlperf.errors import UsageError

PROBE_TIMEOUT_S = 180.0
_MARK = "DLPERF-PROBE "


def ask(framework: str, request: dict, python: str = sys.executable, timeout: float = PROBE_TIMEOUT_S) -> dict:
    """Run the probe and return its answer. A user error in the child (bad factory) becomes a UsageError here."""
    from dlperf.runner.launch import child_env, run_child

    cmd = [python, "-m", "dlperf.runner.probe", framework, json.dumps(request)]
    with tempfile.TemporaryDirectory(prefix="dlperf-probe-") as tmp:
        result = run_child(cmd, child_env(os.environ, 1, python), timeout, Path(tmp))
        answer = _answer(Path(tmp) / "stdout.log")
    if answer is None:
        why = "timed out" if result.timed_out else (result.crashed_reason or "gave no answer")
        last = result.stderr_tail.strip().splitlines()[-1:] or [""]
        raise UsageError(f"{_subject(request)}: the {framework} probe {why}{': ' + last[0] if last[0] else ''}")
    if "usage_error" in answer:
        raise UsageError(answer["usage_error"])
    if "error" in answer:
        raise UsageError(f"{_subject(request)}: the {framework} probe failed: {answer['error']}")
    return answer


def _subject(request: dict) -> str:
    return f"--workloads {request['source']!r}" if "source" in request else "checking the frameworks and devices"


def _answer(stdout: Path) -> dict | None:
    for line in reversed(stdout.read_text(errors="replace").splitlines()):
        if line.startswith(_MARK):
            return json.loads(line[len(_MARK) :])
    return None


def main(argv: list[str]) -> int:
    framework, request = argv[1], json.loads(argv[2])
    try:
        from dlperf.frameworks import backend

        answer = backend(framework).probe(request)
    except UsageError as exc:
        answer = {"usage_error": str(exc)}
    except Exception as exc:
        answer = {"error": f"{type(exc).__name__}: {exc}"}
    sys.stdout.write("\n" + _MARK + json.dumps(answer) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
