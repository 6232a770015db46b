"""What a report must state so a run can be cited and repeated: versions, tiers, precisions."""

from __future__ import annotations

import platform
import sys
from collections import Counter
from fractions import Fraction
from importlib import metadata
from typing import Any

from softrank.witnesses import jsonexact

from ..numfmt import sci

# record key prefix -> what it checks ("nonzero" = the kernel's fallback lower end, run when
# a lower claim is not proved)
CHECK_KINDS = {"upper": "upper ends", "lower": "lower ends",
               "nonzero": "fallback lower ends (||A||_row1 > eps + chi)"}
PACKAGES = ("softrank-certify", "numpy", "python-flint", "mpmath", "sympy", "scipy",
            "matplotlib", "tqdm")


def package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def this_version() -> str:
    return package_version("softrank-certify") or "unknown"


def environment() -> dict[str, Any]:
    """Returns the versions of Python, the packages behind the checks and the C FLINT library."""
    env: dict[str, Any] = {"python": sys.version.split()[0],
                           "implementation": platform.python_implementation(),
                           "platform": platform.platform(terse=True)}
    for name in PACKAGES:
        env[name] = package_version(name)
    try:
        import flint

        env["flint (C library)"] = getattr(flint, "__FLINT_VERSION__", None)
    except ImportError:  # pragma: no cover - python-flint is a hard dependency
        pass
    return env


def methods(records: list[dict[str, Any]], tier: str) -> dict[str, Any]:
    """Returns, per end, how many checks each tier decided, the tier sequences run and the
    arb precisions (bits) used, read from the records' check objects.
    """
    out: dict[str, Any] = {"requested_tier": tier}
    for end in CHECK_KINDS:
        checks = [r.get(f"{end}_check") for r in records if "error" not in r]
        checks = [c for c in checks if isinstance(c, dict)]
        out[end] = {
            "checks": len(checks),
            "decided_by": dict(sorted(Counter(str(c.get("tier")) for c in checks).items())),
            "tier_sequences": dict(sorted(Counter(">".join(c.get("tiers_run") or [])
                                                  for c in checks).items())),
            "precisions_bits": sorted({int(c["precision"]) for c in checks
                                       if c.get("precision") is not None}),
            "kinds": dict(sorted(Counter(str(c.get("kind")) for c in checks).items())),
            "statuses": dict(sorted(Counter(str(c.get("status")) for c in checks).items())),
        }
    chis: dict[str, Fraction] = {}
    for r in records:
        if "error" not in r and r.get("chi") is not None:
            chis[r["operator"]] = Fraction(r["chi"])
    changed = [r for r in records if r.get("chi_changed")]
    out["chi"] = {"operators": len(chis), "positive": sum(c > 0 for c in chis.values()),
                  "max": str(max(chis.values(), default=Fraction(0))),
                  "records_changed": len(changed),
                  "ends_changed": sum(len(r["chi_changed"]) for r in changed)}
    return out


def methods_text(m: dict[str, Any]) -> list[str]:
    """Returns Markdown bullet lines describing ``methods(...)``."""
    lines = [f"- requested tier: `{m['requested_tier']}` (auto = float64 first, escalating to "
             "arb balls and then exact rational arithmetic only where an enclosure is too wide)"]
    for end, label in CHECK_KINDS.items():
        e = m[end]
        if not e["checks"]:
            lines.append(f"- {label}: no checks")
            continue
        decided = ", ".join(f"{t} {n}" for t, n in e["decided_by"].items())
        seqs = ", ".join(f"{s or 'none'} {n}" for s, n in e["tier_sequences"].items())
        prec = ", ".join(str(p) for p in e["precisions_bits"]) or "none"
        kinds = ", ".join(f"{k} {n}" for k, n in e["kinds"].items())
        lines.append(f"- {label} ({e['checks']} checks; kinds: {kinds}): decided by "
                     f"{decided}; tiers run: {seqs}; arb precisions used (bits): {prec}")
    c = m.get("chi")
    if c:
        lines.append(f"- operator slack chi (rigorous upper bound on ||A_record - A_stored||_row1,"
                     f" charged as eps - chi for upper and eps + chi for lower ends): "
                     f"{c['positive']} of {c['operators']} operators have chi > 0; max chi "
                     f"{sci(Fraction(c['max']), rounding='up')} (rounded up; exact value in "
                     "report.json); charging "
                     f"chi changed {c.get('ends_changed', 0)} claim outcomes in "
                     f"{c.get('records_changed', 0)} brackets")
    return lines


