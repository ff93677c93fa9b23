"""The pages are read from the repository's root (docs/index.md says so), so a command that names one of the files
shipped in examples/ names it by its path from there, `examples/my_model.py:make`: a bare `my_model.py:make` is refused
there as a file that does not exist (gpu.md's advise and fit examples were, before)."""

from __future__ import annotations

import re

from test_examples import examples, shown

from conftest import ROOT

FILE_ARG = re.compile(r"^(?P<path>[^:@,]+\.py)(:[A-Za-z_]\w*)?(@b\d+)?$")
SHIPPED = {p.name for p in (ROOT / "examples").glob("*.py")}


def misnamed(example) -> list[str]:
    """The words of one command that name a file of examples/ other than by its path from the repository's root."""
    out = []
    for word in example.args:
        for item in word.split(","):
            m = FILE_ARG.match(item)
            name = m["path"].rsplit("/", 1)[-1] if m else ""
            if name in SHIPPED and m["path"] != f"examples/{name}":
                out.append(item)
    return out


def test_a_shipped_example_is_named_by_its_path_from_the_repositorys_root():
    assert "my_model.py" in SHIPPED
    wrong = [f"{e}: {', '.join(misnamed(e))}" for e in shown() if misnamed(e)]
    assert not wrong, "\n".join(wrong)


def test_a_bare_name_of_a_shipped_file_is_found_and_its_path_is_not():
    page = "```sh\ndlperf advise my_model.py:make\ndlperf run --workloads examples/my_model.py:make@b32\n```\n"
    found = [misnamed(e) for e in examples("page", page)]
    assert found == [["my_model.py:make"], []]
