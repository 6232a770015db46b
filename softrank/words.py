"""The words every report uses for a claimed end, and the one-line reason of an end that is
not proved (display only: nothing here decides anything).

A claimed end is

* ``proved``: its witness or certificate is a proof (the kernel's check ``holds``);
* ``does not hold``: the witness's or certificate's own inequality is proved false (the
  kernel's ``fails``).  That proves nothing about r_eps: other factors, or another
  certificate, may still prove the same rank;
* ``undecided``: the check decided neither way;
* ``refuted``: the claim about r_eps itself is proved false (an upper claim k below the
  proved lower end, or a lower claim L above the proved upper end);
* ``absent``: no claim for that end.

Records keep the older key ``<end>_outcome`` (confirmed / weakened / refuted / absent, where
``refuted`` meant only "the check's inequality is false"); :func:`end_result` reads either.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from .numfmt import near4, outward4

RESULTS = ("proved", "does_not_hold", "undecided", "refuted", "absent")
# the older word -> the newer one (an old "refuted" only ever meant the check's inequality)
_FROM_OUTCOME = {"confirmed": "proved", "refuted": "does_not_hold", "weakened": "undecided",
                 "absent": "absent"}

LEGEND_WORDS = (
    "proved (the witness or certificate is a proof), does not hold (its own inequality is "
    "false; this proves nothing about r_eps), undecided (neither; the end falls back), "
    "refuted (the claim about r_eps is false: it contradicts the other proved end), "
    "absent (no claim)"
)

# what each check compares with its threshold, as printed in a reason line
_QUANTITY = {
    "factors": "||A - UV||_row1",
    "nonzero": "||A||_row1",
    "frobenius_tail": "sum_(i>=L) sigma_i^2",
    "decoder": "||I - XM||_inf + ||XD||_inf ||W||_inf (eps+chi)",
    "submatrix": "||I - XM||_inf + ||X||_inf (eps+chi)",
    "bernstein": "||PAW - W||_inf + ||P||_inf (eps+chi)",
    "rowset": "min sigma_i (A[I] z)_i",
    "rowmix": "min sigma_i (DA z)_i",
    "polytope": "min over facets sigma (A z)_i",
    "nerve": "min over tops s (A z)_i",
}
# the relation that proves the claim; the reason of a failed check prints its negation
_NEGATION = {"<=": ">", "<": ">=", ">": "<=", ">=": "<"}


def word(result: str | None) -> str:
    """Returns the display form of a result (``does_not_hold`` -> ``does not hold``)."""
    return str(result).replace("_", " ")


def end_result(record: dict[str, Any], end: str) -> str:
    """Returns the result word of ``end`` ("upper"/"lower") of a checked record, reading the
    key ``<end>_result`` or, for records written before it existed, ``<end>_outcome``."""
    res = record.get(f"{end}_result")
    if isinstance(res, str):
        return res
    old = record.get(f"{end}_outcome")
    return _FROM_OUTCOME.get(str(old), str(old))


def _threshold_text(check: dict[str, Any], end: str) -> str:
    t = check.get("threshold")
    chi = check.get("chi", "0")
    kind = check.get("kind")
    if t is None:
        return "?"
    if kind in ("decoder", "submatrix", "bernstein"):
        return near4(t)
    if kind == "frobenius_tail":
        return f"m (eps+chi)^2 = {near4(t)}"
    if chi in (None, "0"):
        return f"eps {near4(t)}"
    return f"eps {'-' if end == 'upper' else '+'} chi = {near4(t)}"


def check_reason(check: dict[str, Any] | None, end: str, forced_tier: str | None = None
                 ) -> str:
    """Returns one line saying why a check (its JSON form) did not prove its end: the
    enclosure of the compared quantity against the threshold (rounded outward to 4
    significant digits), the tier, and for ``undecided`` the cause."""
    if not check:
        return "no check"
    status = check.get("status")
    quantity = _QUANTITY.get(str(check.get("kind")), "value")
    if check.get("kind") == "frobenius_tail":
        quantity = quantity.replace(">=L", f">={check.get('rank')}")
    sense = str(check.get("sense", "<="))
    value = check.get("value")
    tier = check.get("tier")
    thr = _threshold_text(check, end)
    if value is None:
        # no enclosure: a claim refuted outright (a rank above min(m, N)) or one stopped
        # before any tier ran (the work limit), which is not "false"
        said = {"fails": "false", "holds": "true"}.get(str(status), "not decided")
        text = f"{check.get('claim')}: {said} ({check.get('reason') or 'no enclosure'})"
    else:
        enc = outward4(Fraction(value["lo"]), Fraction(value["hi"]))
        if status == "fails":
            text = f"{quantity} in {enc} {_NEGATION.get(sense, '!' + sense)} {thr}"
        elif status == "holds":
            text = f"{quantity} in {enc} {sense} {thr}"
        else:
            text = f"{quantity} in {enc} straddles {thr} (needs {sense})"
    text += f" [{tier}]"
    if status == "undecided":
        text += ", undecided: " + _undecided_cause(check, forced_tier)
    return text


def _undecided_cause(check: dict[str, Any], forced_tier: str | None) -> str:
    reason = str(check.get("reason") or "")
    if reason.startswith("work limit"):  # certify.numerics.workbound.WORK_LIMIT
        return f"{reason} (rerun with a larger --max-work)"
    if forced_tier not in (None, "auto"):
        return f"tier forced to {forced_tier} (rerun with --tier auto)"
    if check.get("kind") == "frobenius_tail":
        return ("margin thinner than the singular-value enclosures (no tier makes them exact)")
    return "margin thinner than the enclosures of the tiers run"


def end_reason(record: dict[str, Any], end: str, forced_tier: str | None = None) -> str:
    """Returns the one-line reason of a record's end that is not proved ('' for a proved or
    absent end)."""
    res = end_result(record, end)
    if res in ("proved", "absent"):
        return ""
    check = record.get(f"{end}_check")
    why = check_reason(check, end, forced_tier)
    if res == "refuted":
        if end == "upper":
            why = (f"r_eps >= {record.get('lower')} (proved lower end) > claimed "
                   f"{record.get('upper_claim')}; factors: {why}")
        else:
            why = (f"r_eps <= {record.get('upper')} (proved upper end) < claimed "
                   f"{record.get('lower_claim')}; certificate: {why}")
    return why


def all_proved(records: list[dict[str, Any]]) -> bool:
    """True when every claim of every bracket was proved (absent ends do not count)."""
    return all("error" not in r and end_result(r, "upper") == "proved"
               and end_result(r, "lower") in ("proved", "absent") for r in records)
