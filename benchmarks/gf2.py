"""GF(2) linear algebra for the topology studies (benchmarks only; nothing here is trusted)."""

from __future__ import annotations


def solvable(columns: list[set], target: set) -> bool:
    """Whether some sum over GF(2) of the columns (each a set of equation keys) equals target."""
    order: dict = {}
    pivots: dict = {}

    def top(v: set):
        return max(v, key=lambda key: order.setdefault(key, len(order)))

    for col in columns:
        v = set(col)
        while v:
            k = top(v)
            if k not in pivots:
                pivots[k] = v
                break
            v ^= pivots[k]
    v = set(target)
    while v:
        k = top(v)
        if k not in pivots:
            return False
        v ^= pivots[k]
    return True


def in_span(vectors, target: int) -> bool:
    """Whether target is a GF(2) sum of vectors, each an int whose bits are its coordinates
    (bitsets: much faster than ``solvable`` on tens of thousands of sparse vectors)."""
    pivots: dict[int, int] = {}  # leading bit -> reduced vector
    for v in vectors:
        while v:
            lead = v.bit_length() - 1
            if lead not in pivots:
                pivots[lead] = v
                break
            v ^= pivots[lead]
    while target:
        lead = target.bit_length() - 1
        if lead not in pivots:
            return False
        target ^= pivots[lead]
    return True
