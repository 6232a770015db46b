"""Independent exact re-check of an :class:`~exact.oracle.ExactResult`."""

from __future__ import annotations

from fractions import Fraction

from .bracket import Certificate, verify_decoder, verify_witness
from .linalg import row1_norm, simplex_distance
from .minors import verify_minor
from .nerve import verify_nerve
from .oracle import INF, ExactResult
from .rankone import verify_refutation
from .subspace import verify_search
from .thin import verify_thin_refutation


def verify_result(res: ExactResult) -> list[str]:
    """Returns the list of problems found when re-checking ``res`` exactly (empty = valid).

    Recomputes the witness's rank, error and admissibility, and re-checks the lower
    certificate of its kind from (A, eps) alone.
    """
    A, eps, st = res.A, res.eps, res.stochastic
    problems: list[str] = []
    if res.lower > res.upper:
        problems.append("empty bracket")
    cert = res.lower_certificate
    if cert.bound != res.lower:
        problems.append("certificate bound differs from the lower end")
    kind = cert.kind
    try:
        ok = _lower_ok(A, eps, st, cert)
    except MALFORMED as err:  # a result that is not one the oracle writes proves nothing
        ok = False
        problems.append(f"lower certificate {kind!r} is malformed ({type(err).__name__})")
    if not ok:
        problems.append(f"lower certificate {kind!r} does not re-check")
    if res.upper == INF:
        if res.lower != INF:
            problems.append("infinite upper end without an emptiness proof")
    elif res.witness is None:
        problems.append("finite upper end without a witness")
    else:
        w = res.witness
        try:
            if not verify_witness(A, eps, w, st):
                problems.append("witness does not re-check")
            if w.rank != res.upper:
                problems.append("witness rank differs from the upper end")
            if w.error > eps or w.error < Fraction(0):
                problems.append("witness error out of range")
        except MALFORMED as err:
            problems.append(f"witness is malformed ({type(err).__name__})")
    return problems


#: What a tampered or hand-made result raises in the re-checks (an index past the cell, a
#: ragged matrix, a float or None where a rational or a record belongs): a problem, not a crash.
MALFORMED = (TypeError, ValueError, AttributeError, IndexError, KeyError)


def _lower_ok(A: object, eps: Fraction, st: bool, cert: Certificate) -> bool:
    """Whether the lower certificate ``cert`` re-checks exactly from (A, eps)."""
    kind = cert.kind
    if kind == "trivial":
        ok = cert.bound == 0
    elif kind == "nonzero":
        ok = cert.bound == 1 and row1_norm(A) > eps
    elif kind == "not-stochastic-zero":
        ok = st and cert.bound == 1
    elif kind == "empty":
        ok = st and simplex_distance(A[cert.data["row"]])[0] > eps and cert.bound == INF
    elif kind == "rank-one-refutation":
        r1 = cert.data["refutation"]
        ok = cert.bound == 2 and r1.stochastic == st and verify_refutation(A, eps, r1)
    elif kind in ("decoder", "submatrix"):
        ok = verify_decoder(A, eps, cert)
    elif kind == "thin-refutation":
        ok = cert.bound == 2 and verify_thin_refutation(A, eps, st, cert.data)
    elif kind == "minor-sign":
        mr = cert.data["minor"]
        ok = cert.bound == len(mr.rows) == len(mr.cols) and verify_minor(A, eps, st, mr)
    elif kind == "nerve-chain":
        ok = verify_nerve(A, eps, int(cert.bound), cert.data["nerve"])
    elif kind == "subspace-search":
        r = cert.data["r"]
        ok = cert.bound == r + 1 and verify_search(A, eps, r, st, cert.data["leaves"])
    else:
        ok = False
    return bool(ok)
