"""Terminal-safe rendering of strings the tool did not write itself."""

from __future__ import annotations

from typing import Any


def shown(s: Any) -> str:
    """Returns ``str(s)`` with every non-printable character (control characters such as ESC,
    CR and newline, and other non-printable code points) written as its Python escape, so a
    string from a store can neither forge a line of output nor drive the terminal."""
    text = str(s)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
                   for c in text)
