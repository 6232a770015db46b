"""Replays a softrank-certify bundle in exact integer arithmetic.

Usage:  python replay/replay.py BUNDLE.zip [--flint] [--json] [-q|--quiet] [-h|--help] [--version]
                                [--max-operators N] [--max-ends N] [--max-words N] [--max-work N]
                                [--max-held N] [--max-json N]

This program is the independent check of the kernel's "holds": it imports only the Python
standard library (python-flint only behind --flint, for faster integer matrix products) and
nothing from softrank-certify.  Every stored float is an exact dyadic m 2^e, so every check
below is done on Python integers.  Statements and proofs: proofs_notes/replay.md.

Every end must belong to a bracket whose ends all name one operator and one eps, labelled
"upper" (kind factors) or "lower" (a lower kind); each printed line names its bracket, end,
operator and eps, every string from the bundle written with \\uXXXX for control, format (bidi,
zero-width) and other invisible characters; the last line is the summary, made of counts and
the manifest's sha256 alone.  Before any array is decoded the bundle's size is bounded (exit 2
naming the field when over): --max-operators (default 100000) and --max-ends (1000000)
records, --max-words (100000000) 64-bit words of the integers the arrays decode to, an array
counted once per use, --max-work (50000000000) units of estimated work (a unit is one
operation on small integers, about 40 ns), and --max-held (20000000) words held at once (one
operator's arrays with those of one of its ends: operators are replayed one at a time; about
100 bytes of memory a word); all from the declared shapes and the exponent spread of the
stored floats; and --max-json (67108864) bytes of manifest.json and of bundle.json, checked
from the zip directory before either is parsed.  Raise them (N a positive integer) for larger
bundles.  Members must be stored or deflated, and operator and bracket ids are as a store
writes them ([A-Za-z0-9][A-Za-z0-9._-]*, at most 128 characters).  Verdicts are printed
once every end has replayed.

Exit codes: 0 the kernel proved at least one end of the bundle, every end it proved replays
as holds and no verdict disagrees with the kernel's (ends the kernel did not prove are
replayed for agreement only, not as proofs: 0 does not say every claim holds; the summary
counts them); 1 otherwise: no ends, no end the kernel proved (nothing was confirmed), a
proved end that does not replay, or a disagreement; 2 a malformed, oversized or tampered
bundle (the message names the member or field; no verdict is printed); 3 an internal error of
the replayer (never a verdict); 141 the reader of standard output closed the pipe (as for any
command cut short by SIGPIPE).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import struct
import sys
import zipfile
import zlib
from collections import Counter
from fractions import Fraction
from operator import mul

FORMAT, VERSION = "softrank-replay-bundle", 1
# refused from the zip directory, before inflating: a member above MAX_MEMBER, more than
# MAX_MEMBERS members, an archive or declared sizes adding up to above MAX_TOTAL, or to above
# MAX_RATIO per archive byte once past RATIO_FREE
MAX_MEMBER, MAX_TOTAL, MAX_MEMBERS, MAX_RATIO, RATIO_FREE = 1 << 30, 1 << 31, 100_000, 100, 32 << 20
CD_ENTRY_BYTES = 256  # a directory entry: 46 bytes and a name (an export's are at most 75)
DTYPES = {"<f8": ("d", 8), "<f4": ("f", 4), "<i8": ("q", 8)}
P = 192  # fixed-point bits of the exp bounds used for the slack chi
FLINT = None  # the python-flint module when --flint is given
ROWSET_MAX_RANK = 12  # a rowset certificate holds 2^(rank-1) sign vectors
POLY_MAX_POINTS, POLY_MAX_FACETS = 4096, 100_000  # a polytope's k and f (its rank <= 12 too)
NERVE_MAX_TOPS, NERVE_MAX_CODES = 200_000, 1 << 22  # a nerve's tops, and its labels per level
# caps on what a bundle may ask for, checked by plan() before any array is decoded; work is
# counted in units of _x (one small-integer operation, about 40 ns); options --max-<name>
LIMITS = {"operators": 100_000, "ends": 1_000_000, "words": 100_000_000,
          "work": 50_000_000_000, "held": 20_000_000, "json": 64 << 20}
# examples/minilm: 72, 2592, 1.5e7, 5.1e9 and 2.8e6 (a rank-12 polytope: 34,036 witnesses);
# CPython keeps about 100 bytes a word while decoding full-width floats (a 3000 x 3000
# operator peaks at 0.9 GB), so --max-held is about 2 GB; "json": bytes of manifest.json and
# bundle.json, before parsing (up to 26 bytes held a byte; examples/minilm: 0.6 and 0.9 MB)
EXP_UNITS, DECODE_UNITS = 600, 12  # units of a pair of exp bounds, of decoding a word (measured)
LOWER_KINDS = ("nonzero", "frobenius_tail", "decoder", "submatrix", "bernstein", "rowset",
               "rowmix", "polytope", "nerve")
# invisible though str.isprintable() says otherwise (Unicode Default_Ignorable_Code_Point
# outside categories Cc/Cf/Cn): combining grapheme joiner, fillers, variation selectors
_IGNORABLE = ((0x34F, 0x34F), (0x115F, 0x1160), (0x17B4, 0x17B5), (0x180B, 0x180F),
              (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFFA0, 0xFFA0), (0xE0100, 0xE01EF))
# operator and bracket ids as a store writes them (witnesses/store.py): no spaces, no
# lookalikes, at most 128 characters, so a printed id cannot pass for another or for a line
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
# rationals: the kernel's own bounds (certify/rationals.py), so whatever it took replays: ratio
# parts <= MAX_RATIO_DIGITS digits, and a decimal's numerator and denominator once expanded
MAX_RATIO_DIGITS, MAX_CHARS, MAX_INT_DIGITS = 3914, 20_000, 100
_RATIONAL = re.compile(
    r"([+-]?)(?:([0-9]+)/([0-9]+)|([0-9]*)(?:\.([0-9]*))?(?:[eE]([+-]?[0-9]+))?)")


class BundleError(Exception):
    """A bundle that cannot be replayed: malformed, tampered, inconsistent or too large."""


def shown(s: object) -> str:
    """Returns ``str(s)`` with every character that is not printable (control characters such
    as ESC and newline, format characters such as bidi overrides and zero-width marks, spaces
    other than U+0020, line separators, private-use, surrogate and unassigned code points) or
    that is default-ignorable (variation selectors, fillers) written as the text \\uXXXX
    (\\UXXXXXXXX above U+FFFF), and every backslash doubled: a string from a bundle can neither
    start a line, nor drive the terminal, nor hide a character, nor show as another string."""
    def one(c: str) -> str:
        if c == "\\":
            return "\\\\"
        n = ord(c)
        if c.isprintable() and not any(lo <= n <= hi for lo, hi in _IGNORABLE):
            return c
        return f"\\u{n:04x}" if n <= 0xFFFF else f"\\U{n:08x}"
    return "".join(map(one, str(s)))


# --- reading the bundle ------------------------------------------------------------------

def _no_float(text: str) -> None:
    raise BundleError(f"JSON number {text:.40} is not allowed: rationals are strings and "
                      f"integers have at most {MAX_INT_DIGITS} digits")


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    # a repeated key would be read as its last value here and as its first by another
    # reader (the store's refuses it too): a bundle the export could not have written
    out: dict = {}
    for k, v in pairs:
        if k in out:
            raise BundleError(f"key {k!r:.60} appears twice in one object")
        out[k] = v
    return out


def _is_version(v: object) -> bool:
    return type(v) is int and v == VERSION  # true == 1 in Python; the export writes 1


def _json(raw: bytes, name: str) -> object:
    try:
        return json.loads(raw.decode("utf-8"), parse_float=_no_float, parse_constant=_no_float,
                          parse_int=lambda s: _no_float(s) if len(s) > MAX_INT_DIGITS else int(s),
                          object_pairs_hook=_unique_keys)
    except (ValueError, RecursionError) as err:  # UnicodeDecodeError, JSONDecodeError
        raise BundleError(f"{name}: not JSON: {err}") from None
    except BundleError as err:
        raise BundleError(f"{name}: {err}") from None


def read_bundle(path: str, max_json: int = LIMITS["json"]
                ) -> tuple[str, dict, dict[str, bytes]]:
    """Returns (sha256 of manifest.json, the bundle document, member bytes by name).

    Every member named by the manifest must exist with its size and sha256 and be used by
    bundle.json, nothing else may be there, and sizes are limited before inflating (above;
    manifest.json and bundle.json at most ``max_json`` bytes), members stored or deflated
    (zipfile inflates bzip2 and LZMA a whole chunk at a time, past the size asked for)."""
    try:
        size = os.path.getsize(path)
        if size > MAX_TOTAL:
            raise BundleError(f"{path}: {size} bytes, above the limit of {MAX_TOTAL}")
        with open(path, "rb") as fh:  # the entry count, before zipfile builds every entry
            end = zipfile._EndRecData(fh)  # (private, but in zipfile since Python 2; zip64 too)
        if end and end[zipfile._ECD_ENTRIES_TOTAL] > MAX_MEMBERS:
            raise BundleError(f"{path}: more than {MAX_MEMBERS} archive members")
        # zipfile walks the directory's bytes, not the count: 46 bytes make an entry
        if end and end[zipfile._ECD_SIZE] > MAX_MEMBERS * CD_ENTRY_BYTES:
            raise BundleError(f"{path}: a central directory of {end[zipfile._ECD_SIZE]} bytes, "
                              f"above {MAX_MEMBERS} members of {CD_ENTRY_BYTES}")
        zf = zipfile.ZipFile(path)
    # ValueError: bad UTF-8; NotImplementedError: a "version needed" zipfile does not know
    except (OSError, zipfile.BadZipFile, ValueError, EOFError, NotImplementedError) as err:
        raise BundleError(f"{path}: not a readable zip archive: {err}") from None
    with zf:
        try:
            infos = zf.infolist()
            if len(infos) > MAX_MEMBERS:
                raise BundleError(f"{infos[MAX_MEMBERS].filename}: more than {MAX_MEMBERS} "
                                  "archive members")
            info = {i.filename: i for i in infos}
            if len(info) != len(infos):
                raise BundleError("two archive members share a name")
            limit, total = min(MAX_TOTAL, max(RATIO_FREE, MAX_RATIO * size)), 0
            for i in infos:
                total += i.file_size
                if i.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                    raise BundleError(f"{i.filename}: compression method "
                                      f"{i.compress_type}: only stored and deflated members")
                if i.filename in ("manifest.json", "bundle.json") and i.file_size > max_json:
                    raise BundleError(f"{i.filename}: {i.file_size} bytes, above the limit of "
                                      f"{max_json} (--max-json)")
                if i.file_size > MAX_MEMBER or total > limit:
                    raise BundleError(f"{i.filename}: oversized: {i.file_size} bytes, {total} so "
                                      f"far (limits {MAX_MEMBER} a member, {limit} in all)")

            def read(name: str) -> bytes:  # at most the declared size + 1, sha256 checked
                with zf.open(info[name]) as fh:
                    data = fh.read(info[name].file_size + 1)
                if len(data) != info[name].file_size:
                    raise BundleError(f"{name}: inflates to other than its declared size")
                if name != "manifest.json" \
                        and hashlib.sha256(data).hexdigest() != files[name].get("sha256"):
                    raise BundleError(f"{name}: sha256 differs from the manifest (tampered?)")
                return data

            if "manifest.json" not in info:
                raise BundleError("manifest.json: missing")
            man = _json(raw := read("manifest.json"), "manifest.json")
            if not isinstance(man, dict) or man.get("format") != FORMAT \
                    or not _is_version(man.get("version")) \
                    or not isinstance(man.get("files"), dict):
                raise BundleError(f"manifest.json: not a {FORMAT} version {VERSION} manifest")
            files = man["files"]
            extra = set(info) - set(files) - {"manifest.json"}
            if extra:
                raise BundleError(f"{sorted(extra)[0]}: member not listed in the manifest")
            for name, meta in files.items():
                if not isinstance(meta, dict) or name not in info:
                    raise BundleError(f"{name}: listed in the manifest but missing")
                if info[name].file_size != meta.get("bytes"):
                    raise BundleError(f"{name}: size differs from the manifest")
            if "bundle.json" not in files:
                raise BundleError("bundle.json: missing")
            blobs = {"bundle.json": read("bundle.json")}
            doc = _json(blobs["bundle.json"], "bundle.json")
            if not isinstance(doc, dict) or doc.get("format") != FORMAT \
                    or not _is_version(doc.get("version")):
                raise BundleError(f"bundle.json: not a {FORMAT} version {VERSION} document")
            if not isinstance(doc.get("operators"), list) or not isinstance(doc.get("ends"), list):
                raise BundleError("bundle.json: needs lists 'operators' and 'ends'")
            recs = [r for r in doc["operators"] + doc["ends"] if isinstance(r, dict)]
            recs += [r["certificate"] for r in recs if isinstance(r.get("certificate"), dict)]
            used = {v["file"] for r in recs for v in r.values()  # {"file": ...} references
                    if isinstance(v, dict) and isinstance(v.get("file"), str)}
            unused = sorted(set(files) - used - {"bundle.json"})
            if unused:  # never inflated
                raise BundleError(f"{unused[0]}: listed in the manifest but unused")
            blobs.update((n, read(n)) for n in sorted(used & set(files) - {"manifest.json"}))
        except (zipfile.BadZipFile, OSError, RuntimeError, ValueError, EOFError,
                zlib.error) as err:
            # CRC failures, broken deflate streams (zlib.error) and members cut short (EOFError)
            # land here: a flipped bit
            raise BundleError(f"{path}: corrupt archive member: "
                              f"{err or type(err).__name__}") from None
    return hashlib.sha256(raw).hexdigest(), doc, blobs


def rational(x: object, field: str) -> Fraction:
    """Returns the exact rational a string such as "3/20", "0.15" or "15e-2" spells, within the
    kernel reader's bounds (parsed here: the exponent is bounded before 10^e is built)."""
    m = _RATIONAL.fullmatch(x) if isinstance(x, str) and len(x) <= MAX_CHARS else None
    if m is None or not (m[3].strip("0") if m[3] else m[4] or m[5]):
        raise BundleError(f"{field}: not a rational string such as \"3/20\" or \"0.15\" "
                          f"(at most {MAX_CHARS} characters, no zero denominator): {x!r:.60}")
    sign, num, den, whole, frac, exp = m.groups()
    if num is not None:
        num, den = num.lstrip("0") or "0", den.lstrip("0")
        if max(len(num), len(den)) > MAX_RATIO_DIGITS:
            raise BundleError(f"{field}: {x!r:.60} has over {MAX_RATIO_DIGITS} digits in a part")
        return Fraction(int(sign + num), int(den))
    digits = (whole + (frac or "")).lstrip("0")
    if not digits:
        return Fraction(0)  # no power of ten is built, whatever the exponent
    # 7 exponent digits fail the bound whatever the rest: refused before int() reads them
    e = (exp or "0").lstrip("+-").lstrip("0") or "0"
    k = (-int(e) if exp and exp[0] == "-" else int(e)) - len(frac or "") if len(e) < 7 else 10**7
    if max(len(digits) + max(k, 0), 1 + max(-k, 0)) > MAX_RATIO_DIGITS:  # as the kernel:
        # numerator and denominator within the "p/q" bound, so a rewritten value reads back
        raise BundleError(f"{field}: {x!r:.60} has over {MAX_RATIO_DIGITS} digits with its "
                          "exponent")
    n = int(sign + digits)
    return Fraction(n * 10 ** k) if k >= 0 else Fraction(n, 10 ** -k)


