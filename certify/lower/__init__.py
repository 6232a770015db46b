"""Lower certificates: proofs that every B with ||A - B||_row1 <= eps + chi has rank >= L.

Kinds, one module each (statements and proofs in proofs_notes/lower_nonzero.md,
lower_frobenius.md, lower_decoder.md, bernstein.md, rowset.md, polytope.md, nerve.md); this
module parses a certificate and dispatches it:

* ``nonzero`` (L = 1): ||A||_row1 > eps + chi, so B = 0 is not close enough
  (``certify/lower/nonzero.py``).
* ``frobenius_tail`` (L): sum_{i >= L} sigma_i(A)^2 > m (eps + chi)^2 (Eckart-Young with
  ||E_i||_2 <= ||E_i||_1; ``certify/lower/frobenius.py``).
* ``decoder`` (p; D p x m, W N x p, X p x p): ||I - X D A W||_inf + ||X D||_inf ||W||_inf
  (eps + chi) < 1 makes X D B W invertible for every such B.
* ``submatrix`` (p; rows, cols, X): the decoder argument with D, W row/column selections
  (both in ``certify/lower/decoder.py``).
* ``bernstein`` (p; W N x p with W[J, :] = I, P N x m, J): ||P A W - W||_inf + ||P||_inf
  (eps + chi) < 1 (``certify/lower/bernstein.py``).
* ``rowset`` (p <= 12; I p rows, Z 2^(p-1) x N in [-1, 1]): every sign pattern sigma has a
  z_s with sigma_i (A[I] z_s)_i > eps + chi (``certify/lower/rowset.py``).
* ``rowmix`` (p <= 12; D p x m with rows of l1 norm <= 1, Z): the same on the rows of D A.
* ``polytope`` (p <= 12; points Y labelled by rows I, facets F, witnesses Z, G): the facets of
  conv(+-Y) are listed exactly, and on every facet one witness z has sigma (A z)_i > eps + chi
  for each of its labels (``certify/lower/polytope.py``, Borsuk-Ulam).
* ``nerve`` (p <= 12; tops T of p signed rows, witnesses Z, G): the GF(2) chains derived from
  the tops end in an odd 0-chain, and every top's witness z has s (A z)_i > eps + chi for each
  of its labels (``certify/lower/nerve.py``, the Z2-index of the nerve of served label sets).

"fails" means the certificate's own inequality is proved false, not that r_eps < L.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

import numpy as np

from ..arrays import as_index_vector, as_matrix
from ..errors import InputError
from ..numerics import workbound
from ..numerics.fpenv import quiet_floats
from ..rationals import parse_eps, to_rational
from ..result import Check
from ..upper import check_tier
from . import bernstein, decoder, frobenius, nerve, nonzero, polytope, rowset
from .frobenius import tail_enclosure

__all__ = ["KINDS", "check_lower", "parse_certificate", "tail_enclosure"]

KINDS: dict[str, tuple[str, ...]] = {
    "nonzero": (),
    "frobenius_tail": (),
    "decoder": ("D", "W", "X"),
    "submatrix": ("rows", "cols", "X"),
    "bernstein": bernstein.ARRAYS,
    "rowset": rowset.ARRAYS,
    "rowmix": rowset.MIX_ARRAYS,
    "polytope": polytope.ARRAYS,
    "nerve": nerve.ARRAYS,
}


@quiet_floats
def check_lower(A: object, certificate: Mapping, eps: object, *, tier: str = "auto",
                chi: object = 0, source: str | None = None,
                max_work: int | None = None) -> Check:
    """Decides a lower certificate's inequality at threshold eps + chi for the exact stored A.

    Returns a :class:`Check` with ``status`` ``"holds"`` (proved: every B with
    ||A - B||_row1 <= eps + chi has rank >= ``rank``, so r_eps(A_record) >= rank when
    ||A_record - A||_row1 <= chi), ``"fails"`` (the certificate's inequality is proved
    false) or ``"undecided"``.  ``value`` encloses the compared quantity:

    * nonzero: ||A||_row1, claim value > eps + chi;
    * frobenius_tail: sum_{i >= L} sigma_i(A)^2, claim value > m (eps + chi)^2;
    * decoder / submatrix: ||I - X M||_inf + ||X D||_inf ||W||_inf (eps + chi), claim
      value < 1 (``detail["sense"]`` is ``"<"``, so ``margin`` = 1 - value; a margin of
      exactly 0 is not a proof);
    * bernstein: ||P A W - W||_inf + ||P||_inf (eps + chi), claim value < 1 (as decoder);
    * rowset: min_(s,i) sigma_i(s) (A[I] z_s)_i, claim value > eps + chi;
    * rowmix: the same on the rows of D A (every row of D of l1 norm at most 1);
    * polytope: min over facets F and their labels of sigma (A z_F)_i, claim value > eps + chi
      (``fails`` with ``value`` None when the facets are not those of conv(+-Y));
    * nerve: min over tops T and their labels of s (A z_T)_i, claim value > eps + chi
      (``fails`` with ``value`` None when the chains derived from the tops are not an odd
      cycle).

    ``tier="auto"`` escalates float64 -> arb -> exact (frobenius_tail: float64 -> arb; the
    ``"exact"`` tier, when forced, uses exact dyadic residuals of the same float SVD).
    Raises InputError (field ``lower.<name>``) for a certificate that is not a mapping, an
    unknown kind, missing or extra arrays, wrong shapes, NaN/Inf, a rank that disagrees with
    the arrays, rank < 1 or rank > min(m, N), bad index vectors, or (bernstein) rows W[J, :]
    that are not exactly the identity.

    ``max_work`` (work units, ``certify.numerics.workbound``; default: the enclosing record's meter,
    else ``DEFAULT_MAX_WORK``, about 60 s) bounds the work: a phase whose estimate would
    pass it is not run, and the result is ``"undecided"`` (``value`` None) with
    ``detail["reason"]`` starting ``"work limit"``.
    """
    limit = workbound.check_max_work(max_work)
    eps_q = parse_eps(eps)
    chi_q = to_rational(chi, field="chi")
    if chi_q < 0:
        raise InputError("slack chi must be >= 0", field="chi", source=source)
    tier = check_tier(tier)
    kind, rank, arrays = parse_certificate(certificate, source=source)
    with workbound.metered(limit) as meter:
        start = len(meter.phases)
        try:
            return _check_kind(A, kind, rank, arrays, eps_q, chi_q, tier, source)
        except workbound.WorkLimit as err:
            return _work_limited(A, kind, rank, eps_q, chi_q, meter.tiers_since(start), err)


def _work_limited(A: object, kind: str, rank: int, eps_q: Fraction, chi_q: Fraction,
                  run: tuple[str, ...], err: workbound.WorkLimit) -> Check:
    """The ``undecided`` Check of a lower certificate the work limit stopped after the tiers
    ``run``."""
    t = eps_q + chi_q
    sense, threshold = ">", t
    if kind in ("decoder", "submatrix", "bernstein"):
        sense, threshold = "<", Fraction(1)
    elif kind == "frobenius_tail":
        threshold = np.shape(A)[0] * t * t
    return Check(status="undecided", kind=kind, rank=rank, eps=eps_q, threshold=threshold,
                 value=None, tier=run[-1] if run else "float64",
                 claim=f"{kind} certificate of rank {rank}", chi=chi_q, tiers_run=run,
                 detail={"sense": sense, "reason": str(err)})


def _check_kind(A: object, kind: str, rank: int, arrays: dict[str, object], eps_q: Fraction,
                chi_q: Fraction, tier: str, source: str | None) -> Check:
    """The body of :func:`check_lower` for a parsed certificate (inside its meter)."""
    A = as_matrix(A, "A", source=source)
    m, N = A.shape
    if m == 0 or N == 0:
        raise InputError(f"empty matrix of shape {A.shape}", field="A", source=source)
    if rank > min(m, N):
        # every B of this shape has rank <= min(m, N): such a claim is malformed, not false
        raise InputError(f"rank {rank} exceeds min(m, N) = {min(m, N)} of the {m} x {N} "
                         "matrix", field="lower.rank", source=source)
    t = eps_q + chi_q
    if kind == "nonzero":
        if rank != 1:
            raise InputError(f"a nonzero certificate proves rank 1, got rank {rank}",
                             field="lower.rank", source=source)
        return nonzero.check_nonzero(A, t, eps_q, chi_q, tier, source)
    if kind == "frobenius_tail":
        return frobenius.check_frobenius(A, rank, t, eps_q, chi_q, tier)
    if kind == "decoder":
        D = as_matrix(arrays["D"], "lower.D", source=source, shape=(rank, m))
        W = as_matrix(arrays["W"], "lower.W", source=source, shape=(N, rank))
        X = as_matrix(arrays["X"], "lower.X", source=source, shape=(rank, rank))
        return decoder.check_decoder(A, D, W, X, None, rank, t, eps_q, chi_q, tier)
    if kind == "bernstein":
        W, P, _ = bernstein.parse_arrays(arrays, rank, m, N, source=source)
        return bernstein.check_bernstein(A, W, P, t, eps=eps_q, chi=chi_q, tier=tier)
    if kind == "rowset":
        I, Z = rowset.parse_arrays(arrays, rank, m, N, source=source)
        return rowset.check_rowset(A, I, Z, t, eps=eps_q, chi=chi_q, tier=tier)
    if kind == "polytope":
        Y, I, F, Z, G = polytope.parse_arrays(arrays, rank, m, N, source=source)
        return polytope.check_polytope(A, Y, I, F, Z, G, t, eps=eps_q, chi=chi_q, tier=tier)
    if kind == "nerve":
        T, Z, G = nerve.parse_arrays(arrays, rank, m, N, source=source)
        return nerve.check_nerve(A, T, Z, G, t, eps=eps_q, chi=chi_q, tier=tier)
    if kind == "rowmix":
        D, Z = rowset.parse_mix_arrays(arrays, rank, m, N, source=source)
        return rowset.check_rowmix(A, D, Z, t, eps=eps_q, chi=chi_q, tier=tier)
    rows = as_index_vector(arrays["rows"], "lower.rows", m, source=source)
    cols = as_index_vector(arrays["cols"], "lower.cols", N, source=source)
    if len(rows) != rank:
        raise InputError(f"has {len(rows)} indices but rank is {rank}", field="lower.rows",
                         source=source)
    if len(cols) != rank:
        raise InputError(f"has {len(cols)} indices but rank is {rank}", field="lower.cols",
                         source=source)
    X = as_matrix(arrays["X"], "lower.X", source=source, shape=(rank, rank))
    return decoder.check_decoder(A, None, None, X, (rows, cols), rank, t, eps_q, chi_q, tier)


def parse_certificate(certificate: object, *, source: str | None = None
                      ) -> tuple[str, int, dict[str, object]]:
    """Returns (kind, rank, arrays) after checking the mapping's keys and the rank's type."""
    if not isinstance(certificate, Mapping):
        raise InputError(f"a lower certificate must be a mapping, got "
                         f"{type(certificate).__name__}", field="lower", source=source)
    kind = certificate.get("kind")
    if not isinstance(kind, str) or kind not in KINDS:
        raise InputError(f"unknown kind {kind!r}; use one of {', '.join(KINDS)}",
                         field="lower.kind", source=source)
    if "rank" not in certificate:
        raise InputError("missing", field="lower.rank", source=source)
    rank = certificate["rank"]
    if isinstance(rank, bool) or not isinstance(rank, int | np.integer) or rank < 1:
        raise InputError(f"rank must be an integer >= 1, got {rank!r}", field="lower.rank",
                         source=source)
    want = KINDS[kind]
    for name in want:
        if name not in certificate:
            raise InputError(f"missing (a {kind} certificate needs {', '.join(want)})",
                             field=f"lower.{name}", source=source)
    for name in certificate:
        if name not in ("kind", "rank") and name not in want:
            raise InputError(f"unexpected field for a {kind} certificate",
                             field=f"lower.{name}", source=source)
    return kind, int(rank), {name: certificate[name] for name in want}
