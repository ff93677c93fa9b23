import csv
import io
import json
import random

from conftest import make_cell
from dlperf.report import table
from dlperf.report.format import count, duration, seconds, table_seconds
from dlperf.store.records import Provenance


def cell(workload, device, threads, median, status="ok", mode="fp32", error=None, warnings=(), **fields):
    return make_cell(workload, device=device, threads=threads, mode=mode, batch=64, status=status, median_s=median,
                     iqr_s=0.01, n=fields.pop("n", 10), error=error, warnings=list(warnings), **fields)  # fmt: skip


CELLS = [
    cell("fcn-s", "cpu", 1, 1.0),
    cell("fcn-s", "cpu", 2, 0.6),
    cell("fcn-s", "cpu", 4, 9.0, warnings=["oversubscribed: 4 threads on 2 cores"]),
    cell("fcn-s", "cuda:0", 2, 0.03),
    cell("lstm", "cpu", 1, None, status="timeout", error="exceeded --timeout 60 s (kept 0 samples)"),
    cell("lstm", "cpu", 2, 0.5),
]


def test_columns_rows_and_the_best_thread_count():
    view = table.build(7, CELLS)
    assert view.columns == ["cpu:1", "cpu:2", "cpu:4", "cuda:0"]
    assert [r.workload for r in view.rows] == ["fcn-s", "lstm"]
    assert view.rows[0].best_cpu_column() == "cpu:2"  # the GPU is not a thread count
    assert view.rows[1].best_cpu_column() is None  # one measured CPU cell: nothing to choose between
    assert table.row_values(view, view.rows[0]) == [
        "fcn-s", "torch", "64", "1.000 s n=10", "0.600 s* n=10", "9.000 s n=10", "30.0 ms n=10"
    ]  # fmt: skip
    assert table.row_values(view, view.rows[1]) == ["lstm", "torch", "64", "timeout", "0.500 s n=10", "", ""]


def test_a_median_of_few_samples_is_flagged_in_the_cell_and_the_notes():
    # with --max-time 5 a slow model's cells had n=1 and an IQR of 0, and looked like every other result
    few = cell("resnet-18", "cpu", 1, 4.2, n=1, warnings=["few samples: the median of 1 timed step (...)"])
    view = table.build(1, [few, cell("resnet-18", "cpu", 2, 2.5)])
    assert table.row_values(view, view.rows[0])[3:] == ["4.200 s? n=1", "2.500 s n=10"]
    assert view.rows[0].best_cpu_column() is None  # a comparison with a one-sample median recommends nothing
    assert any(n.startswith("resnet-18 torch cpu:1: few samples") for n in view.notes)


def test_no_star_from_a_comparison_the_machine_disturbed_and_the_note_says_why():
    # another job held a core while 2 threads were timed: 1 thread looked faster, and was starred
    busy = "other processes used 48% of the CPUs while this cell was timed"
    view = table.build(1, [cell("fcn-s", "cpu", 1, 0.9), cell("fcn-s", "cpu", 2, 1.1, warnings=[busy])])
    assert view.rows[0].best_cpu_column() is None
    # marked `?` as the paper view and the report mark it: read plainly, 2 threads were slower than 1
    assert table.row_values(view, view.rows[0])[3:] == ["0.900 s n=10", "1.100 s? n=10"]
    assert view.notes == [f"fcn-s torch cpu:2: {busy}", "no fastest thread count starred in fcn-s torch: a compared "
                          "cell was disturbed (above)"]  # fmt: skip
    quiet = table.build(1, [cell("fcn-s", "cpu", 1, 0.9), cell("fcn-s", "cpu", 2, 1.1)])
    assert quiet.rows[0].best_cpu_column() == "cpu:1" and not quiet.notes
    # a wide IQR is the steps' own spread, not the machine's: the medians still compare (make run's fcn-s at 2
    # threads: 0.362 s against 0.627 s, IQR 14%)
    noisy = cell("fcn-s", "cpu", 2, 0.362, warnings=["noisy: IQR is 14% of the median"])
    view = table.build(1, [cell("fcn-s", "cpu", 1, 0.627), noisy])
    assert view.rows[0].best_cpu_column() == "cpu:2" and not any("starred" in n for n in view.notes)


