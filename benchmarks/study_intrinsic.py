"""Intrinsic geometry of the 72 MiniLM heads: validated tau, kappa, Gamma and the theorem's
profile against validated rank brackets (needs the [models] extra).

Usage (about 12 minutes per sequence length on one core; resumable):

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/study_intrinsic.py --tokens 64 128 \
        --out /tmp/intrinsic-study --results examples/intrinsic

For each sequence length T the script

1. takes a store with validated rank brackets at eps = 0.25: for T = 64 a copy of the shipped
   example store ``examples/minilm``; for other T it runs ``produce`` (alternating l1 and every
   built-in lower producer) on text 0 of ``examples/minilm_texts.txt``;
2. runs the untrusted intrinsic producers on every head for r = 1, 2, 4, 8 and r = rank C = d_head
   (= 32; T_32 = C, so tau = 0 up to rounding and the profile applies at every eps), with a
   gauge-search budget of ``--budget`` seconds per (head, r) (twice that at r = 32), and stores
   the witnesses in the store's ``intrinsic.jsonl``;
3. checks every record with the kernel (``softrank.commands._intrinsic_check``) and the native size
   Gamma = rad(Q) rad(K) (the scale 1/sqrt(d_head) folded into Q, so Q K^T are the logits)
   from the model's own queries and keys;
4. writes ``study.md`` (tables), ``study.json`` (every number) and ``figure_kappa_rank.png``.

Intrinsic score of a head = the logarithm of the profile at r = rank C and eps = 0.25, i.e.
(r/2) log(1 + kappa(C) / eps^2), taken at the geometric midpoint of its validated interval.
Spearman correlations with the validated rank ends L and U come with percentile bootstrap
intervals over heads (2000 resamples).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
TEXTS = ROOT / "examples" / "minilm_texts.txt"
LOWERS = ["nonzero", "frobenius_tail", "pinv_decoder", "submatrix", "keyset"]
EPS = Fraction(1, 4)


def capture_qk(tokens: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Returns {"t0.L<l>.H<h>": (Q / sqrt(d_head), K)} for text 0 (float64 from the model's
    float32 projections, exactly as ``witnesses.models.Capture`` computes the logits)."""
    import torch

    from softrank.witnesses.models import Capture, read_texts

    cap = Capture("minilm")
    text = read_texts(TEXTS)[0]
    enc = cap.tokenizer(text, truncation=True, max_length=tokens, return_tensors="pt")
    T = int(enc["input_ids"].shape[1])
    qk: dict[tuple[int, str], np.ndarray] = {}
    hooks = []
    for li in range(cap.n_layers):
        sa = cap._self_attention(li)
        for part in ("query", "key"):
            def hook(_m, _i, out, li=li, part=part):
                qk[(li, part)] = out.detach().to(torch.float64).numpy()[0]
            hooks.append(getattr(sa, part).register_forward_hook(hook))
    try:
        with torch.no_grad():
            cap.model(**enc)
    finally:
        for h in hooks:
            h.remove()
    scale = 1.0 / np.sqrt(cap.d_head)
    out = {}
    for li in range(cap.n_layers):
        Q = qk[(li, "query")].reshape(T, cap.n_heads, cap.d_head)
        K = qk[(li, "key")].reshape(T, cap.n_heads, cap.d_head)
        for hi in range(cap.n_heads):
            out[f"t0.L{li}.H{hi}"] = (Q[:, hi, :] * scale, K[:, hi, :])
    return out


def bracket_store(out: Path, tokens: int, producers: list[str]) -> Path:
    """Returns a store with rank brackets at eps = 0.25 for the 72 heads of text 0."""
    from softrank.cli import main as cli_main

    store = out / f"T{tokens}"
    if tokens == 64:
        if not (store / "store.json").is_file():
            shutil.copytree(ROOT / "examples" / "minilm", store)
        return store
    rc = cli_main(["produce", str(store), "--model", "minilm", "--texts", str(TEXTS),
                   "--text-index", "0", "--tokens", str(tokens), "--eps", "0.25",
                   "--producers", *producers, "--quiet"])
    if rc not in (0, 1):
        raise SystemExit(f"produce failed with exit code {rc}")
    return store


