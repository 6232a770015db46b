"""Row blocks: how much of a matrix the arb and exact tiers hold at once (memory, not time)."""

from __future__ import annotations

BLOCK_ENTRIES = 1 << 20  # entries of one block: about 50 - 100 MB as arb balls or big integers


def row_blocks(m: int, N: int) -> list[slice]:
    """Returns consecutive row ranges of an m x N matrix, each of at most BLOCK_ENTRIES entries
    (and at least one row).  Row sums, row minima and sums of products over rows are
    independent per block; a whole 6000 x 8192 matrix as arb balls at once held gigabytes (a
    review ran a 768 KB store out of 6 GB)."""
    step = max(1, BLOCK_ENTRIES // max(N, 1))
    return [slice(i, min(i + step, m)) for i in range(0, m, step)]
