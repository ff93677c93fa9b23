"""Dedicated framework environments: where they live, how a worker finds dlperf there, and what counts as installed.

The real installs (pip, the frameworks' wheels) run in CI's `make envs`; these tests use a bare venv, which is made in
a second and has nothing installed, to show the isolation itself.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from conftest import dlperf, one_line_error
from dlperf import envs
from dlperf.envs import framework_status
from dlperf.runner.launch import child_env


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("DLPERF_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


def bare_env(framework: str, *, verified: bool) -> Path:
    """A venv where the framework's would be, with nothing installed: a stand-in for `dlperf env install`."""
    venv.create(envs.env_dir(framework), with_pip=False, symlinks=True)
    if verified:
        (envs.env_dir(framework) / envs.RECORD).write_text(json.dumps({"verified": True, "versions": {"mxnet": "9"}}))
    return envs.env_python(framework)


def test_the_data_directory_is_overridable_and_defaults_under_the_home(data_dir, monkeypatch):
    assert envs.env_dir("jax") == data_dir.resolve() / "envs" / "jax"
    monkeypatch.delenv("DLPERF_DATA_DIR")
    monkeypatch.setenv("XDG_DATA_HOME", "/somewhere")
    assert envs.data_dir() == Path("/somewhere/dlperf")


def test_a_framework_is_found_here_or_in_its_verified_environment_only(data_dir):
    assert envs.interpreter_for("torch") == sys.executable  # importable in the test's own environment
    assert envs.interpreter_for("mxnet") is None
    assert "dlperf env install mxnet" in envs.unavailable_reason("mxnet")
    bare_env("mxnet", verified=False)  # an install that never finished verifying
    assert envs.interpreter_for("mxnet") is None
    assert "not verified" in envs.unavailable_reason("mxnet")
    python = bare_env("mxnet", verified=True)
    assert envs.interpreter_for("mxnet") == str(python)
    status = framework_status("mxnet")
    assert status.available and status.version == "9" and status.environment == str(envs.env_dir("mxnet"))


def test_a_worker_in_another_environment_imports_dlperf_and_nothing_else_of_this_one(data_dir):
    python = str(bare_env("mxnet", verified=True))
    env = child_env(os.environ, 2, python)
    assert env["PYTHONPATH"] == envs.worker_path()
    assert os.listdir(env["PYTHONPATH"]) == ["dlperf"]  # a link to this package, nothing beside it
    script = (
        "import importlib.util as u, json, os, dlperf.worker.cell, dlperf.runner.probe;"
        "print(json.dumps({m: u.find_spec(m) is not None for m in ('numpy', 'rich', 'torch')}"
        " | {'dlperf': os.path.dirname(dlperf.__file__), 'omp': os.environ['OMP_NUM_THREADS']}))"
    )
    done = subprocess.run([python, "-c", script], env=env, capture_output=True, text=True, cwd="/", check=True)
    seen = json.loads(done.stdout)
    assert seen == {"numpy": False, "rich": False, "torch": False, "dlperf": seen["dlperf"], "omp": "2"}
    assert Path(seen["dlperf"]).resolve() == Path(envs.__file__).resolve().parents[1]


def test_the_worker_link_follows_the_package_and_is_replaced_atomically(data_dir):
    first = envs.worker_path()
    link = Path(first) / "dlperf"
    link.unlink()
    link.symlink_to("/nonexistent", target_is_directory=True)  # a stale link: this clone moved
    assert envs.worker_path() == first
    assert link.resolve() == Path(envs.__file__).resolve().parents[1]


def test_every_dedicated_environment_has_a_committed_constraints_file_of_exact_versions():
    for framework, packages in envs.PACKAGES.items():
        lines = [x for x in envs.constraints_file(framework).read_text().splitlines() if x.strip()]
        pins = dict(line.split("==") for line in lines)
        assert all(v and "*" not in v for v in pins.values()), framework
        for package in packages:
            assert package.replace("-", "_") in {p.replace("-", "_").lower() for p in pins}, (framework, package)
    assert envs.constraints_file("mxnet").read_text().count("numpy==1.23.5") == 1  # MXNet 1.9.1 needs numpy<1.24
    assert "tensorflow_cpu==2.21.0" in envs.constraints_file("tensorflow").read_text()


