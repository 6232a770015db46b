"""softrank-certify trusted kernel.

Public API (each returns three-valued :class:`Check` results about the exact stored numbers):

* :func:`check_upper` - upper witnesses B = U V, ||A - B||_row1 <= eps.

Kernel functions take arrays and exact rationals, never files; nothing here imports a
producer (``witnesses.producers``) or reads a store.
"""

from .bracket import BracketCheck, check_bracket
from .errors import InputError
from .lower import check_lower
from .rationals import parse_eps, to_rational
from .result import Check, Enclosure
from .slack import Slack, charged_slack, operator_slack
from .svd import SingularValues, singular_values
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
]
