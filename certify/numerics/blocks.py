"""Row blocks: how much of a matrix a tier holds at once (memory, not time)."""

from __future__ import annotations

BLOCK_ENTRIES = 1 << 20  # entries of one block: about 50 - 100 MB as arb balls or big integers
FLOAT_BLOCK_ENTRIES = 1 << 22  # float64 temporaries of one block: 32 MB each


def row_blocks(m: int, N: int, *, floats: bool = False) -> list[slice]:
    """Returns consecutive row ranges of an m x N matrix, each of at most BLOCK_ENTRIES
    entries (FLOAT_BLOCK_ENTRIES with ``floats``, for float64 temporaries) and at least one
    row.  Row sums, row minima and sums of products over rows are
    independent per block; a whole 6000 x 8192 matrix as arb balls at once held gigabytes (a
    review ran a 768 KB store out of 6 GB), and the float64 tiers' temporaries, a whole m x N
    array each, held six times the stored matrix."""
    entries = FLOAT_BLOCK_ENTRIES if floats else BLOCK_ENTRIES  # read here: tests shrink them
    step = max(1, entries // max(N, 1))
    return [slice(i, min(i + step, m)) for i in range(0, m, step)]
