"""benchmarks/house.py: the package keeps the shape issue 28 gave it, and each count sees what it counts (a small
package built to break every goal is found over them)."""

import subprocess
import sys

from conftest import ROOT, benchmark

SCRIPT = ROOT / "benchmarks" / "house.py"


def test_the_package_is_within_every_goal():
    counts = benchmark("house").count()
    over = {name: n for name, (n, most) in counts.goals().items() if n > most}
    assert over == {}, (counts.bare_dicts, counts.long_files, counts.long_functions)


def test_the_script_says_so_and_exits_0():
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.count("ok ") == 4, done.stdout


def test_every_goal_is_seen_broken(tmp_path):
    house = benchmark("house")
    (tmp_path / "runner").mkdir()
    keyed = "\n".join(f"x{i} = row['key{i}']" for i in range(house.KEYED_AT_START // 4 + 1))
    body = "\n".join(f"    a{i} = {i}" for i in range(house.MAX_FUNCTION_LINES))
    (tmp_path / "runner" / "collect.py").write_text(
        f"{keyed}\n\ndef measurement() -> dict:\n    return {{}}\n\ndef long():\n{body}\n" + "\n" * house.MAX_FILE_LINES
    )
    counts = house.count(tmp_path)
    assert all(n > most for n, most in counts.goals().values()), counts.goals()
    assert counts.bare_dicts == ["runner/collect.py:measurement"]
