"""Audit reports for papers: check every bracket of a store, resumably, and write the tables,
figures and provenance a paper needs.

``run_audit(store, out)`` checks each bracket (``softrank.recheck.check_record``, which hands
arrays and exact rationals to ``certify``), journals every finished record (``journal.py``),
and writes ``report.json``, ``report.md``, ``report.tex`` (a standalone document that
``\\input``s ``report-tables.tex``, ``report-figures.tex`` and ``report-per-head.tex``),
``per_head.csv`` and ``figures/`` atomically.  An
interrupted audit rerun with the same arguments skips the brackets already journaled and
writes the same report.json (apart from the ``"run"`` key).
"""

from __future__ import annotations

import math
import secrets
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from softrank.certify.errors import InputError
from softrank.certify.numerics.workbound import DEFAULT_MAX_WORK
from softrank.certify.upper import check_tier
from softrank.witnesses import open_store
from softrank.witnesses.store import stale_brackets

from ..terminal import shown
from ..workers import check_jobs
from . import provenance
from .batching import chunk_works
from .executors import make_executor, plan_chunks
from .files import RESULT_FILES, check_out_folder, clear_results, write_public
from .journal import JOURNAL_NAME, Journal, journal_key, normalize
from .report import (
    FIGURES_TEX,
    PER_HEAD_CSV,
    PER_HEAD_TEX,
    TABLES_TEX,
    VOLATILE_KEY,
    attach_intrinsic,
    build_report,
    report_json,
    report_latex,
    report_latex_figures,
    report_latex_per_head,
    report_latex_tables,
    report_markdown,
)
from .stats import DEFAULT_RESAMPLES, DEFAULT_SEED, MAX_RESAMPLES, layer_of
from .tables import csv_text, group_pairs, latex_tabular

DEFAULT_BUDGETS = (8, 16, 32)

__all__ = ["DEFAULT_BUDGETS", "DEFAULT_RESAMPLES", "DEFAULT_SEED", "VOLATILE_KEY",
           "parse_budgets", "require_figures", "run_audit"]


def require_figures() -> None:
    """Raises InputError unless matplotlib imports: an audit asked for figures refuses to
    start without them rather than report files it cannot write (``--no-figures`` skips them).
    """
    try:
        import matplotlib  # noqa: F401
    except ImportError as err:
        raise InputError(f"figures need matplotlib ({err}); install the plots extra "
                         "(pip install 'softrank-certify[plots]') or pass --no-figures",
                         field="--no-figures") from None


MAX_BUDGETS = 64


def parse_budgets(text: str) -> list[int]:
    """Returns the sorted distinct positive ranks of ``"8,16,32"``; InputError otherwise."""
    try:
        ks = sorted({int(t) for t in text.split(",") if t.strip()})
    except ValueError:
        raise InputError(f"budgets must be comma-separated integers, got {text!r}",
                         field="--budgets") from None
    if not ks or ks[0] < 1:
        raise InputError(f"budgets must be positive ranks, got {text[:80]!r}",
                         field="--budgets")
    if len(ks) > MAX_BUDGETS:  # every pair gets a verdict per budget
        raise InputError(f"{len(ks)} budgets (at most {MAX_BUDGETS})", field="--budgets")
    return ks


def sample_size(n: int) -> int:
    """Returns how many of ``n`` journaled records a resume rechecks: all of up to 4, then
    about sqrt(n) (at least 4, at most 64)."""
    return min(n, max(4, min(64, math.isqrt(n))))


