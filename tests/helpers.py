"""Shared test helpers: random softmax matrices, witnesses and exact reference values."""

from __future__ import annotations

import contextlib
import hashlib
import json
import zipfile
from fractions import Fraction

import numpy as np


def softmax_rows(logits: np.ndarray) -> np.ndarray:
    z = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def random_attention(rng: np.random.Generator, m: int, n: int, scale: float = 2.0) -> np.ndarray:
    return softmax_rows(rng.normal(size=(m, n)) * scale)


def tsvd_witness(A: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    u, s, vt = np.linalg.svd(A, full_matrices=False)
    return u[:, :k] * s[:k], vt[:k].copy()


def exact_row1(A: np.ndarray, B_terms: tuple[np.ndarray, np.ndarray] | None = None) -> Fraction:
    """max_i sum_j |A - U V|_ij in exact rational arithmetic (pure Python, independent of flint)."""
    m, n = A.shape
    Af = [[Fraction(float(x)) for x in row] for row in A]
    if B_terms is not None:
        U, V = B_terms
        Uf = [[Fraction(float(x)) for x in row] for row in U]
        Vf = [[Fraction(float(x)) for x in row] for row in V]
        k = U.shape[1]
        for i in range(m):
            for j in range(n):
                Af[i][j] -= sum((Uf[i][l] * Vf[l][j] for l in range(k)), Fraction(0))
    return max(sum((abs(x) for x in row), Fraction(0)) for row in Af)


def plain_float_error(A: np.ndarray, U: np.ndarray, V: np.ndarray) -> float:
    """The unverified float64 evaluation that stored brackets were made with."""
    return float(np.abs(A - U @ V).sum(axis=1).max())


def bernstein_certificate(A: np.ndarray, W: np.ndarray, P: np.ndarray | None = None) -> dict:
    """A bernstein certificate on col(W): the basis rescaled so that its rows J (greedy pivots)
    are exactly the identity, and P = W pinv(A W) unless given (untrusted float64)."""
    N, p = W.shape
    J: list[int] = []
    R = W.copy()
    for k in range(p):  # column-pivoted elimination (used rows become zero) picks J
        j = int(np.argmax(np.abs(R[:, k])))
        J.append(j)
        R = R - np.outer(R[:, k] / R[j, k], R[j])
    Wn = W @ np.linalg.inv(W[J])
    Wn[J] = np.eye(p)
    if P is None:
        P = Wn @ np.linalg.pinv(A @ Wn)
    return {"kind": "bernstein", "rank": p, "W": Wn, "P": P, "J": np.array(J, dtype=np.int64)}


def lp_left_inverse(A: np.ndarray, W: np.ndarray) -> np.ndarray:
    """The optimal P for col(W): row j minimises ||P_j||_1 subject to P_j (A W) = W_j."""
    from scipy.optimize import linprog

    M = A @ W
    m = M.shape[0]
    rows = []
    for w in W:
        res = linprog(np.ones(2 * m), A_eq=np.hstack([M.T, -M.T]), b_eq=w, bounds=(0, None),
                      method="highs")
        assert res.status == 0
        rows.append(res.x[:m] - res.x[m:])
    return np.array(rows)


def sign_patterns(p: int) -> list[list[int]]:
    """The 2^(p-1) sign patterns from the format's words (sigma_0 = +1, sigma_i = -1 iff bit
    i - 1 of the pattern index is set), written here independently of the kernel."""
    return [[1] + [-1 if (s >> (i - 1)) & 1 else 1 for i in range(1, p)]
            for s in range(1 << (p - 1))]


def exact_orthant_min(rows: list[list[Fraction]], Z) -> Fraction:
    """min over patterns s and rows i of sigma_i(s) (rows . z_s) in exact rationals."""
    best = None
    for sig, z in zip(sign_patterns(len(rows)), Z, strict=True):
        zq = [Fraction(float(x)) for x in z]
        for sg, row in zip(sig, rows, strict=True):
            v = sg * sum((a * b for a, b in zip(row, zq, strict=True)), Fraction(0))
            best = v if best is None else min(best, v)
    assert best is not None
    return best


def resigned_bundle(path, out, edit_doc=None, edit_member=None) -> None:
    """A consistently re-signed forgery: members edited and the manifest rewritten to match
    (so the replayer's own certificate checks, not the sha256 list, must catch it)."""
    with zipfile.ZipFile(path) as z:
        man = json.loads(z.read("manifest.json"))
        members = {n: z.read(n) for n in z.namelist() if n != "manifest.json"}
    if edit_doc is not None:
        doc = json.loads(members["bundle.json"])
        edit_doc(doc)
        members["bundle.json"] = json.dumps(doc).encode()
    if edit_member is not None:
        name, data = edit_member(members)
        members[name] = data
    man["files"] = {n: {"bytes": len(b), "sha256": hashlib.sha256(b).hexdigest()}
                    for n, b in members.items()}
    with zipfile.ZipFile(out, "w") as zout:
        zout.writestr("manifest.json", json.dumps(man))
        for n, b in members.items():
            zout.writestr(n, b)


def forged_lower_array(path, out, bracket: str, name: str, dtype: str, value) -> None:
    """Writes to ``out`` a re-signed copy of the bundle at ``path`` in which the first entry
    of array ``name`` of the lower end of ``bracket`` (read as ``dtype``) is ``value``."""
    with zipfile.ZipFile(path) as z:
        doc = json.loads(z.read("bundle.json"))
    (end,) = [e for e in doc["ends"] if e["bracket"] == bracket and e["end"] == "lower"]
    ref = end["certificate"][name]

    def forge(members):
        X = np.frombuffer(members[ref["file"]], dtype=dtype).copy()
        X[0] = value
        return ref["file"], X.tobytes()

    resigned_bundle(path, out, edit_member=forge)


def check_lower_any_rank(A: np.ndarray, cert: dict, eps, tier: str = "auto"):
    """``check_lower`` for a rowset or polytope certificate without its input check
    rank <= min(m, N): the kernel's own inequality on rank-deficient shapes, where the
    theorem behind that input check says it can never hold (chi = 0)."""
    from softrank.certify import lower
    from softrank.certify.lower import polytope, rowset
    from softrank.certify.rationals import parse_eps

    kind, rank, arrays = lower.parse_certificate(cert)
    A = np.asarray(A, dtype=np.float64)
    m, N = A.shape
    e = parse_eps(eps)
    if kind == "rowset":
        I, Z = rowset.parse_arrays(arrays, rank, m, N)
        return rowset.check_rowset(A, I, Z, e, eps=e, chi=Fraction(0), tier=tier)
    if kind == "polytope":
        Y, I, F, Z, G = polytope.parse_arrays(arrays, rank, m, N)
        return polytope.check_polytope(A, Y, I, F, Z, G, e, eps=e, chi=Fraction(0), tier=tier)
    raise ValueError(f"not a rowset or polytope certificate: {kind}")


@contextlib.contextmanager
def local_cluster_client():
    """A Dask ``Client`` on a fresh two-process ``LocalCluster`` (no dashboard), closed with
    its cluster on exit."""
    import gc

    from distributed import Client, LocalCluster

    # a Client left half-built by an earlier test (a refused address) closes itself in
    # __del__; run inside LocalCluster's start-up that deadlocks on the loop runner's lock,
    # so collect it here, outside any lock
    gc.collect()
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                           dashboard_address=None, silence_logs=50)
    c = Client(cluster)
    try:
        yield c
    finally:
        c.close()
        cluster.close()


