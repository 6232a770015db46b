"""softrank-certify trusted kernel.

Every check returns a three-valued :class:`Check` (``status`` ``"holds"`` = proved,
``"fails"`` = the witness's or certificate's own inequality is false, which proves nothing
about r_eps, ``"undecided"``) about the exact stored numbers; eps is always an
exact rational ("0.25", "1/4", a Fraction, or a float meaning its exact binary value) and comes
last, by position or keyword.

Public API:

* :func:`check_upper` ``(A, U, V, eps)`` - upper witness B = U V: ||A - B||_row1 <= eps;
* :func:`check_lower` ``(A, certificate, eps)`` - lower certificate (``nonzero``,
  ``frobenius_tail``, ``decoder``, ``submatrix``, ``bernstein``, ``rowset``, ``rowmix``,
  ``polytope``, ``nerve``): every B within eps has rank >= L;
* :func:`check_bracket` ``(A, upper, lower, eps)`` - both ends, validated bracket
  :class:`BracketCheck` with each end's result (proved / does_not_hold / undecided /
  refuted / absent) and verdicts at rank budgets;
* :func:`operator_slack` ``(record)`` - :class:`Slack` chi between the stored A and the
  operator of record (exact softmax of logits, exact row renormalisation of a block);
* :func:`singular_values` ``(A)`` - :class:`SingularValues`, rigorous enclosures;
* :func:`exact_error` ``(A, U, V)`` - the exact max-row-l1 error as a Fraction;
* :func:`tighten` ``(ends)`` - brackets of one operator combined across tolerances;
* :func:`parse_eps`, :func:`to_rational` - exact rationals from strings, numbers, Fractions;
* :class:`Enclosure` - closed interval of exact rationals; :class:`InputError` - bad input,
  naming the file and field.

Kernel functions take arrays and exact rationals, never files; nothing here imports a
producer (``witnesses.producers``) or reads a store.

Layout (what a referee checks, and where; proofs_notes/README.md maps each check to its note,
its kernel function, its replay function and the tests that try invalid certificates):

* top level - ``upper`` (factors), ``bracket`` (both ends and verdicts), ``slack`` (chi),
  ``tighten`` (across eps), and the shared ``result``, ``errors``, ``rationals``, ``arrays``;
* ``lower/`` - one module per lower kind behind the dispatcher ``check_lower``;
* ``numerics/`` - the validated numerics every check relies on: a-priori float rounding
  bounds (``rounding``), tier escalation and NaN-safe reductions (``tiers``), arb balls
  (``arbutil``, ``ballmat``), exact dyadics (``dyadic``), row-l1 decisions (``rowl1``),
  exponential bounds (``expbound``), validated singular values (``svd``);
* ``intrinsic/`` - the interaction C, tau, kappa, radii and Gamma, the profile, and the
  record check of the intrinsic witnesses.
"""

from .bracket import BracketCheck, check_bracket
from .errors import InputError
from .lower import check_lower
from .numerics.svd import SingularValues, singular_values
from .rationals import parse_eps, to_rational
from .result import Check, Enclosure
from .slack import Slack, charged_slack, operator_slack
from .tighten import ProvedEnd, TightBracket, tighten
from .upper import check_upper, exact_error

__all__ = [
    "Check",
    "Enclosure",
    "InputError",
    "check_upper",
    "exact_error",
    "parse_eps",
    "to_rational",
    "Slack",
    "operator_slack",
    "charged_slack",
    "SingularValues",
    "singular_values",
    "check_lower",
    "BracketCheck",
    "check_bracket",
    "ProvedEnd",
    "TightBracket",
    "tighten",
]
