"""Terminal-safe rendering of strings the tool did not write itself.

One rule for every line the CLI prints from a store, a report, a bundle or an error message
(and, through :func:`softrank.audit.escape.visible`, for reports): a character that is not
printable or is invisible by default is written as the text ``\\uXXXX``, and a backslash as
``\\\\``, so the display is one-to-one: the text ``\\u001b`` in a store shows as ``\\\\u001b``,
never as an escaped ESC.  Text is escaped once, where it is shown: error messages quote store
text raw and every place that prints or renders them escapes the whole message.  The standalone
replayer (replay/replay.py, which imports nothing from this package) carries a copy of the
same function; a test checks that the two agree on every code point.
"""

from __future__ import annotations

from typing import Any

# invisible though str.isprintable() says otherwise (Unicode Default_Ignorable_Code_Point
# outside categories Cc/Cf/Cn): combining grapheme joiner, fillers, variation selectors
_IGNORABLE = ((0x34F, 0x34F), (0x115F, 0x1160), (0x17B4, 0x17B5), (0x180B, 0x180F),
              (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFFA0, 0xFFA0), (0xE0100, 0xE01EF))


def _one(c: str) -> str:
    if c == "\\":
        return "\\\\"
    n = ord(c)
    if c.isprintable() and not any(lo <= n <= hi for lo, hi in _IGNORABLE):
        return c
    return f"\\u{n:04x}" if n <= 0xFFFF else f"\\U{n:08x}"


def shown(s: Any) -> str:
    """Returns ``str(s)`` with every character that is not printable (control characters such
    as ESC, CR and newline; format characters such as bidi overrides and zero-width marks;
    spaces other than U+0020; line and paragraph separators; private-use, surrogate and
    unassigned code points) or that is default-ignorable (variation selectors, fillers)
    written as the text ``\\uXXXX`` (``\\UXXXXXXXX`` above U+FFFF), so a string from a store
    can neither start or forge a line of output, nor drive the terminal, nor hide a
    character; and every backslash doubled, so two different strings never show alike.
    Printable text without a backslash is returned unchanged."""
    text = str(s)
    if text.isascii() and text.isprintable() and "\\" not in text:
        return text
    return "".join(map(_one, text))