def test_env_list_and_the_refusals(data_dir):
    bare_env("jax", verified=True)
    listed = json.loads(dlperf("env", "list", "--format", "json", env={"DLPERF_DATA_DIR": str(data_dir)}).stdout)
    by_name = {r["framework"]: r for r in listed}
    assert by_name["jax"]["installed"] and by_name["jax"]["used"] == "dedicated"
    assert not by_name["tensorflow"]["installed"] and "dlperf env install tensorflow" in by_name["tensorflow"]["reason"]
    text = dlperf("env", "list", env={"DLPERF_DATA_DIR": str(data_dir), "COLUMNS": ""}).stdout  # a pipe (xdist: 80)
    assert f"data directory: {data_dir.resolve()}" in text
    for name, words in [
        ("caffe", "no release installs"),
        ("torch", "pip install 'dlperf[torch]'"),
        ("keras", "unknown"),
    ]:
        one_line_error(dlperf("env", "install", name, env={"DLPERF_DATA_DIR": str(data_dir)}), words)
    assert not (data_dir / "envs" / "caffe").exists()


def test_a_run_asking_for_a_framework_without_its_environment_says_how_to_get_it(data_dir, tmp_path):
    done = dlperf(
        "run", "--frameworks", "tensorflow", "--workloads", "tiny-fcn-r", db=tmp_path / "x.db",
        env={"DLPERF_DATA_DIR": str(data_dir)},
    )  # fmt: skip
    one_line_error(done, "--frameworks tensorflow: not installed: run `dlperf env install tensorflow`")


def test_a_folder_named_after_a_framework_is_not_the_framework(tmp_path, monkeypatch):
    """A project's `jax/` folder (or tests/frameworks/jax) on the path is a namespace package: importable by name,
    but not JAX. Taken for it, dlperf would start JAX's workers in its own environment, where they fail."""
    (tmp_path / "mxnet").mkdir()
    monkeypatch.syspath_prepend(str(tmp_path))
    assert not envs.importable_here("mxnet")
    assert envs.importable_here("torch") == (importlib.util.find_spec("torch") is not None)


def test_an_install_records_what_its_verifying_step_answered(data_dir, monkeypatch):
    from dlperf.answers import SelftestAnswer

    bare_env("mxnet", verified=True)  # installed again: its environment kept, pip run in it
    ran = []
    monkeypatch.setattr(envs, "_check", lambda cmd, what: ran.append(what))  # no pip: the record alone
    answer = SelftestAnswer("mxnet", "3.11.2", {"mxnet": "1.9.1", "numpy": None}, 26_874, [2.3, 2.2], 0.4, {})
    rec = envs.install("mxnet", lambda python: answer, log=lambda line: None)
    assert ran == ["pip install"] and envs.record("mxnet")["versions"] == answer.versions
    assert (rec.framework, rec.verified, rec.versions, rec.python) == ("mxnet", True, answer.versions, "3.11.2")
    written = json.loads((envs.env_dir("mxnet") / envs.RECORD).read_text())
    assert list(written) == ["framework", "verified", "versions", "python", "constraints", "constraints_sha1",
                             "verify", "verified_at", "install_s"]  # fmt: skip
    assert written["verify"] == answer.to_json() and written["constraints"] == "mxnet.txt"