def test_a_row_with_no_star_highlights_none_of_its_cells():
    # modes.db's fused and bf16 rows, a cell disturbed: their labels were printed bold green, as a fastest cell is
    busy = "other processes used 48% of the CPUs while this cell was timed"
    view = table.build(1, [cell("fcn-s", "cpu", 1, 0.9), cell("fcn-s", "cpu", 2, 1.1, warnings=[busy])])
    assert _green(view) == [False] * 5
    starred = table.build(1, [cell("fcn-s", "cpu", 1, 0.9), cell("fcn-s", "cpu", 2, 1.1)])
    assert _green(starred) == [False, False, False, True, False]


def _green(view) -> list[bool]:
    """Which cells of the view's first row are highlighted as the fastest."""
    return [str(c._cells[0]).startswith("[bold green]") for c in table.render_rich(view).columns]


def test_notes_carry_warnings_and_failure_reasons():
    notes = table.build(7, CELLS).notes
    assert "fcn-s torch cpu:4: oversubscribed: 4 threads on 2 cores" in notes
    assert "lstm torch cpu:1: timeout: exceeded --timeout 60 s (kept 0 samples)" in notes


def test_a_cell_with_no_figure_keeps_what_loaded_the_machine_but_not_notes_on_its_steps():
    """A failed cell read 'noisy: ... breaks torch cpu:1 (14%)' beside its 'failed' note: the noise of a median no
    table shows."""
    noise = ["noisy: the steps' IQR is 14% of the median", "slow steps now and then: the mean 30% above the median",
             "other processes used the CPUs while it was timed (80%)"]  # fmt: skip
    failed = cell("breaks", "cpu", 1, None, status="failed", error="RuntimeError: boom", warnings=noise)
    notes = table.build(7, [failed, cell("breaks", "cpu", 2, 0.5, warnings=noise[:1])]).notes
    assert [n for n in notes if "cpu:1" in n] == [
        "breaks torch cpu:1: other processes used the CPUs while it was timed (80%)",
        "breaks torch cpu:1: failed: RuntimeError: boom",
    ]
    assert "breaks torch cpu:2: noisy: the steps' IQR is 14% of the median" in notes


def test_formats():
    view = table.build(7, CELLS)
    md = table.render_markdown(view)
    assert md.splitlines()[0] == "| workload | framework | batch | cpu:1 | cpu:2 | cpu:4 | cuda:0 |"
    # the notes, the reasons of failed cells among them, as the text view has them (they were left out)
    assert "- note: lstm torch cpu:1: timeout: exceeded --timeout 60 s (kept 0 samples)" in md.splitlines()
    rows = list(csv.reader(io.StringIO(table.render_csv(view))))
    assert rows[1][4] == "0.6" and rows[2][3] == "timeout"  # raw numbers, no marks
    data = json.loads(table.render_json(view))
    assert data["run_id"] == 7 and data["rows"][0]["cells"]["cpu:2"]["best"] is True


def test_a_table_of_one_mode_other_than_fp32_names_it():
    """`table --modes bf16` printed columns workload, framework, batch, cpu:1: nothing said bf16 in text, md or csv,
    and a reader took the figures for fp32's. One mode is named unless it is plain fp32 on synthetic data."""
    bf16 = table.build(1, [cell("fcn-s", "cpu", 1, 0.9, mode="bf16"), cell("fcn-s", "cpu", 2, 0.6, mode="bf16")])
    assert table.render_markdown(bf16).splitlines()[0] == "| workload | framework | mode | batch | cpu:1 | cpu:2 |"
    assert next(csv.reader(io.StringIO(table.render_csv(bf16))))[2] == "mode"
    fp32 = table.build(1, [cell("fcn-s", "cpu", 1, 0.9)])
    assert "mode" not in table.render_markdown(fp32).splitlines()[0]