# at most this many produce_budgets entries are summarised (a store may hold any number)
PRODUCED_BY_MAX = 8


def produced_by(header: Any) -> list[dict[str, str]]:
    """Returns, for each of the first PRODUCED_BY_MAX ``produce_budgets`` entries of a store
    header's provenance, the settings and software its producer recorded, as strings
    (budget mode and scale, package version, producer-source digest, numpy, scipy, the BLAS
    libraries with their kernel architectures).  These are the producer's own words, never
    checked: a report shows them as recorded.  Returns [] when the header has none."""
    prov = header.get("provenance") if isinstance(header, dict) else None
    entries = prov.get("produce_budgets") if isinstance(prov, dict) else None
    if not isinstance(entries, list):
        return []
    out = []
    for e in entries[:PRODUCED_BY_MAX]:
        if not isinstance(e, dict):
            continue
        row = {"budget_mode": str(e.get("budget_mode")), "budget_scale": str(e.get("budget_scale"))}
        row.update(_software_row(e.get("software")))
        out.append(row)
    return out


def _software_row(sw: Any) -> dict[str, str]:
    """Returns the package version, producer-source digest, numpy, scipy and BLAS libraries
    of a recorded numerics environment ``sw``, as strings ({} when it is not an object)."""
    row: dict[str, str] = {}
    if not isinstance(sw, dict):
        return row
    for key in ("softrank_certify", "producer_sources_sha256", "numpy", "scipy"):
        if key in sw:
            row[key] = str(sw[key])
    blas = sw.get("blas")
    if isinstance(blas, list):
        row["blas"] = "; ".join(
            " ".join(str(b.get(k)) for k in ("internal_api", "version", "architecture")
                     if b.get(k) is not None)
            for b in blas[:PRODUCED_BY_MAX] if isinstance(b, dict))
    return row


def producing_environments(header: Any) -> dict[str, Any]:
    """Returns what a store header's provenance says about the numerics environments whose
    processes produced its brackets (``producing_software``, one entry per distinct one, as
    ``produce`` records them): {"count": how many entries, "shown": the first PRODUCED_BY_MAX
    as string rows, "more": how many are not shown, "other_than_budgets": whether some entry
    differs from every
    ``produce_budgets[].software``}.  In work mode a bracket is a function of that software, so
    a store produced under several environments, or under one other than the producing
    command's own, is not rewritten bit for bit by one rerun.  The producer's own words, never
    checked; count 0 when the header has none (a store not written by ``produce``, or by an
    older one)."""
    prov = header.get("provenance") if isinstance(header, dict) else None
    seen = prov.get("producing_software") if isinstance(prov, dict) else None
    if not isinstance(seen, list):
        return {"count": 0, "shown": [], "more": 0, "other_than_budgets": False}
    budgets = prov.get("produce_budgets")
    # one canonical string per entry: a list search per entry was quadratic in the header
    own = {_canon(e.get("software")) for e in budgets if isinstance(e, dict)} \
        if isinstance(budgets, list) else set()
    return {"count": len(seen),
            "shown": [_software_row(sw) for sw in seen[:PRODUCED_BY_MAX]],
            "more": max(len(seen) - PRODUCED_BY_MAX, 0),
            "other_than_budgets": any(_canon(sw) not in own for sw in seen)}


def _canon(x: Any) -> str:
    """Equal JSON values give equal strings (keys sorted; exact numbers as the store has them)."""
    return jsonexact.dumps(x, sort_keys=True)
