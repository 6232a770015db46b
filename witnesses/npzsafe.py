"""Reading .npz archives from untrusted stores: every size is checked before it is allocated.

``numpy.load`` trusts an archive: an npy header declaring shape (200000, 200000) makes it try
to allocate the whole array, and a deflate bomb is inflated before anyone compares its shape
with the record.  :func:`read_npz` instead

1. refuses a file larger than the cap before reading it, and checks its sha256;
2. reads the zip central directory (names, declared sizes, compression) without inflating
   anything, and refuses too many members, names that are not ``<name>.npy``, declared sizes
   above the cap and compression ratios no float data reaches;
3. inflates only the first bytes of each member to read its npy header (versions 1.0 and 2.0,
   parsed by :func:`parse_header`, which accepts only the dict numpy's own writer produces),
   refuses object, structured and exotic dtypes, a data length that disagrees with the
   member's declared size, and asks the caller's ``expect`` whether this name, dtype and shape
   are what the record says;
4. only then allocates each array (exactly the declared number of bytes) and fills it,
   inflating the member itself (ISA-L's inflate where installed, else zlib) with the checks
   ``zipfile`` makes: local header, bounds, declared size, CRC-32.

Nothing here unpickles; every refusal is an :class:`certify.errors.InputError` naming the file
and the array.
"""

from __future__ import annotations

import hashlib
import io
import math
import os
import re
import stat
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

try:  # Intel ISA-L's inflate: the same deflate streams, about 1.5x faster than zlib here
    from isal import isal_zlib as _inflate
    _INFLATE_ERRORS: tuple[type[BaseException], ...] = (zlib.error, _inflate.error)
except ImportError:  # pragma: no cover - the ``fast`` extra is not installed
    _inflate = zlib
    _INFLATE_ERRORS = (zlib.error,)

from softrank.certify.errors import InputError

from .atomic import byte_cap_from_env

DEFAULT_MAX_BYTES = 4 << 30  # 4 GiB of declared array data per file
MAX_MEMBERS = 64
MAX_RATIO = 1000  # float data never deflates 1000:1; a bomb does
RATIO_FLOOR = 64 << 20  # below this any ratio is allowed (identity-like or sparse matrices)
MAX_HEADER = 10_000  # numpy's own default limit for npy header length
_MAGIC = b"\x93NUMPY"
# The header dict exactly as numpy's writer spells it (``format._write_array_header``: keys
# sorted, ``repr`` of each value, a final ", " before "}"), the final ", " optional (a plain
# ``repr(dict)``, as other writers and hand-made test files have it), then the writer's space
# padding and newline.  Anything else (other quoting, other key order, comments, Python 2
# ``3L`` integers, nested structures) is refused: a regular expression over at most
# MAX_HEADER bytes cannot be made to recurse or to allocate, which ``ast.literal_eval`` can.
# The descr is a simple dtype string (byte order, one of the type letters numpy writes, item
# size, an optional datetime unit); structured dtypes (lists) never match.
_DIM = rb"(?:0|[1-9][0-9]{0,18})"
_HEADER = re.compile(
    rb"\{'descr': '(?P<descr>[<>|=][biufcmMOSUV][0-9]{0,5}(?:\[[0-9A-Za-z]{1,8}\])?)', "
    rb"'fortran_order': (?P<fortran>True|False), "
    rb"'shape': \((?P<shape>|" + _DIM + rb",|" + _DIM + rb"(?:, " + _DIM + rb")+)\)"
    rb"(?:, )?\} *\n")
_DTYPE_KINDS = "fiub"


MAX_BYTES_ENV = "SOFTRANK_MAX_ARRAY_BYTES"


def max_bytes() -> int:
    """Returns the cap on declared array bytes per file: ``SOFTRANK_MAX_ARRAY_BYTES`` if set
    (a positive integer), else 4 GiB.  Raises InputError naming the variable when it is set
    to anything else (a typo must not silently fall back to the default cap)."""
    return byte_cap_from_env(MAX_BYTES_ENV, DEFAULT_MAX_BYTES,
                             "bytes of declared array data per file")


@dataclass(frozen=True)
class MemberHeader:
    """What a member's npy header declares (before any array memory is allocated)."""

    name: str
    dtype: np.dtype
    shape: tuple[int, ...]
    fortran_order: bool
    offset: int  # bytes of magic + header before the data
    nbytes: int


# expect(name, dtype, shape) -> None to accept, or a reason string to refuse
Expect = Callable[[str, np.dtype, tuple[int, ...]], str | None]


