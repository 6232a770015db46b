"""The strict npy header parser of witnesses.npzsafe: numpy's own headers read exactly,
anything else refused with an InputError naming the member."""

from __future__ import annotations

import io
import struct
import zipfile

import numpy as np
import pytest

from softrank.certify import InputError
from softrank.witnesses import npzsafe


def _npy(arr: np.ndarray, version: tuple[int, int] | None = None) -> bytes:
    """The .npy bytes numpy's own writer produces for ``arr``."""
    buf = io.BytesIO()
    np.lib.format.write_array(buf, arr, version=version, allow_pickle=False)
    return buf.getvalue()


def _zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def _with_header(header: bytes, data: bytes = b"", version: bytes = b"\x01\x00") -> bytes:
    fmt = "<H" if version == b"\x01\x00" else "<I"
    return b"\x93NUMPY" + version + struct.pack(fmt, len(header)) + header + data


VALID = [
    np.arange(12, dtype=np.float32).reshape(3, 4),
    np.arange(6, dtype=np.float64).reshape(2, 3) / 7,
    np.arange(6, dtype=">f8").reshape(3, 2),  # big-endian
    np.arange(5, dtype=np.int64) - 2,
    np.arange(7, dtype=np.int32),
    np.arange(9, dtype=np.uint8),
    np.array([True, False, True]),
    np.array(3.5),  # 0-d
    np.zeros((0,)),  # empty
    np.zeros((0, 3), dtype=np.float32),
    np.asfortranarray(np.arange(12.0).reshape(3, 4)),  # fortran order
    np.asfortranarray(np.arange(24, dtype=np.int16).reshape(2, 3, 4)),
    np.ones((1, 1, 1, 1, 1, 1, 1, 1)),  # 8 dims, the most accepted
    np.zeros((100000, 0)),  # a wide dimension: numpy pads the header for growth
]


@pytest.mark.parametrize("version", [None, (1, 0), (2, 0)])
@pytest.mark.parametrize("arr", VALID, ids=lambda a: f"{a.dtype.str}{a.shape}")
def test_numpy_written_members_read_exactly(arr, version):
    out = npzsafe.read_npz_bytes(_zip({"X.npy": _npy(arr, version)}), "v.npz")["X"]
    assert out.dtype == arr.dtype and out.shape == arr.shape
    assert np.array_equal(out, arr)
    assert out.flags.f_contiguous == arr.flags.f_contiguous
    assert out.flags.writeable


def test_savez_compressed_archives_read_exactly():
    arrs = {f"m{i}": a for i, a in enumerate(VALID)}
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrs)
    out = npzsafe.read_npz_bytes(buf.getvalue(), "s.npz")
    assert set(out) == set(arrs)
    for k, a in arrs.items():
        assert out[k].dtype == a.dtype and np.array_equal(out[k], a)


def test_parse_header_returns_what_numpy_reads():
    for arr in VALID:
        for version in ((1, 0), (2, 0)):
            raw = _npy(arr, version)
            hlen_size = 2 if version == (1, 0) else 4
            hlen = int.from_bytes(raw[8:8 + hlen_size], "little")
            header = raw[8 + hlen_size:8 + hlen_size + hlen]
            fh = io.BytesIO(raw)
            assert np.lib.format.read_magic(fh) == version
            read = getattr(np.lib.format, f"read_array_header_{version[0]}_0")
            want = read(fh)
            assert npzsafe.parse_header(header) == (tuple(want[0]), want[1], want[2])


def test_a_plain_repr_dict_without_the_final_comma_is_read():
    # what hand-made files (repr of the dict, no ", " before "}") look like
    X = np.arange(4.0)
    d = repr({"descr": "<f8", "fortran_order": False, "shape": (4,)}).encode() + b"   \n"
    out = npzsafe.read_npz_bytes(_zip({"X.npy": _with_header(d, X.tobytes())}), "r.npz")
    assert np.array_equal(out["X"], X)


