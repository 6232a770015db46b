"""Several operators per Dask task: how many, from the declared sizes.

A Dask task costs a few milliseconds of scheduling and transport (about 7 ms on a
two-worker LocalCluster of the reference machine, ``benchmarks/bench_scheduler.py``), ten
times the whole check of a tiny operator.  ``batches`` groups consecutive work items (the
per-operator chunks of ``check``/``audit``, the per-operator jobs of ``produce``) into tasks
of about ``TARGET_TASK_WORK`` of estimated work, so that overhead is paid once per task.

Grouping changes where and next to what an item runs, never what it computes: a task runs
its items one after another with the same function, inputs and fresh per-item state as a
task of one item would, and the caller receives every item's result exactly once (a task
rerun after its worker died delivers its results once, when it completes).

Estimates are in the work units of ``certify.numerics.workbound`` (about one nanosecond of
the reference machine) and only steer the grouping: a wrong estimate costs balance, never a
result.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from softrank.certify.errors import InputError
from softrank.witnesses import BracketRecord, StoreReader

#: Estimated work a task should hold (about 0.25 s: the 7 ms overhead is then ~3%).
TARGET_TASK_WORK = 250_000_000
#: At most this many operators per task, so that a killed worker loses little work and
#: a task's results (one record per bracket) stay a small message.
MAX_BATCH = 64
#: With enough operators, at least this many tasks per worker thread: tasks finish at
#: different times, and a worker with nothing queued waits.
TASKS_PER_WORKER = 4

# check costs, fitted on serial checks of this machine (one BLAS thread): 8 x 8 operators
# with one bracket 0.71 ms each; 64 x 64 MiniLM heads with 18 brackets 17-48 ms; heads with
# logits and three factors brackets of rank ~0.6 N plus decoder certificates: float32-stored
# 128 x 128 7 ms, 512 x 512 90 ms; float64-stored 7 ms and 65 ms CPU (their chi is the
# float64 tier's negligible bound, about 70 ns per entry; before it was arb's, 1 us per entry,
# and they took 27 ms and 340 ms).  The formula is within 30% of each but the 512 x 512
# float64-stored heads, which it overestimates about 1.7x (their tasks are only smaller).
CHECK_OPERATOR = 300_000     # load and validate the operator's arrays
CHECK_SLACK_PER_ENTRY = 100  # chi of an operator of record given by logits or a block
CHECK_BRACKET = 800_000        # load a bracket file, build its record
CHECK_PER_ENTRY = 25           # per entry of A, per bracket: row sums, residual bounds
# per m N k / 4: the products of rank-k factors (float64 ball products, ``float_product``
# prices 4 per multiply-add, an upper bound; BLAS does better)

# produce costs: a budgeted search (alt_l1, bernstein, rowset, decoder_lp, and any plug-in)
# runs about as long as its budget, stated for 128 x 128 and scaled by max(1/100,
# m N / 128^2) (witnesses/producers/README.md, "Budgets").  20 s per budgeted producer and eps
# on a 128 x 128 head gives 80 s for the four together, near the 82-100 CPU s per head and eps
# that README measured for the defaults; on 8 x 8 heads it gives 0.8 s against 1.07 s
# measured.  The other producers (SVDs, QR, submatrices, key sets) cost about 2 ms plus
# 5 m N min(m, N).
CHEAP_PRODUCERS = frozenset({"tsvd", "rw_svd", "cpqr", "rpqr", "rep_rows", "nonzero",
                             "frobenius_tail", "pinv_decoder", "submatrix", "keyset"})
PRODUCE_OPERATOR = 1_000_000
PRODUCE_BUDGETED = 20_000_000_000   # one budgeted producer and eps on a 128 x 128 head
PRODUCE_CHEAP = 2_000_000


def parse_batch(text: str) -> int | None:
    """Returns the operators-per-task count of ``--batch`` (a positive integer), or None for
    "auto"; InputError (field ``--batch``) otherwise."""
    t = str(text).strip().lower()
    if t == "auto":
        return None
    if not t.isdigit() or int(t) < 1:
        raise InputError(f"must be 'auto' or a positive integer, got {text!r}",
                         field="--batch")
    return int(t)


def batches(works: Sequence[float], workers: int, batch: int | None = None
            ) -> list[range]:
    """Returns consecutive index ranges that cover ``range(len(works))`` once, in order.

    ``batch`` given: ranges of ``batch`` items (the last may be shorter).  Automatic
    (``batch`` None): items are added to a range while its estimated work (the sum of
    ``works``) stays at most ``TARGET_TASK_WORK``, and a range holds at most K items, K =
    ``MAX_BATCH`` lowered to len(works) // (``TASKS_PER_WORKER`` x ``workers``) (at least 1),
    so that there are at least TASKS_PER_WORKER tasks per worker whenever there are that many
    items; an item above the target alone is a range of one.
    """
    n = len(works)
    if batch is not None:
        k = max(1, int(batch))
        return [range(i, min(n, i + k)) for i in range(0, n, k)]
    cap = max(1, min(MAX_BATCH, n // (TASKS_PER_WORKER * max(1, int(workers)))))
    out: list[range] = []
    start, load = 0, 0.0
    for i, w in enumerate(works):
        if i > start and (i - start >= cap or load + w > TARGET_TASK_WORK):
            out.append(range(start, i))
            start, load = i, 0.0
        load += w
    if start < n:
        out.append(range(start, n))
    return out


def bracket_work(m: int, n: int, br: BracketRecord) -> int:
    """Returns the estimated work of checking bracket ``br`` of an m x n operator."""
    ks = br.upper.rank + (br.lower.rank if br.lower is not None else 0)
    return CHECK_BRACKET + CHECK_PER_ENTRY * m * n + m * n * max(1, ks) // 4


def chunk_works(reader: StoreReader, chunks: Sequence[Sequence[str]]) -> list[int]:
    """Returns the estimated work of checking each chunk (bracket ids of one operator each,
    ``plan_chunks``) of ``reader``'s store, from the declared shapes and ranks only (no
    array is read)."""
    wanted = {i for c in chunks for i in c}
    by_id = {b.id: b for b in reader.brackets if b.id in wanted}
    out = []
    for c in chunks:
        brs = [by_id[i] for i in c]
        if not brs:
            out.append(CHECK_OPERATOR)
            continue
        op = reader.operator(brs[0].operator)
        m, n = op.shape
        slack = CHECK_SLACK_PER_ENTRY * m * n if op.record_kind != "A" else 0
        out.append(CHECK_OPERATOR + slack + sum(bracket_work(m, n, b) for b in brs))
    return out


def produce_work(shape: tuple[int, int], eps_count: int, producers: Iterable[str],
                 scale: float | None = None) -> int:
    """Returns the estimated work of producing an operator of ``shape`` at ``eps_count``
    tolerances with ``producers`` (upper and lower), budgets times ``scale`` (None: 1).  A
    producer that is not built in is priced as a budgeted one."""
    m, n = shape
    size = max(0.01, m * n / 128**2)
    budgeted = PRODUCE_BUDGETED * size * (1.0 if scale is None else float(scale))
    per_eps = sum(PRODUCE_CHEAP + 5 * m * n * min(m, n) if p in CHEAP_PRODUCERS else budgeted
                  for p in producers)
    return int(PRODUCE_OPERATOR + max(0, eps_count) * per_eps)