def _below(path: Path, folder: Path) -> bool:
    return path != folder and path.is_relative_to(folder)


def open_array_file(path: Path, field_name: str, inside: Path | None) -> tuple[int, int]:
    """Returns (descriptor, size) of ``path`` opened for reading, checked on the descriptor:
    a regular file and, when ``inside`` (a folder) is given, one whose real path lies below
    it.

    A store's path checks run before the open; a link or FIFO swapped in between would
    otherwise be followed (a file outside the store read) or block the open.  ``O_NONBLOCK``
    keeps a FIFO from stalling, and the descriptor's own path (``/proc/self/fd``) is what is
    compared with ``inside``."""
    src = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
                     | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InputError("array file is missing", field=field_name, source=src) from None
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror or err}", field=field_name,
                         source=src) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputError("array file is not a regular file", field=field_name, source=src)
        if inside is not None:
            try:
                real = Path(os.readlink(f"/proc/self/fd/{fd}"))
            except OSError:  # no procfs: the path as resolved now (a narrower window)
                real = path.resolve()
            # real has no links, so lying lexically below the absolute folder puts it inside;
            # only a root reached through a link needs the (slower) resolve
            if not (_below(real, Path(os.path.abspath(inside)))
                    or _below(real, inside.resolve())):
                raise InputError("array file resolves outside the store's arrays/ folder",
                                 field=field_name, source=src)
    except BaseException:
        os.close(fd)
        raise
    return fd, st.st_size


def read_npz(path: Path, expected_sha: str | None, *, expect: Expect | None = None,
             field_name: str = "file", cap: int | None = None,
             inside: Path | None = None) -> dict[str, np.ndarray]:
    """Returns the arrays of the .npz file ``path`` after the checks of this module's doc.

    ``expected_sha`` (hex) is compared with the file's sha256 when given.  ``expect`` vets
    each member's name, dtype and shape before allocation.  ``cap`` bounds the file size and
    the total declared array bytes (default :func:`max_bytes`).  ``inside`` (a
    folder): the file opened must lie below it, checked on the open descriptor.
    """
    src = str(path)
    cap = max_bytes() if cap is None else cap
    fd, size = open_array_file(path, field_name, inside)
    if size > cap:
        os.close(fd)
        raise InputError(f"file of {size} bytes exceeds the cap of {cap} bytes "
                         "(SOFTRANK_MAX_ARRAY_BYTES)", field=field_name, source=src)
    try:
        with os.fdopen(fd, "rb") as fh:
            parts = [fh.read(size)]  # what fstat promised, in one allocation of its size
            total = len(parts[0])
            # st_size can lie (procfs reports 0 for files of any length): the rest is read
            # a MiB at a time and stops past the cap
            while total <= cap and (more := fh.read(1 << 20)):
                parts.append(more)
                total += len(more)
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror or err}", field=field_name,
                         source=src) from None
    if total > cap:
        raise InputError(f"file longer than the cap of {cap} bytes (SOFTRANK_MAX_ARRAY_BYTES)",
                         field=field_name, source=src)
    data = parts[0] if len(parts) == 1 else b"".join(parts)
    if expected_sha is not None:
        got = hashlib.sha256(data).hexdigest()
        if got != expected_sha:
            raise InputError(f"sha256 mismatch (record says {expected_sha[:12]}..., file "
                             f"has {got[:12]}...): file changed or corrupt", field="sha256",
                             source=src)
    return read_npz_bytes(data, src, expect=expect, field_name=field_name, cap=cap)


def read_npz_bytes(data: bytes, src: str, *, expect: Expect | None = None,
                   field_name: str = "file", cap: int | None = None) -> dict[str, np.ndarray]:
    """Like :func:`read_npz` for archive bytes already in memory (``src`` names them)."""
    cap = max_bytes() if cap is None else cap
    if not data.startswith(b"PK"):
        raise InputError("not an .npz archive (pickles and other formats are never loaded)",
                         field=field_name, source=src)
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError) as err:
        raise InputError(f"corrupt npz archive: {err}", field=field_name, source=src) from None
    with zf:
        infos = _vet_directory(zf, src, field_name, cap)
    # one pass per member (header vetted, then its data read from the same stream): the
    # directory check above already bounds the total, so no member allocates more than
    # the cap, and a refused header still stops the read before its data is allocated
    raw = memoryview(data)
    return dict(_read_vetted_member(raw, info, src, expect) for info in infos)