def array(ref: object, blobs: dict[str, bytes], field: str, shape: tuple | None = None,
          neg_inf: bool = False) -> list:
    """Returns the array ``ref`` points to as nested lists (rows) or a flat list (1-D).

    ``ref`` = {"file", "dtype" (<f8, <f4 or <i8, little-endian), "shape"}.  Floats must be
    finite (-inf only where ``neg_inf``); ``shape`` (None = any) is checked.
    """
    if not isinstance(ref, dict) or not isinstance(ref.get("dtype"), str) \
            or ref["dtype"] not in DTYPES or not isinstance(ref.get("file"), str) \
            or ref["file"] not in blobs or not isinstance(ref.get("shape"), list) \
            or not all(type(d) is int and d >= 0 for d in ref["shape"]) \
            or len(ref["shape"]) not in (1, 2):
        raise BundleError(f"{field}: bad array reference {repr(ref)[:100]}")
    dims = tuple(ref["shape"])
    if shape is not None and (len(shape) != len(dims) or any(
            s is not None and s != d for s, d in zip(shape, dims, strict=True))):
        raise BundleError(f"{field}: shape {list(dims)} where {list(shape)} is needed")
    code, size = DTYPES[ref["dtype"]]
    data = blobs[ref["file"]]
    count = math.prod(dims)
    if len(data) != count * size:
        raise BundleError(f"{field}: {len(data)} bytes for shape {list(dims)}")
    flat = list(struct.unpack(f"<{count}{code}", data))
    if code != "q":
        for x in flat:
            if x != x or x == math.inf or (x == -math.inf and not neg_inf):
                raise BundleError(f"{field}: non-finite entry {x}")
    if len(dims) == 1:
        return flat
    return [flat[i * dims[1]:(i + 1) * dims[1]] for i in range(dims[0])]


