"""The pages generated from the code, filled in at build time (mkdocs.yml's `hooks`), so they cannot drift from it.

A page holds a marker where the generated text goes: `<!-- dlperf:cli -->` (every command and flag, read from the
argparse parsers of `dlperf.cli`), `<!-- dlperf:export-columns -->` (the columns `dlperf export` writes, in its
order, from a record `dlperf.report.export` builds), `<!-- dlperf:exit-codes -->` (`dlperf.vocab.ExitCode`) and
`<!-- dlperf:include FILE.md -->` (a Markdown file of the repository's root, as it is, its relative links made to
work on the site: the whole page, whatever else it holds for a reader of the repository). An unknown marker, a column
or an exit code without its meaning here fails the build.

A page's link to one of those root files (`../../BENCHMARKS.md#a-heading`, which works in the repository) is made a
link to the site's page of it. The site's anchors are GitHub's (mkdocs.yml's slugify), so one anchor serves both.

The reference pages hold their generated text between two markers (`<!-- dlperf:cli -->` ... `<!-- /dlperf:cli -->`),
committed, so that a reader of the repository sees it as the site does: `make docs-reference` (this file run as a
script) writes it again from the code, and tests/docs/test_reference.py fails while a committed text is stale. The
site makes it again at build time whatever was committed.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))  # this checkout's dlperf, whatever is installed

MARKER = re.compile(r"^<!-- dlperf:(?P<name>[\w-]+)(?: (?P<arg>\S+))? -->$", re.MULTILINE)
# a generated text committed between its two markers, so that a reader of the repository sees it too
BLOCK = re.compile(r"^<!-- dlperf:(?P<name>[\w-]+) -->\n(?P<body>.*?)^<!-- /dlperf:(?P=name) -->$\n?",
                   re.MULTILINE | re.DOTALL)  # fmt: skip

# the root files the site includes, and the page each is (a link between them stays a link on the site)
ROOT_PAGES = {"README.md": "index.md", "ARCHITECTURE.md": "architecture.md", "BENCHMARKS.md": "benchmarks.md"}


def on_page_markdown(markdown: str, page, config, files) -> str:
    """mkdocs' hook: each marker of the page replaced by its generated text."""
    return fill(markdown, page.file.src_uri)


def fill(markdown: str, src_uri: str) -> str:
    if (included := MARKER.search(markdown)) and included["name"] == "include":
        return include(included["arg"], src_uri)
    markdown = to_site(BLOCK.sub(lambda m: generate(m["name"], src_uri), markdown), src_uri)  # committed text anew

    def replace(match: re.Match) -> str:
        name, arg = match["name"], match["arg"]
        if name == "include":
            return include(arg, src_uri)
        if name in GENERATORS and arg is None:
            return GENERATORS[name]()
        raise ValueError(f"{src_uri}: unknown marker {match[0]!r} (known: {', '.join(GENERATORS)}, include FILE.md)")

    return MARKER.sub(replace, markdown)


# ---- the command reference ----------------------------------------------------------------------------------------


def cli_markdown(parser: argparse.ArgumentParser | None = None) -> str:
    """Every command of `dlperf` (and its own subcommands, `dlperf env install`), its help, description, usage and a
    table of its flags: help, default, choices."""
    if parser is None:
        from dlperf.cli import build_parser

        parser = build_parser()
    out = [f"`{parser.prog}` {escape(parser.description or '')}", "", *flag_table(parser)]
    for name, sub, help_line in subcommands(parser):
        out += command_section(f"{parser.prog} {name}", sub, help_line, level=2)
    return "\n".join(out) + "\n"


def subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser, str]]:
    """(name, parser, its one-line help) of each subcommand, in the order `--help` lists them."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            return [(name, sub, helps.get(name, "")) for name, sub in action.choices.items()]
    return []


def command_section(prog: str, parser: argparse.ArgumentParser, help_line: str, level: int) -> list[str]:
    out = ["", f"{'#' * level} {prog}", "", f"{escape(help_line)}", ""]
    if parser.description:
        out += [escape(parser.description), ""]
    out += ["```text", usage(parser), "```", "", *flag_table(parser)]
    for name, sub, sub_help in subcommands(parser):
        out += command_section(f"{prog} {name}", sub, sub_help, level + 1)
    return out


def usage(parser: argparse.ArgumentParser, width: int = 100) -> str:
    """argparse's usage line, wrapped at `width` whatever the terminal building the site."""
    formatter = parser.formatter_class(prog=parser.prog, width=width)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    return formatter.format_help().strip()


def flag_table(parser: argparse.ArgumentParser) -> list[str]:
    actions = [a for a in parser._actions if flag_shown(a)]
    if not actions:
        return []
    rows = ["| flag | what it does | default | choices |", "|---|---|---|---|"]
    for a in actions:
        rows.append(f"| {flag_name(a)} | {escape(expanded_help(a, parser))} | {default_of(a)} | {choices_of(a)} |")
    return [*rows, ""]


def flag_shown(action: argparse.Action) -> bool:
    """Every flag but `--help` (every command has it) and the subcommands (each a section of its own)."""
    hidden = (argparse._SubParsersAction, argparse._HelpAction)
    return action.help is not argparse.SUPPRESS and not isinstance(action, hidden)


def flag_name(action: argparse.Action) -> str:
    """`-o FILE`, `--output FILE`; a positional argument by its name; a switch alone."""
    if not action.option_strings:
        return f"`{action.metavar or action.dest}`"
    takes_value = action.nargs != 0
    metavar = action.metavar or action.dest.upper()
    return ", ".join(f"`{o} {metavar}`" if takes_value else f"`{o}`" for o in action.option_strings)


def expanded_help(action: argparse.Action, parser: argparse.ArgumentParser) -> str:
    """The help as `--help` prints it: argparse's `%(default)s` and the like filled in."""
    text = action.help or ""
    if "%" not in text:
        return text
    params = {k: v for k, v in vars(action).items() if v is not argparse.SUPPRESS}
    params["prog"] = parser.prog
    if params.get("choices") is not None:
        params["choices"] = ", ".join(str(c) for c in params["choices"])
    return text % params


def default_of(action: argparse.Action) -> str:
    if action.nargs == 0 or action.default in (None, argparse.SUPPRESS) or action.default == []:
        return ""
    return f"`{action.default}`"


def choices_of(action: argparse.Action) -> str:
    """argparse's `choices`, or those of a closed-set `type` (`commands.common.choice`)."""
    options = action.choices if action.choices is not None else getattr(action.type, "choices", None)
    return ", ".join(f"`{c}`" for c in options) if options else ""


def escape(text: str) -> str:
    """Plain text in Markdown (a table cell too): no emphasis, no HTML, no column break, one line; a `code span`
    stays one."""
    parts = re.split(r"(`[^`]*`)", text.replace("\n", " "))
    return "".join(part if part.startswith("`") else plain(part) for part in parts)


def plain(text: str) -> str:
    text = re.sub(r"([\\`*_|\[\]])", r"\\\1", text)
    return text.replace("<", "&lt;").replace(">", "&gt;")


# ---- the export columns -------------------------------------------------------------------------------------------

