"""The assumptions every verdict rests on, stated once for reports and ``check --json``.

The float64 tier's rounding lemmas and their hypotheses are in proofs_notes/rounding.md; the
arb and exact tiers rest only on the third item.
"""

from __future__ import annotations

from typing import Any

ASSUMPTIONS: tuple[str, ...] = (
    "IEEE 754 binary64 arithmetic in round-to-nearest, ties to even (the mode every CPython and "
    "NumPy process starts in; the checker never changes it).",
    "Matrix products come from a BLAS that computes each entry as some ordering of its dot "
    "product, with or without FMA, blocked or not; no Strassen-type fast products (OpenBLAS, "
    "MKL and Accelerate use none for dgemm).",
    "Arb's contract (python-flint): every ball operation returns a ball that contains the exact "
    "result; FLINT's integer and rational matrix arithmetic is exact.",
    "Stored floats are read as the exact dyadic rationals they denote, tolerances as the exact "
    "rationals they spell; nothing else about the producer is trusted.",
)

SCOPE = ("A verdict decided in the float64 tier rests on all four; one decided in the arb or "
         "exact tier on the last two only. The rounding lemmas and their proofs: "
         "proofs_notes/rounding.md.")


def assumptions() -> dict[str, Any]:
    """Returns {"items": [...], "scope": ...} for JSON output."""
    return {"items": list(ASSUMPTIONS), "scope": SCOPE}


def assumptions_markdown() -> list[str]:
    """Returns the lines of an "Assumptions" section (Markdown)."""
    return ["## Assumptions", "", *(f"- {a}" for a in ASSUMPTIONS), "", SCOPE, ""]
