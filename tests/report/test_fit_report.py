"""`dlperf report` of a `dlperf fit` run: the answer (largest batch, its peak, the first batch that did not fit) and the
tries as tries; the batches that ran out of memory are the answer's evidence, not failed cells (helper 124: the report
of a fit run showed 4 "failed" cells and not the answer, 102)."""

from conftest import make_cell
from dlperf.report import fit, html
from dlperf.report.load import Loaded
from dlperf.store.records import RunRecord

MIB = 2**20
TRIED = [(16, 141), (32, 257), (64, 489), (128, None), (96, 721), (112, None), (104, None), (100, 751), (102, 765),
         (103, None)]  # fmt: skip


def fit_run(made_by: str = "fit", argv: tuple[str, ...] = ("--max-memory", "1GiB"), **kept) -> Loaded:
    """A fit run of tiny-gpt under a 1 GiB limit, its command line `dlperf fit gpt.py:make` and `argv`; `kept`: more of
    its environment (`fit_limit`)."""
    env = {"made_by": made_by, "cpu": {"model": "AMD EPYC"}, "cores": {"cores": 2}, **kept}
    run = RunRecord(4, "2026-12-02T14:37:33+00:00", None, "complete", ["dlperf", "fit", "gpt.py:make", *argv],
                    {"max_memory": 1024 * MIB}, env, {})  # fmt: skip
    cells = []
    for position, (batch, peak) in enumerate(TRIED):
        fits = (
            {"median_s": batch / 8.1, "n": 1, "peak_mem_bytes": peak * MIB}
            if peak
            else {
                "status": "failed",
                "error": f"out of memory at batch {batch} under --max-memory 1,024 MiB: RuntimeError",
            }
        )
        cells.append(make_cell(f"tiny-gpt@b{batch}", run_id=4, position=position, batch=batch, **fits))
    return Loaded("h.db", [run], cells, {}, False, [])


def test_the_answer_is_the_largest_batch_with_its_peak_and_the_first_that_did_not_fit():
    [search] = fit.searches(fit_run().runs, fit_run().cells)
    assert search.answer() == ("tiny-gpt torch cpu:1 fp32: the largest batch that fits is 102 (peak memory 765 MiB); "
                               "batch 103 runs out of memory")  # fmt: skip
    assert [row[:2] for row in search.rows()] == [[str(b), "yes" if p else "out of memory"] for b, p in TRIED]
    assert search.limit_line() == "limit: --max-memory 1,024 MiB"


def limit_of(loaded: Loaded) -> str:
    [search] = fit.searches(loaded.runs, loaded.cells)
    return search.limit_line()


def test_the_limit_is_said_as_fit_said_it_and_a_flag_only_where_the_user_gave_it():
    """fit stores the memory available when it started as the run's max_memory where no --max-memory was given: the
    report said "limit: --max-memory 21.9 GiB" where fit had said "limit: the memory available when fit started
    (22,398 MiB)". What the run kept (`fit_limit`) tells; a run an older dlperf stored, its `dlperf fit` command line;
    a run whose command line is a script's, neither: its size alone, no flag claimed."""
    available = "limit: the memory available when fit started (1,024 MiB)"
    assert limit_of(fit_run(argv=(), fit_limit="available")) == available
    assert limit_of(fit_run(argv=())) == available  # stored before fit kept it: no --max-memory in its command line
    assert limit_of(fit_run(argv=("--max-memory=1GiB",))) == "limit: --max-memory 1,024 MiB"
    assert limit_of(fit_run(argv=(), fit_limit="--max-memory")) == "limit: --max-memory 1,024 MiB"
    script = fit_run()
    script.runs[0].argv[:] = ["python", "size.py"]  # a script's own argv, which says nothing of fit's flags
    assert limit_of(script) == "limit: 1,024 MiB of memory per try"


def test_the_report_of_a_fit_says_its_limit_as_the_fit_did(tmp_path, monkeypatch, capsys):
    """`dlperf fit` without --max-memory (its tries faked, 1 ms steps, out of memory above batch 40), then `dlperf
    report` of its store: the same limit line."""
    from test_interrupted_searches import _children, _main

    db = str(tmp_path / "f.db")
    _children(monkeypatch, oom_above=40)
    code, out, err = _main(monkeypatch, capsys, "fit", "tiny-fcn-r", "--threads", "1", "--db", db)
    assert code == 0, err
    [said] = [line for line in out.splitlines() if line.startswith("limit: ")]
    assert said.startswith("limit: the memory available when fit started (") and said.endswith(" MiB)")
    assert _main(monkeypatch, capsys, "report", "--db", db, "-o", str(tmp_path / "r.html"))[0] == 0
    assert f'<p class="legend">{said}</p>' in (tmp_path / "r.html").read_text()