def test_the_csv_says_its_unit_and_the_machine_as_the_text_view_does():
    """`table --format csv` gave raw medians under headers `cpu:1`, `cpu:2` with no unit (the text view's legend says
    seconds, written in ms or µs under 0.1 s) and no machine, which the text, md and json views carry."""
    view = table.build(7, CELLS)
    view.machine, view.versions = "vm · AMD EPYC, 2 cores", ["torch 2.13.0+cpu (dlperf's environment)"]
    rows = list(csv.reader(io.StringIO(table.render_csv(view))))
    legends = [r[1] for r in rows if r[0] == "legend"]
    assert legends[0].startswith("seconds per mini-batch, as a plain number (never ms or µs): median"), rows
    assert legends[0].count("second") == 1, legends[0]  # the unit said once ('seconds per mini-batch, in seconds')
    assert rows[-2:] == [["measured on", view.machine], ["measured with", view.versions[0]]]


def test_a_second_mode_becomes_part_of_the_row_and_of_the_notes():
    unsupported = cell("fcn-s", "cpu", 1, None, status="unsupported", mode="channels_last", error="no Conv2d")
    view = table.build(1, [cell("fcn-s", "cpu", 1, 1.0), cell("fcn-s", "cpu", 1, 0.5, mode="bf16"), unsupported])
    assert view.show_mode and len(view.rows) == 3 and table.head(view)[2] == "mode"
    assert view.notes == ["fcn-s torch channels_last cpu:1: unsupported: no Conv2d"]


def test_number_formats():
    # steps under 0.1 s in ms or µs, three significant figures (a GPU step of 2.1 ms once showed as 0.0021)
    assert table_seconds(1.23456) == "1.235 s" and table_seconds(0.1) == "0.100 s" and table_seconds(0.004) == "4.00 ms"
    assert (
        table_seconds(0.0021) == "2.10 ms" and table_seconds(0.00052) == "520 µs" and table_seconds(0.0999) == "99.9 ms"
    )
    assert seconds(0.5) == "0.500 s" and seconds(0.0042) == "4.20 ms" and seconds(None) == "-"
    assert count(25_557_032) == "25,557,032"
    assert duration(23.4) == "23 s" and duration(720) == "12 min" and duration(7300) == "2 h 01 min"
    assert duration(0.4) == "0.4 s" and duration(0) == "0 s"  # "profiled in 0 s" said of a 0.4 s profile


def test_frameworks_training_different_parameter_counts_are_named_with_the_documented_reason():
    def fw(framework, params, deviations=(), **fields):
        return make_cell("lstm", framework, median_s=0.5, params=params,
                         settings={"deviations": list(deviations)}, **fields)  # fmt: skip

    cells = [
        fw("torch", 6_182_672),
        fw("tensorflow", 6_180_624, ["one bias vector per LSTM layer"]),
        fw("mxnet", 6_182_672, ["biases start at zero"], workload_spec={"params": 6_182_672}),
    ]
    view = table.build(1, cells)
    assert [r.framework for r in view.rows] == ["torch", "tensorflow", "mxnet"]
    assert view.notes == [
        "lstm: the frameworks train different parameter counts: torch 6,182,672, "
        "tensorflow 6,180,624 (one bias vector per LSTM layer), mxnet 6,182,672"
    ]
    assert table.build(1, [fw("torch", 10), fw("mxnet", 10)]).notes == []  # agreement says nothing


def test_the_table_says_which_framework_versions_measured_the_cells():
    measured_by = Provenance("torch", "2.13.0+cpu", None, "dlperf")
    cells = [cell("fcn-r", "cpu", 1, 0.5, provenance=measured_by), cell("fcn-r", "cpu", 2, 0.3, provenance=measured_by)]
    view = table.build(1, cells)
    assert view.versions == ["torch 2.13.0+cpu (dlperf's environment)"]
    data = json.loads(table.render_json(view))
    assert data["versions"] == view.versions and data["rows"][0]["cells"]["cpu:1"]["framework_version"] == "2.13.0+cpu"
    assert table.render_markdown(view).endswith("measured with: torch 2.13.0+cpu (dlperf's environment)")


