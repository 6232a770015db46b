"""Bounded work: every expensive phase of a check is priced before it starts.

A check runs inside a :class:`Meter` (one per record: :func:`certify.check_bracket` opens
it, or :func:`certify.check_upper` / :func:`certify.check_lower` when called alone).  Before
each phase that can be slow (a float64 product, an arb product at a precision, an exact
dyadic product, the facet solves and exact point-facet comparisons of a polytope, the arb
tier of the operator slack) the kernel calls :func:`charge` with an upper estimate of that
phase's work, computed from the declared sizes and from the bit sizes of the stored numbers
(:func:`bits`: 53 plus the spread of the binary exponents, read with ``np.frexp``; no exact
arithmetic is done to price exact arithmetic).  When the meter's total would pass its limit,
:class:`WorkLimit` is raised before the phase runs; the entry point turns it into an
``undecided`` :class:`Check` whose ``detail["reason"]`` starts with ``"work limit"``.  A
phase is never interrupted and no verdict is derived from a phase that did not run, so the
limit can only turn a verdict into ``undecided``, never into a wrong one.

Unit: one "work" is about one nanosecond of the reference machine (2 shared cores); the
prices below over-estimate measured times (flint's fmpz_mat and arb_mat products, Python
Fractions, numpy), so the default :data:`DEFAULT_MAX_WORK` (6e10, about 60 s) is reached
before 60 s of real work.  proofs_notes/workbound.md states the estimates and their reasons.
"""

from __future__ import annotations

import contextvars
import math
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

#: Default per-record limit, in work units (about 60 s of the reference machine).
DEFAULT_MAX_WORK = 60_000_000_000

WORK_LIMIT = "work limit"  # the first words of every reason string the limit produces


class WorkLimit(Exception):
    """Raised by :func:`charge` before a phase whose price would pass the meter's limit.

    ``what`` names the phase, ``price`` its estimate, ``spent`` the work charged before it
    and ``limit`` the meter's limit (all in work units).
    """

    def __init__(self, what: str, price: int, spent: int, limit: int):
        self.what, self.price, self.spent, self.limit = what, price, spent, limit
        super().__init__(f"{WORK_LIMIT}: {what} is estimated at {_g(price)} work units, "
                         f"{_g(spent)} already spent, limit {_g(limit)} (raise it with "
                         "--max-work or max_work=)")


def _g(x: int) -> str:
    """A work count by its three leading digits and its exponent (any size of int)."""
    d = str(int(x))
    return d if len(d) <= 4 else f"{d[0]}.{d[1:3]}e+{len(d) - 1:02d}"


@dataclass
class Meter:
    """Work charged so far against ``limit`` (work units), and the phases it was charged for
    (``phases``, in order: what a check stopped by the limit had already run)."""

    limit: int
    spent: int = 0
    phases: list[str] = field(default_factory=list)

    def charge(self, price: float, what: str) -> None:
        """Adds ``price`` to ``spent``; raises :class:`WorkLimit` (adding nothing) when the
        sum would exceed ``limit``."""
        if isinstance(price, int):  # prices of huge declared sizes stay exact integers
            p = price
        else:
            p = int(math.ceil(price)) if math.isfinite(price) else 1 << 62
        if self.spent + p > self.limit:
            raise WorkLimit(what, p, self.spent, self.limit)
        self.spent += p
        self.phases.append(what)

    def tiers_since(self, start: int) -> tuple[str, ...]:
        """Returns the value tiers (float64, arb, exact, in the order first charged) among
        the phases charged from index ``start`` on: the tiers a check had run when the limit
        stopped it.  The kernel names a tier's phase "the arb tier at 128 bits" (the
        Frobenius tail's: "the float64 SVD", "the exact residuals of the SVD"); phases that
        validate a certificate's structure ("the exact normals of 40 facets") are no tier."""
        run: list[str] = []
        for what in self.phases[start:]:
            m = _TIER_WORD.match(what)
            if m and m.group(1) not in run:
                run.append(m.group(1))
        return tuple(run)


_TIER_WORD = re.compile(r"the (float64|arb|exact) (?:tier|SVD|residuals of the SVD)\b")


_METER: contextvars.ContextVar[Meter | None] = contextvars.ContextVar("softrank_meter",
                                                                      default=None)


