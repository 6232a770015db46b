"""Member streams of untrusted .npz files, with each inflate backend (ISA-L and zlib).

The reader inflates members itself (not through ``zipfile``'s streams): the same arrays as
numpy's loader for files numpy writes, and an InputError naming the member for a changed
byte, a wrong local header, data cut short or running past the archive."""

from __future__ import annotations

import io
import zipfile
import zlib

import numpy as np
import pytest

from softrank.certify.errors import InputError
from softrank.witnesses import npzsafe

BACKENDS = ["zlib"]
try:
    from isal import isal_zlib

    BACKENDS.append("isal")
except ImportError:  # pragma: no cover - without the ``fast`` extra
    isal_zlib = None


@pytest.fixture(params=BACKENDS)
def backend(request, monkeypatch):
    mod = zlib if request.param == "zlib" else isal_zlib
    errors = (zlib.error,) if mod is zlib else (zlib.error, mod.error)
    monkeypatch.setattr(npzsafe, "_inflate", mod)
    monkeypatch.setattr(npzsafe, "_INFLATE_ERRORS", errors)
    return request.param


def _arrays(seed=0):
    rng = np.random.default_rng(seed)
    return {"A": rng.random((37, 29)), "U": rng.standard_normal((37, 3)).astype(np.float32),
            "J": np.arange(5, dtype=np.int64), "Z": np.zeros((64, 64))}


def _npz(compressed=True, **arrays):
    buf = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buf, **arrays)
    return buf.getvalue()


@pytest.mark.parametrize("compressed", [True, False])
def test_numpys_files_read_as_numpy_reads_them(backend, compressed):
    arrays = _arrays()
    data = _npz(compressed, **arrays)
    got = npzsafe.read_npz_bytes(data, "x.npz")
    with np.load(io.BytesIO(data), allow_pickle=False) as ref:
        assert set(got) == set(ref.files)
        for k in got:
            assert got[k].dtype == ref[k].dtype and np.array_equal(got[k], ref[k])
            assert got[k].flags.writeable


def _member(data, name):
    info = zipfile.ZipFile(io.BytesIO(data)).getinfo(name + ".npy")
    n = int.from_bytes(data[info.header_offset + 26:info.header_offset + 28], "little")
    e = int.from_bytes(data[info.header_offset + 28:info.header_offset + 30], "little")
    return info, info.header_offset + 30 + n + e


def test_a_changed_data_byte_is_refused_naming_the_member(backend):
    data = bytearray(_npz(True, **_arrays()))
    info, start = _member(bytes(data), "A")
    refused = 0
    for at in range(start + 40, start + info.compress_size, max(1, info.compress_size // 40)):
        bad = bytearray(data)
        bad[at] ^= 0x10
        with pytest.raises(InputError) as err:
            npzsafe.read_npz_bytes(bytes(bad), "x.npz")
        assert err.value.field == "A" and err.value.source == "x.npz"
        refused += 1
    assert refused >= 20


def test_a_changed_stored_byte_fails_the_crc(backend):
    data = bytearray(_npz(False, **_arrays()))
    info, start = _member(bytes(data), "Z")
    data[start + info.file_size - 1] ^= 0x01  # the last data byte: header still parses
    with pytest.raises(InputError, match="CRC"):
        npzsafe.read_npz_bytes(bytes(data), "x.npz")


def test_a_local_header_naming_another_member_is_refused(backend):
    data = bytearray(_npz(True, **_arrays()))
    info, _ = _member(bytes(data), "U")
    data[info.header_offset + 30] = ord("V")  # "U.npy" -> "V.npy" in the local header only
    with pytest.raises(InputError, match="differ"):
        npzsafe.read_npz_bytes(bytes(data), "x.npz")


def test_a_bad_local_signature_is_refused(backend):
    data = bytearray(_npz(True, **_arrays()))
    info, _ = _member(bytes(data), "J")
    data[info.header_offset + 2] = 0
    with pytest.raises(InputError, match="local file header"):
        npzsafe.read_npz_bytes(bytes(data), "x.npz")


def test_deflate_data_shorter_than_declared_is_refused(backend):
    """A member whose deflate stream ends early (its declared size kept) ends in an error."""
    arr = np.arange(1000, dtype=np.float64)
    buf = io.BytesIO()
    np.save(buf, arr)
    payload = buf.getvalue()
    short = zlib.compressobj(6, zlib.DEFLATED, -15)
    body = short.compress(payload[:-800]) + short.flush()
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("a.npy", payload)
    data = bytearray(out.getvalue())
    info, start = _member(bytes(data), "a")
    # splice in the short stream, fixing the sizes in both headers (CRC of the full data kept)
    new = bytes(data[:start]) + body + bytes(data[start + info.compress_size:])
    delta = len(body) - info.compress_size
    cd = zipfile.ZipFile(io.BytesIO(bytes(data))).start_dir
    new = bytearray(new)
    new[info.header_offset + 18:info.header_offset + 22] = len(body).to_bytes(4, "little")
    cd += delta
    new[cd + 20:cd + 24] = len(body).to_bytes(4, "little")
    eocd = new.rfind(b"PK\x05\x06")
    new[eocd + 16:eocd + 20] = cd.to_bytes(4, "little")
    with pytest.raises(InputError, match="ends before|declared size|corrupt"):
        npzsafe.read_npz_bytes(bytes(new), "x.npz")


def test_member_data_past_the_archive_end_is_refused(backend):
    data = bytearray(_npz(True, **_arrays()))
    info, _ = _member(bytes(data), "Z")
    zf = zipfile.ZipFile(io.BytesIO(bytes(data)))
    cd = zf.start_dir
    # the central directory entry of the last member (Z) claims a huge compressed size
    at = bytes(data).find(b"PK\x01\x02Z.npy"[:4], cd)
    while at != -1 and data[at + 46:at + 51] != b"Z.npy":
        at = bytes(data).find(b"PK\x01\x02", at + 4)
    assert at != -1
    data[at + 20:at + 24] = (len(data) * 2).to_bytes(4, "little")
    with pytest.raises(InputError):
        npzsafe.read_npz_bytes(bytes(data), "x.npz")


def test_a_negative_header_offset_never_reads_from_the_end(backend, monkeypatch):
    data = _npz(True, **_arrays())
    info = zipfile.ZipFile(io.BytesIO(data)).getinfo("A.npy")
    info.header_offset = -len(data) + info.header_offset  # the same bytes, indexed from the end
    with pytest.raises(ValueError, match="offset"):
        npzsafe._MemberStream(memoryview(data), info)