def test_the_table_says_which_columns_lack_a_peak_once_some_peak_was_measured():
    def counted(threads, utilization):
        return cell("fcn-r", "cpu", threads, 0.5, flops_by_dtype={"fp32": 10**9}, utilization=utilization)

    [note] = [n for n in table.build(1, [counted(1, 0.4), counted(4, None)]).notes if n.startswith("utilization")]
    assert "for cpu:4 in the dtypes" in note and "dlperf peak" in note
    assert not [n for n in table.build(1, [counted(1, None)]).notes if n.startswith("utilization")]  # no peak at all


HOSTILE = "\x1b[2J\x1b]0;pwned\x07net\x9b31m\x08\r[bold]x[/][link=http://e]y[/link]"
HOSTILE_CELLS = [
    cell(HOSTILE, "cpu", 1, 1.0),
    cell(HOSTILE, "cpu", 2, 0.5),
    cell('=HYPERLINK("http://e","y")', "cpu", 1, None, status="failed", error=f"@SUM(1) {HOSTILE}"),
]


def test_text_view_shows_hostile_names_and_errors_escaped(capsys):
    """ESC, CSI (\\x9b), BEL, backspace and CR from a workload name or an error are shown, not obeyed; rich markup
    in them is printed as typed."""
    from dlperf.commands.common import print_rich

    view = table.build(1, HOSTILE_CELLS)
    print_rich(table.render_rich(view), [table.LEGEND], view.notes, width=400)
    out = capsys.readouterr().out
    for raw in ("\x1b", "\x9b", "\x07", "\x08", "\r"):
        assert raw not in out, repr(raw)
    assert out.count("\\x1b[2J\\x1b]0;pwned\\x07net\\x9b31m\\x08\\r[bold]x[/][link=http://e]y[/link]") == 2
    assert "failed: @SUM(1) \\x1b[2J" in out


def test_a_note_folded_at_the_terminals_width_keeps_its_indent(capsys):
    """In a pty a long note's next lines began at column 0, the line before ending in a space."""
    from dlperf.commands.common import print_rich

    print_rich(None, notes=["noisy: " + ", ".join(f"tiny-fcn-r torch cpu:{i} (31%)" for i in range(6))], width=60)
    first, *rest = capsys.readouterr().out.splitlines()
    assert first.startswith("  note: noisy:") and rest
    assert all(line.startswith(" " * 8) and len(line) <= 60 and line == line.rstrip() for line in [first, *rest][1:])


def test_a_note_whose_path_is_wider_than_the_screen_under_its_indent_prints_the_path_whole(capsys):
    """A resume command's path that fitted at column 0 went past the width once indented 8 columns, and rich folded
    it inside the path ('.../test_h0' over '/t.db'): such a line starts at column 0, the path whole and the width
    kept (a path wider than the width is folded, as ever: test_cli_output)."""
    from dlperf.commands.common import print_rich

    path = "/tmp/pytest-of-root/pytest-250/popen-gw1/test_int_h0/t.db"  # 58 with its quote: past 60 indented 8
    print_rich(None, notes=[f"run 1 is unfinished: `dlperf run --resume --db {path}` measures them"], width=60)
    lines = capsys.readouterr().out.splitlines()
    assert f"{path}`" in lines, lines
    assert all(len(line) <= 60 for line in lines)


def test_csv_text_that_starts_a_formula_is_quoted_for_spreadsheets():
    cells = [cell("-fcn", "cpu", 1, 1.0), cell("-fcn", "cpu", 2, 0.5), *HOSTILE_CELLS[2:]]
    rows = list(csv.reader(io.StringIO(table.render_csv(table.build(1, cells)))))
    assert [r[0] for r in rows[1:3]] == ["'-fcn", '\'=HYPERLINK("http://e","y")']
    assert rows[1][3:5] == ["1.0", "0.5"]  # numbers stay numbers
    notes = [r[1] for r in rows if r[0] == "note"]  # the notes, after the rows, quoted as the names are
    assert notes and all(not n.startswith(("=", "+", "-", "@")) for n in notes)