def drop_ranks(store: Path, ranks: list[int]) -> None:
    """Removes the rank records of ``ranks`` (and the cached results) so they are redone."""
    from softrank.witnesses.intrinsic_store import INTRINSIC_FILE

    path = store / INTRINSIC_FILE
    if path.is_file():
        keep = [ln for ln in path.read_text().splitlines()
                if json.loads(ln).get("rank") not in ranks]
        path.write_text("".join(ln + "\n" for ln in keep))
    (store / "intrinsic_results.json").unlink(missing_ok=True)


def produce_witnesses(store: Path, ranks: list[int], budget: float) -> None:
    """Adds the intrinsic rank records missing from ``store`` (resumable)."""
    from softrank.witnesses import open_store
    from softrank.witnesses.intrinsic_store import IntrinsicWriter
    from softrank.witnesses.producers import intrinsic as P

    reader = open_store(store)
    with IntrinsicWriter(reader) as w:
        have = w.ids
        for k, op in enumerate(reader.operators):
            todo = [r for r in ranks if f"{op.id}.r{r}" not in have]
            if not todo:
                continue
            arrs = op.load()
            C = P.interaction_float(arrs["A"], arrs.get("logits"))
            t0 = time.monotonic()
            for r in todo:
                rw = P.rank_witness(C, r, budget=budget * (2 if r > 8 else 1))
                w.add(op.id, "rank", rw.arrays, rank=r, eps=(EPS,), claims=rw.claims,
                      producer={"name": "intrinsic-v1", "budget_seconds": budget})
            w.flush()
            print(f"  [{k + 1}/{len(reader.operators)}] {op.id}: {time.monotonic() - t0:.1f}s",
                  file=sys.stderr, flush=True)


def _check_ops(job: tuple[str, list[str]]) -> list[dict[str, Any]]:
    from softrank.commands._intrinsic_check import _eps_of, _Operators, check_record
    from softrank.witnesses import open_store
    from softrank.witnesses.intrinsic_store import read_intrinsic

    store, op_ids = job
    reader = open_store(store)
    ops, eps = _Operators(reader), _eps_of(reader)
    recs = [r for r in read_intrinsic(reader) if r.operator in set(op_ids)]
    return [check_record(r, ops, eps.get(r.operator, [])) for r in recs]


def check_witnesses(store: Path, jobs: int = 1) -> list[dict[str, Any]]:
    """Returns the kernel's results for every intrinsic record (cached in the store folder)."""
    from concurrent.futures import ProcessPoolExecutor

    from softrank.witnesses import open_store

    cache = store / "intrinsic_results.json"
    if cache.is_file():
        return json.loads(cache.read_text())
    op_ids = [o.id for o in open_store(store).operators]
    chunks = [(str(store), op_ids[i::jobs]) for i in range(jobs)]
    if jobs == 1:
        res = _check_ops(chunks[0])
    else:
        with ProcessPoolExecutor(max_workers=jobs) as ex:
            res = [r for part in ex.map(_check_ops, chunks) for r in part]
    errs = [r for r in res if "error" in r]
    if errs:
        raise SystemExit(f"input errors: {errs[:3]}")
    cache.write_text(json.dumps(res))
    return res


def gamma_per_head(store: Path, tokens: int) -> dict[str, dict[str, Any]]:
    """Returns per operator id the kernel's Gamma bracket and the max |Q K^T - logits|."""
    from softrank.certify import intrinsic as K
    from softrank.witnesses import open_store
    from softrank.witnesses.producers import intrinsic as P

    cache = store / "gamma_results.json"
    if cache.is_file():
        return json.loads(cache.read_text())
    qk = capture_qk(tokens)
    out = {}
    for op in open_store(store).operators:
        key = op.id.split(".", 1)[1].rsplit(".", 1)[0]  # minilm.t0.L3.H7.T64 -> t0.L3.H7
        Q, Kk = qk[key]
        logits = op.load()["logits"]
        nw = P.native_witness(Q, Kk)
        g = K.native_size(Q, Kk, 1, centre_q=nw["centre_q"], weights_q=nw["weights_q"],
                          centre_k=nw["centre_k"], weights_k=nw["weights_k"])
        out[op.id] = {"Gamma": g.to_json(),
                      "qk_vs_logits": float(np.abs(Q @ Kk.T - logits).max())}
    cache.write_text(json.dumps(out))
    return out