# --- dyadic integer matrices: (rows of ints, e) stands for ints * 2^e ---------------------

def dyadic(rows: list[list[float]]) -> tuple[list[list[int]], int]:
    """Returns (M, e) with rows == M 2^e exactly (finite floats)."""
    # two passes instead of a list of (p, q) pairs: a third of the memory per element
    e = min((1 - x.as_integer_ratio()[1].bit_length() for r in rows for x in r if x), default=0)
    return [[_shifted(x.as_integer_ratio(), e) for x in r] for r in rows], e


def _shifted(pq: tuple[int, int], e: int) -> int:
    return pq[0] << (1 - pq[1].bit_length() - e)  # p / q = p 2^(1 - bits(q)), q a power of 2


def matmul(A: list[list[int]], B: list[list[int]]) -> list[list[int]]:
    """Returns the exact integer product A B."""
    if not A or not B or not B[0]:
        return [[0] * (len(B[0]) if B else 0) for _ in A]
    if FLINT is not None:
        C = FLINT.fmpz_mat(A) * FLINT.fmpz_mat(B)
        flat, n = [int(v) for v in C.entries()], C.ncols()
        return [flat[i * n:(i + 1) * n] for i in range(C.nrows())]
    cols = list(zip(*B, strict=True))
    return [[sum(map(mul, r, c)) for c in cols] for r in A]


def dmul(X: tuple, Y: tuple) -> tuple:
    return matmul(X[0], Y[0]), X[1] + Y[1]


def dsub(X: tuple, Y: tuple) -> tuple:
    """X - Y for dyadic matrices of one shape."""
    e = min(X[1], Y[1])
    sx, sy = X[1] - e, Y[1] - e
    rows = zip(X[0], Y[0], strict=True)
    return [[(a << sx) - (b << sy) for a, b in zip(r, s, strict=True)] for r, s in rows], e


def scale(q: Fraction | int, e: int) -> Fraction:
    return Fraction(q) * 2 ** e if e >= 0 else Fraction(q, 1 << -e)


def max_row_abs(X: tuple) -> Fraction:
    """Returns max_i sum_j |X_ij| exactly (0 for an empty matrix)."""
    return scale(max((sum(map(abs, r)) for r in X[0]), default=0), X[1])


def transpose(M: list[list]) -> list[list]:
    return [list(c) for c in zip(*M, strict=True)]


# --- the checks ---------------------------------------------------------------------------

def check_upper(A: tuple, U: tuple, V: tuple, t: Fraction) -> tuple[str, Fraction]:
    """||A - U V||_row1 <= t, exactly: returns (holds/fails, the exact error)."""
    UV = dmul(U, V) if V[0] else ([[0] * len(A[0][0]) for _ in A[0]], 0)  # rank 0: B = 0
    err = max_row_abs(dsub(A, UV))
    return ("holds" if t >= 0 and err <= t else "fails"), err


def check_nonzero(A: tuple, t: Fraction) -> tuple[str, Fraction]:
    """||A||_row1 > t: B = 0 is farther than t from A."""
    n = max_row_abs(A)
    return ("holds" if n > t else "fails"), n


def check_decoder(A: tuple, D: tuple | None, W: tuple | None, X: tuple,
                  sel: tuple[list[int], list[int]] | None, t: Fraction) -> tuple[str, Fraction]:
    """||I - X D A W||_inf + ||X D||_inf ||W||_inf t < 1, exactly.

    A submatrix certificate is the decoder with D, W row and column selections: then
    D A W = A[rows][:, cols], ||W||_inf = 1 (distinct columns) and ||X D||_inf = ||X||_inf.
    """
    p = len(X[0])
    if sel is None:
        M = dmul(dmul(D, A), W)
        xd, w = max_row_abs(dmul(X, D)), max_row_abs(W)
    else:
        rows, cols = sel
        M = ([[A[0][i][j] for j in cols] for i in rows], A[1])
        xd, w = max_row_abs(X), Fraction(1)
    eye = ([[int(i == j) for j in range(p)] for i in range(p)], 0)
    value = max_row_abs(dsub(eye, dmul(X, M))) + xd * w * t
    return ("holds" if value < 1 else "fails"), value


def check_bernstein(A: tuple, W: tuple, P: tuple, t: Fraction) -> tuple[str, Fraction]:
    """||P A W - W||_inf + ||P||_inf t < 1, exactly (the caller has checked W[J, :] = I)."""
    value = max_row_abs(dsub(dmul(P, dmul(A, W)), W)) + max_row_abs(P) * t
    return ("holds" if value < 1 else "fails"), value


def check_rowset(A: tuple, I: list[int] | None, Z: tuple, t: Fraction,
                 D: tuple | None = None) -> tuple[str, Fraction]:
    """min over s, i of sigma_i(s) (M z_s)_i > t, exactly, for the rows M = A[I] (rowset) or
    M = D A (rowmix); sigma_0(s) = +1 and sigma_i(s) = -1 exactly when bit i - 1 of s is
    set (the caller has checked |Z| <= 1 and, for rowmix, the rows of D)."""
    M = dmul(D, A) if D is not None else ([A[0][i] for i in I], A[1])
    Y = dmul(Z, (transpose(M[0]), M[1]))
    best = min((-v if i and (s >> (i - 1)) & 1 else v)
               for s, row in enumerate(Y[0]) for i, v in enumerate(row))
    value = scale(best, Y[1])
    return ("holds" if value > t else "fails"), value


def solve_facet(B: list[list[int]]) -> tuple[list[int], int] | None:
    """Returns (u, d) with B u = d (1, ..., 1) and d = +-det B != 0, or None when B is
    singular: fraction-free (Bareiss) elimination with row swaps, every division exact."""
    p, prev = len(B), 1
    M = [r + [1] for r in B]
    for c in range(p):
        piv = next((r for r in range(c, p) if M[r][c]), None)
        if piv is None:
            return None
        M[c], M[piv] = M[piv], M[c]
        for r in range(c + 1, p):  # columns <= c of these rows are 0 now: never read again
            a, b = M[c][c], M[r][c]
            M[r][c + 1:] = [(a * x - b * y) // prev
                            for x, y in zip(M[r][c + 1:], M[c][c + 1:], strict=True)]
        prev = M[c][c]
    u = [0] * p
    for i in reversed(range(p)):  # d x_i is an integer (Cramer's rule): exact division
        u[i] = (prev * M[i][p] - sum(map(mul, M[i][i + 1:p], u[i + 1:]))) // M[i][i]
    return u, prev