def test_terminal_escapes_controls_and_keeps_ordinary_unicode():
    from dlperf.report.format import markup, terminal

    assert terminal("résnet-日本 ok") == "résnet-日本 ok"
    assert terminal("a\x1b[31m\x9b\x07\x08\r\n\t\x7f\u202eb") == "a\\x1b[31m\\x9b\\x07\\x08\\r\\n\\t\\x7f\\u202eb"
    assert terminal("line 1\nline\x1b 2", newlines=True) == "line 1\nline\\x1b 2"
    assert markup("[bold]x[/]") == "\\[bold]x\\[/]"


def test_a_cell_whose_loss_was_not_finite_is_marked_noted_and_never_the_best():
    """Issue 30: its time is shown, marked, with a note; no star rests on it, and it is no best mode."""
    from dlperf.report import best

    warning = "loss not finite: nan after the timed steps (process 1); its time is kept, but the step did not train"
    cells = [
        make_cell(threads=1, median_s=0.9, n=20),
        make_cell(threads=2, median_s=0.5, n=20, loss_finite=False, warnings=[warning]),
        make_cell(threads=2, mode="bf16", median_s=0.2, n=20, loss_finite=False, warnings=[warning]),
        make_cell(threads=1, mode="bf16", median_s=0.4, n=20, loss_finite=True),
    ]
    view = table.build(1, cells)
    fp32 = next(r for r in view.rows if r.mode == "fp32")
    assert table.cell_text(fp32, "cpu:2") == f"0.500 s{table.LOSS_MARK} n=20" and fp32.best_cpu_column() is None
    assert f"fcn-r torch cpu:2, fcn-r torch bf16 cpu:2: {warning}" in view.notes  # one warning, named once
    assert any(line.startswith(f"{table.LOSS_MARK} = the loss was not finite") for line in table.legend(view))
    assert json.loads(table.render_json(view))["rows"][0]["cells"]["cpu:2"]["loss_finite"] is False
    assert table.LOSS_MARK in table.render_markdown(view)
    rows = {(r.column, r.mode) for r in best.build(cells, {})}
    by_column = {r.column: r for r in best.build(cells, {})}
    assert by_column["cpu:2"].mode is None and sorted(by_column["cpu:2"].rejected) == ["bf16", "fp32"], rows
    assert by_column["cpu:1"].mode == "bf16"


def test_a_table_of_cells_whose_loss_is_finite_or_unknown_has_no_loss_mark():
    view = table.build(
        1, [make_cell(threads=1, median_s=0.9, n=20, loss_finite=True), make_cell(threads=2, median_s=0.5, n=20)]
    )
    assert not any(table.LOSS_MARK in line for line in table.legend(view))
    assert "loss_finite" not in table.render_json(view)


def busy_cells(share_by_cell):
    return [cell(w, "cpu", t, 0.5 + t / 10, warnings=[f"other processes used {share}% of the CPUs while this cell was "
                 "timed", "noisy: IQR is 12% of the median"]) for (w, t), share in share_by_cell.items()]  # fmt: skip


