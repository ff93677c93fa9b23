"""`dlperf run --resume` refuses a run measured on another machine or software, by what its store recorded: a tester
edited a stored run's environment (no AVX-512, Python 3.10.0) and `--resume --dry-run` accepted it, since only the
fingerprint stored beside it, which an older dlperf wrote without the CPU's extensions or Python, was compared."""

from __future__ import annotations

import json
import sqlite3

import pytest

from conftest import require
from dlperf import api, envinfo
from dlperf.errors import UsageError
from dlperf.plan import make_plan
from dlperf.runner.session import Session
from dlperf.spec import make_spec
from dlperf.store import Store

# what dlperf stored as a run's fingerprint before it recorded the CPU's numbers, extensions and Python
OLD_KEYS = ("cpu_model", "cores", "memory_gib", "hostname", "gpus", "frameworks")


def stored_by_an_older_dlperf(db: str, edit=lambda env: None) -> int:
    """An interrupted run of this machine, its fingerprint as an older dlperf stored it, its environment `edit`ed."""
    plan = make_plan(make_spec(["tiny-fcn-r"], threads=[1]))
    store = Store.open(db, create=True)
    session = Session.create(store, plan.spec, plan.env, plan.cores, ["dlperf", "run"], plan.cells, plan.workloads)
    store.set_run_status(session.run_id, "interrupted")
    store.close()
    env = json.loads(json.dumps(plan.env))
    for key in envinfo.CPU_ID:
        env["cpu"].pop(key, None)  # not recorded then either
    old = {k: v for k, v in envinfo.fingerprint(env).items() if k in OLD_KEYS}
    edit(env)
    with sqlite3.connect(db) as con:
        con.execute("UPDATE runs SET env_json = ?, fingerprint_json = ? WHERE id = ?",
                    (json.dumps(env), json.dumps(old), session.run_id))  # fmt: skip
    con.close()
    return session.run_id


def test_an_older_run_of_this_machine_stays_resumable(tmp_path):
    require("torch")
    db = str(tmp_path / "r.db")
    stored_by_an_older_dlperf(db)
    assert api.resume(db, dry_run=True).tasks


def test_an_older_run_of_other_cpu_extensions_or_python_is_refused(tmp_path):
    require("torch")
    db = str(tmp_path / "r.db")
    here = envinfo.capture()
    extension = envinfo.kernel_isa(here["cpu"]["flags"])[0]  # sse2 at least, on any x86-64 CPU

    def edit(env: dict) -> None:
        env["cpu"]["flags"].remove(extension)
        env["python"]["version"] = "3.10.0"

    run_id = stored_by_an_older_dlperf(db, edit)
    with pytest.raises(UsageError) as refused:
        api.resume(db, dry_run=True)
    said = str(refused.value)  # other extensions: another machine's run, which --resume does not take here
    assert said.startswith(f"resume: {db} holds no unfinished run of this machine: run {run_id} was measured on "
                           "another machine, ")  # fmt: skip
    assert said.endswith(f"(CPU extensions gained {extension}), and a run is one machine's: `dlperf run --resume` "
                         "on that machine, with this store, measures what it left; start a new run here "
                         "instead")  # fmt: skip
    db = str(tmp_path / "python.db")
    run_id = stored_by_an_older_dlperf(db, lambda env: env["python"].update(version="3.10.0"))
    with pytest.raises(UsageError) as refused:  # this machine's run, its software changed
        api.resume(db, dry_run=True)
    python = envinfo.fingerprint(here)["python"]
    assert str(refused.value) == (f"resume: run {run_id} was measured on a different machine or software (Python "
                                  f"3.10 -> {python}); start a new run instead")  # fmt: skip


def test_a_run_another_dlperf_version_measured_is_refused_and_one_that_recorded_none_is_not(tmp_path):
    """dlperf's version is recorded with every run, but --resume did not compare it (session 28's note): a run begun
    by another version, whose timing and figures may differ, was finished by this one. A run that recorded none (an
    environment stored by hand, say) is taken as this version's."""
    require("torch")
    from dlperf.version import VERSION

    db = str(tmp_path / "r.db")
    run_id = stored_by_an_older_dlperf(db, lambda env: env.update(dlperf_version="0.0.9"))
    with pytest.raises(UsageError) as refused:
        api.resume(db, dry_run=True)
    assert str(refused.value) == (f"resume: run {run_id} was measured on a different machine or software (dlperf "
                                  f"0.0.9 -> {VERSION}); start a new run instead")  # fmt: skip
    db = str(tmp_path / "none.db")
    stored_by_an_older_dlperf(db, lambda env: env.pop("dlperf_version"))
    assert api.resume(db, dry_run=True).tasks
    here = envinfo.capture()
    assert envinfo.resume_diff(envinfo.fingerprint(here), here, here) == []
    assert envinfo.resume_diff(envinfo.fingerprint(here), {**here, "dlperf_version": "9"}, here) == [
        f"dlperf 9 -> {VERSION}"
    ]