# what each column of `dlperf export` holds; tests/docs/test_reference.py checks every column has one, and no more
EXPORT_COLUMNS = {
    "run_id": "the run the cell belongs to, in this store (`dlperf merge` gives a copied run a new one)",
    "run_started_at": "when that run began (UTC, ISO 8601): the same in every store a merge copied it to",
    "run_state": "complete, or what the run is: interrupted, stopped (its process gone), running, or copied while "
    "running; a record of a run not complete is what it measured so far",
    "run_origin": "where a run copied in by `dlperf merge` was measured: `FILE run N`, or `ray:NODE_ID run N` for a "
    "Ray node's run of `dlperf run --ray` (two nodes of one host are two machines); empty for a run measured in this "
    "store",
    "hostname": "the host of the machine that measured the run (a merged store holds several)",
    "cpu_model": "that machine's CPU model",
    "cores": "the cores that machine let dlperf use",
    "gpus": "that machine's GPUs, by name; empty without",
    "dlperf_version": "the dlperf that measured the run",
    "dlperf_code": "the digest (SHA-256) of that dlperf's code that builds and times a step, which `--resume` "
    "compares: two runs of one version at two commits may differ here; empty for a run an older dlperf measured",
    "dlperf_commit": "the git commit that dlperf ran from; empty where it was not run from a git checkout",
    "key": "the cell's identity: workload|framework|device|threads|mode, and what a cell adds (processes, loader)",
    "workload": "the workload's name (`dlperf list`)",
    "framework": "torch, jax, tensorflow or mxnet",
    "device": "cpu, or cuda:N",
    "threads": "the thread count the cell ran with",
    "mode": "the training mode (fp32, bf16, compile, ...), components joined by `+`",
    "batch": "the batch size of one step",
    "status": "ok, failed, timeout, unsupported or pending",
    "error": "why the cell failed or was unsupported; empty when it measured",
    "median_s": "the step time: the median of the per-process medians, seconds",
    "iqr_s": "the interquartile range of the timed steps, seconds",
    "mean_s": "the mean step time, seconds",
    "stdev_s": "the standard deviation of the step times, seconds",
    "ci_low_s": "the low end of the median's 95% confidence interval (2 to 5 processes: Student's t on the logs of "
    "their medians; 6 or more: the distribution-free interval of their medians; in a run of a dlperf before commit "
    "03b1d83f, a hierarchical bootstrap of the processes), seconds",
    "ci_high_s": "the high end of the median's 95% confidence interval, seconds",
    "mean_ci_low_s": "the low end of the mean step's 95% confidence interval (batch means: each process's steps in 10 "
    "consecutive batches), seconds",
    "mean_ci_high_s": "the high end of the mean step's 95% confidence interval, seconds",
    "n": "timed steps, every process's",
    "processes": "the cell's processes stored (a failed one too); fewer than processes_planned in an unfinished run: "
    "not final (a search's baseline may take more, its candidates fewer)",
    "processes_planned": "its run's --repeats: the timed processes each cell gets",
    "samples_per_s": "samples per second at the median step",
    "samples_s": "a former name of `samples_per_s` (until ae158e29), kept for scripts: the same value",
    "warmup_steps": "the steps run before timing began",
    "params": "the model's trainable parameters",
    "flops_per_step": "floating-point operations of one training step, as the framework counts them: what runs, so "
    "not the first layer's input gradient, which no step computes (tiny-fcn-r: 31% under a forward-times-3 rule)",
    "peak_mem_bytes": "the peak memory of a step, of the kind `peak_mem_kind` says",
    "peak_mem_kind": "what `peak_mem_bytes` measured: cuda_allocator, live_tensors, ...",
    "process_hwm_increase_bytes": "how much the process's resident high-water mark grew while it trained",
    "steal_fraction": "the share of time the hypervisor gave the CPUs to others while timed",
    "others_cpu_share": "the share of the machine's CPUs other processes used while timed",
    "cpu_utilization": "the cores the step kept busy",
    "minor_faults_per_step": "minor page faults per timed step",
    "kernel_cpu_share": "of the process's CPU time over the timed steps, the share the kernel spent on its behalf",
    "flops_by_dtype": "the step's FLOPs by data type",
    "utilization": "the time the step's FLOPs take at the peaks `dlperf peak` measured, over its median; empty without",
    "compile_s": "the time a compiled mode took to compile, seconds",
    "graphs": "the graphs a compiled mode produced",
    "graph_breaks": "where compilation broke the model into graphs",
    "recompiles": "recompilations while timed",
    "nproc": "processes in all, for a multi-process cell; 0 for a plain one",
    "scaling": "strong or weak, for a multi-process cell",
    "parallel": "the strategy of a multi-process cell: ddp, fsdp, gpipe, 1f1b, tp, mirrored",
    "microbatches": "a pipeline's micro-batches per step",
    "framework_version": "the framework's version that measured the cell (a cell no worker measured, unsupported or "
    "pending: the version its run found as it planned)",
    "environment": "the framework's environment: dlperf's own, or a `dlperf env install` one",
    "timing": "how each step was timed: pipelined as a training loop runs (CUDA events; JAX: when the host finds the "
    "loss ready), or bracketed by the clock with the device synchronized on both sides (the CPU; MXNet); empty in a "
    "cell measured before it was recorded",
    "gradient_bytes": "the bytes of gradients a data-parallel step reduces",
    "allreduce_s": "one all-reduce of the gradients alone, seconds",
    "busbw_bytes_s": "the all-reduce's bus bandwidth, bytes per second",
    "local_step_s": "the step of one process without communication, seconds",
    "exposed_comm_s": "the communication a step waits for (that step against its compute alone), seconds",
    "comm_share": "the exposed communication's share of the step timed beside its compute alone (not the median)",
    "param_bytes_rank": "the parameters one process holds, bytes",
    "state_bytes_rank": "the parameters, gradients and optimizer state one process holds, bytes",
    "peak_bytes_rank": "one process's peak memory, bytes",
    "bubble": "a pipeline's measured idle share",
    "bubble_theory": "a pipeline's theoretical idle share for its stages and micro-batches",
    "split": "how the pipeline cut the model into stages",
    "loss_ok": "whether the mode's loss followed the fp32 reference (the loss check); empty when not checked",
    "loss_reason": "why the loss check failed",
    "loss_finite": "false when a timed step's loss was NaN or infinite: the cell did not train (its warnings say so)",
    "shared_from": "where a figure the cell's processes did not measure came from, by figure (flops, memory, "
    "loss_check): the key of the run's cell of another thread count, or `cached from run N of DB` (DATA_DIR/cache/"
    "figures, counted by an earlier run); empty where it measured all",
    "loader": "the loader setting of a `--data` cell (workers, pin); empty on synthetic data",
    "long_run_samples_per_s": "a `--data` group's cell (the synthetic one too): the batch over its mean step, what a "
    "long run delivers (the median step leaves out the steps that wait for data); empty outside one",
    "dataset": "the dataset the loader read",
    "dataset_samples": "the dataset's samples",
    "loader_alone_samples_per_s": "what the loader alone delivered, samples per second",
    "data_wait_share": "the share of the step spent waiting for data",
    "data_wait_median_s": "the median wait for a batch, seconds",
    "input_bound": "the verdict: whether the loader, not the step, sets the pace",
    "workers": "the loader's worker processes",
    "oversubscribed": "whether the loader's workers and the step's threads asked for more cores than there are",
    "h2d_bytes": "one batch's bytes copied to the device",
    "h2d_pageable_bytes_s": "that copy from pageable memory, bytes per second",
    "h2d_pinned_bytes_s": "that copy from pinned memory, bytes per second",
    "h2d_pinned_non_blocking_bytes_s": "that copy from pinned memory with non_blocking, bytes per second",
    "recommended_loader": "the group's loader setting to use: the smallest not measurably slower than the fastest",
    "data_recommendation": "that recommendation in full (JSON): setting, why, enough (why its loader keeps up with "
    "the step; null: the step still waits for data), slower (settings that wait less for data "
    "but whose steps were measurably slower), doubts (why the synthetic step was no baseline to hold a setting's "
    "samples/s against: few samples, an unsettled warm-up, processes that disagree), advice",
    "predicted_gpu": "the GPU the cell's step was predicted for (its own device's)",
    "predicted_step_s": "the predicted step, seconds",
    "prediction_error": "predicted / measured - 1",
    "predicted_bound": "what bounds the predicted step: compute, memory or launch",
    "gpu_predictions": "every GPU step predicted for the cell, a crossover's included (JSON)",
    "profile": "the cell's profile (JSON), as `dlperf profile --format json` gives it: the timed step "
    "(`step_s`), each category's `seconds` and `share` of it, the `verdict` (bound, level, figure, modes to try, "
    "left_out, measured), the achieved rates, the dispatch floor, the counts per step, the profiler's overhead, the "
    "trace and the notes; `profile_status` and `error` where it could not be taken; empty where the run stored none "
    "(run without --profile)",
    "warnings": "what the run said about the cell (in CSV a JSON list, as every list)",
    "samples": "with `--samples` only: every raw step time, one list per process (JSON)",
}