def validated(store: Path) -> dict[str, tuple[int, int]]:
    """Returns per operator the validated bracket (L, U) at eps = 0.25."""
    from quality_minilm import validated_brackets

    cache = store / "validated_brackets.json"
    if cache.is_file():
        rows = json.loads(cache.read_text())
    else:
        rows = validated_brackets(store)
        cache.write_text(json.dumps(rows))
    return {r["operator"]: (int(r["L"]), int(r["U"])) for r in rows
            if Fraction(r["eps"]) == EPS}


def spearman_ci(x: np.ndarray, y: np.ndarray, boot: int, seed: int = 0
                ) -> tuple[float, float, float]:
    from scipy.stats import spearmanr

    rho = float(spearmanr(x, y).statistic)
    rng = np.random.default_rng(seed)
    vals = []
    for _ in range(boot):
        idx = rng.integers(0, len(x), len(x))
        v = spearmanr(x[idx], y[idx]).statistic
        if np.isfinite(v):
            vals.append(v)
    lo, hi = np.percentile(vals, [2.5, 97.5])
    return rho, float(lo), float(hi)


def _q(s: str | None) -> float:
    return float("nan") if s is None else float(Fraction(s))


def analyse(tokens: int, res: list[dict[str, Any]], gam: dict[str, Any],
            brackets: dict[str, tuple[int, int]], rC: int, boot: int) -> dict[str, Any]:
    by = {(r["operator"], r["rank"]): r for r in res if r["kind"] == "rank"}
    ops = sorted({r["operator"] for r in res})
    ranks = sorted({r["rank"] for r in res if r["kind"] == "rank"})
    summary: dict[str, Any] = {"tokens": tokens, "heads": len(ops), "kappa_ratio": {},
                               "tau_ratio_max": {}, "seconds_check": {}}
    for r in ranks:
        ratios = [_q(by[(o, r)]["kappa"]["hi"]) / _q(by[(o, r)]["kappa"]["lo"]) for o in ops]
        taus = [by[(o, r)]["tau"] for o in ops]
        tr = [_q(t["hi"]) / _q(t["lo"]) for t in taus if _q(t["lo"]) > 1e-12]
        summary["kappa_ratio"][r] = {"median": float(np.median(ratios)),
                                     "max": float(np.max(ratios))}
        summary["tau_ratio_max"][r] = float(max(tr)) if tr else None
        summary["seconds_check"][r] = float(np.median([by[(o, r)]["seconds"] for o in ops]))
    heads = []
    for o in ops:
        rec = by[(o, rC)]
        prof = next(p for p in rec["profiles"] if Fraction(p["eps"]) == EPS)
        lp = prof["log_profile"] if prof["status"] == "applicable" else None
        g = gam[o]["Gamma"]
        k = rec["kappa"]
        L, U = brackets[o]
        heads.append({
            "operator": o, "L": L, "U": U,
            "kappa_C": [_q(k["lo"]), _q(k["hi"])],
            "tau_C_hi": _q(rec["tau"]["hi"]),
            "score": None if lp is None else [_q(lp["lo"]), _q(lp["hi"])],
            "Gamma": [_q(g["lo"]), _q(g["hi"])],
            "Gamma_over_kappa": [_q(g["lo"]) / _q(k["hi"]), _q(g["hi"]) / _q(k["lo"])],
            "kappa_r": {r: [_q(by[(o, r)]["kappa"]["lo"]), _q(by[(o, r)]["kappa"]["hi"])]
                        for r in ranks},
            "qk_vs_logits": gam[o]["qk_vs_logits"],
        })
    ok = [h for h in heads if h["score"] is not None]
    s = np.array([np.sqrt(h["score"][0] * h["score"][1]) for h in ok])
    for end in ("L", "U"):
        rho, lo, hi = spearman_ci(s, np.array([h[end] for h in ok], dtype=float), boot)
        summary[f"spearman_{end}"] = {"rho": rho, "ci95": [lo, hi], "heads": len(ok)}
    gk = np.array([np.sqrt(h["Gamma_over_kappa"][0] * h["Gamma_over_kappa"][1])
                   for h in heads])
    summary["Gamma_over_kappa"] = {"median": float(np.median(gk)), "min": float(gk.min()),
                                   "max": float(gk.max()),
                                   "proved_min_lower_end": min(h["Gamma_over_kappa"][0]
                                                               for h in heads)}
    summary["rank_C"] = rC
    return {"summary": summary, "heads": heads}