GOOD = b"{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }"
MALFORMED = {
    "double quotes": GOOD.replace(b"'", b'"') + b" \n",
    "keys reordered": b"{'fortran_order': False, 'descr': '<f8', 'shape': (2,), }  \n",
    "missing key": b"{'descr': '<f8', 'shape': (2,), }  \n",
    "extra key": GOOD[:-1] + b"'x': 1, }  \n",
    "leading zero": GOOD.replace(b"(2,)", b"(02,)") + b" \n",
    "negative dim": GOOD.replace(b"(2,)", b"(-2,)") + b" \n",
    "float dim": GOOD.replace(b"(2,)", b"(2.0,)") + b" \n",
    "python 2 long": GOOD.replace(b"(2,)", b"(2L,)") + b" \n",
    "list shape": GOOD.replace(b"(2,)", b"[2]") + b" \n",
    "1-tuple without comma": GOOD.replace(b"(2,)", b"(2)") + b" \n",
    "twenty-digit dim": GOOD.replace(b"(2,)", b"(10000000000000000000,)") + b" \n",
    "no newline": GOOD + b"   ",
    "text after the newline": GOOD + b" \nx",
    "tab padding": GOOD + b"\t\n",
    "structured descr": GOOD.replace(b"'<f8'", b"[('a', '<f8')]") + b" \n",
    "descr without byte order": GOOD.replace(b"'<f8'", b"'f8'") + b" \n",
    "unknown type letter": GOOD.replace(b"'<f8'", b"'<a8'") + b" \n",
    "datetime unit unknown": GOOD.replace(b"'<f8'", b"'<M8[zz]'") + b" \n",
    "fortran_order 1": GOOD.replace(b"False", b"1") + b" \n",
    "expression": GOOD.replace(b"(2,)", b"(1+1,)") + b" \n",
    "empty": b"\n",
}


@pytest.mark.parametrize("header", MALFORMED.values(), ids=list(MALFORMED))
def test_malformed_headers_are_refused_naming_the_member(header):
    data = _zip({"Wx.npy": _with_header(header, b"\0" * 16)})
    with pytest.raises(InputError, match="bad npy header") as e:
        npzsafe.read_npz_bytes(data, "m.npz")
    assert e.value.field == "Wx" and e.value.source == "m.npz"
    with pytest.raises(ValueError):
        npzsafe.parse_header(header)


@pytest.mark.parametrize("raw, why", [
    (b"\x93NUMPZ\x01\x00" + b"\0" * 40, "magic"),
    (b"\x93NUMPY\x03\x00" + b"\0" * 40, "version 3.0"),
    (b"\x93NUMPY\x01\x00\x11\x27" + b" " * 10001, "10001 bytes"),  # one above MAX_HEADER
    (b"\x93NUMPY\x02\x00\xff\xff\xff\x7f" + b" " * 40, "bytes"),
    (b"\x93NUMPY\x01\x00\x40\x00" + GOOD, "ends inside"),  # truncated header
    (b"\x93NUM", "ends inside"),
])
def test_bad_magic_versions_and_lengths_are_refused(raw, why):
    with pytest.raises(InputError, match="bad npy header") as e:
        npzsafe.read_npz_bytes(_zip({"Q.npy": raw}), "b.npz")
    assert why in e.value.reason and e.value.field == "Q"


def test_refused_dtypes_still_say_dtype():
    # an object, string or datetime descr parses, then the dtype check refuses it
    for descr in (b"|O", b"<U4", b"<M8[s]", b"<c16", b"|V8"):
        header = GOOD.replace(b"<f8", descr) + b" \n"
        with pytest.raises(InputError, match="refused") as e:
            npzsafe.read_npz_bytes(_zip({"Z.npy": _with_header(header, b"\0" * 64)}), "d.npz")
        assert e.value.field == "Z"


def test_nine_dimensions_are_refused():
    arr = np.ones((1,) * 9)
    with pytest.raises(InputError, match="bad shape") as e:
        npzsafe.read_npz_bytes(_zip({"N.npy": _npy(arr)}), "n.npz")
    assert e.value.field == "N"


def test_the_parser_is_linear_on_a_long_shape():
    # a header of the maximal length made of dimensions: parsed (refused for its 9+ dims)
    # without backtracking blow-up
    dims = b", ".join([b"1"] * 3000)
    header = b"{'descr': '<f8', 'fortran_order': False, 'shape': (" + dims + b"), }\n"
    assert len(header) <= npzsafe.MAX_HEADER
    shape, _, _ = npzsafe.parse_header(header)
    assert len(shape) == 3000