def export_columns() -> list[str]:
    """The columns `dlperf export` writes, in its order, with `--samples`' last."""
    from dlperf.report import export

    return [*export.columns(), "samples"]


def export_markdown() -> str:
    rows = ["| column | what it holds |", "|---|---|"]
    for name in export_columns():
        if name not in EXPORT_COLUMNS:
            raise ValueError(f"dlperf export writes a column {name!r} that docs/hooks/generated.py does not describe")
        rows.append(f"| `{name}` | {EXPORT_COLUMNS[name]} |")
    return "\n".join(rows) + "\n"


# ---- the exit codes -----------------------------------------------------------------------------------------------

EXIT_CODES = {
    "OK": "everything asked was done: every cell measured (each has at least one timed step), or the view printed",
    "CELLS_FAILED": "some cells failed or timed out, the rest saved (a cell without a timed step included); `dlperf "
    "profile`: a cell's profile failed or timed out; `dlperf compare`: a cell significantly slower with "
    "B/A above 1 + `--threshold`, or a cell A measured that failed, timed out or (on the same hardware) "
    "unsupported in B; a view (`export`, `report`, `plot`, `table`): a stored row that no longer reads, "
    "left out with a warning; a probe (the short child that checks the frameworks, devices or a workload "
    "before anything is measured) killed by a signal, which the line names; `dlperf run --dry-run`: a "
    "pilot step failed (the run's cells of it would too)",
    "BAD_INPUT": "bad input, said in one line on stderr (and on stdout too under `--format json`, as a document, "
    '`{"error": ..., "exit_code": 2}`, or `--format md`, a Markdown line): nothing ran and nothing was '
    "written; `dlperf compare`: the two runs share no cell measured on both sides, none of their shared "
    "cells could be tested (too little data), or B is unfinished and has not measured cells of A yet, or "
    "all their processes (the table is shown: no verdict is not a pass)",
    "OUTPUT_FAILED": "standard output could not be written (a full disk, a closed terminal), said in one line on "
    "stderr where it can be: the output is cut short, and what the command stored is stored (a run's cells "
    "included); a failing stderr alone is no failure: warnings and the progress display are dropped. An `-o` file "
    "that ran out of room (a full disk, a quota, `ulimit -f`) is this code too, nothing of it written (one that "
    "cannot be made, its folder missing or not writable, is bad input: 2)",
    "INTERRUPTED": "interrupted (Ctrl-C, SIGTERM, or SIGHUP when the terminal closes): no process is left, and the "
    "last line says what was kept and what to run next. A sweep (`run`, `profile`, a crossover's batches) keeps what "
    "had finished and `dlperf run --resume` goes on; a search (`optimize`, `fit`, `advise`, a thread search) keeps "
    "its measured cells, and runs again from the start; `peak` keeps the thread counts it finished, `data synth` the "
    "datasets written whole; `comm` the sizes its job had measured, naming the command that measures the rest",
}