def test_a_hostname_alone_does_not_stop_a_resume_but_names_the_machine():
    """A container restarted on the same machine has a new hostname: its interrupted run could never be resumed
    ('hostname ctr1 -> ctr2'), though store.md lists what stops a resume and the hostname is not in it."""
    here = envinfo.capture()
    elsewhere = {**here, "hostname": "ctr1"}
    assert envinfo.resume_diff(envinfo.fingerprint(elsewhere), elsewhere, here) == []
    assert envinfo.machine_diff(envinfo.fingerprint(elsewhere), elsewhere, here) == []
    bigger = {**here, "memory_total_bytes": 1024 * 2**30}
    assert envinfo.machine_diff(envinfo.fingerprint(bigger), bigger, here) == [
        f"memory (GiB) 1024 -> {envinfo.fingerprint(here)['memory_gib']}"
    ]
    assert envinfo.machine_diff({}, {}, here) == []  # what a run did not record is no difference


def test_a_run_begun_by_other_timing_code_or_by_a_dlperf_that_did_not_record_it_is_refused(tmp_path):
    """dlperf's version has been 0.1.0 at every commit, so `--resume` of a run interrupted under 11eef592, whose worker
    and timer were 1,480 commits older, went on under this one with no word, mixing the two codes' timings in its
    table. The digest of the code that builds and times a step (`envinfo.timing_code`) is kept with the run and
    compared; a run that kept none (an older dlperf's) is refused too, as is the same sweep's warning that --resume
    would finish it."""
    require("torch")
    here = envinfo.timing_code()
    older = {"digest": "4f1c9a2e0b7d" + "0" * 52, "commit": "11eef5929ad38b010fe9521d464e183e73a2e56c"}
    db = str(tmp_path / "r.db")
    run_id = stored_by_an_older_dlperf(db, lambda env: env.update(dlperf_code=older))
    with pytest.raises(UsageError) as refused:
        api.resume(db, dry_run=True)
    now = here["digest"][:12] + (f" (commit {here['commit'][:8]})" if "commit" in here else "")
    assert str(refused.value) == (f"resume: run {run_id} was measured on a different machine or software (dlperf's "
                                  f"timing code 4f1c9a2e0b7d (commit 11eef592) -> {now}); start a new run "
                                  "instead")  # fmt: skip
    db = str(tmp_path / "none.db")
    run_id = stored_by_an_older_dlperf(db, lambda env: env.pop("dlperf_code"))
    with pytest.raises(UsageError) as refused:
        api.resume(db, dry_run=True)
    assert str(refused.value) == (f"resume: run {run_id} was measured on a different machine or software (dlperf's "
                                  "timing code, which the dlperf that began the run did not record, so it may time "
                                  "the cells left otherwise); start a new run instead")  # fmt: skip
    db = str(tmp_path / "same.db")
    stored_by_an_older_dlperf(db)  # this code's own run
    assert api.resume(db, dry_run=True).tasks


def test_the_commit_is_read_from_a_checkout_its_worktrees_and_packed_refs(tmp_path):
    """No subprocess: HEAD, the ref it names (loose, in a worktree's common folder, or packed), or a detached HEAD."""
    sha, other = "a" * 40, "b" * 40
    repo = tmp_path / "repo"
    (repo / ".git" / "refs" / "heads").mkdir(parents=True)
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (repo / ".git" / "packed-refs").write_text(
        f"# pack-refs with: peeled\n{other} refs/heads/x\n{sha} refs/heads/main\n"
    )
    assert envinfo.git_commit(repo) == sha
    (repo / ".git" / "refs" / "heads" / "main").write_text(other + "\n")  # a loose ref wins over the packed one
    assert envinfo.git_commit(repo) == other
    tree = tmp_path / "tree"
    (repo / ".git" / "worktrees" / "tree").mkdir(parents=True)
    (repo / ".git" / "worktrees" / "tree" / "HEAD").write_text("ref: refs/heads/x\n")
    (repo / ".git" / "worktrees" / "tree" / "commondir").write_text("../..\n")
    tree.mkdir()
    (tree / ".git").write_text(f"gitdir: {repo / '.git' / 'worktrees' / 'tree'}\n")
    assert envinfo.git_commit(tree) == other  # refs/heads/x, packed in the common folder
    (repo / ".git" / "HEAD").write_text(sha + "\n")  # detached
    assert envinfo.git_commit(repo) == sha
    assert envinfo.git_commit(tmp_path) is None  # no checkout: an installed dlperf


def test_an_editors_lock_file_or_a_dangling_link_beside_the_timing_code_is_no_traceback(tmp_path, monkeypatch):
    """An editor writes `.#timer.py`, a link to nowhere, beside a file it edits: `timing_code` read every `*.py`
    `rglob` found, so every command that captures the environment (run, table, predict, ...) ended in a
    FileNotFoundError traceback while the file was open. Hidden names and what is no regular file are left out: the
    digest is the tree's without them."""
    import shutil

    tree = tmp_path / "dlperf"
    shutil.copytree(envinfo.PACKAGE, tree, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(envinfo, "PACKAGE", tree)
    envinfo.timing_code.cache_clear()
    clean = envinfo.timing_code()["digest"]
    (tree / "worker" / ".#timer.py").symlink_to(tmp_path / "nowhere")
    (tree / "measure" / "gone.py").symlink_to(tmp_path / "nowhere.py")
    envinfo.timing_code.cache_clear()
    try:
        assert envinfo.timing_code()["digest"] == clean
    finally:
        envinfo.timing_code.cache_clear()