def parse_max_work(text: str) -> int:
    """Returns the work limit spelled by ``text``: a nonnegative integer, also in scientific
    notation (``6e10``); raises InputError (field ``--max-work``) otherwise."""
    from fractions import Fraction

    from ..errors import InputError

    try:
        q = Fraction(str(text).strip()) if len(str(text)) <= 40 else None
    except (ValueError, ZeroDivisionError):
        q = None
    if q is None or q.denominator != 1 or q < 0 or q > 10**30:
        raise InputError(f"must be a nonnegative integer (e.g. 6e10), got {str(text)[:40]!r}",
                         field="--max-work")
    return int(q)


def check_max_work(max_work: object) -> int | None:
    """Returns ``max_work`` as a nonnegative int (None: the default or the enclosing meter);
    raises InputError (field ``max_work``) for anything else."""
    if max_work is None:
        return None
    if isinstance(max_work, bool) or not isinstance(max_work, int | np.integer) \
            or max_work < 0:
        from ..errors import InputError

        raise InputError(f"must be an integer >= 0, got {max_work!r}", field="max_work")
    return int(max_work)


@contextmanager
def metered(max_work: int | None = None) -> Iterator[Meter]:
    """Runs the block with a meter: a new one of limit ``max_work`` when given, otherwise the
    enclosing block's meter (a record's checks share one), otherwise a new one of limit
    :data:`DEFAULT_MAX_WORK`."""
    cur = _METER.get()
    if max_work is None and cur is not None:
        yield cur
        return
    meter = Meter(DEFAULT_MAX_WORK if max_work is None else int(max_work))
    token = _METER.set(meter)
    try:
        yield meter
    finally:
        _METER.reset(token)


def charge(price: float, what: str) -> None:
    """Charges ``price`` work units for the phase ``what`` to the current meter (a fresh
    default meter when none is open, so a kernel function called on its own is bounded by
    the default limit per phase).  Raises :class:`WorkLimit` before an over-limit phase."""
    meter = _METER.get()
    if meter is None:
        Meter(DEFAULT_MAX_WORK).charge(price, what)
    else:
        meter.charge(price, what)


# --- bit sizes ---------------------------------------------------------------------------

def bits(X: np.ndarray) -> int:
    """Returns an upper bound on the bit length of the entries of the integer matrix M with
    X = M 2^e that ``dyadic.to_int_matrix`` builds (X finite float): 53 plus the spread
    between the largest and the smallest binary exponent of X's nonzero entries; 1 for an
    empty or all-zero X.  One ``np.frexp`` pass; no exact arithmetic."""
    X = np.asarray(X, dtype=np.float64)
    if X.size == 0:
        return 1
    with np.errstate(all="ignore"):
        _, ex = np.frexp(X)
    nz = X != 0
    if not nz.any():
        return 1
    e = ex[nz]
    # an entry m 2^q (|m| < 2^53) of exponent ex needs at most ex - e_min + 53 bits once the
    # common exponent is the least significant bit of the smallest entry
    return int(e.max()) - int(e.min()) + 53