def exit_codes() -> dict[str, int]:
    from dlperf.vocab import ExitCode

    return {name: value for name, value in vars(ExitCode).items() if not name.startswith("_")}


def exit_codes_markdown() -> str:
    rows = ["| code | name | what it means |", "|---|---|---|"]
    for name, value in sorted(exit_codes().items(), key=lambda item: item[1]):
        if name not in EXIT_CODES:
            raise ValueError(f"dlperf.vocab.ExitCode.{name} has no meaning in docs/hooks/generated.py")
        rows.append(f"| {value} | `{name}` | {EXIT_CODES[name]} |")
    return "\n".join(rows) + "\n"


# ---- the root files, included -------------------------------------------------------------------------------------

LINK = re.compile(r"(?<!!)\[(?P<text>[^\]]*)\]\((?P<target>[^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def include(name: str, src_uri: str) -> str:
    """A root file's text as it is, its relative links made to work from the page `src_uri`: to another root page,
    that page; to a file of the repository, its path as code (the site holds no source)."""
    path = ROOT / name
    if name not in ROOT_PAGES or not path.is_file():
        raise ValueError(f"{src_uri}: include {name!r}: only {', '.join(ROOT_PAGES)} of the repository's root")
    return relink(path.read_text(encoding="utf-8"), src_uri.count("/"))


def relink(text: str, depth: int) -> str:
    """`text`'s relative links, outside code blocks, as they work from a page `depth` folders below docs/."""
    return outside_fences(text, lambda run: LINK.sub(lambda m: relinked(m, depth), run))


def outside_fences(text: str, change) -> str:
    """`text` with `change` made to each run of lines outside its code blocks (a link's text may span lines)."""
    runs, run, fenced = [], [], False
    for line in text.splitlines():
        if FENCE.match(line):
            runs.append("\n".join(run) if fenced else change("\n".join(run)))
            run, fenced = [], not fenced
        run.append(line)
    runs.append("\n".join(run) if fenced else change("\n".join(run)))
    return "\n".join(runs) + "\n"


def to_site(markdown: str, src_uri: str) -> str:
    """The links of the page `src_uri` to a root file the site includes, made links to that file's page."""
    here = (ROOT / "docs" / src_uri).parent

    def site_link(match: re.Match) -> str:
        path, _, anchor = match["target"].partition("#")
        if re.match(r"^[a-z][a-z0-9+.-]*:|^/", path) or not path.endswith(".md"):
            return match[0]
        name = os.path.normpath(here / path)
        page = next((p for r, p in ROOT_PAGES.items() if str(ROOT / r) == name), None)
        if page is None:
            return match[0]
        target = os.path.relpath(ROOT / "docs" / page, here).replace(os.sep, "/")
        return f"[{match['text']}]({target}{'#' + anchor if anchor else ''})"

    return outside_fences(markdown, lambda run: LINK.sub(site_link, run))


def relinked(match: re.Match, depth: int) -> str:
    target = match["target"]
    if re.match(r"^[a-z][a-z0-9+.-]*:|^#|^/", target):  # a URL, an anchor on the page, an absolute path
        return match[0]
    path, _, anchor = target.partition("#")
    page = ROOT_PAGES.get(path.removeprefix("./"))
    if page is not None:
        return f"[{match['text']}]({'../' * depth}{page}{'#' + anchor if anchor else ''})"
    return f"{match['text']} (`{path}`)" if match["text"].strip("`") != path else f"`{path}`"


GENERATORS = {"cli": cli_markdown, "export-columns": export_markdown, "exit-codes": exit_codes_markdown}


def generate(name: str, src_uri: str) -> str:
    if name not in GENERATORS:
        raise ValueError(f"{src_uri}: unknown block {name!r} (known: {', '.join(GENERATORS)})")
    return GENERATORS[name]()


def written(markdown: str, src_uri: str) -> str:
    """The page with each block's text between its markers made again from the code, the markers kept."""
    return BLOCK.sub(lambda m: f"<!-- dlperf:{m['name']} -->\n{generate(m['name'], src_uri)}"
                               f"<!-- /dlperf:{m['name']} -->\n", markdown)  # fmt: skip


def stale_pages(docs: Path = ROOT / "docs") -> dict[Path, str]:
    """Each page whose committed blocks differ from what the code makes now -> its text made again."""
    found = {}
    for path in sorted(docs.rglob("*.md")):
        text = path.read_text(encoding="utf-8")
        if BLOCK.search(text) and (again := written(text, str(path.relative_to(docs)))) != text:
            found[path] = again
    return found


if __name__ == "__main__":  # `make docs-reference`: the committed blocks made again from the code
    for path, text in stale_pages().items():
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")