def _vet_directory(zf: zipfile.ZipFile, src: str, field_name: str, cap: int
                   ) -> list[zipfile.ZipInfo]:
    infos = zf.infolist()
    if len(infos) > MAX_MEMBERS:
        raise InputError(f"{len(infos)} members (at most {MAX_MEMBERS})", field=field_name,
                         source=src)
    seen: set[str] = set()
    total = 0
    for info in infos:
        name = info.filename
        if not name.endswith(".npy") or "/" in name or name[:-4] in seen or not name[:-4]:
            raise InputError(f"member {name[:80]!r} is not a distinct <name>.npy",
                             field=field_name, source=src)
        seen.add(name[:-4])
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise InputError(f"member {name[:80]!r}: unsupported compression "
                             f"{info.compress_type}", field=field_name, source=src)
        if info.flag_bits & 0x1:
            raise InputError(f"member {name[:80]!r} is encrypted", field=field_name,
                             source=src)
        total += info.file_size
        if total > cap:
            raise InputError(f"declared array data exceeds the cap of {cap} bytes "
                             "(SOFTRANK_MAX_ARRAY_BYTES)", field=field_name, source=src)
        if looks_like_bomb(info):
            raise InputError(f"member {name[:80]!r} inflates {info.compress_size} bytes to "
                             f"{info.file_size} (ratio above {MAX_RATIO}: refused as a "
                             "decompression bomb)", field=field_name, source=src)
    return infos


def looks_like_bomb(info: zipfile.ZipInfo) -> bool:
    """True when a member declares more than RATIO_FLOOR bytes and more than MAX_RATIO times
    its compressed size: refused by the reader (the writer stores such arrays uncompressed,
    so every store it writes can be read back)."""
    return info.file_size > RATIO_FLOOR and info.file_size > MAX_RATIO * max(
        1, info.compress_size)


_CHUNK = 16 << 20
_LOCAL = b"PK\x03\x04"  # a local file header's signature; 30 bytes, then name and extra


class _MemberStream:
    """A read-only stream of one zip member's bytes, from the archive bytes ``raw``.

    What ``zipfile`` checks when it opens a member, without its per-read overhead: the local
    header's signature and name, the compressed bytes inside the archive, never more output
    than the declared size (inflated in steps of at most what the caller asks), and the
    CRC-32 once the declared size has been produced.  Every failure raises ValueError or an
    inflate error (``_INFLATE_ERRORS``)."""

    def __init__(self, raw: memoryview, info: zipfile.ZipInfo):
        at = info.header_offset
        if at < 0:  # a directory inconsistent with the end record: never index from the end
            raise ValueError("bad local file header offset")
        head = bytes(raw[at:at + 30])
        if len(head) != 30 or head[:4] != _LOCAL:
            raise ValueError("bad local file header")
        n, e = int.from_bytes(head[26:28], "little"), int.from_bytes(head[28:30], "little")
        name = bytes(raw[at + 30:at + 30 + n]).decode(
            "utf-8" if info.flag_bits & 0x800 else "cp437", "replace")
        if name != info.orig_filename:
            raise ValueError("file name in directory and header differ")
        start = at + 30 + n + e
        if start + info.compress_size > len(raw):
            raise ValueError("member data runs past the end of the archive")
        self._src = raw[start:start + info.compress_size]
        self._dec = _inflate.decompressobj(-15) if info.compress_type == \
            zipfile.ZIP_DEFLATED else None
        self._left = info.file_size
        self._crc, self._want = 0, info.CRC

    def read(self, n: int) -> bytes:
        """Returns the next min(n, bytes left) bytes of the member (fewer only at its end)."""
        n = min(n, self._left)
        if n <= 0:
            return b""
        parts = []
        while n > 0:
            if self._dec is None:
                out = bytes(self._src[:n])
                self._src = self._src[n:]
            else:
                out = self._dec.decompress(self._src, n)
                self._src = self._dec.unconsumed_tail
            if not out:
                raise ValueError("member data ends before its declared size")
            parts.append(out)
            n -= len(out)
            self._left -= len(out)
            self._crc = _inflate.crc32(out, self._crc)
        if self._left == 0 and self._crc != self._want:
            raise ValueError("bad CRC-32 of member data")
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def readinto(self, view: memoryview) -> int:
        """Fills the front of ``view`` with the next bytes; returns how many (at most
        _CHUNK, so a large array is not held twice)."""
        b = self.read(min(len(view), _CHUNK))
        view[:len(b)] = b
        return len(b)