def test_each_kind_of_note_is_one_line_naming_its_cells():
    """Issue 31, item 12: `make run` printed 39 notes for 14 cells, each disturbance twice (per cell, then per row)."""
    cells = busy_cells({("fcn-s", 1): 40, ("fcn-s", 2): 48, ("lstm", 1): 30, ("lstm", 2): 35})
    emulated = {"status": "unsupported", "mode": "bf16", "error": "bf16 is emulated here"}
    cells += [cell("fcn-s", "cpu", 4, None, **emulated), cell("lstm", "cpu", 4, None, **emulated)]
    notes = table.build(1, cells).notes
    assert notes == [
        "other processes used the CPUs while these cells were timed: fcn-s torch cpu:1 (40%), fcn-s torch cpu:2 "
        "(48%), lstm torch cpu:1 (30%), lstm torch cpu:2 (35%)",
        "noisy: the steps' IQR is wide against the median: fcn-s torch cpu:1 (12%), fcn-s torch cpu:2 (12%), "
        "lstm torch cpu:1 (12%), lstm torch cpu:2 (12%)",
        "fcn-s torch bf16 cpu:4, lstm torch bf16 cpu:4: unsupported: bf16 is emulated here",
        "no fastest thread count starred in fcn-s torch, lstm torch: a compared cell was disturbed (above)",
    ]


def test_slow_steps_are_one_note_naming_each_cell_with_its_mean_above_the_median():
    said = "slow steps now and then: the mean step, {}, is {}% above the median; a long run pays the mean"
    cells = [cell("lstm", "cpu", 1, 0.5, warnings=[said.format("0.600 s", 20)]),
             cell("lstm", "cpu", 2, 0.4, warnings=[said.format("0.520 s", 30)])]  # fmt: skip
    assert table.build(1, cells).notes == [
        "slow steps now and then: the mean step above the median (a long run pays the mean): lstm torch cpu:1 "
        "(20%), lstm torch cpu:2 (30%)"
    ]
    assert table.note_kind(said) == "noise"


def test_the_legend_explains_only_the_marks_that_appear():
    """Issue 31, item 12: the legend explained `*` and `(N%)` when neither appeared."""
    plain = table.legend(table.build(1, busy_cells({("fcn-s", 1): 40, ("fcn-s", 2): 48})))
    assert len(plain) == 1 and "median of n steady-state training steps" in plain[0]
    assert table.BEST_MARK not in plain[0] and "(N%)" not in plain[0]
    assert plain[0].endswith("? = a median not to rely on (busy CPUs, steal, few steps, warm-up, processes apart: its "
                             "note says which)")  # fmt: skip
    marked = [cell("fcn-s", "cpu", 1, 1.0, utilization=0.4), cell("fcn-s", "cpu", 2, 0.6, n=2)]
    [line] = table.legend(table.build(1, [*marked, cell("lstm", "cpu", 1, 1.0), cell("lstm", "cpu", 2, 0.5)]))
    assert f"{table.BEST_MARK} = fastest CPU thread count" in line and "(N%) = utilization" in line
    assert f"{table.FEW_MARK} = fewer than" in line


def test_the_memory_views_sizes_are_never_zero_mib_for_a_small_figure():
    """`predict --memory` printed a small model's batch and per-sample figures as "0 MiB"."""
    from dlperf.report.memory import size

    assert [size(n) for n in (300, 300_000, 5 * 2**20, 3 * 2**30)] == ["300 B", "293 KiB", "5 MiB", "3.00 GiB"]
    # a sample of 544 KiB read "1 MiB", 2x off; under 100 MiB three figures
    assert [size(n) for n in (557_104, 1.5 * 2**20, 9.7 * 2**20, 150.4 * 2**20)] == [
        "544 KiB", "1.5 MiB", "9.7 MiB", "150 MiB"]  # fmt: skip