def grid_family_points(eps: float = 0.25) -> list[tuple[int, int, float, int]]:
    """(r, L, kappa, r_eps) of the grid family: kappa(C) = s r (L-1)^2 / 2 with
    s = log(8 r / (1 - eps)) and r_eps = L^r (both proved exactly by exact/grid.py)."""
    pts = []
    for r, Ls in ((2, (3, 5, 8, 12, 20)), (3, (3,))):
        s = np.log(8 * r / (1 - eps))
        pts += [(r, L, float(s * r * (L - 1) ** 2 / 2), L ** r) for L in Ls]
    return pts


def write_outputs(results: Path, studies: list[dict[str, Any]]) -> None:
    results.mkdir(parents=True, exist_ok=True)
    (results / "study.json").write_text(json.dumps(studies, indent=1, default=str) + "\n")
    lines = ["# Intrinsic geometry of the MiniLM heads (text 0, all 72 heads)", "",
             "Produced by `benchmarks/study_intrinsic.py`; every interval below is a validated",
             "bracket from the kernel (`certify.intrinsic`), every rank bracket a validated",
             "bracket at eps = 1/4.  Floats are rounded for reading only.", "",
             "## kappa bracket quality (upper / lower)", "",
             "| T | r | median kappa hi/lo | max kappa hi/lo | max tau hi/lo - 1 (tau > 1e-12) "
             "| median check s |", "|---|---|---|---|---|---|"]
    for st in studies:
        s = st["summary"]
        for r, v in s["kappa_ratio"].items():
            t = s["tau_ratio_max"][r]
            lines.append(f"| {s['tokens']} | {r} | {v['median']:.6f} | {v['max']:.6f} | "
                         f"{'-' if t is None else f'{t - 1:.1e}'} | {s['seconds_check'][r]:.2f} |")
    lines += ["", "## Intrinsic score vs validated rank ends (Spearman, 95% bootstrap)", "",
              "Score = log profile at r = rank C, eps = 1/4: (r/2) log(1 + kappa(C)/eps^2).", "",
              "| T | heads | rho(score, L) [95%] | rho(score, U) [95%] | Gamma/kappa(C) median "
              "[min, max] |", "|---|---|---|---|---|"]
    for st in studies:
        s = st["summary"]
        sl, su, g = s["spearman_L"], s["spearman_U"], s["Gamma_over_kappa"]
        lines.append(f"| {s['tokens']} | {sl['heads']} | {sl['rho']:.3f} [{sl['ci95'][0]:.3f}, "
                     f"{sl['ci95'][1]:.3f}] | {su['rho']:.3f} [{su['ci95'][0]:.3f}, "
                     f"{su['ci95'][1]:.3f}] | {g['median']:.2f} [{g['min']:.2f}, "
                     f"{g['max']:.2f}] |")
    lines += ["", "## Per head (T, head, [L, U], [kappa(C)], [Gamma], [score])", "",
              "| T | head | L | U | kappa(C) | Gamma | score |", "|---|---|---|---|---|---|---|"]
    for st in studies:
        for h in st["heads"]:
            sc = h["score"]
            lines.append(f"| {st['summary']['tokens']} | {h['operator']} | {h['L']} | "
                         f"{h['U']} | [{h['kappa_C'][0]:.4g}, {h['kappa_C'][1]:.4g}] | "
                         f"[{h['Gamma'][0]:.4g}, {h['Gamma'][1]:.4g}] | "
                         f"{'n/a' if sc is None else f'[{sc[0]:.4g}, {sc[1]:.4g}]'} |")
    (results / "study.md").write_text("\n".join(lines) + "\n")
    figure(results / "figure_kappa_rank.png", studies)