def _check_into(journal: Journal, executor: Any, reader: Any, store_ref: tuple[str, str],
                todo: list[str], sample: list[str], tier: str, total: int, progress: bool,
                on_record: Callable[[dict[str, Any]], None] | None,
                max_work: int | None = None) -> list[str]:
    """Checks ``todo`` (journaling each record) and ``sample`` (comparing each with its
    journaled record); returns the sampled ids whose recheck differs.

    Records are journaled per list the executor hands over (``run_batches``: those that
    arrived together), with one fsync per list (``Journal.append_many``), before any of them
    is counted or passed to ``on_record``."""
    from tqdm import tqdm

    wanted = set(sample)
    bad: list[str] = []
    chunks = plan_chunks(reader, [*todo, *sample], executor.workers)
    # the estimated work of each chunk: Dask and pool executors group chunks into tasks by
    # it, a serial one into lists journaled together
    works = chunk_works(reader, chunks)
    with tqdm(total=total, initial=total - len(todo), unit="bracket", file=sys.stderr,
              disable=not progress, desc="audit") as bar:
        # closing(): on an error, stop the executor (cancel queued chunks) now,
        # not when the generator is garbage-collected
        with closing(executor.run_batches(store_ref, chunks, tier, max_work, works)) as results:
            for batch in results:
                fresh = []
                for rec in batch:
                    if rec["bracket"] in wanted:
                        if normalize(rec) != journal.records.get(rec["bracket"]):
                            bad.append(rec["bracket"])
                        continue
                    fresh.append(rec)
                done = journal.append_many(fresh)
                bar.update(len(done))
                if on_record is not None:
                    for rec in done:
                        on_record(rec)
    return sorted(bad)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def run_audit(store: str | Path, out: str | Path, *, jobs: int = 1,
              budgets: Sequence[int] = DEFAULT_BUDGETS, tier: str = "auto",
              scheduler: Any = None, restart: bool = False, progress: bool = False,
              figures: bool = True, command: str | None = None,
              on_record: Callable[[dict[str, Any]], None] | None = None,
              bootstrap_seed: int = DEFAULT_SEED,
              bootstrap_resamples: int = DEFAULT_RESAMPLES,
              recheck: bool = False, recheck_seed: int | None = None,
              max_work: int | None = None, batch: int | None = None) -> dict[str, Any]:
    """Checks every bracket of ``store`` not yet in ``out``'s journal and writes the report.

    Returns the report.json document.  ``scheduler`` (a Dask scheduler address or Client)
    selects the Dask executor (``batch`` operators per task; None: chosen from the declared
    sizes, ``batching.batches``), else ``jobs`` > 1 a local process pool.  ``on_record`` is
    called after each record is journaled (tests use it to interrupt a run); records are
    journaled a batch at a time (those that arrived together, one fsync each), so when it is
    called for a record, the rest of that record's batch is journaled too.
    Journal trust (see ``journal.py``): records come from the journal only when every line's
    HMAC verifies under this user's key; a random sample of them (``recheck_seed``, default
    fresh randomness, recorded under ``run``) is checked again, and any disagreement discards
    the whole journal and checks everything.  ``recheck`` ignores the journal altogether.
    Raises InputError for an unreadable store, a bad tier or budget, or a journal that
    belongs to another store/tier (unless ``restart``).  A kernel exception propagates; every
    record journaled before it is kept.  With ``figures`` and no matplotlib it raises
    InputError before checking anything.  ``bootstrap_seed`` and ``bootstrap_resamples`` fix
    the intervals (both stated in the report).  ``max_work`` bounds each record's work
    (``certify.numerics.workbound``; None: the kernel's default); a journal written under another
    limit is not reused.
    """
    started, t0 = _now(), time.monotonic()
    tier = check_tier(tier)
    budgets = sorted({int(k) for k in budgets})
    if not budgets or budgets[0] < 1:
        raise InputError("budgets must be positive ranks", field="--budgets")
    check_jobs(jobs)
    if not 1 <= int(bootstrap_resamples) <= MAX_RESAMPLES:
        # the bootstrap's work is resamples x pairs, spent after every check has run
        raise InputError(f"must be from 1 to {MAX_RESAMPLES}", field="--resamples")
    if figures:
        require_figures()
    reader = open_store(store)
    ids = [b.id for b in reader.brackets]
    # a journal written under another work limit holds other verdicts: a different key (the
    # default limit spelled out is the default: the same key as leaving it out)
    limit = None if max_work is None or int(max_work) == DEFAULT_MAX_WORK else int(max_work)
    key = journal_key(store, tier if limit is None else f"{tier}; max_work={limit}",
                      provenance.this_version(), reader.digest)
    store_ref = (key["store"], key["store_sha256"])
    executor_name, workers = "none", 0
    seed = secrets.randbits(64) if recheck_seed is None else int(recheck_seed)
    # a planted link or a folder in place of a report fails the run now, not after the checks
    check_out_folder(out, results=RESULT_FILES)
    with Journal.open(out, key, restart=restart or recheck, known_ids=ids) as journal:
        clear_results(out)  # the journal is this run's: an earlier report is not
        if journal.key_note is not None:
            print(shown(f"softrank-certify: {journal.key_note}"), file=sys.stderr)
        if journal.dropped_tail:
            # a write cut off by a kill: its record is checked again, like any not journaled
            print(shown(f"softrank-certify: {journal.path}: dropped an incomplete last line "
                        "(a write cut off by a kill)"), file=sys.stderr)
        if journal.trust.startswith("untrusted"):
            print(shown(f"softrank-certify: {journal.path}: journal not trusted "
                        f"({journal.trust.split(': ', 1)[1]}); every bracket is checked again"),
                  file=sys.stderr)
        # the records pin each array by its digest; a journaled verdict was computed from the
        # bytes read then, so it is reused only while they still hash to that digest
        stale = stale_brackets(reader, [b for b in reader.brackets if b.id in journal.records])
        if stale:
            print(shown(f"softrank-certify: {journal.path}: {len(stale)} journaled records name "
                        "array files that changed since they were checked; checking them "
                        "again"), file=sys.stderr)
            for i in stale:
                del journal.records[i]
        # an input error depends on more than the pinned bytes (a file since repaired, the
        # array cap of this run): it is never reused
        errs = [i for i, r in journal.records.items() if "error" in r]
        if errs:
            print(shown(f"softrank-certify: {journal.path}: {len(errs)} journaled input errors "
                        "are checked again"), file=sys.stderr)
            for i in errs:
                del journal.records[i]
        sample = journal.sample(seed, sample_size(len(journal.records)))
        todo = [i for i in ids if i not in journal.records]
        if len(todo) < len(ids):
            print(shown(f"softrank-certify: resuming: {len(ids) - len(todo)} of {len(ids)} "
                        f"brackets done in {journal.path} ({len(sample)} of them rechecked as "
                        "a sample)"), file=sys.stderr)
        runner: Any = None
        tasks = 0  # Dask tasks submitted (several operators each, see batching.py)
        for _attempt in (1, 2):
            if todo or sample:
                if runner is None:
                    executor = make_executor(jobs, scheduler, batch)
                    executor_name, workers = executor.name, executor.workers
                    runner = executor
                bad = _check_into(journal, runner, reader, store_ref, todo, sample, tier,
                                  len(ids), progress, on_record, max_work)
                tasks += getattr(runner, "tasks", 0)
            else:
                bad = []
            if not bad:
                break
            # a signed record that a recheck contradicts: trust none of the journal
            why = (f"journaled record of {bad[0]} differs from its recheck ({len(bad)} of "
                   f"{len(sample)} sampled records)")
            print(shown(f"softrank-certify: {journal.path}: journal rejected: {why}; every "
                        "bracket is checked again"), file=sys.stderr)
            journal.reset(why)
            sample, todo = [], list(ids)
            runner = None  # a fresh executor (a Dask one closes its client after a run)
        resumed = len(ids) - len(todo)
        records = [journal.records[i] for i in ids if i in journal.records]
    missing = len(ids) - len(records)
    if missing:  # an executor that drops work must not yield a short report
        raise RuntimeError(f"{missing} brackets have no record after the run; rerun to resume")
    fig_paths: list[str] = []
    fig_note = None if figures else "figures not requested (--no-figures)"
    if figures:
        from .figures import write_figures

        fig_paths = write_figures(out, group_pairs(records, budgets), records)
    store_info = {"path": str(store), "sha256": reader.digest,
                  "operators": len(reader.operators), "brackets": len(ids),
                  "header": reader.header}
    if command is None:
        command = (f"run_audit({str(store)!r}, {str(out)!r}, jobs={jobs}, budgets={budgets}, "
                   f"tier={tier!r})")
    run = {"command": command, "started": started, "finished": _now(),
           "seconds": round(time.monotonic() - t0, 3), "executor": executor_name,
           "workers": workers, "dask_tasks": tasks, "resumed_records": resumed,
           "new_records": len(ids) - resumed,
           "journal": JOURNAL_NAME, "figures_note": fig_note,
           "journal_trust": journal.trust, "journal_rechecked": len(sample) if resumed else 0,
           "journal_seed": seed}
    report = build_report(records, store=store_info, tier=tier, budgets=budgets,
                          environment=provenance.environment(),
                          methods=provenance.methods(records, tier), figures=fig_paths, run=run,
                          bootstrap=(int(bootstrap_seed), int(bootstrap_resamples)),
                          layers={o.id: layer_of(o.meta) for o in reader.operators})
    # before report.md is written: an intrinsic input error is part of this run's result
    from .intrinsic import write_intrinsic

    attach_intrinsic(report, write_intrinsic(store, out, report["pairs"], figures=figures,
                                             max_work=max_work))
    outp = Path(out)
    # each file is replaced atomically; report.json goes last, so once it is in place the
    # Markdown and LaTeX of the same run are too
    for name, table in report["tables"].items():
        write_public(outp, f"tables/{name}.tex", latex_tabular(table) + "\n")
    write_public(outp, TABLES_TEX, report_latex_tables(report))
    write_public(outp, FIGURES_TEX, report_latex_figures(report))
    write_public(outp, PER_HEAD_TEX, report_latex_per_head(report))
    write_public(outp, PER_HEAD_CSV, csv_text(report["per_head_table"]))
    write_public(outp, "report.tex", report_latex(report))
    write_public(outp, "report.md", report_markdown(report))
    write_public(outp, "report.json", report_json(report))
    return report