def test_the_fastest_framework_is_named_with_its_speed_up_over_the_next():
    # a run of four frameworks showed their medians side by side, but nothing said which was fastest, nor by how much
    cells = [make_cell("fcn-r", framework=fw, threads=t, batch=16, median_s=m, n=50, key=f"{fw}{t}")
             for fw, t, m in (("torch", 1, 0.4), ("jax", 1, 0.1), ("mxnet", 1, 0.9), ("torch", 2, 0.3),
                              ("jax", 2, 0.303))]  # fmt: skip
    rng = random.Random(0)
    spread = [1.0] + [f for u in (rng.uniform(0, 0.4) for _ in range(25)) for f in (1 - u, 1 + u)]  # median 1
    samples = {c.key: [[c.median_s * f for f in rng.sample(spread, len(spread))]] for c in cells}
    view = table.build(1, cells, samples=samples)
    head, one, two = view.fastest  # a line each: the comparisons of a run were one paragraph, hard to read
    assert one.startswith("- fcn-r cpu:1: jax, 4.00x [") and one.endswith("as fast as torch (of 3)")
    assert two.startswith("- fcn-r cpu:2: torch, 1.01x [") and two.endswith("as fast as jax, not told apart")
    assert "each cell one process" in head and head.endswith(":")
    assert "\n".join(view.fastest) + "\n" in table.render_markdown(view)  # a Markdown list too
    first, _ = json.loads(table.render_json(view))["fastest"]
    assert (first["framework"], first["next"], first["column"]) == ("jax", "torch", "cpu:1")
    assert first["ci_low"] < first["speedup"] < first["ci_high"]
    assert any(r[0] == "fastest" for r in csv.reader(io.StringIO(table.render_csv(view))))


def test_a_fastest_framework_that_kept_more_cores_busy_than_its_threads_says_so():
    # mxnet at 1 thread kept 1.43 cores busy (its engine worker beside the Python thread): named fastest at cpu:1
    # against torch's one core, nothing said its speed-up came from a second core
    cells = [make_cell("tiny-lstm", framework=fw, batch=4, median_s=m, n=50, key=fw, cpu_utilization=u)
             for fw, m, u in (("torch", 0.002, 0.99), ("mxnet", 0.001, 1.43))]  # fmt: skip
    view = table.build(1, cells)
    _, line = view.fastest
    assert line.endswith("as fast as torch, mxnet kept 1.43 cores busy at 1 thread(s)")
    assert view.fastest_json[0]["cores_busy_beyond_threads"] == 1.43
    cells[1] = make_cell("tiny-lstm", framework="mxnet", batch=4, median_s=0.001, n=50, key="m", cpu_utilization=1.1)
    assert "cores busy" not in table.build(1, cells).fastest[1]  # within the threads' cores: nothing to say


def test_the_fastest_framework_without_steps_or_with_few_has_no_interval_and_one_framework_names_none():
    cells = [make_cell("fcn-r", framework=fw, batch=16, median_s=m, n=n, key=fw, warnings=w)
             for fw, m, n, w in (("torch", 2.0, 2, ["few samples: the median of 2 timed steps"]),
                                 ("jax", 1.0, 9, []))]  # fmt: skip
    _, line = table.build(1, cells).fastest
    assert "jax, 2.00x [no interval: a median of under 6 steps] as fast as torch, a compared cell disturbed" in line
    assert table.build(1, [cell("fcn-s", "cpu", 1, 1.0), cell("fcn-s", "cpu", 2, 0.6)]).fastest == []


def test_a_cell_that_kept_more_cores_busy_than_its_threads_is_noted():
    # tiny-resnet-56 mxnet at 1 thread kept 1.43 cores busy (its engine worker beside the Python thread) and nothing
    # said so: beside torch's 0.99 cores the two cpu:1 cells did not run on the same number of cores
    cells = [make_cell("tiny-lstm", framework=fw, batch=4, median_s=0.001, n=50, cpu_utilization=u)
             for fw, u in (("torch", 0.99), ("mxnet", 1.43), ("jax", 1.1))]  # fmt: skip
    cells.append(make_cell("tiny-lstm", framework="mxnet", threads=2, batch=4, median_s=0.001, n=50,
                           cpu_utilization=1.9))  # fmt: skip
    notes = [n for n in table.build(1, cells).notes if "more cores busy" in n]
    assert notes == ["tiny-lstm mxnet cpu:1: more cores busy than threads: 1.43 cores at 1 thread(s)"]
    cells.append(make_cell("tiny-fcn-r", framework="mxnet", batch=4, median_s=0.001, n=50, cpu_utilization=1.34))
    (line,) = [n for n in table.build(1, cells).notes if "more cores busy" in n]
    assert line.endswith("tiny-lstm mxnet cpu:1 (1.43 cores), tiny-fcn-r mxnet cpu:1 (1.34 cores)")
    assert ("tiny-lstm mxnet cpu:1", "threads") in [(label, kind) for label, kind, _ in table.cell_notes(cells)]


