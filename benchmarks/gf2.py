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
