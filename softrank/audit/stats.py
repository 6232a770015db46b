"""The audit's statistics layer: exact closure, seeded bootstrap intervals, per-layer summaries.

Pure functions on the grouped pairs of ``tables.group_pairs``; no files, no rendering.  Every
number is an exact rational (as a string in report.json); renderers only format them.

Bootstrap (see proofs_notes/audit.md, section 3): for one row (family, eps) with n pairs (one
pair per operator), a resample draws n of its operators uniformly with replacement; each
statistic is recomputed exactly on the resample; the 95% interval is the percentile interval
[s_(j+1), s_(R-j)] of the R resample values sorted ascending (1-based order statistics),
j = floor(R / 40).  The draws of a row come from ``random.Random(stream_seed(seed, family,
eps))`` calling ``randrange(n)`` n times per resample in resample order, over the row's pairs
sorted by operator id; so the intervals are reproducible from the seed and the resample count
alone, and adding a family or an eps does not move the intervals of the other rows.  A resample
statistic that is infinite (a median ratio U/L whose middle values involve L = 0) sorts last
and is reported as None.
"""

from __future__ import annotations

import random
import re
from collections import defaultdict
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from .records import (  # noqa: F401  (the kinds stay importable from here)
    LOWER_NONE_KIND,
    LOWER_NONZERO_KIND,
    UPPER_FALLBACK_KIND,
    end_kind,
)
from .tables import ALL_FAMILIES, _family_eps_keys, _q, eps_key, median, ok

DEFAULT_SEED = 20240601
DEFAULT_RESAMPLES = 2000
MAX_RESAMPLES = 100_000  # 50 times the default; intervals settle long before
LEVEL = Fraction(95, 100)
STATISTICS = ("resolved_share", "closed_share", "median_lower", "median_upper", "median_ratio")


def is_closed(pair: dict[str, Any]) -> bool:
    """True when the pair's validated bracket is exact: L = U (so r_eps is known exactly)."""
    return pair["lower"] == pair["upper"]


def stream_seed(seed: int, family: str, eps: str) -> str:
    """Returns the seed of the random stream of row (family, eps) (a string: ``random.Random``
    hashes it with SHA-512, the same on every platform and Python >= 3.2)."""
    # random.Random encodes the string as UTF-8: a lone surrogate (a JSON escape in a hostile
    # store) is written as its escape, every valid string is unchanged
    return _utf8_safe(f"softrank-bootstrap:{int(seed)}:{family}:{eps}")


def _utf8_safe(s: str) -> str:
    return "".join(f"\\u{ord(c):04x}" if 0xD800 <= ord(c) <= 0xDFFF else c for c in s)


def _ratio(p: dict[str, Any]) -> Fraction | None:
    return None if p["ratio"] is None else Fraction(p["ratio"])


def point_statistics(ps: Sequence[dict[str, Any]]) -> dict[str, Fraction | None]:
    """Returns the five statistics of a non-empty list of pairs as exact rationals: resolved
    and closed (L = U) shares, medians of L, U and U/L (None = infinite ratio median).
    """
    n = len(ps)
    return {
        "resolved_share": Fraction(sum(bool(p["resolved"]) for p in ps), n),
        "closed_share": Fraction(sum(is_closed(p) for p in ps), n),
        "median_lower": median([Fraction(p["lower"]) for p in ps]),
        "median_upper": median([Fraction(p["upper"]) for p in ps]),
        "median_ratio": median([_ratio(p) for p in ps]),
    }


def percentile_interval(values: Sequence[Fraction | None]) -> list[Fraction | None]:
    """Returns [s_(j+1), s_(R-j)], j = floor(R/40), of the R values sorted ascending (None =
    +infinity sorts last): the 95% percentile interval.  Raises ValueError for no values.
    """
    if not values:
        raise ValueError("no resample values")
    finite = sorted(v for v in values if v is not None)
    ordered: list[Fraction | None] = [*finite, *([None] * (len(values) - len(finite)))]
    j = len(ordered) * (1 - LEVEL) / 2
    j = int(j)  # floor: the interval is never narrower than the nominal 95%
    return [ordered[j], ordered[len(ordered) - 1 - j]]