def test_a_mode_that_failed_its_loss_check_is_marked_and_said_in_the_table():
    """bf16 of a model whose logits bf16 rounds away ((z + 1000) - 1000) timed 48.4 ms against fp32's 81.6 and failed
    its loss check ("loss 2.3 at step 2 is 0.7 from fp32's 1.6"): `dlperf run`'s table showed 48.4 ms and nothing
    more, where `table --best` left it out; it is now marked `!`, said in a note, never starred."""
    from dlperf.store.records import LossCheckRecord

    failed = LossCheckRecord(False, "loss 2.3 at step 2 is 0.7 from fp32's 1.6")
    cells = [make_cell(threads=t, median_s=m, n=20) for t, m in ((1, 0.9), (2, 0.8))]
    cells += [make_cell(threads=t, mode="bf16", median_s=m, n=20, loss_check=failed) for t, m in ((1, 0.4), (2, 0.2))]
    view = table.build(1, cells)
    bf16 = next(r for r in view.rows if r.mode == "bf16")
    assert table.cell_text(bf16, "cpu:2") == f"0.200 s{table.LOSS_MARK} n=20" and bf16.best_cpu_column() is None
    assert any("loss check failed: loss 2.3 at step 2" in n and "bf16 cpu:2" in n for n in view.notes)
    assert any("failed its loss check" in line for line in table.legend(view))
    assert json.loads(table.render_json(view))["rows"][1]["cells"]["cpu:2"]["loss_ok"] is False


def test_the_json_table_marks_the_cells_the_text_marks_with_a_question_mark():
    """The text, md and csv tables marked a disturbed or few-sample cell `?`; the JSON a script reads said nothing."""
    cells = [*busy_cells({("fcn-s", 1): 40}), cell("fcn-s", "cpu", 2, 0.6, n=2), cell("fcn-s", "cpu", 4, 0.4)]
    view = table.build(1, cells)
    got = json.loads(table.render_json(view))["rows"][0]["cells"]
    assert [table.FEW_MARK in table.cell_text(view.rows[0], c) for c in ("cpu:1", "cpu:2", "cpu:4")] == [
        True, True, False]  # fmt: skip
    assert got["cpu:1"]["doubts"] == ["other processes used 40% of the CPUs while this cell was timed"]
    assert got["cpu:2"]["doubtful"] is True and got["cpu:2"]["doubts"] == ["fewer than 6 samples"]
    assert "doubtful" not in got["cpu:4"] and "doubts" not in got["cpu:4"]


def test_a_loss_check_that_could_not_run_is_said_in_the_table():
    """Sparse gradients broke the check itself ("the check could not run: NotImplementedError: ... 'SparseCPU'"): the
    export said so, and the table, progress and report said nothing, so the bf16 cell looked checked."""
    from dlperf.store.records import LossCheckRecord

    broke = LossCheckRecord(None, "the check could not run: NotImplementedError: Could not run 'aten::ne.Scalar_out'")
    unchecked = LossCheckRecord(None, "not checked: 10 ms per step is not faster than 9 ms")
    cells = [make_cell(threads=1, median_s=0.9, n=20), make_cell(threads=1, mode="bf16", median_s=0.4, n=20,
                                                                   loss_check=broke),
             make_cell(threads=1, mode="foreach", median_s=0.8, n=20, loss_check=unchecked)]  # fmt: skip
    notes = table.build(1, cells).notes
    assert any("bf16 cpu:1" in n and "loss not checked: the check could not run: NotImplementedError" in n
               and n.endswith("whether this mode trains as fp32 does is not known") for n in notes), notes  # fmt: skip
    assert not any("foreach" in n for n in notes)  # not checked by choice (not faster): no note, as before