def words(b: int) -> int:
    """Returns the number of 64-bit limbs of a b-bit integer (at least 1)."""
    return max(1, -(-int(b) // 64))


# --- prices (work units, about nanoseconds) ----------------------------------------------

def float_product(m: int, k: int, n: int) -> int:
    """Price of a float64 ball product (m x k)(k x n) and its a-priori bounds: 8 per
    multiply-add (ballmat runs up to three products; BLAS on subnormal results takes about
    4.3 ns a multiply-add, against 0.05 ns on normal floats, and a review's store of
    subnormal entries ran 1.7 times the earlier 4) plus 20 per entry touched."""
    return 8 * m * k * n + 20 * (m * k + k * n + m * n)


def arb_product(m: int, k: int, n: int, prec: int) -> int:
    """Price of converting (m x k) and (k x n) float matrices to arb_mat and multiplying
    them at ``prec`` bits: 600 per entry converted or read back, 12 (prec / 128) per
    multiply-add (measured about 3 at 128 to 512 bits; a review measured 1.8 times the
    earlier 300 per entry on 2048 x 8192 row blocks, where Python arb objects dominate)."""
    scale = max(1.0, prec / 128)
    return int(600 * (m * k + k * n + m * n) + 12 * scale * m * k * n)


def exact_product(m: int, k: int, n: int, b1: int, b2: int) -> int:
    """Price of an exact fmpz_mat product (m x k)(k x n) of b1- and b2-bit integers,
    including the conversion of both factors from floats (Python ints when the exponent
    spread exceeds 9 bits) and one Python pass over the result: per multiply-add
    4 + 0.5 w1 w2 (w = 64-bit limbs; schoolbook limb products, above flint's measured
    multi-modular times), per entry converted 1000 (1 + w / 8)."""
    w1, w2 = words(b1), words(b2)
    wr = words(b1 + b2 + max(1, k).bit_length())
    conv = 1000 * ((m * k) * (1 + w1 / 8) + (k * n) * (1 + w2 / 8) + (m * n) * (1 + wr / 8))
    return int(conv + m * k * n * (4 + 0.5 * w1 * w2))


def fraction_ops(count: int, b: int) -> int:
    """Price of ``count`` Python Fraction products or sums whose numerators and denominators
    have at most b bits, gcd included: 3000 + 400 w + 6 w^2 each (w the 64-bit limbs of b;
    measured 2 us at 64 bits, 47 us at 6000, 3.5 ms at 60000)."""
    w = words(b)
    return int(count * (3000 + 400 * w + 6 * w * w))


def solve_facets(f: int, p: int, b: int) -> int:
    """Price of the polytope's facet normals: f integer p x p systems of b-bit entries, each
    a fmpz_mat build, determinant and solve (fraction-free elimination: p^3 products of
    operands up to :func:`normal_bits` bits) and the conversion of its p rational entries
    to Fractions and floats."""
    wn, wb = words(normal_bits(p, b)), words(b)
    per = 60_000 + 5000 * p * p + p ** 3 * (30 + 8 * wn * wb) + p * (5000 + 16 * wn * wn)
    return f * per


def normal_bits(p: int, b: int) -> int:
    """Bound on the bits of a facet normal's entries (numerator or denominator) for b-bit
    integer points: by Cramer's rule they are p x p minors (or (p - 1) x (p - 1) minors),
    at most p (b + log2 p) bits (Hadamard), plus 1127 bits for the common scale 2^-e of the
    stored floats."""
    return p * (b + max(1, p).bit_length()) + 1127


def point_facet_pairs(count: int, p: int, nb: int) -> int:
    """Price of ``count`` exact point-facet comparisons n . y in Fractions, the normal's
    entries of at most ``nb`` bits: p products of a float's exact value (at most 1127 bits)
    with a normal entry and p sums, each of operands of at most nb + 1127 bits (a sum's
    denominator is a common multiple: at most p of them, bounded here by p (nb + 1127))."""
    return fraction_ops(2 * p * count, p * (nb + 1127))


def exact_rows(count: int, b: int) -> int:
    """Price of reading ``count`` exact integers of b bits back into Python (abs, sums,
    squares, comparisons): 300 (1 + w) each."""
    return int(count * 300 * (1 + words(b)))


def product_bits(b1: int, b2: int, k: int) -> int:
    """Bits of an entry of an exact product of b1- and b2-bit integer matrices with inner
    dimension k (a sum of k products): b1 + b2 + log2 k + 1."""
    return int(b1) + int(b2) + max(1, int(k)).bit_length() + 1


def exact_chain(*factors: np.ndarray) -> int:
    """Price of the exact product of the float matrices ``factors`` (left to right, each
    converted with ``dyadic.to_int_matrix``), its alignment with another exponent and one
    Python pass over the result."""
    r, c = factors[0].shape
    b = bits(factors[0])
    total = 0
    for X in factors[1:]:
        bx = bits(X)
        total += exact_product(r, c, X.shape[1], b, bx)
        b, c = product_bits(b, bx, c), X.shape[1]
    return total + exact_rows(r * c, b + 2200)


def arb_chain(prec: int, *factors: np.ndarray) -> int:
    """Price of the arb product of the float matrices ``factors`` (left to right) at
    ``prec`` bits, with one pass over the result's entries."""
    r, c = factors[0].shape
    total = 0
    for X in factors[1:]:
        total += arb_product(r, c, X.shape[1], prec)
        c = X.shape[1]
    return total + 3000 * r * c


PSD_BUFFERS = 6  # dense (m + n)^2 float64 buffers of kappa's PSD dual (S, its factor, products)
MAX_DENSE_BYTES = 1 << 30  # a record whose dense buffers would pass this is refused


def intrinsic_witness(m: int, n: int, r: int, b: int,
                      witness: Mapping[str, np.ndarray | None]) -> int:
    """Price of the kappa witnesses' own work on an m x n operator with factors of width r and
    b-bit entries: the rectangles' exact sums (s rectangles, about 9 r Fraction operations
    each), the gauge's exact determinant, inverse and adjugate (2 r^3 Fraction operations on
    entries of up to r (bits(G) + log2 r) bits), the PSD dual's float Cholesky and products
    (3 (m + n)^3 flops, one unit each) and the variance dual (:func:`variance_dual`)."""
    price = 0
    rects = witness.get("rects")
    if rects is not None:
        price += fraction_ops(12 * r * len(rects), 2 * b + 64)
    G = witness.get("G")
    if G is not None and G.size:
        price += fraction_ops(2 * r ** 3, r * (bits(G) + max(r, 1).bit_length()))
    if witness.get("M") is not None:
        price += 3 * (m + n) ** 3
    lam, mu = witness.get("lam"), witness.get("mu")
    if lam is not None and mu is not None:
        price += variance_dual(r, b, lam, mu)
    return int(price)


def variance_dual(r: int, b: int, lam: np.ndarray, mu: np.ndarray) -> int:
    """Price of kappa's variance dual on factors of width r and b-bit entries, with weights
    ``lam`` and ``mu`` (s1 and s2 of them nonzero): the exact centred product (s1 x r)(r x s2)
    of rationals whose numerators and denominators carry the weights' bits (the weight sum
    and the common power of two, at most 1127 bits, appear on both), its s1 s2 entries read
    into arb, scaled in a Python loop and read back as floats (20,000 each, with the row sums),
    the float SVD (10 s1 s2 min(s1, s2)), the arb products W^T B and the Gram matrix of W,
    and the exact weight sums."""
    s1 = int(np.count_nonzero(np.asarray(lam)))
    s2 = int(np.count_nonzero(np.asarray(mu)))
    if s1 == 0 or s2 == 0:
        return 0
    b1 = b + 2 * (bits(np.asarray(lam, dtype=np.float64)) + s1.bit_length()) + 1127
    b2 = b + 2 * (bits(np.asarray(mu, dtype=np.float64)) + s2.bit_length()) + 1127
    lo, hi = min(s1, s2), max(s1, s2)
    return int(exact_product(s1, max(r, 1), s2, b1, b2)
               + 3 * exact_rows(s1 * s2, product_bits(b1, b2, r))
               + 20_000 * s1 * s2 + 10 * s1 * s2 * lo
               + arb_product(s2, s1, s2, 128) + arb_product(lo, hi, lo, 128)
               + fraction_ops(2 * (s1 + s2), max(b1, b2)))


def intrinsic_dense_bytes(m: int, n: int, witness: Mapping[str, object]) -> int:
    """Bytes of the dense buffers a record's PSD dual allocates (0 without one): memory, which
    the work price does not bound; callers refuse a record above MAX_DENSE_BYTES."""
    return PSD_BUFFERS * 8 * (m + n) ** 2 if witness.get("M") is not None else 0


def intrinsic_record(m: int, n: int, r: int, *arrays: np.ndarray, beta_bits: int = 0) -> int:
    """Price of one intrinsic record on an m x n operator with factors of width r (rank
    records: X m x r, Y n x r; native records: Q m x d, K n x d with r = d), the stored
    ``arrays`` giving the bit sizes: the interaction's arb logs and exact sums (m n entries),
    tau's arb rows at two precisions (m n (r + 1) ball operations in Python, with exact
    endpoints per entry), kappa's and the radii's exact products (m x r x n) and sums.
    ``beta_bits`` (numerator plus denominator bits of the operator's exact beta) prices the
    Fraction product by beta that tau's arb rows take per entry of logits at each precision:
    400 w_beta + 6 w_beta w_b each (limbs of beta and of the entry; a 26,000-bit beta on
    96 x 96 logits of 1,055 bits took 1.5 s more than beta = 1, priced at 5.3 s)."""
    b = max((bits(X) for X in arrays if X.size), default=1)
    arb_rows = 2 * (m * n * (r + 1) * 3000 + m * n * 20_000)
    exact = exact_product(m, r, n, b, b) + 2 * exact_rows(m * n, 2 * b + 2200)
    wb = words(beta_bits)
    by_beta = 2 * m * n * (400 * wb + 6 * wb * words(b + 2200)) if beta_bits > 0 else 0
    return int(m * n * 5000 + arb_rows + exact + fraction_ops(m + n, 2 * b + 2200) + by_beta)


def profiles(count: int, eps_bits: int) -> int:
    """Price of ``count`` profile brackets (arb logs and exps at 128 bits of exact ends whose
    eps has at most ``eps_bits`` bits): 500,000 + 40 Fraction operations each (measured
    0.13 - 0.44 ms, and 3.4 ms for a 26,000-bit eps at r = 10^6, priced 45 ms)."""
    return int(count * (500_000 + fraction_ops(40, eps_bits + 2200)))