def bootstrap(ps: Sequence[dict[str, Any]], rng: random.Random, resamples: int
              ) -> dict[str, list[Fraction | None]]:
    """Returns {statistic: [lo, hi]} 95% percentile intervals over ``resamples`` resamples of
    ``ps`` (drawn with replacement by ``rng.randrange``, in the order the pairs are given).

    The same statistics as ``point_statistics`` on each resample, computed on integer ranks:
    the ratios are ordered once exactly, so a resample sorts small integers.
    """
    n = len(ps)
    if n == 1:
        # every resample is the one pair, so every draw is the point value: the loop would
        # give the same interval, at 2,000 resamples per single-operator group (2,000 such
        # groups took 45 CPU s); the row's own stream is not shared with any other row
        point = point_statistics(ps)
        return {name: [point[name], point[name]] for name in STATISTICS}
    resolved = [int(bool(p["resolved"])) for p in ps]
    closed = [int(is_closed(p)) for p in ps]
    lower = [int(p["lower"]) for p in ps]
    upper = [int(p["upper"]) for p in ps]
    ratios = [_ratio(p) for p in ps]
    # rank of each pair's ratio in one exact ascending order (infinite ratios last)
    order = sorted(range(n), key=lambda i: (ratios[i] is None, ratios[i] or 0))
    rank = [0] * n
    for r, i in enumerate(order):
        rank[i] = r
    by_rank = [ratios[i] for i in order]

    def mid(values: list[int]) -> tuple[int, int]:
        values.sort()
        return values[(n - 1) // 2], values[n // 2]

    draws: dict[str, list[Fraction | None]] = {s: [] for s in STATISTICS}
    for _ in range(resamples):
        idx = [rng.randrange(n) for _ in range(n)]
        draws["resolved_share"].append(Fraction(sum(resolved[i] for i in idx), n))
        draws["closed_share"].append(Fraction(sum(closed[i] for i in idx), n))
        a, b = mid([lower[i] for i in idx])
        draws["median_lower"].append(Fraction(a + b, 2))
        a, b = mid([upper[i] for i in idx])
        draws["median_upper"].append(Fraction(a + b, 2))
        ra, rb = (by_rank[r] for r in mid([rank[i] for i in idx]))
        draws["median_ratio"].append(None if ra is None or rb is None else (ra + rb) / 2)
    return {name: percentile_interval(vals) for name, vals in draws.items()}


def _rows(pairs: list[dict[str, Any]]) -> list[tuple[str | None, str]]:
    """Row keys in the order of ``tables.summarize_groups`` (same rule, read off the pairs)."""
    return _family_eps_keys(pairs, pairs)


def interval_rows(pairs: list[dict[str, Any]], *, seed: int = DEFAULT_SEED,
                  resamples: int = DEFAULT_RESAMPLES) -> list[dict[str, Any]]:
    """Returns one row per (family, eps) with pairs (plus the aggregate, family None, per eps
    with several families):
    family, eps, operators, resolved, closed (counts), and for each statistic its exact point
    value and its bootstrap 95% interval ``[lo, hi]`` (exact strings; None = infinite).
    Raises ValueError when ``resamples`` < 1.
    """
    if int(resamples) < 1:
        raise ValueError("resamples must be >= 1")
    out = []
    by_key: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for p in pairs:  # one pass, not one scan of every pair per row
        if p["family"] is not ALL_FAMILIES:  # the aggregate's key: it takes every pair
            by_key.setdefault((p["family"], p["eps"]), []).append(p)
        by_key.setdefault((ALL_FAMILIES, p["eps"]), []).append(p)
    for fam, eps in _rows(pairs):
        ps = sorted(by_key.get((fam, eps), []), key=lambda p: p["operator"])
        point = point_statistics(ps)
        # the aggregate keeps the stream it had when its key was the string "all"
        rng = random.Random(stream_seed(seed, "all" if fam is ALL_FAMILIES else fam, eps))
        ci = bootstrap(ps, rng, int(resamples))
        out.append({
            "family": fam, "eps": eps, "operators": len(ps),
            "resolved": sum(bool(p["resolved"]) for p in ps),
            "closed": sum(is_closed(p) for p in ps),
            **{name: _q(point[name]) for name in STATISTICS},
            "intervals": {name: [_q(v) for v in ci[name]] for name in STATISTICS},
        })
    return out


def bootstrap_settings(seed: int, resamples: int) -> dict[str, Any]:
    """Returns the description of the bootstrap stored in report.json (``options``)."""
    return {"seed": int(seed), "resamples": int(resamples), "level": str(LEVEL),
            "unit": "operator (one (operator, eps) pair per row)",
            "interval": "percentile [s_(j+1), s_(R-j)] of the R sorted resample values, "
                        "j = floor(R/40)",
            "stream": "random.Random('softrank-bootstrap:<seed>:<family>:<eps>'), randrange(n) "
                      "n times per resample, pairs sorted by operator id"}


# ---------------------------------------------------------------------------- per layer


def layer_of(meta: Any) -> Any:
    """Returns meta["layer"] when it is an int or a short string, else None."""
    if isinstance(meta, dict):
        v = meta.get("layer")
        if isinstance(v, bool):
            return None
        if isinstance(v, int) or (isinstance(v, str) and 0 < len(v) <= 40):
            return v
    return None


def _layer_sort(v: Any) -> tuple[int, Any]:
    return (0, v) if isinstance(v, int) else (1, str(v))


def layer_rows(pairs: list[dict[str, Any]], layers: dict[str, Any]) -> list[dict[str, Any]]:
    """Returns one exact summary per (family, layer, eps) over the pairs whose operator has a
    layer in ``layers`` (operator id -> layer): operators, resolved, closed, resolved and closed
    shares, medians of L and U (exact strings).  Empty when no operator has a layer.
    """
    groups: dict[tuple[str, Any, str], list[dict[str, Any]]] = defaultdict(list)
    for p in pairs:
        layer = layers.get(p["operator"])
        if layer is not None:
            groups[(p["family"], layer, p["eps"])].append(p)
    out = []
    for (fam, layer, eps), ps in sorted(groups.items(), key=lambda kv: (
            kv[0][0], _layer_sort(kv[0][1]), eps_key(kv[0][2]))):
        point = point_statistics(ps)
        out.append({"family": fam, "layer": layer, "eps": eps, "operators": len(ps),
                    "resolved": sum(bool(p["resolved"]) for p in ps),
                    "closed": sum(is_closed(p) for p in ps),
                    **{name: _q(point[name]) for name in STATISTICS}})
    return out



# ---------------------------------------------------------------------------- per head

# the kind shown for an end that no claim gave (the fallback proved on the spot)
def _natural(s: str) -> tuple[Any, ...]:
    """Sort key reading digit runs as numbers (H2 before H10)."""
    return tuple((0, int(t), "") if t.isdigit() else (1, 0, t)
                 for t in re.split(r"(\d+)", s) if t)


def per_head_rows(pairs: list[dict[str, Any]], records: list[dict[str, Any]]
                  ) -> list[dict[str, Any]]:
    """Returns one row per (operator, eps) pair, sorted by family, operator id (digit runs
    as numbers) and eps: operator, family, eps, lower, upper, gap = U - L (exact ints) and
    the kinds of the certificates that gave each end (``end_kind`` of the pair's
    ``upper_from`` / ``lower_from`` record); for a pair with ``tightened``
    (``tightening.attach``) also tight_lower, tight_upper, tight_lower_from, tight_upper_from
    (citations: bracket, eps, kind, fallback) and tight_consistent."""
    by_id = {r["bracket"]: r for r in records if ok(r)}
    rows = []
    for p in pairs:
        row = {"operator": p["operator"], "family": p["family"], "eps": p["eps"],
               "lower": p["lower"], "upper": p["upper"],
               "gap": p["upper"] - p["lower"],
               "upper_kind": end_kind(by_id[p["upper_from"]], "upper"),
               "lower_kind": end_kind(by_id[p["lower_from"]], "lower")}
        t = p.get("tightened")
        if t is not None:
            row.update(tight_lower=t["lower"], tight_upper=t["upper"],
                       tight_lower_from=t["lower_from"], tight_upper_from=t["upper_from"],
                       tight_consistent=t["consistent"])
        rows.append(row)
    rows.sort(key=lambda r: (r["family"], _natural(r["operator"]), eps_key(r["eps"])))
    return rows


# ---------------------------------------------------------------------------- figure data


def margin_panels(records: list[dict[str, Any]]) -> dict[tuple[str, str], list[tuple[Fraction,
                                                                                      str]]]:
    """Returns {(end, kind): [(exact midpoint of the margin enclosure, status), ...]} over the
    checks of checked records that recorded a margin, panels ordered upper first then by
    kind (the data of the margins figure)."""
    panels: dict[tuple[str, str], list[tuple[Fraction, str]]] = defaultdict(list)
    for r in records:
        if not ok(r):
            continue
        for end in ("upper", "lower"):
            c = r.get(f"{end}_check")
            if not isinstance(c, dict) or not c.get("margin"):
                continue
            m = c["margin"]
            mid = (Fraction(m["lo"]) + Fraction(m["hi"])) / 2
            panels[(end, str(c.get("kind")))].append((mid, str(c.get("status"))))
    return {k: panels[k] for k in sorted(panels, key=lambda k: (k[0] != "upper", k[1]))}


def chi_values(records: list[dict[str, Any]]) -> dict[str, dict[str, Fraction]]:
    """Returns {family: {operator: chi}} over the checked records that carry chi (the data
    of the chi figure; one value per operator)."""
    chis: dict[str, dict[str, Fraction]] = defaultdict(dict)
    for r in records:
        if ok(r) and r.get("chi") is not None:
            chis[r["family"]][r["operator"]] = Fraction(r["chi"])
    return {f: chis[f] for f in sorted(chis)}


def chi_groups(chis: dict[str, dict[str, Fraction]], most: int
               ) -> list[tuple[str, dict[Any, Fraction]]]:
    """Returns the families of ``chis`` (``chi_values``) as at most ``most`` >= 2 groups: the
    first ``most`` - 1 families alone and the others merged into one group named
    "<n> other families" (operators keyed by (family, operator)); all alone when they fit."""
    items = list(chis.items())
    if len(items) <= most:
        return items
    rest: dict[Any, Fraction] = {}
    for f, values in items[most - 1:]:
        rest.update({(f, k): v for k, v in values.items()})
    return [*items[:most - 1], (f"{len(items) - most + 1} other families", rest)]


def figure_counts(pairs: list[dict[str, Any]], records: list[dict[str, Any]]
                  ) -> dict[str, dict[str, int]]:
    """Returns what each figure is drawn from, for its caption: checked brackets, and
    brackets: pairs, panels, pairs within the study's criterion, closed pairs;
    margins: checks with a margin, panels; chi: operators, those with chi > 0, families."""
    checked = sum(ok(r) for r in records)
    margins = margin_panels(records)
    chis = chi_values(records)
    return {
        "brackets": {"brackets": checked, "pairs": len(pairs),
                     "panels": len({(p["family"], p["eps"]) for p in pairs}),
                     "within_criterion": sum(bool(p["resolved"]) for p in pairs),
                     "closed": sum(is_closed(p) for p in pairs)},
        "margins": {"brackets": checked, "checks": sum(len(v) for v in margins.values()),
                    "panels": len(margins)},
        "chi": {"brackets": checked, "operators": sum(len(v) for v in chis.values()),
                "positive": sum(v > 0 for c in chis.values() for v in c.values()),
                "families": len(chis)},
    }
