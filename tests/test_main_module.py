"""`python -m dlperf` run by hand in a folder holding a user's statistics.py: `-m` put that folder first on sys.path,
so dlperf itself imported the user's file for the standard library's and crashed before its first line of output
(its children start with -P since e71d3a3; the parent did not). `__main__` moves the folder last."""

from conftest import ROOT, dlperf

STATISTICS = 'raise SystemExit("the user\'s statistics.py was imported by dlperf")\n'


def test_python_m_dlperf_beside_a_users_statistics_py_uses_the_standard_librarys(tmp_path):
    (tmp_path / "statistics.py").write_text(STATISTICS)
    path = {"PYTHONPATH": str(ROOT / "src")}  # conftest's default ends in ':', an empty entry: the cwd again
    for args in (["--help"], ["list"]):
        done = dlperf(*args, cwd=tmp_path, timeout=120, env=path)
        assert done.returncode == 0 and "statistics.py" not in done.stdout + done.stderr, done.stdout + done.stderr
    assert "fcn-s" in done.stdout  # list's workloads
