"""A-priori work of the built-in producers that have no search budget of their own.

``tsvd``, ``rw_svd``, ``cpqr``, ``rpqr``, ``rep_rows``, ``frobenius_tail`` and ``pinv_decoder``
factor the whole operator, then bisect on the rank; their work is a function of the shape
alone, growing like m N min(m, N) (``rw_svd``: one SVD per reweighting step, eight steps a
rank, about 2 log2 min(m, N) ranks tried).  Unbounded by any budget, ``rw_svd`` alone took
about 720 CPU s on a 2048 x 2048 operator at ``--budget-scale 0.001``.  ``produce`` prices
each call before it starts (``over_budget``) and skips it, with a note, where the price is
above ``SOFTRANK_CHEAP_BUDGET`` work units (default 120) times the operator's size factor
and ``--budget-scale``: the same units as the other budgets, so the bound scales with them.

The searches with a budget of their own are priced by the longest step they take without a
budget check, under the same rule: ``alt_l1`` starts from the truncated SVD's least passing
rank (the work of ``tsvd``), ``bernstein`` computes one SVD of the operator between two checks
and ``nerve`` two.  Unpriced, ``alt_l1`` at ``--budget-scale 0.001`` on a 4096 x 4096
operator would do about 1,000 units of work against a budget of about 120.

The prices are upper envelopes, not predictions: single-threaded numpy on the machine the
work units were calibrated on took 0.5 - 1.4 ns per m N min(m, N) for an SVD with vectors,
0.13 - 0.53 ns for a pivoted QR and 0.5 - 1.6 ns per m N k for a least-squares solve with k
unknowns (sizes 128 - 2048); each bisection step is priced at the largest rank.  At the
default scale no call on an operator of up to 4096 x 4096 is skipped.
"""

from __future__ import annotations

from ._common import budget_from_env, size_scale

SVD_UNIT = 1.5e-9      # per m N min(m, N): a thin SVD with vectors
QR_UNIT = 6e-10        # per m N min(m, N): a column-pivoted QR
LSTSQ_UNIT = 1.7e-9    # per m N k: least squares with k unknowns and N right-hand sides
PRODUCT_UNIT = 5e-10   # per m N k: U V and its row l1 error
ENTRY_UNIT = 2e-9      # per m N: one pass over the entries (``rep_rows``: per row and rank)
CHEAP_BUDGET_ENV = "SOFTRANK_CHEAP_BUDGET"
DEFAULT_CHEAP_BUDGET = 120.0


def attempts(m: int, N: int) -> int:
    """Returns an upper bound on the ranks a galloping and binary search on [1, min(m, N)]
    tries (``_common.least_rank``)."""
    return 2 * max(1, min(m, N)).bit_length() + 2


def price(name: str, shape: tuple[int, ...]) -> float | None:
    """Returns the work units that bound one call of built-in producer ``name`` on an
    operator of ``shape`` at one eps (for a search with a budget of its own: its longest step
    without a budget check), or None for a plug-in or a producer whose every
    step is priced by its own budget."""
    m, N = int(shape[0]), int(shape[1])
    k = min(m, N)
    F = m * N * k
    a = attempts(m, N)
    step = PRODUCT_UNIT * F + ENTRY_UNIT * m * N  # a fit's product and its row errors
    tsvd = SVD_UNIT * F + a * step
    table = {
        "tsvd": tsvd,
        "rw_svd": tsvd + a * 8 * (SVD_UNIT * F + step),
        "cpqr": QR_UNIT * F + a * (LSTSQ_UNIT * F + step),
        "rpqr": QR_UNIT * F + a * (LSTSQ_UNIT * F + step),
        "rep_rows": ENTRY_UNIT * m * m * N * (1 + a) + a * step,
        "frobenius_tail": SVD_UNIT * F,
        "pinv_decoder": SVD_UNIT * F + a * (2 * PRODUCT_UNIT * F + SVD_UNIT * k ** 3),
        "alt_l1": tsvd,
        "bernstein": SVD_UNIT * F,
        "nerve": 2 * SVD_UNIT * F,
    }
    return table.get(name)


def budget(shape: tuple[int, ...]) -> float:
    """Returns the work units a call of a priced producer may cost on an operator of
    ``shape``: ``SOFTRANK_CHEAP_BUDGET`` (default 120) times its size factor and the budget
    scale."""
    return budget_from_env(CHEAP_BUDGET_ENV, DEFAULT_CHEAP_BUDGET) * size_scale(shape)


def over_budget(name: str, shape: tuple[int, ...]) -> str | None:
    """Returns why a call of ``name`` on an operator of ``shape`` is skipped (its price is
    above its budget), or None when it runs."""
    p = price(name, shape)
    if p is None:
        return None
    b = budget(shape)
    if p <= b:
        return None
    return (f"{name} skipped: its work on a {shape[0]} x {shape[1]} operator is priced at "
            f"{p:.4g} units, above its budget of {b:.4g} (--budget-scale or "
            f"{CHEAP_BUDGET_ENV} raises it)")