def test_the_report_of_a_fit_run_shows_the_answer_and_no_failed_cell():
    page = html.render(fit_run())
    assert "The largest batch that fits" in page
    assert "the largest batch that fits is 102 (peak memory 765 MiB); batch 103 runs out of memory" in page
    assert "num failed" not in page and ">failed<" not in page and "failed:" not in page and " failed," not in page
    assert "4 batches tried by dlperf fit ran out of memory" in page
    assert page.count(">out of memory<") == 8  # each try, in the answer's table and in the seconds table


def test_a_run_that_is_no_fit_has_no_fit_section():
    assert fit.searches(fit_run("run").runs, fit_run("run").cells) == []
    assert "The largest batch that fits" not in html.render(fit_run("run"))


def test_no_batch_tried_fits_says_so():
    search = fit.Search(1, "w", "torch", "cpu:1", "fp32", None, [make_cell("w@b1", batch=1, status="failed",
                        error="out of memory at batch 1")])  # fmt: skip
    assert search.answer() == "w torch cpu:1 fp32: no batch tried fits: batch 1 runs out of memory"
    assert search.limit_line() == "limit: the device's own memory"


def search_of(*tries) -> fit.Search:
    return fit.Search(1, "w", "torch", "cpu:1", "fp32", None, [make_cell(f"w@b{t['batch']}", **t) for t in tries])


FITS = {"median_s": 0.1, "n": 1, "peak_mem_bytes": MIB}


def test_a_search_stopped_by_another_failure_says_so_not_that_every_batch_fits():
    """fit stops a mode's search at a failure other than out of memory: the report read 'every batch tried fits; the
    largest tried is 8' where batch 16 timed out, and 'no batch tried fits: no try ran' where batch 8 failed."""
    timed_out = search_of({"batch": 8, **FITS}, {"batch": 16, "status": "timeout", "error": "timed out after 600 s"})
    assert timed_out.answer() == ("w torch cpu:1 fp32: the search stopped, batch 16 timeout: timed out after 600 s; "
                                  "the largest batch that fit so far is 8 (peak memory 1 MiB)")  # fmt: skip
    failed = search_of({"batch": 8, "status": "failed", "error": "RuntimeError: shapes"})
    said = "w torch cpu:1 fp32: the search stopped, batch 8 failed: RuntimeError: shapes; no batch fit so far"
    assert failed.answer() == said


def test_a_search_interrupted_during_a_try_says_so():
    cut = search_of({"batch": 8, **FITS}, {"batch": 16, "status": "pending"})
    assert cut.answer() == ("w torch cpu:1 fp32: the search stopped, interrupted during its try of batch 16; the "
                            "largest batch that fit so far is 8 (peak memory 1 MiB)")  # fmt: skip


def test_a_try_the_search_went_on_after_did_not_fit():
    """oneDNN's refusal under the limit after a smaller batch fitted is stored unsupported, and fit took it as the batch
    not fitting (fit.no_kernel_is_memory), bisecting below it: it is the first batch that did not fit."""
    refused = {"status": "unsupported", "error": "bf16: oneDNN could not create a primitive"}
    found = search_of({"batch": 8, **FITS}, {"batch": 16, **refused}, {"batch": 12, **FITS}, {"batch": 14, **FITS},
                      {"batch": 15, **FITS})  # fmt: skip
    assert found.answer() == ("w torch cpu:1 fp32: the largest batch that fits is 15 (peak memory 1 MiB); batch 16 "
                              "runs out of memory")  # fmt: skip


def test_a_search_that_ended_on_a_refusal_after_a_fitted_batch_found_its_boundary():
    """A store from before b66fd96 keeps oneDNN's refusals under the limit 'unsupported'; fit read each after a fitted
    batch as the batch not fitting, down to the boundary, and said 'the largest batch that fits is 4; batch 5 runs out
    of memory'. The report took only a refusal the search went on after as that: one that was its last try read as
    the search stopped, 'batch 5 unsupported: fp32: no fp32 kernel ...'."""
    refused = {"status": "unsupported", "error": "fp32: no fp32 kernel for this op on this device (could not create "
               "a primitive)"}  # fmt: skip
    found = search_of({"batch": 4, **FITS}, {"batch": 8, **refused}, {"batch": 6, **refused}, {"batch": 5, **refused})
    assert found.answer() == ("w torch cpu:1 fp32: the largest batch that fits is 4 (peak memory 1 MiB); batch 5 "
                              "runs out of memory")  # fmt: skip
    alone = search_of({"batch": 4, **refused})  # nothing fitted: no kernel here, the search stopped there
    assert (
        alone.answer() == f"w torch cpu:1 fp32: the search stopped, batch 4 unsupported: {refused['error']}; no "
        "batch fit so far"
    )
