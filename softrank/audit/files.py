"""Atomic writes of report files that others may read (mode 0644, not mkstemp's 0600)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO

from softrank.witnesses.atomic import write_atomic

PUBLIC_MODE = 0o644


def write_public(path: str | os.PathLike, data: bytes | str) -> None:
    """Atomically creates or replaces ``path`` with ``data`` (str is UTF-8), mode 0644.

    The mode is set on the temporary file before the rename, so readers never see the file
    with other permissions.
    """
    raw = data.encode("utf-8") if isinstance(data, str) else data

    def writer(fh: IO[bytes]) -> None:
        os.fchmod(fh.fileno(), PUBLIC_MODE)
        fh.write(raw)

    write_atomic(Path(path), writer)
