"""The one JSON reader (and writer) for every JSON input: stores, journals, oracle cells.

Reading contract (:func:`loads`):

* numbers with a fraction or exponent parse to the exact ``Fraction`` they spell ("0.3" is
  3/10, never the binary float nearest to it); integers to ``int``; NaN/Infinity are refused;
* a number with more than ``MAX_DIGITS`` significant digits plus exponent is refused before
  it is expanded, and so is a document whose numbers together expand to more than
  ``MAX_DIGITS`` + ``DIGITS_PER_CHAR`` times its length in digits (each "1e-3999" is 7
  characters that expand to a 4,000-digit rational: without the second rule half a million of
  them in a 4 MB file became gigabytes of exact numbers and of their printed forms);
* nesting deeper than ``MAX_DEPTH`` arrays/objects is refused before parsing (no
  RecursionError);
* an object with a repeated key is refused (JSON leaves its meaning open; silently taking the
  last value lets two readers disagree about one file);
* every refusal is a ``ValueError`` (callers wrap it in an InputError naming file and line).

JSON Lines files are split on "\\n" only (:func:`split_lines`): ``str.splitlines`` would also
split inside a string at a raw U+2028/U+2029, which JSON allows there.

Writers emit exact rationals as strings ("1/4") so a round trip is exact.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

import numpy as np

from softrank.certify.rationals import qstr

MAX_DIGITS = 4000  # beyond this a number is refused rather than expanded
# digits (significant plus exponent) a document's numbers may expand to per character of it,
# beyond MAX_DIGITS: a float64 between 1e-16 and 1e16 as Python writes it expands to about its
# length; MAX_DIGITS leaves room for about a dozen near the ends of the float64 range
DIGITS_PER_CHAR = 4
MAX_DEPTH = 64  # stores nest 3 or 4 levels deep; 64 leaves room and stays far from recursion
_MAX_DIGITS = MAX_DIGITS  # old private name, kept for importers

# a string, or an unterminated one up to the end of the text (then the parser refuses the
# text): every match attempt from a quote succeeds, so the scan stays linear (a pattern that
# needs the closing quote retried from every quote of an unterminated string: quadratic)
_STRING = re.compile(r'"(?:[^"\\]|\\.)*(?:"|\\?\Z)', re.DOTALL)
_BRACKETS = re.compile(r"[\[\]{}]")


class _Numbers:
    """The number hooks of one document: exact values, and a budget of expanded digits that
    every number spends before it is expanded."""

    def __init__(self, length: int):
        self.left = MAX_DIGITS + DIGITS_PER_CHAR * length

    def _spend(self, digits: int, s: str) -> None:
        if digits > MAX_DIGITS:
            raise ValueError(f"number with too many digits: {s[:40]}...")
        self.left -= digits
        if self.left < 0:
            raise ValueError(f"numbers expanding to more digits than {MAX_DIGITS} + "
                             f"{DIGITS_PER_CHAR} per character of the document (at {s[:40]})")

    def exact_float(self, s: str) -> Fraction:
        try:
            d = Decimal(s)
        except InvalidOperation:  # pragma: no cover - json only passes valid number syntax
            raise ValueError(f"bad number {s[:40]}") from None
        if d:
            self._spend(abs(d.adjusted()) + len(d.as_tuple().digits), s)
        return Fraction(d)

    def exact_int(self, s: str) -> int:
        self._spend(len(s), s)
        return int(s)


def _exact_int(s: str) -> int:
    if len(s) > MAX_DIGITS:
        raise ValueError(f"integer with too many digits: {s[:40]}...")
    return int(s)


def _reject_constant(s: str) -> Any:
    raise ValueError(f"non-finite JSON constant {s}")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key {k!r} in one object")
        out[k] = v
    return out


def nesting_depth(text: str) -> int:
    """Returns the maximum nesting depth of arrays/objects in JSON ``text`` (strings skipped).

    Runs in linear time without recursion, so it can vet text before the recursive parser sees
    it.  For text that is not JSON the answer is an upper bound of no meaning; the parser then
    refuses the text anyway.
    """
    depth = best = 0
    for m in _BRACKETS.finditer(_STRING.sub("", text)):
        if m.group() in "[{":
            depth += 1
            best = max(best, depth)
        else:
            depth -= 1
    return best


def loads(text: str | bytes) -> Any:
    """Parses one JSON document under the reading contract of this module.

    Raises ValueError (including ``json.JSONDecodeError``) for anything it refuses.
    """
    if isinstance(text, bytes | bytearray):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as err:
            raise ValueError(f"not UTF-8 text: {err}") from None
    if text.count("[") + text.count("{") > MAX_DEPTH and nesting_depth(text) > MAX_DEPTH:
        raise ValueError(f"nesting deeper than {MAX_DEPTH} levels")
    try:
        numbers = _Numbers(len(text))
        return json.loads(text, parse_float=numbers.exact_float, parse_int=numbers.exact_int,
                          parse_constant=_reject_constant, object_pairs_hook=_no_duplicates)
    except RecursionError:  # pragma: no cover - the depth check comes first
        raise ValueError("nesting too deep") from None


def loads_native(text: str | bytes) -> Any:
    """Parses JSON this package wrote itself (a signed audit journal) with the same depth and
    duplicate-key refusals as :func:`loads`, but numbers as Python's json gives them, so a
    record read back is identical to the one written.  Nothing decides a verdict from it."""
    if isinstance(text, bytes | bytearray):
        text = bytes(text).decode("utf-8")
    if text.count("[") + text.count("{") > MAX_DEPTH and nesting_depth(text) > MAX_DEPTH:
        raise ValueError(f"nesting deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(text, parse_int=_exact_int, parse_constant=_reject_constant,
                          object_pairs_hook=_no_duplicates)
    except RecursionError:  # pragma: no cover - the depth check comes first
        raise ValueError("nesting too deep") from None


def split_lines(text: str) -> list[str]:
    """Returns the lines of JSON Lines ``text`` (split on "\\n" only; a trailing "\\r" is
    dropped), so that a raw U+2028 inside a JSON string never splits a record."""
    return [ln[:-1] if ln.endswith("\r") else ln for ln in text.split("\n")]


def _default(o: Any) -> Any:
    if isinstance(o, Fraction):
        return qstr(o)
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def dumps(obj: Any, **kw: Any) -> str:
    """Serialises ``obj``; Fractions become exact strings, NumPy scalars native numbers.

    Non-ASCII characters are written as \\u escapes, so no raw line separator ever reaches
    a JSON Lines file.
    """
    return json.dumps(obj, default=_default, allow_nan=False, **kw)
