def test_the_command_named_to_go_on_is_one_the_shell_finds(tmp_path, monkeypatch):
    """`make run` calls .venv/bin/dlperf without activating the environment: its "Continue with: dlperf run --resume"
    was "command not found". The script as called is named where PATH finds no dlperf or another one."""
    from dlperf.store.location import program, resume_command

    script = tmp_path / "venv" / "bin" / "dlperf"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("DLPERF_DB", raising=False)
    monkeypatch.setattr("sys.argv", [str(script), "run"])
    assert program() == str(script) and resume_command("r.db") == f"{script} run --resume --db r.db"
    monkeypatch.setenv("PATH", str(script.parent))  # an activated environment: its name alone
    assert program() == "dlperf" and resume_command("r.db") == "dlperf run --resume --db r.db"
    monkeypatch.setattr("sys.argv", ["/x/site-packages/dlperf/__main__.py"])  # python -m dlperf
    assert program() == "dlperf"