def figure(path: Path, studies: list[dict[str, Any]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    for st, mk in zip(studies, ("o", "s", "^"), strict=False):
        hs = st["heads"]
        x = np.array([np.sqrt(h["kappa_C"][0] * h["kappa_C"][1]) for h in hs])
        xe = np.array([[xi - h["kappa_C"][0], h["kappa_C"][1] - xi] for xi, h in zip(x, hs,
                                                                                    strict=True)]).T
        y = np.array([np.sqrt(max(h["L"], 1) * h["U"]) for h in hs])
        ye = np.array([[yi - max(h["L"], 1), h["U"] - yi] for yi, h in zip(y, hs,
                                                                           strict=True)]).T
        ax.errorbar(x, y, xerr=xe, yerr=ye, fmt=mk, ms=3, lw=0.6, alpha=0.7,
                    label=f"MiniLM heads, T = {st['summary']['tokens']}")
    g = grid_family_points()
    ax.plot([p[2] for p in g if p[0] == 2], [p[3] for p in g if p[0] == 2], "k-d", ms=4,
            label="grid family r = 2 (exact)")
    ax.plot([p[2] for p in g if p[0] == 3], [p[3] for p in g if p[0] == 3], "kv", ms=5,
            label="grid family r = 3 (exact)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("kappa(C): validated bracket")
    ax.set_ylabel("approximation rank at eps = 1/4: validated [L, U]")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--out", default="/tmp/intrinsic-study", help="work folder (stores)")
    ap.add_argument("--results", default=str(ROOT / "examples" / "intrinsic"))
    ap.add_argument("--budget", type=float, default=1.0,
                    help="gauge-search seconds per (head, r) (x2 at r = rank C)")
    ap.add_argument("--ranks", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--rank-c", type=int, default=32, help="rank of C (= d_head)")
    ap.add_argument("--boot", type=int, default=2000)
    ap.add_argument("--jobs", type=int, default=1, help="processes for the kernel checks")
    ap.add_argument("--redo-ranks", type=int, nargs="+", default=[],
                    help="drop and regenerate the stored witnesses of these ranks")
    ap.add_argument("--producers", nargs="+", default=["alt_l1", *LOWERS],
                    help="bracket producers for T != 64 (default: alt_l1 and every lower "
                         "producer, about 1.5 min per head at T = 128 on a busy core)")
    ap.add_argument("--stage", choices=["all", "witnesses"], default="all")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    studies = []
    for T in args.tokens:
        t0 = time.monotonic()
        store = bracket_store(out, T, args.producers)
        print(f"T={T}: brackets ready ({time.monotonic() - t0:.0f}s)", file=sys.stderr)
        if args.redo_ranks:
            drop_ranks(store, args.redo_ranks)
        produce_witnesses(store, sorted(set(args.ranks) | {args.rank_c}), args.budget)
        print(f"T={T}: witnesses ready ({time.monotonic() - t0:.0f}s)", file=sys.stderr)
        if args.stage == "witnesses":
            continue
        res = check_witnesses(store, args.jobs)
        gam = gamma_per_head(store, T)
        brk = validated(store)
        print(f"T={T}: checked ({time.monotonic() - t0:.0f}s)", file=sys.stderr)
        studies.append(analyse(T, res, gam, brk, args.rank_c, args.boot))
    if studies:
        write_outputs(Path(args.results), studies)
        for st in studies:
            print(json.dumps(st["summary"], default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
