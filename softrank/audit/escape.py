"""Escaping of text the report did not write itself (store strings, paths, error messages).

A store is adversarial: an operator ``family`` holding a newline, a fake ``**Result:**`` line
and an unclosed ``<!--`` would otherwise render as a forged report.  Every function here first
makes invisible and line-breaking characters visible (:func:`visible`), so store text can
never start a line of the output, then neutralises the markup of the target format.
"""

from __future__ import annotations

import hashlib
import re

from ..terminal import shown

# characters with a meaning anywhere inside a CommonMark/GFM line (a backslash escape makes
# each literal); '<' and '&' also stop raw HTML and entities
_MD_SPECIAL = set("\\`*_[]<>|~&$!#:@")
# GFM's extended autolinks start at "scheme:", "x@y" and "www.": escaping ':' and '@' (above)
# and the dot after "www" keeps store text from becoming a link
_WWW = re.compile(r"(?i)(www)\.")

_TEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
        "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
        "^": r"\textasciicircum{}", "<": r"\textless{}", ">": r"\textgreater{}",
        "|": r"\textbar{}",
        # after \\, \midrule or \addlinespace a "[" opens an optional argument, and after
        # \\ a "*" is its starred form (the star vanished: "*b" printed as "b")
        "[": "{[}", "]": "{]}", "*": "{*}",
        # OT1's ligatures turned store text into other text: -- and --- into dashes, `` and
        # '' into curly quotes, !` and ?` into inverted marks, and " printed as '' does; each
        # character is kept apart or set from a font where it is itself
        "-": "-{}", "`": r"\textasciigrave{}", "'": r"\textquotesingle{}",
        '"': r"{\ttfamily\char34}"}


def visible(s: object) -> str:
    """Returns ``str(s)`` with every control, format, separator (but the space), private-use,
    surrogate, unassigned or default-ignorable character replaced by the text ``\\uXXXX``
    (``\\U00XXXXXX`` beyond the BMP): the terminal's rule (:func:`softrank.terminal.shown`)."""
    return shown(s)


def md(s: object) -> str:
    """Returns ``s`` as literal Markdown text on one line: hidden characters made visible,
    and every character with inline meaning (``\\ ` * _ [ ] < > | ~ & $ ! # : @``, and the dot of
    ``www.``) backslash-escaped, so no emphasis, link or autolink, HTML, comment, table cell
    break or heading can start from it."""
    out = "".join("\\" + ch if ch in _MD_SPECIAL else ch for ch in visible(s))
    return _WWW.sub(r"\1\\.", out)


def md_code(s: object) -> str:
    """Returns ``s`` as a Markdown code span on one line (fenced by more backticks than any
    run inside it, as CommonMark specifies), hidden characters made visible."""
    text = visible(s)
    longest = run = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _tex_char(ch: str) -> str:
    if ch in _TEX:
        return _TEX[ch]
    if ord(ch) < 128:
        return ch
    # the report's preamble loads no font or input encoding beyond LaTeX's defaults, where
    # most characters past ASCII (CJK, Cyrillic, a thorn) stop pdflatex: written as the
    # visible rule writes hidden ones
    n = ord(ch)
    return rf"\textbackslash{{}}u{n:04x}" if n <= 0xFFFF else rf"\textbackslash{{}}U{n:08x}"


def tex(s: object) -> str:
    """Returns ``s`` as literal LaTeX text in ASCII: hidden characters made visible, every
    character special to TeX (and ``< > |``, which OT1 fonts mis-render) replaced by its text
    command, ligatures broken (``-- --- `` '' !` ?` "`` print as typed), and every character
    past ASCII written as the text ``\\uXXXX``."""
    return "".join(_tex_char(ch) for ch in visible(s))


def tex_comment(s: object) -> str:
    """Returns ``s`` safe inside a ``%`` comment line: a comment ends only at a line break,
    and :func:`visible` removes every line break."""
    return visible(s)


#: figure text and family names from a store are cut to this many characters: matplotlib
#: lays a title out character by character (a 2,000,000-character family took gigabytes and
#: minutes), and a family is repeated in some forty table cells (200 families of 100,000
#: characters wrote 6.6 GB of report and held 8.7 GB)
SVG_TEXT_MAX = 80
_CUT_MARK = "\u2026["  # an ellipsis, then the digest in brackets


def _shortened(v: str) -> str:
    """``v`` itself when at most SVG_TEXT_MAX characters long and free of the cut mark, else
    its first 60, an ellipsis and the first 16 hex digits of the sha256 of ``v`` in brackets
    (so two long names that share their start stay apart, and no short name looks cut)."""
    # a short name holding the cut mark is cut too: shown whole it could pass for the cut
    # form of a long one
    if len(v) <= SVG_TEXT_MAX and _CUT_MARK not in v:
        return v
    # 64 bits: two names share a cut form only when a birthday search of about 2^32
    # sha256 evaluations finds them (with 8 hex digits, one took a second)
    tag = hashlib.sha256(v.encode("utf-8", "backslashreplace")).hexdigest()[:16]
    return f"{v[:60]}{_CUT_MARK}{tag}]"


def cut(s: object) -> str:
    """Returns ``str(s)`` cut as figure text is (at most SVG_TEXT_MAX characters, a digest
    where it was cut) and not yet escaped: the renderer of the cell escapes it."""
    return _shortened(str(s))


def svg_text(s: object) -> str:
    """Returns ``s`` safe as matplotlib text (titles, labels, legends in SVG/PNG figures):
    hidden characters made visible, cut to SVG_TEXT_MAX characters when longer (the first
    60, an ellipsis and the first 16 hex digits of the sha256 of the visible text, so two long
    names that share their start stay apart), and ``$`` escaped so no mathtext is parsed from
    it.  (The SVG writer itself escapes XML.)"""
    return _shortened(visible(s)).replace("$", r"\$")


# a spreadsheet reads a cell starting with one of these as a formula (CSV injection); the tab
# and carriage return of the usual list never get here: visible() has written them as text
_CSV_FORMULA = ("=", "+", "-", "@")


def csv_cell(s: object) -> str:
    """Returns ``s`` as a CSV cell that no spreadsheet evaluates: hidden characters made visible
    (so a cell never spans lines), then a leading ``'`` when it would start with ``= + - @``.
    (Quoting of ``,`` and ``"`` is the csv writer's job.)"""
    text = visible(s)
    return "'" + text if text.startswith(_CSV_FORMULA) else text
