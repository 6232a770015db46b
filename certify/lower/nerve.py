"""Lower certificate ``nerve``: a GF(2) chain of served label sets whose parity is odd.

A *label* is a signed row: code j < m stands for +a_j, code j + m for -a_j.  Certificate
(rank p): tops T (q x p label codes, each top p labels on distinct rows), witnesses Z
(q' x N, every entry in [-1, 1]) and G (q indices into Z).  With t = eps + chi the
certificate holds when

1. (chains) with c_(p-1) the set of tops and, for k = p - 1, ..., 1, the boundary of c_k
   (mod 2) invariant under the sign flip nu and c_(k-1) its simplices whose first label
   (smallest row) is positive, the 0-chain c_0 has an odd number of labels;
2. (value) min over tops T and labels (i, s) of T of s (A z_T)_i  >  t, z_T = Z[G[T]].

Then boundary(c_k) = c_(k-1) + nu(c_(k-1)) for every k and |c_0| is odd, and every B with
||A - B||_row1 <= t has rank >= p (proofs_notes/nerve.md: the witnesses give an odd map of
the complex of the tops' faces into {w : ||A w||_inf > t ||w||_inf}, and the chains forbid
an odd map of that complex into R^(p-1) without zeros).  The chains are derived, not
stored: a certificate cannot list chains that disagree with its tops.

Part 1 is exact integer work on the label codes (sorting and counting), priced and bounded
before it starts.  Part 2 runs the float64 -> arb -> exact tiers of the polytope kind on
the (top, label) pairs.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

import numpy as np

from ..errors import InputError
from ..numerics import workbound
from ..rationals import qstr
from ..result import Check, Enclosure
from .polytope import _int_array, _row_keys, decide_pairs, labelled_check, witness_arrays

ARRAYS = ("T", "Z", "G")
#: Largest rank accepted: a top has 2^p faces, and the chains are derived from all of them.
MAX_RANK = 12
MAX_TOPS = 200_000
#: Most label codes one level of the chain derivation forms (int64: 32 MiB; the faces of a
#: rank-12 cross-polytope's 2048 tops need 270,336); beyond, the check is undecided.
MAX_ENTRIES = 1 << 22
#: Work units (about ns) charged per label code sorted and counted in the derivation.
ENTRY_WORK = 400


def parse_arrays(arrays: Mapping[str, object], rank: int, m: int, N: int, *,
                 source: str | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Returns (T, Z, G): int64 q x p label codes, float64 q' x N witnesses, int64 q.

    Raises InputError naming ``lower.rank`` (p outside 1 .. MAX_RANK), ``lower.T`` (not
    q x p with q in 1 .. MAX_TOPS, a code outside [0, 2m), a top with two labels on one row,
    or a top listed twice), ``lower.Z`` (not N columns, q' outside 1 .. q, NaN/Inf, an entry
    outside [-1, 1]) or ``lower.G`` (not q indices in [0, q')).  The chain derivation sizes
    each of its levels itself (:func:`chain_defect`).
    """
    if not 1 <= rank <= MAX_RANK:
        raise InputError(f"a nerve certificate has rank 1 .. {MAX_RANK}, got {rank}",
                         field="lower.rank", source=source)
    T = _int_array(arrays["T"], "lower.T", 2, 2 * m, source)
    q = T.shape[0]
    if T.shape[1] != rank or not 1 <= q <= MAX_TOPS:
        raise InputError(f"has shape {T.shape}; expected (q, {rank}) with 1 <= q <= "
                         f"{MAX_TOPS}", field="lower.T", source=source)
    T = canonical(T, m)
    if rank > 1 and np.any(np.diff(T % m, axis=1) == 0):
        raise InputError("a top has two labels on one row", field="lower.T", source=source)
    if np.any(_counts(T, 2 * m) != 1):
        raise InputError("a top is listed twice", field="lower.T", source=source)
    Z, G = witness_arrays(arrays, N, q, "tops", source)
    return T, Z, G


def canonical(S: np.ndarray, m: int) -> np.ndarray:
    """Returns the label codes of every row of S ordered by row of A (code mod m): the one
    form in which two simplices are compared."""
    order = np.argsort(S % m, axis=1, kind="stable")
    return np.take_along_axis(S, order, axis=1)


def mirror(S: np.ndarray, m: int) -> np.ndarray:
    """Returns nu(S): every label's sign flipped (rows, hence the order, unchanged)."""
    return (S + m) % (2 * m)