def test_an_install_cut_short_is_made_again_from_scratch_not_mended_in_place(data_dir, monkeypatch):
    """Ctrl-C while the venv was made left bin/python without pip, and one while pip unpacked tensorflow a package pip
    took for installed: every `dlperf env install` after failed the same way (No module named pip; No module named
    'tensorflow.python'), and `env list` sent the user back to it. An environment without a verified record is now
    made again."""
    from dlperf.answers import SelftestAnswer

    python = bare_env("mxnet", verified=False)
    (python.parent.parent / "half-unpacked").write_text("")
    ran, said = [], []

    def check(cmd, what):
        ran.append(what)
        if what == "creating the virtual environment":
            venv.create(envs.env_dir("mxnet"), with_pip=False, symlinks=True)

    monkeypatch.setattr(envs, "_check", check)
    answer = SelftestAnswer("mxnet", "3.11.2", {"mxnet": "1.9.1"}, 26_874, [2.3, 2.2], 0.4, {})
    envs.install("mxnet", lambda python: answer, log=said.append)
    assert ran == ["creating the virtual environment", "pip install"]
    assert said[0] == f"its last install in {envs.env_dir('mxnet')} did not finish: making it again from scratch"
    assert not (envs.env_dir("mxnet") / "half-unpacked").exists() and envs.record("mxnet") is not None


def test_env_install_takes_force_before_the_names_too(data_dir):
    """`dlperf env install --force mxnet`, the way a user types it, was "unrecognized arguments: mxnet"."""
    for words in (["env", "install", "--force", "keras"], ["env", "install", "keras", "--force"]):
        one_line_error(dlperf(*words, env={"DLPERF_DATA_DIR": str(data_dir)}), "dlperf env install keras: unknown")


def test_a_broken_dedicated_environment_is_said_with_how_to_mend_it(data_dir):
    from dlperf.runner.probe import mend

    python = str(envs.env_python("mxnet"))
    assert mend("mxnet", python, "failed: ModuleNotFoundError: No module named 'numpy'") == (
        "; its environment is broken: dlperf env install mxnet --force makes it again"
    )
    assert mend("mxnet", python, "failed: ValueError: bad shape") == ""  # a workload's own error
    assert mend("mxnet", sys.executable, "failed: ModuleNotFoundError: x") == ""  # not a dedicated environment


def test_env_list_says_which_environment_was_installed_with_other_pins(data_dir):
    """The install record kept its constraints file's SHA-1 and nothing compared it: after dlperf's pins changed,
    `env list` said the old environment was fine."""
    bare_env("jax", verified=True)
    record = envs.env_dir("jax") / envs.RECORD
    pinned = envs.pinned_version("jax")
    for version, changed in ((pinned, False), ("0.0.1", True)):  # not its file's hash: a comment edited is no change
        record.write_text(json.dumps({"verified": True, "versions": {"jax": version, "a-package-not-pinned": "1"},
                                      "constraints_sha1": "0" * 40}))  # fmt: skip
        [jax] = [r for r in envs.listing() if r.framework == "jax"]
        assert jax.pins_changed is changed
    text = dlperf("env", "list", env={"DLPERF_DATA_DIR": str(data_dir), "COLUMNS": ""}).stdout  # a pipe (xdist: 80)
    assert "installed with other versions than this dlperf pins: dlperf env install jax updates it" in text


def test_dlperf_env_alone_without_a_database_points_at_env_list(data_dir, tmp_path):
    """`dlperf env` is `env show`, a run's stored environment: before any run a user checking what is installed got
    only "no such database"."""
    said = dlperf("env", db=tmp_path / "none.db", env={"DLPERF_DATA_DIR": str(data_dir)})
    one_line_error(said, "no such database (run `dlperf run` first); `dlperf env list` shows the frameworks' environ")
    shown = dlperf("env", "show", db=tmp_path / "none.db", env={"DLPERF_DATA_DIR": str(data_dir)})
    assert "env list" not in shown.stderr and shown.returncode == 2


def test_a_second_install_of_one_framework_at_once_is_refused_not_let_remove_the_first(data_dir):
    """A second `dlperf env install mxnet` begun while the first made the environment took it for one cut short and
    removed it under the first."""
    refused = pytest.raises(envs.InstallError, match=r"^another `dlperf env install mxnet` is making it now")
    with envs.installing("mxnet"), refused:
        envs.install("mxnet", lambda python: None, log=lambda line: None)
    with envs.installing("mxnet"):  # released: the next one holds it
        pass