def check_polytope(A: tuple, Y: tuple, I: list[int], F: list[list[int]], Z: tuple,
                   G: list[int], t: Fraction) -> tuple[str, Fraction | None]:
    """The 2f facets F, mirror(F) are exactly the simplicial facets of conv(+-Y), and
    min over facets r and points x of r of sigma_x (A z_r)_(I[x mod k]) > t, exactly.

    Point x < k is Y[x] (sigma +1), point x + k is -Y[x] (sigma -1); mirror(r) = r + k mod 2k
    uses -Z[G[r]], which gives the same values.  ("fails", None) when the facets are not
    those of conv(+-Y) (the caller has checked shapes, index ranges, distinct points in a
    facet and |Z| <= 1).
    """
    k, p = len(Y[0]), len(Y[0][0])
    full = [tuple(sorted(r)) for r in F] + [tuple(sorted((x + k) % (2 * k) for x in r))
                                           for r in F]
    # every (p - 1)-subset of a facet lies in exactly two of the 2f distinct facets (for
    # p = 1 the one 0-subset lies in all of them: f = 1, a 0-sphere is two points)
    ridges = Counter(r[:c] + r[c + 1:] for r in full for c in range(p))
    if len(set(full)) != len(full) or any(n != 2 for n in ridges.values()):
        return "fails", None
    for facet in F:  # hyperplane n . y = 1 with n . Y[j] = Y[0][j] . u / d (2^e cancels)
        B = [Y[0][x] if x < k else [-y for y in Y[0][x - k]] for x in facet]
        sol = solve_facet(B)  # None: the points do not span a hyperplane missing 0
        if sol is None or any(sum(map(mul, r, sol[0])) != sol[1] for r in B):
            return "fails", None  # (the solve is checked here, not trusted)
        (u, d), on = sol, {x % k for x in facet}
        if any(abs(sum(map(mul, y, u))) >= abs(d) for j, y in enumerate(Y[0]) if j not in on):
            return "fails", None  # some other point (or its mirror) is not strictly inside
    pairs = {(G[r], I[x % k], x < k) for r, facet in enumerate(F) for x in facet}
    best = min((1 if pos else -1) * sum(map(mul, A[0][i], Z[0][g])) for g, i, pos in pairs)
    value = scale(best, A[1] + Z[1])
    return ("holds" if value > t else "fails"), value


def nerve_codes(q: int, p: int) -> int:
    """Most labels one level of check_nerve's derivation can hold for q tops of p labels
    (at most q C(p, k + 1) simplices at level k, each with k + 1 faces of k labels), before
    its own cap NERVE_MAX_CODES: the work and memory estimates use it."""
    return max((q * math.comb(p, k + 1) * (k + 1) * k for k in range(1, p)), default=0)


def check_nerve(A: tuple, T: list[list[int]], Z: tuple, G: list[int], t: Fraction
                ) -> tuple[str, Fraction | None]:
    """The chains derived from the tops T are an odd cycle, and min over tops r and labels
    x of r of sigma_x (A z_r)_(x mod m) > t, exactly.

    Label x < m is row x with sigma +1, x >= m row x - m with sigma -1.  c_(p-1) is the set
    of tops; the boundary of c_k (mod 2) must be invariant under the sign flip, and c_(k-1)
    is its simplices whose first label (smallest row) is positive; |c_0| must be odd.
    ("fails", None) when it is not (the caller has checked shapes, ranges, distinct rows in
    a top, distinct tops and |Z| <= 1); ("undecided", None) when a level would hold more
    than NERVE_MAX_CODES labels, as in the kernel.
    """
    m = len(A[0])

    def flip(s: tuple) -> tuple:
        return tuple((x + m) % (2 * m) for x in s)

    c = {tuple(sorted(r, key=lambda x: x % m)) for r in T}
    while len(next(iter(c))) > 1:
        if len(c) * len(next(iter(c))) * (len(next(iter(c))) - 1) > NERVE_MAX_CODES:
            return "undecided", None
        faces = Counter(s[:x] + s[x + 1:] for s in c for x in range(len(s)))
        bd = {f for f, n in faces.items() if n % 2}
        if any(flip(f) not in bd for f in bd):
            return "fails", None
        c = {f for f in bd if f[0] < m}
        if not c:
            return "fails", None  # an empty 0-chain is even
    if len(c) % 2 == 0:
        return "fails", None
    pairs = {(G[r], x) for r, top in enumerate(T) for x in top}
    best = min((1 if x < m else -1) * sum(map(mul, A[0][x % m], Z[0][g])) for g, x in pairs)
    value = scale(best, A[1] + Z[1])
    return ("holds" if value > t else "fails"), value


def gram(A: tuple, side: str) -> tuple:
    """A^T A (side "AtA") or A A^T (side "AAt"), exactly."""
    M = A[0] if side == "AAt" else transpose(A[0])
    return matmul(M, transpose(M)), 2 * A[1]


def is_diagonally_dominant(E: list[list[int]]) -> bool:
    """E symmetric with E_ii >= sum_{j != i} |E_ij| for all i: then E is PSD (Gershgorin)."""
    return all(all(E[i][j] == E[j][i] for j in range(i))
               and E[i][i] + abs(E[i][i]) >= sum(map(abs, E[i])) for i in range(len(E)))


def check_frobenius(A: tuple, S: tuple, L: int, t: Fraction, cert: dict | None, blobs: dict,
                    m: int, field: str = "certificate") -> tuple[str, Fraction | None]:
    """sum_{i >= L} sigma_i(A)^2 > m t^2 through Ky Fan's dual (proofs_notes/replay.md).

    With k = L - 1 and S the Gram matrix: tail >= ||A||_F^2 - k z - ||G||_F^2 whenever
    E = z I + G^T G - S - C^T C is diagonally dominant (so S - z I <= G^T G, which is >= 0).
    G must be k x n and C n x n (else BundleError).  Returns ("holds", that lower bound) or
    ("undecided", bound or None): a certificate that does not verify proves nothing either way.
    """
    n = len(S[0])
    frob = scale(sum(S[0][i][i] for i in range(n)), S[1])
    k = L - 1
    if k == 0:
        bound = frob
    elif k >= n or cert is None:
        return "undecided", None
    else:
        z = rational(cert.get("z"), f"{field}.z")
        if z.denominator & (z.denominator - 1) or z < 0:
            raise BundleError(f"{field}.z: must be a nonnegative dyadic rational")
        G = dyadic(array(cert.get("G"), blobs, f"{field}.G", (k, n)))
        C = dyadic(array(cert.get("C"), blobs, f"{field}.C", (n, n)))
        GtG = dmul((transpose(G[0]), G[1]), G)
        CtC = dmul((transpose(C[0]), C[1]), C)
        ez = -(z.denominator.bit_length() - 1)
        zI = ([[z.numerator if i == j else 0 for j in range(n)] for i in range(n)], ez)
        E = dsub(dsub(GtG, S), dsub(CtC, zI))  # z I + G^T G - S - C^T C
        if not is_diagonally_dominant(E[0]):
            return "undecided", None
        bound = frob - k * z - scale(sum(x * x for r in G[0] for x in r), 2 * G[1])
    return ("holds" if bound > m * t * t else "undecided"), bound


# --- the operator slack chi ---------------------------------------------------------------