def _counts(S: np.ndarray, base: int) -> np.ndarray:
    """Returns, for every row of S, how often it occurs in S."""
    if len(S) == 0:
        return np.zeros(0, dtype=np.int64)
    _, inv, cnt = np.unique(np.stack(_row_keys(S, base), axis=1), axis=0,
                            return_inverse=True, return_counts=True)
    return cnt[inv.ravel()]


class TooLarge(Exception):
    """A level of the chain derivation would hold more than MAX_ENTRIES label codes."""


def chain_defect(T: np.ndarray, m: int) -> str | None:
    """Returns None when the chains derived from the tops T (canonical, as returned by
    :func:`parse_arrays`) satisfy part 1 of the module's statement: boundary(c_k) is
    nu-invariant for k = p - 1 .. 1 and |c_0| is odd; otherwise a sentence naming the first
    defect.  Each level is sized and priced from the chain it starts from before anything
    of it is formed: raises :class:`TooLarge` past MAX_ENTRIES label codes and
    ``workbound.WorkLimit`` past the meter's limit."""
    q, p = T.shape
    workbound.charge(ENTRY_WORK * q * p, f"the tops of rank {p} ({q})")
    c = T
    for k in range(p - 1, 0, -1):  # c holds simplices of k + 1 labels
        n = len(c) * (k + 1) * k  # the codes of c's faces
        if n > MAX_ENTRIES:
            raise TooLarge(f"size limit: the boundary of the {k}-chain would hold {n} label "
                           f"codes, more than the {MAX_ENTRIES} the kernel forms at once")
        workbound.charge(ENTRY_WORK * n, f"the boundary of the {k}-chain ({n} label codes)")
        faces = np.vstack([np.delete(c, x, axis=1) for x in range(k + 1)])
        if len(faces):
            faces = faces[_counts(faces, 2 * m) % 2 == 1]  # the GF(2) boundary
        if len(faces):
            faces = np.unique(faces, axis=0)
            both = np.vstack([faces, mirror(faces, m)])
            if np.any(_counts(both, 2 * m) != 2):
                return (f"the boundary of the {k}-chain is not invariant under the sign flip: "
                        "the tops do not form a cycle of the quotient complex")
        c = faces[faces[:, 0] < m]  # representatives: first label positive
    if len(c) % 2 == 0:
        return (f"the 0-chain has {len(c)} labels, an even number: the cycle does not pair "
                "to 1 with w^(p-1)")
    return None


def check_nerve(A: np.ndarray, T: np.ndarray, Z: np.ndarray, G: np.ndarray, t: Fraction, *,
                eps: Fraction, chi: Fraction, tier: str = "auto") -> Check:
    """Decides the nerve certificate for exact stored A and arrays validated by
    :func:`parse_arrays` (``t`` = eps + chi).

    Returns a :class:`Check` of kind ``"nerve"`` with ``threshold`` t and
    ``detail["sense"]`` ``">"``.  ``status`` is ``"fails"`` (``value`` None,
    ``detail["reason"]`` the defect) when the derived chains do not satisfy part 1;
    otherwise ``value`` is an interval containing min over tops T and their labels (i, s) of
    s (A z_T)_i, and ``status`` is ``"holds"`` when value > t is proved (then every B with
    ||A - B||_row1 <= t has rank >= p), ``"fails"`` when value <= t is proved, else
    ``"undecided"``.  ``tier="auto"`` runs float64, arb 128, exact; the exact tier always
    decides.
    """
    m = A.shape[0]
    p = T.shape[1]
    claim = f"an odd GF(2) chain of label sets each with min s (A z)_i > {qstr(t)}"

    def result(status: str, value: Enclosure | None, run: list[str], detail: dict) -> Check:
        return labelled_check("nerve", p, eps, chi, t, claim, status, value, run, detail)

    try:
        defect = chain_defect(T, m)
    except TooLarge as err:
        return result("undecided", None, [], {"reason": str(err)})
    if defect is not None:
        return result("fails", None, ["exact"], {"reason": defect})
    g = G[:, None].repeat(p, axis=1).ravel()  # witness row of every (top, label) pair
    i = (T % m).ravel()
    sig = np.where(T < m, 1.0, -1.0).ravel()
    out = decide_pairs(A, Z, g, i, sig, t, tier)
    return result(out.status, out.value, out.run, {})