def factors_nonzero_store(path, n_ops: int, size: int, seed: int, *, logits: bool = True,
                          float32_odd: bool = False, id_digits: int = 0) -> None:
    """Writes a store of ``n_ops`` softmax operators of ``size`` x ``size`` (gaussian logits x
    2 from ``seed``), each with a rank-size/2 truncated-SVD witness and a ``nonzero`` lower end
    at eps 0.05 and 0.3; the operator of record is the softmax of the logits when ``logits``,
    and odd-numbered operators are stored as float32 when ``float32_odd``.  Operator ids are
    op<o> (zero-padded to ``id_digits``), bracket ids <operator id>-<eps>."""
    from softrank.witnesses import Store

    rng = np.random.default_rng(seed)
    with Store.create(path) as st:
        for o in range(n_ops):
            L = rng.standard_normal((size, size)) * 2
            A = softmax_rows(L)
            if float32_odd and o % 2:
                A = A.astype(np.float32)
            oid = st.add_operator(A, family="f", logits=L if logits else None,
                                  id=f"op{o:0{id_digits}d}" if id_digits else f"op{o}")
            U, V = tsvd_witness(A.astype(np.float64), size // 2)
            for eps in ("0.05", "0.3"):
                st.add_bracket(oid, eps, {"kind": "factors", "rank": size // 2, "U": U, "V": V},
                               {"kind": "nonzero", "rank": 1}, id=f"{oid}-{eps}")


def disjoint_mixture(seed: int, m: int = 40, N: int = 36, r: int = 5) -> np.ndarray:
    """A row-stochastic m x N matrix of rank r: every row a convex mixture of r distributions
    with disjoint supports, each of which is also a row (so every rank below r misses one by
    1/2 or more: no rank below r fits it within t < 1/2)."""
    rng = np.random.default_rng(seed)
    blocks = np.array_split(np.arange(N), r)
    P = np.zeros((r, N))
    for j, b in enumerate(blocks):
        P[j, b] = rng.dirichlet(np.ones(len(b)))
    W = rng.dirichlet(np.full(r, 0.3), size=m)
    W[:r] = np.eye(r)
    return W @ P