def _exp_pos(V: int, up: bool) -> int:
    """Returns a bound (above if ``up``, else below) on exp(V 2^-P) 2^P for 0 <= V 2^-P <= 90.

    exp(v) = exp(v / 2^s)^(2^s) with w = v / 2^s <= 1/16 (+ 2^-P); the Taylor terms of degree
    <= 28 are all positive and the rest sums to at most e^w w^29 / 29! < 2^-200, charged as one
    unit of 2^-P when rounding up.
    """
    s = (V >> (P - 4)).bit_length()
    W = -((-V) >> s) if up else V >> s
    term = total = 1 << P
    for n in range(1, 29):
        term = -((-term * W) // (n << P)) if up else (term * W) // (n << P)
        total += term
    total += 1 if up else 0
    for _ in range(s):
        total = -((-total * total) >> P) if up else (total * total) >> P
    return total


def exp_neg(v: Fraction) -> tuple[int, int]:
    """Returns integers lo, hi with lo <= exp(-v) 2^P <= hi, for a rational v >= 0."""
    if v >= 90:  # 0 < exp(-v) <= exp(-90), and the squarings stay small
        return 0, _ceil_div(1 << (2 * P), _exp_pos(90 << P, up=False))
    lo_v, hi_v = v.numerator * (1 << P) // v.denominator, _ceil_q(v * (1 << P))
    return (1 << (2 * P)) // _exp_pos(hi_v, True), _ceil_div(1 << (2 * P), _exp_pos(lo_v, False))


def _ceil_div(a: int, b: int) -> int:
    return -((-a) // b)


def _ceil_q(q: Fraction) -> int:
    return -((-q.numerator) // q.denominator)


def slack_bound(A: list[list[float]], logits: list[list[float]] | None,
                block: list[list[float]] | None, beta: Fraction) -> Fraction:
    """Returns chi_hi >= max_i sum_j |A_record_ij - A_ij| (proofs_notes/replay.md).

    A_record is the row softmax of beta * logits (-inf: probability 0) or the row
    renormalisation of a nonnegative block; with neither it is A and chi = 0.
    """
    if logits is None and block is None:
        return Fraction(0)
    if block is not None:
        worst = Fraction(0)
        for prow, arow in zip(block, A, strict=True):
            if any(x < 0 for x in prow) or not any(x > 0 for x in prow):
                raise BundleError("operator block: negative entries or a zero row")
            S = sum(map(Fraction, prow))
            worst = max(worst, sum(abs(Fraction(x) / S - Fraction(a))
                                   for x, a in zip(prow, arow, strict=True)))
        return worst
    one = 1 << P
    worst = 0
    for lrow, arow in zip(logits, A, strict=True):
        finite = [x for x in lrow if x != -math.inf]
        if not finite:
            raise BundleError("operator logits: a row is all -inf")
        top = Fraction(max(finite))
        es = [None if x == -math.inf else exp_neg(beta * (top - Fraction(x))) for x in lrow]
        s_lo = sum(e[0] for e in es if e)
        s_hi = sum(e[1] for e in es if e)
        total = 0
        for e, a in zip(es, arow, strict=True):
            qa = Fraction(a) * one
            a_dn, a_up = qa.numerator // qa.denominator, _ceil_q(qa)
            if e is None:
                total += max(a_up, -a_dn)
                continue
            q_lo, q_hi = e[0] * one // s_hi, _ceil_div(e[1] * one, s_lo)
            total += max(q_hi - a_dn, a_up - q_lo)
        worst = max(worst, total)
    return Fraction(worst, one)


# --- binding the ends to their brackets and bounding the work -----------------------------

def _w(bits: int) -> int:
    """The 64-bit words of an integer of at most ``bits`` bits (at least one)."""
    return 1 + max(bits, 0) // 64


def _bits(data: bytes, dtype: str) -> int:
    """Returns hi - lo for the smallest range [2^lo, 2^hi) holding 1 and every bit of every
    nonzero finite entry of these array bytes (for <i8, the largest magnitude's bit length).

    It bounds the bit length of the integers dyadic() makes, and because the range holds 2^0
    the width of a product or an aligned difference (dsub) is at most the sum of its operands'
    widths, whatever their exponents."""
    code, size = DTYPES[dtype]
    if len(data) % size:
        return 0  # array() refuses it before any work
    vals = (v for (v,) in struct.iter_unpack("<" + code, data))
    if code == "q":
        return max((abs(v).bit_length() for v in vals), default=0)
    exps = {math.frexp(v)[1] for v in vals if v and math.isfinite(v)}
    if not exps:
        return 1
    return max(max(exps), 0) - min(min(exps) - (53 if code == "d" else 24), 0)


def _big(x: int) -> str:
    return f"{x:.3g}" if x < 10 ** 300 else "over 1e300"


def _short(q: object) -> str:
    """A rational's text, cut to 40 characters when over 60; the length and a digest of the
    whole text stay visible, so two long values that differ never print alike."""
    t = str(q)
    if len(t) <= 60:
        return t
    digest = hashlib.sha256(t.encode()).hexdigest()[:16]
    return f"{t[:40]}... ({len(t)} chars, sha256 {digest})"


def plan(doc: dict, blobs: dict[str, bytes], limits: dict[str, int]) -> tuple[dict, dict]:
    """Checks the records' structure, binds every end to its bracket and bounds the replay's
    work, before any array is decoded; returns the operators' shapes by id and the totals
    {"words": ..., "work": ...} compared with ``limits``.

    Raises BundleError naming the field for: more operators or ends than ``limits`` allows;
    an operator without a unique id and a shape [m, N]; an end of an unknown operator, without
    a bracket label, of an unknown kind, labelled other than "upper" (kind factors) or "lower"
    (a lower kind); two ends of one bracket naming different operators or eps, or sharing
    label and kind; 64-bit words of the integers the arrays decode to (summed over every use:
    an array that k records use counts k times), words held at once (an operator's, plus the
    largest of its ends' with a Ky Fan end's Gram matrix) or estimated work (units of _x,
    from the declared shapes and the bit widths _bits() bounds) above the limits.
    """
    for name in ("operators", "ends"):
        if len(doc[name]) > limits[name]:
            raise BundleError(f"bundle.json.{name}: {len(doc[name])} records, above the limit "
                              f"of {limits[name]} (--max-{name})")
    shapes: dict[str, tuple[int, int]] = {}
    cache: dict[tuple[str, str], int] = {}

    def use(ref: object) -> tuple[int, int, int]:
        """(declared elements, bit width bound, declared rows) of an array reference; zeros for
        a malformed one (array() refuses it before any work)."""
        if not isinstance(ref, dict) or not isinstance(ref.get("file"), str) \
                or ref["file"] not in blobs or not isinstance(ref.get("dtype"), str) \
                or ref["dtype"] not in DTYPES or not isinstance(ref.get("shape"), list) \
                or not all(type(d) is int and d >= 0 for d in ref["shape"]):
            return 0, 0, 0
        key = (ref["file"], ref["dtype"])
        if key not in cache:
            cache[key] = _bits(blobs[ref["file"]], ref["dtype"])
        return math.prod(ref["shape"]), cache[key], (ref["shape"] or [0])[0]

    costs = []  # (work, words decoded, field)
    a_bits, chi_bits, op_words = {}, {}, {}
    held = (0, "")  # most words held at once: one operator, and one of its ends with it
    for i, op in enumerate(doc["operators"]):
        f = f"operators[{i}]"
        if not isinstance(op, dict) or not isinstance(op.get("id"), str) \
                or not _ID.fullmatch(op["id"]) \
                or op["id"] in shapes or not isinstance(op.get("shape"), list) \
                or len(op["shape"]) != 2 or not all(type(d) is int and d > 0
                                                    for d in op["shape"]):
            raise BundleError(f"{f}: needs a unique id ([A-Za-z0-9][A-Za-z0-9._-]*, at most 128 "
                              "characters, as a store writes it) and a shape [m, N]")
        m, N = shapes[op["id"]] = tuple(op["shape"])
        us = {n: use(op.get(n)) for n in ("A", "logits", "block") if n == "A" or op.get(n)}
        a_bits[op["id"]] = a = us["A"][1]
        chi = rational(op.get("chi", "0"), f"{f}.chi")
        chi_bits[op["id"]] = chi.numerator.bit_length() + chi.denominator.bit_length()
        words = op_words[op["id"]] = sum(e * _w(b) for e, b, _ in us.values())
        held = (words, f) if words > held[0] else held
        work = DECODE_UNITS * words
        if "logits" in us:  # v = beta (top - x) in Fractions, then the exp bounds
            beta = rational(op.get("beta", "1"), f"{f}.beta")
            bb = beta.numerator.bit_length() + beta.denominator.bit_length()
            work += m * N * (EXP_UNITS + 4 * _x(us["logits"][1] + bb, us["logits"][1] + bb))
        if "block" in us:  # row sums and quotients in Fractions
            work += m * N * 10 * _x(us["block"][1] + a + N.bit_length(), a)
        costs.append((work, words, f))
    brackets: dict[str, tuple] = {}
    gram_done = set()
    for i, end in enumerate(doc["ends"]):
        f = f"ends[{i}]"
        if not isinstance(end, dict) or not isinstance(end.get("operator"), str) \
                or end["operator"] not in shapes:
            raise BundleError(f"{f}: not an end record of a known operator")
        b, label, kind, op = end.get("bracket"), end.get("end"), end.get("kind"), end["operator"]
        if not isinstance(b, str) or not _ID.fullmatch(b):
            raise BundleError(f"{f}.bracket: needs a bracket id ([A-Za-z0-9][A-Za-z0-9._-]*, at "
                              "most 128 characters, as a store writes it)")
        if kind not in ("factors", *LOWER_KINDS):
            raise BundleError(f"{f}.kind: unknown kind {kind}")
        if label not in ("upper", "lower") or (label == "upper") != (kind == "factors"):
            raise BundleError(f"{f}.end: {label} with kind {kind}: an end is \"upper\" "
                              "(kind factors) or \"lower\" (a lower kind)")
        eps = rational(end.get("eps"), f"{f}.eps")
        first = brackets.setdefault(b, (op, eps, i, set()))
        if first[:2] != (op, eps):
            raise BundleError(
                f"{f}: bracket {b} names operator {op} at eps {_short(eps)} here "
                f"and operator {first[0]} at eps {_short(first[1])} in ends[{first[2]}]: "
                "the ends of "
                "a bracket must name one operator and one eps")
        if (label, kind) in first[3]:
            raise BundleError(f"{f}: bracket {b} has a second {label} end of kind {kind}")
        first[3].add((label, kind))
        cert = end.get("certificate") if isinstance(end.get("certificate"), dict) else {}
        us = {n: use(v) for n, v in cert.items()}
        rank = end.get("rank")
        r = rank if isinstance(rank, int) and not isinstance(rank, bool) and rank > 0 else 0
        words = sum(e * _w(bt) for e, bt, _ in us.values())
        # t = eps +- chi and the exact comparisons: a few products of numbers this wide
        t_bits = eps.numerator.bit_length() + eps.denominator.bit_length() + chi_bits[op]
        bits = {n: u[1] for n, u in us.items()}
        if kind == "frobenius_tail" and isinstance(cert.get("z"), str):
            z = rational(cert["z"], f"{f}.certificate.z")  # z I is aligned with S, G^T G
            bits["z"] = z.numerator.bit_length() + z.denominator.bit_length()
        work = 50 + 20 * _x(t_bits, t_bits) + DECODE_UNITS * words + _end_work(
            kind, r, shapes[op], a_bits[op], bits, {n: u[2] for n, u in us.items()})
        if kind == "frobenius_tail" and op not in gram_done:  # once per operator
            gram_done.add(op)
            m, N = shapes[op]
            work += min(m, N) ** 2 * max(m, N) * _x(a_bits[op], a_bits[op])
        gw = min(shapes[op]) ** 2 * _w(2 * a_bits[op] + max(shapes[op]).bit_length()) \
            if kind == "frobenius_tail" else 0  # a Gram matrix, kept with its operator
        if kind == "nerve":  # the label tuples of the chain derivation's largest level
            gw = 5 * min(NERVE_MAX_CODES, nerve_codes(us["T"][2] if "T" in us else 0,
                                                      min(r, ROWSET_MAX_RANK)))
        if kind == "polytope":  # 2f facet tuples and a Counter of their 2 f p ridges
            gw = 2 * (us["F"][2] if "F" in us else 0) * (1 + 3 * min(r, ROWSET_MAX_RANK))
        if op_words[op] + words + gw > held[0]:  # the first largest is named
            held = (op_words[op] + words + gw, f"{f} with its operator")
        costs.append((work, words, f))
    totals = {"held": held[0]}
    if held[0] > limits["held"]:
        raise BundleError(f"bundle.json: {_big(held[0])} 64-bit words held at once by "
                          f"{held[1]}, above the limit of "
                          f"{_big(limits['held'])} (--max-held)")
    for k, name, what in ((1, "words", "64-bit words decoded"),
                          (0, "work", "estimated work (units of about 40 ns)")):
        total = totals[name] = sum(c[k] for c in costs)
        if total > limits[name]:
            top = max(costs, key=lambda c: c[k])
            raise BundleError(f"bundle.json: {what} {_big(total)}, above the limit of "
                              f"{_big(limits[name])} (--max-{name}); the largest part is "
                              f"{top[2]} ({_big(top[k])})")
    return shapes, totals


def _x(b1: int, b2: int = 0) -> int:
    """Units of one product of integers of b1 and b2 bits (b2 = 0: an addition, shift or
    comparison): one for the interpreter's overhead, plus 64-bit word products at about 1/8
    unit each (CPython multiplies 30-bit digits, about 5 ns a word product)."""
    return 1 + _w(b1) * _w(b2) // 8


def _end_work(kind: str, r: int, shape: tuple[int, int], a: int, bits: dict, rows: dict
              ) -> int:
    """An estimate, in units of _x, of what replay_end() spends on one end: the matrix
    products and eliminations it does, each with the bit widths of its operands."""
    m, N = shape
    X = _x

    def g(name: str) -> int:
        return bits.get(name, 0)

    if kind == "factors":
        return m * r * N * X(g("U"), g("V")) + m * N * X(g("U") + g("V") + a)
    if kind == "nonzero":
        return m * N * X(a)
    if kind == "decoder":
        d, x, w = g("D"), g("X"), g("W")
        return (r * m * N * X(d, a) + r * N * r * X(d + a, w) + r ** 3 * X(x, d + a + w)
                + r * r * m * X(x, d))
    if kind == "submatrix":
        return r ** 3 * X(g("X"), a)
    if kind == "bernstein":
        return m * N * r * X(a, g("W")) + N * m * r * X(g("P"), a + g("W"))
    p = min(r, ROWSET_MAX_RANK)  # replay_end refuses a larger rank before any work
    if kind in ("rowset", "rowmix"):
        d = g("D") if kind == "rowmix" else 0
        mix = p * m * N * X(d, a) if kind == "rowmix" else 0
        return mix + (1 << max(p - 1, 0)) * N * p * X(g("Z"), a + d)
    if kind == "polytope":  # per facet: an elimination on p-row integer points, whose
        y, k, nf = g("Y"), rows.get("Y", 0), rows.get("F", 0)  # entries grow to p y bits
        elim = sum((p - c) ** 2 * (2 + 2 * X((c + 1) * y, (c + 1) * y)) for c in range(p))
        return 2 * nf * (4 * p * p + elim + k * p * (1 + X(y, p * y)) + p * N * X(a, g("Z")))
    if kind == "nerve":  # the chains: sets of label tuples; the values: one dot per pair
        q = rows.get("T", 0)
        return 4 * nerve_codes(q, p) + 4 * q * p + q * p * N * X(a, g("Z"))
    n = min(m, N)  # frobenius_tail: G^T G, C^T C and the dominance check
    return n ** 3 * (X(g("G"), g("G")) + X(g("C"), g("C"))) + 4 * n * n * X(
        2 * max(a, g("G"), g("C")) + g("z"))


# --- replaying a bundle -------------------------------------------------------------------

def replay(path: str, *, emit=None, limits: dict[str, int] | None = None) -> dict:
    """Replays every end of the bundle at ``path``; returns a JSON-safe summary.

    ``emit`` (if given) is called with one result dict per end as it is decided; ``limits``
    overrides entries of LIMITS.  Raises BundleError for a malformed, tampered, unbound or
    oversized bundle (plan(): before any array is decoded).
    """
    if 0 < getattr(sys, "get_int_max_str_digits", int)() < 50_000:  # values print in full:
        sys.set_int_max_str_digits(50_000)  # they can pass 4300 digits (inputs are bounded)
    limits = {**LIMITS, **(limits or {})}
    digest, doc, blobs = read_bundle(path, limits["json"])
    shapes, totals = plan(doc, blobs, limits)
    by_op: dict[str, list[int]] = {}  # plan() checked that every end names a known operator
    for i, end in enumerate(doc["ends"]):
        by_op.setdefault(end["operator"], []).append(i)
    found, chi_confirmed = {}, 0
    for i, op in enumerate(doc["operators"]):  # one at a time: memory is bounded by the
        # largest operator with one of its ends (plan(), --max-held), not by the bundle
        ops = {op["id"]: operator(op, shapes[op["id"]], blobs, f"operators[{i}]")}
        chi_confirmed += ops[op["id"]]["chi_confirmed"]
        found.update((j, replay_end(doc["ends"][j], ops, blobs, f"ends[{j}]"))
                     for j in by_op.get(op["id"], []))
    results = [found[j] for j in sorted(found)]
    for res in results if emit else ():  # only now: a bundle refused at its last end (exit
        emit(res)  # 2) prints no verdict
    proved = [r for r in results if r["kernel"] == "holds"]
    return {"bundle": path, "manifest_sha256": digest, "ends": len(results),
            "kernel_proved": len(proved), "replayed_proved": sum(r["replay"] == "holds"
                                                                for r in proved),
            "disagreements": sum(not r["agrees"] for r in results),
            "chi_confirmed": chi_confirmed,
            "operators": len(doc["operators"]), "estimate": totals, "results": results}


def operator(op: dict, shape: tuple[int, int], blobs: dict, f: str) -> dict:
    """Decodes one operator record: A as exact dyadic integers and the slack chi used for its
    ends (the record's chi when this replay's own bound confirms it, else the bound)."""
    m, N = shape
    A = array(op.get("A"), blobs, f"{f}.A", (m, N))
    lg = array(op["logits"], blobs, f"{f}.logits", (m, N), neg_inf=True) \
        if op.get("logits") else None
    bl = array(op["block"], blobs, f"{f}.block", (m, N)) if op.get("block") else None
    if lg is not None and bl is not None:
        raise BundleError(f"{f}: both logits and block")
    beta = rational(op.get("beta", "1"), f"{f}.beta")
    claimed = rational(op.get("chi", "0"), f"{f}.chi")
    if beta <= 0 or claimed < 0:
        raise BundleError(f"{f}: beta must be > 0 and chi >= 0")
    chi_hi = slack_bound(A, lg, bl, beta)
    # the kernel's chi when this replay confirms it covers chi_true, else the replay's own
    return {"A": dyadic(A), "shape": (m, N), "chi": max(claimed, chi_hi),
            "chi_confirmed": chi_hi <= claimed, "gram": None}


def _witness_rows(Zf: list, G: list, n: int, what: str, f: str) -> None:
    """Raises BundleError unless Zf holds 1 .. n witnesses with entries in [-1, 1] and G names
    one of them for each of the n facets or tops (``what``)."""
    q = len(Zf)
    if not 1 <= q <= n:
        raise BundleError(f"{f}.Z: {q} witnesses for {n} {what}, not 1 .. {n}")
    if any(abs(x) > 1 for r in Zf for x in r):
        raise BundleError(f"{f}.Z: an entry lies outside [-1, 1]")
    if not all(type(g) is int and 0 <= g < q for g in G):
        raise BundleError(f"{f}.G: need {n} witness indices < {q}")


def replay_end(end: object, ops: dict, blobs: dict, f: str) -> dict:
    """Replays one end (an upper witness or a lower certificate) of a bracket."""
    if not isinstance(end, dict) or not isinstance(end.get("operator"), str) \
            or end["operator"] not in ops:
        raise BundleError(f"{f}: not an end record of a known operator")
    op = ops[end["operator"]]
    m, N = op["shape"]
    eps = rational(end.get("eps"), f"{f}.eps")
    kind, rank, kernel = end.get("kind"), end.get("rank"), end.get("kernel")
    if eps <= 0 or not isinstance(rank, int) or isinstance(rank, bool) or rank < 0:
        raise BundleError(f"{f}: eps must be > 0 and rank an integer >= 0")
    if kernel not in ("holds", "fails", "undecided"):
        raise BundleError(f"{f}.kernel: {repr(kernel)[:100]}")
    cert = end.get("certificate") or {}
    if not isinstance(cert, dict):
        raise BundleError(f"{f}.certificate: must be a mapping")
    chi, A = op["chi"], op["A"]

    def get(name: str, shape: tuple) -> tuple:
        return dyadic(array(cert.get(name), blobs, f"{f}.{name}", shape))

    if kind == "factors":
        value = check_upper(A, get("U", (m, rank)), get("V", (rank, N)), eps - chi)
    elif kind == "nonzero" and rank == 1:
        value = check_nonzero(A, eps + chi)
    elif kind in ("decoder", "submatrix") and rank >= 1:
        X = get("X", (rank, rank))
        if kind == "decoder":
            value = check_decoder(A, get("D", (rank, m)), get("W", (N, rank)), X, None,
                                  eps + chi)
        else:
            rows = array(cert.get("rows"), blobs, f"{f}.rows", (rank,))
            cols = array(cert.get("cols"), blobs, f"{f}.cols", (rank,))
            for name, idx, bound in (("rows", rows, m), ("cols", cols, N)):
                if len(set(idx)) != rank or not all(type(j) is int and 0 <= j < bound
                                                    for j in idx):
                    raise BundleError(f"{f}.{name}: need {rank} distinct indices < {bound}")
            value = check_decoder(A, None, None, X, (rows, cols), eps + chi)
    elif kind == "bernstein" and 1 <= rank <= N:
        Wf = array(cert.get("W"), blobs, f"{f}.W", (N, rank))
        J = array(cert.get("J"), blobs, f"{f}.J", (rank,))
        if len(set(J)) != rank or not all(type(j) is int and 0 <= j < N for j in J):
            raise BundleError(f"{f}.J: need {rank} distinct indices < {N}")
        if any(Wf[j][k] != (1 if i == k else 0) for i, j in enumerate(J) for k in range(rank)):
            raise BundleError(f"{f}.W: the rows W[J, :] are not exactly the identity")
        value = check_bernstein(A, dyadic(Wf), get("P", (N, m)), eps + chi)
    elif kind in ("rowset", "rowmix"):
        top = min(ROWSET_MAX_RANK, m) if kind == "rowset" else ROWSET_MAX_RANK
        if not 1 <= rank <= top:
            raise BundleError(f"{f}.rank: a {kind} certificate has rank 1 .. {top}, got {rank}")
        I = Dd = None
        if kind == "rowset":
            I = array(cert.get("I"), blobs, f"{f}.I", (rank,))
            if len(set(I)) != rank or not all(type(i) is int and 0 <= i < m for i in I):
                raise BundleError(f"{f}.I: need {rank} distinct indices < {m}")
        else:
            Dd = get("D", (rank, m))
            if any(scale(sum(map(abs, r)), Dd[1]) > 1 for r in Dd[0]):
                raise BundleError(f"{f}.D: a row has l1 norm above 1")
        Zf = array(cert.get("Z"), blobs, f"{f}.Z", (1 << (rank - 1), N))
        if any(abs(x) > 1 for r in Zf for x in r):
            raise BundleError(f"{f}.Z: an entry lies outside [-1, 1]")
        value = check_rowset(A, I, dyadic(Zf), eps + chi, D=Dd)
    elif kind == "polytope":
        if not 1 <= rank <= ROWSET_MAX_RANK:
            raise BundleError(f"{f}.rank: a polytope certificate has rank 1 .. "
                              f"{ROWSET_MAX_RANK}, got {rank}")
        Yf = array(cert.get("Y"), blobs, f"{f}.Y", (None, rank))
        I = array(cert.get("I"), blobs, f"{f}.I", (len(Yf),))
        F = array(cert.get("F"), blobs, f"{f}.F", (None, rank))
        Zf = array(cert.get("Z"), blobs, f"{f}.Z", (None, N))
        G = array(cert.get("G"), blobs, f"{f}.G", (len(F),))
        k, nf = len(Yf), len(F)
        if not 1 <= k <= POLY_MAX_POINTS:
            raise BundleError(f"{f}.Y: {k} points, not 1 .. {POLY_MAX_POINTS}")
        if not all(type(i) is int and 0 <= i < m for i in I):
            raise BundleError(f"{f}.I: need {k} row indices < {m}")
        if not 1 <= nf <= POLY_MAX_FACETS:
            raise BundleError(f"{f}.F: {nf} facets, not 1 .. {POLY_MAX_FACETS}")
        if not all(type(x) is int and 0 <= x < 2 * k for r in F for x in r) \
                or any(len(set(r)) != rank for r in F):
            raise BundleError(f"{f}.F: need facets of {rank} distinct point indices < {2 * k}")
        _witness_rows(Zf, G, nf, "facets", f)
        value = check_polytope(A, dyadic(Yf), I, F, dyadic(Zf), G, eps + chi)
    elif kind == "nerve":
        if not 1 <= rank <= min(ROWSET_MAX_RANK, m):
            raise BundleError(f"{f}.rank: a nerve certificate has rank 1 .. "
                              f"{min(ROWSET_MAX_RANK, m)}, got {rank}")
        T = array(cert.get("T"), blobs, f"{f}.T", (None, rank))
        Zf = array(cert.get("Z"), blobs, f"{f}.Z", (None, N))
        G = array(cert.get("G"), blobs, f"{f}.G", (len(T),))
        q = len(T)
        if not 1 <= q <= NERVE_MAX_TOPS:
            raise BundleError(f"{f}.T: {q} tops, not 1 .. {NERVE_MAX_TOPS}")
        if not all(type(x) is int and 0 <= x < 2 * m for r in T for x in r) \
                or any(len({x % m for x in r}) != rank for r in T):
            raise BundleError(f"{f}.T: need tops of {rank} labels < {2 * m} on distinct rows")
        if len({tuple(sorted(r)) for r in T}) != q:
            raise BundleError(f"{f}.T: a top is listed twice")
        _witness_rows(Zf, G, q, "tops", f)
        value = check_nerve(A, T, dyadic(Zf), G, eps + chi)
    elif kind == "frobenius_tail" and rank >= 1:
        side = "AtA" if N <= m else "AAt"
        if cert and cert.get("side") != side:
            raise BundleError(f"{f}.side: must be {side} for shape {m} x {N}")
        if rank > min(m, N):
            value = ("fails", Fraction(0))  # an empty tail is 0, never > m t^2 > 0
        else:
            if op["gram"] is None:
                op["gram"] = gram(A, side)
            value = check_frobenius(A, op["gram"], rank, eps + chi,
                                    cert if end.get("certificate") else None, blobs, m,
                                    f"{f}.certificate")
    else:
        raise BundleError(f"{f}: unknown kind {repr(kind)[:100]} with rank "
                          f"{repr(rank)[:20]}")
    status, v = value
    # a Ky Fan certificate can only prove: "undecided" there agrees with a kernel that
    # did not prove the end (no certificate was exported for it)
    agrees = status == kernel or (kind == "frobenius_tail" and status == "undecided"
                                  and kernel != "holds")
    return {"bracket": end.get("bracket"), "operator": end["operator"], "end": end.get("end"),
            "kind": kind, "rank": rank, "eps": str(eps), "kernel": kernel, "replay": status,
            "agrees": agrees, "value": None if v is None else str(v)}


def float_environment_reason() -> str | None:
    """Returns None when stored floats read exactly here, else why not.  Every number is read
    with as_integer_ratio, exact in any rounding mode, but under denormals-are-zero (set by a
    library built with -ffast-math, or torch.set_flush_denormal) a subnormal compares and
    converts as 0: a stored 2^-1074 would be replayed as 0.  The probe values are unpacked
    from bytes so that no compiler folds them."""
    tiny, one, step = struct.unpack("<3d", struct.pack("<3Q", 1, 0x3FF0000000000000,
                                                       0x3CA8000000000000))  # 3 2^-54
    if not tiny or tiny.as_integer_ratio() != (1, 1 << 1074):
        return "subnormal numbers read as zero (denormals-are-zero)"
    if one + step != 1 + 2.0**-52 or -one - step != -(1 + 2.0**-52):
        return "the rounding mode is not round-to-nearest"
    return None


def main(argv: list[str] | None = None, prog: str | None = None,
         package: str | None = None) -> int:
    """Replays the bundle named in ``argv`` (default: the command line) and returns the exit
    code.  ``prog`` is the name the usage shows (default ``python replay/replay.py``) and
    ``package`` the version of the package that installed this file, for ``--version``."""
    global FLINT
    usage = __doc__.strip()
    if prog:
        usage = usage.replace("python replay/replay.py", prog, 1)
    args = sys.argv[1:] if argv is None else argv
    args = [{"-q": "--quiet", "-h": "--help"}.get(a, a) for a in args]
    limits, rest, it = {}, [], iter(args)
    for a in it:
        name, eq, val = a.partition("=")
        if name[:6] == "--max-" and name[6:] in LIMITS:
            val = val if eq else next(it, "")
            if not (val.isascii() and val.isdigit() and int(val) > 0):
                print(f"replay: {name} needs a positive integer", file=sys.stderr)
                return 2
            limits[name[6:]] = int(val)
        else:
            rest.append(a)
    opts, paths = {a for a in rest if a.startswith("-")}, [a for a in rest if a[:1] != "-"]
    if "--help" in opts:
        return print(usage) or 0
    if "--version" in opts:
        installed = f" (installed by softrank-certify {package})" if package else ""
        return print(f"{prog or 'replay.py'}: reads {FORMAT} version {VERSION}{installed}") or 0
    if len(paths) != 1 or opts - {"--flint", "--json", "--quiet"}:
        print("\n".join(usage.splitlines()[2:4]), file=sys.stderr)
        return 2
    if "--flint" in opts:
        try:
            import flint  # the optional fast path: integer matrix products only
        except ImportError:
            print("replay: --flint needs python-flint; run without it", file=sys.stderr)
            return 2
        FLINT = flint
    quiet, as_json = "--quiet" in opts or "--json" in opts, "--json" in opts
    why = float_environment_reason()
    if why is not None:  # no verdict from numbers this process cannot read
        print(f"replay: internal error: the floating-point environment is not the IEEE "
              f"default: {why}; run in a fresh process", file=sys.stderr)
        return 3
    for stream in (sys.stdout, sys.stderr):  # a terminal that cannot show a character: \x..
        getattr(stream, "reconfigure", lambda **_: None)(errors="backslashreplace")

    def emit(r: dict) -> None:  # every string from the bundle goes through shown()
        if not quiet:
            mark = "" if r["agrees"] else "  DISAGREES with the kernel"
            print(f"bracket {shown(r['bracket'])} {r['end']} {r['kind']} rank {r['rank']} on "
                  f"operator {shown(r['operator'])} eps {_short(r['eps'])}: replay "
                  f"{r['replay']}, kernel {r['kernel']}{mark}")

    try:
        s = replay(paths[0], emit=emit, limits=limits)
    except BundleError as err:
        print(f"replay: bundle rejected: {shown(err)}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        raise
    except Exception as err:  # a crash must never read as "not proved"
        print(f"replay: internal error: {type(err).__name__}: {shown(err)}", file=sys.stderr)
        return 3
    if not s["ends"]:
        print("replay: the bundle has no ends: nothing was replayed", file=sys.stderr)
    elif not s["kernel_proved"]:
        print("replay: the kernel proved no end of the bundle: nothing was confirmed",
              file=sys.stderr)
    if as_json:
        print(json.dumps(s, indent=1))  # ASCII only: every string is escaped by json
    else:  # the last line, made of counts and the manifest's digest alone
        print(f"bundle (manifest sha256 {s['manifest_sha256']}): "
              f"{s['ends']} ends; kernel proved {s['kernel_proved']}, replay confirmed "
              f"{s['replayed_proved']}; disagreements {s['disagreements']}; slack chi "
              f"confirmed on {s['chi_confirmed']} of {s['operators']} operators; "
              f"{s['ends'] - s['kernel_proved']} ends not proved by the kernel, replayed for "
              "agreement only, not as proofs")
    if not s["kernel_proved"]:  # nothing to confirm is not a confirmation
        return 1
    return 0 if s["replayed_proved"] == s["kernel_proved"] and not s["disagreements"] else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # the reader (head, less) closed the pipe: the shell's 128 + SIGPIPE
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(141)
