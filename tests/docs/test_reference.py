"""The site's generated pages (docs/hooks/generated.py): every command and flag from the parsers themselves, every
export column and exit code with its meaning, the root files included with their links working on the site."""

import argparse
import importlib.util

import pytest

from conftest import ROOT
from dlperf.cli import build_parser
from dlperf.vocab import ExitCode


@pytest.fixture(scope="module")
def generated():
    spec = importlib.util.spec_from_file_location("dlperf_docs_generated", ROOT / "docs/hooks/generated.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sections(markdown: str) -> dict[str, str]:
    """The reference's text by command: `dlperf run` -> its section (heading to the next heading)."""
    out, name = {}, "dlperf"
    for line in markdown.splitlines():
        if line.startswith("#"):
            name = line.lstrip("# ")
        out[name] = out.get(name, "") + line + "\n"
    return out


def every_command(parser: argparse.ArgumentParser, prog: str = "dlperf"):
    """(prog, parser) of `dlperf` and each of its (sub)commands, walked from the parser objects."""
    yield prog, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from every_command(sub, f"{prog} {name}")


def test_every_flag_of_every_command_is_in_its_section_with_its_help_default_and_choices(generated):
    parser = build_parser()
    page = sections(generated.cli_markdown(parser))
    commands = list(every_command(parser))
    assert len(commands) > 15  # the walk found the subcommands
    for prog, command in commands:
        assert prog in page, f"{prog} has no section"
        for action in command._actions:
            if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                continue
            names = action.option_strings or [action.metavar or action.dest]
            for name in names:
                assert f"`{name}" in page[prog], f"{prog}: {name} missing"
            if action.help:
                assert generated.escape(generated.expanded_help(action, command)) in page[prog], (prog, names)
            for option in action.choices or getattr(action.type, "choices", None) or ():
                assert f"`{option}`" in page[prog], (prog, names, option)
            if action.nargs != 0 and action.default not in (None, argparse.SUPPRESS, []):
                assert f"`{action.default}`" in page[prog], (prog, names, action.default)


def test_a_flag_added_in_the_code_is_in_the_reference_without_editing_a_page(generated, monkeypatch):
    from dlperf.commands import table

    before = table.add_arguments

    def with_one_more(p):
        before(p)
        p.add_argument("--brand-new", default="x", type=str, choices=["x", "y"], help="added by the test (%(default)s)")

    monkeypatch.setattr(table, "add_arguments", with_one_more)
    table_section = sections(generated.cli_markdown())["dlperf table"]
    row = next(line for line in table_section.splitlines() if line.startswith("| `--brand-new"))
    assert row == "| `--brand-new BRAND_NEW` | added by the test (x) | `x` | `x`, `y` |"


def test_a_closed_set_flag_lists_its_choices(generated):
    """`commands.common.choice`, argparse's `type` for a closed set, names its options as argparse's `choices`."""
    run_table = sections(generated.cli_markdown())["dlperf table"]
    row = next(line for line in run_table.splitlines() if line.startswith("| `--format"))
    assert "`text`, `md`, `csv`, `json`" in row


def test_help_text_is_plain_text_in_a_table_cell_and_code_stays_code(generated):
    assert generated.escape("a|b *c* d_e <f> `g_h|i`") == r"a\|b \*c\* d\_e &lt;f&gt; `g_h|i`"


def test_every_export_column_has_its_meaning_and_no_more(generated):
    columns = generated.export_columns()
    assert columns[:5] == ["run_id", "run_started_at", "run_state", "run_origin", "hostname"] and "key" in columns
    assert columns[-1] == "samples"
    assert set(columns) == set(generated.EXPORT_COLUMNS), set(columns) ^ set(generated.EXPORT_COLUMNS)
    rows = [line for line in generated.export_markdown().splitlines() if line.startswith("| `")]
    assert [r.split("`")[1] for r in rows] == columns  # in the order export writes them


def test_a_new_export_column_without_its_meaning_fails_the_build(generated, monkeypatch):
    monkeypatch.setattr(generated, "export_columns", lambda: ["run_id", "brand_new"])
    with pytest.raises(ValueError, match="brand_new"):
        generated.export_markdown()


def test_every_exit_code_is_on_its_page_with_its_meaning(generated, monkeypatch):
    page = generated.exit_codes_markdown()
    for code in (0, 1, 2, 130):
        assert f"\n| {code} | `" in page
    assert set(generated.exit_codes()) == set(generated.EXIT_CODES)
    monkeypatch.setattr(ExitCode, "BRAND_NEW", 3, raising=False)
    with pytest.raises(ValueError, match="BRAND_NEW"):
        generated.exit_codes_markdown()


def test_an_unknown_marker_fails_the_build(generated):
    with pytest.raises(ValueError, match="unknown marker"):
        generated.fill("x\n<!-- dlperf:clii -->\n", "reference/cli.md")
    with pytest.raises(ValueError, match="include 'LICENSE'"):
        generated.fill("<!-- dlperf:include LICENSE -->\n", "architecture.md")


def test_an_included_root_files_links_work_on_the_site(generated):
    text = (
        "See [the rules](ARCHITECTURE.md#the-rules), [the figures](./BENCHMARKS.md), [CLI](src/dlperf/cli.py),\n"
        "[`Makefile`](Makefile), [a page](https://example.org/x.md), [here](#the-tree) and ![a chart](c.png).\n"
        "```\n[in a block](ARCHITECTURE.md)\n```\n"
    )
    assert generated.relink(text, depth=1) == (
        "See [the rules](../architecture.md#the-rules), [the figures](../benchmarks.md), CLI (`src/dlperf/cli.py`),\n"
        "`Makefile`, [a page](https://example.org/x.md), [here](#the-tree) and ![a chart](c.png).\n"
        "```\n[in a block](ARCHITECTURE.md)\n```\n"
    )


def test_the_root_files_are_included_as_they_are(generated):
    """A page that includes a root file is that file on the site; in the repository, where the marker shows nothing,
    it links the file (20 links of the guides once landed on a blank page there)."""
    for name, page in (("ARCHITECTURE.md", "architecture.md"), ("BENCHMARKS.md", "benchmarks.md")):
        text = (ROOT / "docs" / page).read_text()
        assert text.startswith(f"<!-- dlperf:include {name} -->\n") and f"](../{name})" in text
        included = generated.fill(text, page)
        assert (
            included.strip()
            == generated.relink((ROOT / name).read_text(), 0).strip()
            == (ROOT / name).read_text().strip()
        )


def test_the_committed_reference_text_is_what_the_code_makes_now(generated):
    """The reference pages hold their generated text between markers, committed, so a reader of the repository sees
    it (the pages once held only the markers, filled in when the site was built)."""
    stale = generated.stale_pages()
    assert not stale, f"stale: {', '.join(str(p.relative_to(ROOT)) for p in stale)}: run `make docs-reference`"
    for page in ("cli.md", "export.md", "exit-codes.md"):
        text = (ROOT / "docs/reference" / page).read_text()
        assert generated.BLOCK.search(text) and "|---|" in text, page


def test_the_site_makes_a_block_again_whatever_was_committed(generated):
    page = "# x\n<!-- dlperf:exit-codes -->\nsomething old\n<!-- /dlperf:exit-codes -->\nafter\n"
    built = generated.fill(page, "reference/x.md")
    assert "something old" not in built and "<!--" not in built and "| 130 |" in built and built.endswith("after\n")
    assert generated.written(page, "reference/x.md").startswith("# x\n<!-- dlperf:exit-codes -->\n| code |")


def test_a_pages_link_to_a_root_file_is_its_site_page_anchor_and_all(generated):
    """The guides link BENCHMARKS.md itself, which works in the repository; the site has it as its page."""
    page = (
        "See [the harness's cost](../../BENCHMARKS.md#what-the-harness-costs), [the\nbenchmarks]"
        "(../../BENCHMARKS.md) and [the design](../../ARCHITECTURE.md).\n```\n[kept](../../BENCHMARKS.md)\n```\n"
        "[a guide](gpu.md)\n"
    )
    built = generated.fill(page, "guides/x.md")
    assert "[the harness's cost](../benchmarks.md#what-the-harness-costs)" in built
    assert "[the\nbenchmarks](../benchmarks.md)" in built and "[the design](../architecture.md)" in built
    assert "[kept](../../BENCHMARKS.md)" in built and "[a guide](gpu.md)" in built
    top = generated.fill("[b](../BENCHMARKS.md#x) [r](../README.md)\n", "index.md")
    assert top == "[b](benchmarks.md#x) [r](index.md)\n"