def _read_vetted_member(raw: memoryview, info: zipfile.ZipInfo, src: str,
                        expect: Expect | None) -> tuple[str, np.ndarray]:
    """Returns (name, array) of one member: its header vetted by :func:`_read_header`,
    then its data read from the same stream."""
    try:
        fh = _MemberStream(raw, info)
    except (ValueError, *_INFLATE_ERRORS) as err:
        raise InputError(f"bad zip member: {str(err)[:200]}", field=info.filename[:-4],
                         source=src) from None
    h = _read_header(fh, info, src, expect)
    return h.name, _read_member(fh, h, src)


def parse_header(header: bytes) -> tuple[tuple[int, ...], bool, np.dtype]:
    """Returns (shape, fortran_order, dtype) of an npy header dict (the bytes after the
    length field, padding and newline included).

    Accepts exactly the form of ``_HEADER`` (what numpy's writer produces, the final ", "
    optional); raises ValueError for anything else.  The dtype is not yet vetted: the caller
    refuses the kinds it does not take (an object descr ``|O`` parses here).
    """
    m = _HEADER.fullmatch(header)
    if m is None:
        raise ValueError(f"not a numpy header dict: {header[:120]!r}")
    try:
        dtype = np.dtype(m["descr"].decode("ascii"))
    except (TypeError, ValueError) as err:
        raise ValueError(f"descr {m['descr'][:20]!r} is not a dtype: {err}") from None
    dims = m["shape"]
    shape = tuple(int(d) for d in dims.split(b",") if d) if dims else ()
    return shape, m["fortran"] == b"True", dtype


def _read_exact(fh: _MemberStream, n: int, what: str) -> bytes:
    b = fh.read(n)
    if len(b) != n:
        raise ValueError(f"member ends inside the {what}")
    return b


def _read_header(fh: _MemberStream, info: zipfile.ZipInfo, src: str,
                 expect: Expect | None) -> MemberHeader:
    """Returns the vetted header of member ``info`` read from its stream ``fh`` (left
    positioned at the data); raises InputError naming the member for anything refused."""
    name = info.filename[:-4]
    try:
        # magic, version and (for 1.0) the whole length field in one read
        pre = _read_exact(fh, 10, "npy magic")
        if pre[:6] != _MAGIC:
            raise ValueError(f"not an npy member: magic {pre[:6]!r}")
        if pre[6:8] == b"\x01\x00":
            hlen, offset = int.from_bytes(pre[8:10], "little"), 10
        elif pre[6:8] == b"\x02\x00":
            rest = _read_exact(fh, 2, "npy header length")
            hlen, offset = int.from_bytes(pre[8:10] + rest, "little"), 12
        else:
            raise ValueError(f"unsupported npy format version {pre[6]}.{pre[7]}")
        if hlen > MAX_HEADER:  # refused before the header is read, let alone parsed
            raise ValueError(f"header of {hlen} bytes (at most {MAX_HEADER})")
        shape, fortran, dtype = parse_header(_read_exact(fh, hlen, "npy header"))
        offset += hlen
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, *_INFLATE_ERRORS) as err:
        raise InputError(f"bad npy header: {str(err)[:200]}", field=name, source=src) from None
    if dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None or \
            dtype.kind not in _DTYPE_KINDS or dtype.itemsize == 0:
        raise InputError(f"dtype {dtype.str!r} refused (numeric arrays only; never pickles)",
                         field=name, source=src)
    if len(shape) > 8:
        raise InputError(f"bad shape {shape!r:.80}", field=name, source=src)
    nbytes = math.prod(shape) * dtype.itemsize
    if offset + nbytes != info.file_size:
        raise InputError(f"header declares {nbytes} data bytes but the member holds "
                         f"{info.file_size - offset}", field=name, source=src)
    if expect is not None:
        why = expect(name, dtype, shape)
        if why:
            raise InputError(why, field=name, source=src)
    return MemberHeader(name, dtype, shape, fortran, offset, nbytes)


def _read_member(fh: _MemberStream, h: MemberHeader, src: str) -> np.ndarray:
    """Returns the data declared by ``h`` from the member stream ``fh`` positioned at it."""
    buf = bytearray(h.nbytes)
    try:
        view = memoryview(buf)
        got = 0
        while got < h.nbytes:
            n = fh.readinto(view[got:])
            if not n:
                break
            got += n
        if got != h.nbytes or fh.read(1):
            raise ValueError("member data length differs from its header")
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, *_INFLATE_ERRORS) as err:
        raise InputError(f"corrupt array data: {str(err)[:200]}", field=h.name,
                         source=src) from None
    arr = np.frombuffer(buf, dtype=h.dtype)
    return arr.reshape(h.shape, order="F" if h.fortran_order else "C")
