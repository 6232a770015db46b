"""Intrinsic geometry of the 72 MiniLM heads: validated tau, kappa, Gamma and the theorem's
profile against validated rank brackets (needs the [models] extra).

Usage (the committed run: r = 1, 2, 4, 8 at 1 CPU second per (head, r) and r = rank C at 2;
about 530 CPU seconds at T = 128 for brackets, witnesses and checks, and about a minute of
CPU at T = 64 besides the witnesses):

    HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 .venv/bin/python benchmarks/study_intrinsic.py \
        --tokens 64 128 --ranks 1 2 4 8 --budget 1 --jobs 2 \
        --producers tsvd rw_svd frobenius_tail nonzero pinv_decoder submatrix keyset \
        --out /tmp/intrinsic-study --results examples/intrinsic

(resumable: every stage caches its results in the store folder under ``--out``).

For each sequence length T the script

1. takes a store with validated rank brackets at eps = 0.25: for T = 64 a copy of the shipped
   example store ``examples/minilm``; for other T it runs ``produce`` with ``--producers``
   (default: alternating l1 and every built-in lower producer, slow) on text 0 of
   ``examples/minilm_texts.txt``;
2. runs the untrusted intrinsic producers on every head for the ranks ``--ranks`` and
   r = rank C = d_head (= 32; T_32 = C, so tau = 0 up to rounding and the profile applies at
   every eps), with a CPU budget of ``--budget`` seconds per (head, r) (twice that at r > 8),
   and stores the witnesses in the store's ``intrinsic.jsonl``;
3. checks every intrinsic record with the kernel (``softrank.commands._intrinsic_check``,
   timing each with time.process_time), then runs ``softrank-certify check STORE --json`` on
   the whole store: the validated rank ends L, U come from that run, which must also prove
   every intrinsic record; computes the native size Gamma = rad(Q) rad(K) (the scale
   1/sqrt(d_head) folded into Q, so Q K^T are the logits) from the model's own queries and keys;
4. writes ``study.md`` (tables), ``study.json`` (every number) and ``figure_kappa_rank.png``.

Intrinsic score of a head = the logarithm of the profile at r = rank C and eps = 0.25, i.e.
(r/2) log(1 + kappa(C) / eps^2), as the kernel's interval from the proved kappa(C) and tau
ends.  Spearman correlations with the validated rank ends L and U (score at the geometric
midpoint of its interval) come with percentile bootstrap intervals over heads (2000
resamples).  Profile gap of a head = log(profile) - log(U) and - log(L) in natural-log units:
the theorem says r_eps <= min(p, C_r * profile) with an unknown dimension constant C_r, so the
gap measures how far the profile lies above the validated rank ends up to log C_r.
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

from softrank.numfmt import fixed, float_down, float_up, sci, sig

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
TEXTS = ROOT / "examples" / "minilm_texts.txt"
LOWERS = ["nonzero", "frobenius_tail", "pinv_decoder", "submatrix", "keyset"]
EPS = Fraction(1, 4)


def capture_qk(tokens: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Returns {"t0.L<l>.H<h>": (Q / sqrt(d_head), K)} for text 0: the float64 queries (scale
    folded in) and keys of ``witnesses.models.Capture``, from which it forms the logits."""
    from softrank.witnesses.models import Capture, read_texts

    cap = Capture("minilm")
    text = read_texts(TEXTS)[0]
    out = {}
    for h in cap.capture(text, tokens=tokens):
        if h.Q is None or h.K is None:
            raise SystemExit(f"layer {h.layer} head {h.head}: no Q, K ({h.meta.get('qk')})")
        out[f"t0.L{h.layer}.H{h.head}"] = (h.Q, h.K)
    return out


def bracket_store(out: Path, tokens: int, producers: list[str]) -> Path:
    """Returns a store with rank brackets at eps = 0.25 for the 72 heads of text 0."""
    from softrank.cli import main as cli_main

    store = out / f"T{tokens}"
    if tokens == 64:
        if not (store / "store.json").is_file():
            shutil.copytree(ROOT / "examples" / "minilm", store)
        return store
    done = store / "brackets_done"  # produce finished on this store: do not redo it
    if done.is_file():
        return store
    rc = cli_main(["produce", str(store), "--model", "minilm", "--texts", str(TEXTS),
                   "--text-index", "0", "--tokens", str(tokens), "--eps", "0.25",
                   "--producers", *producers, "--quiet"])
    if rc not in (0, 1):
        raise SystemExit(f"produce failed with exit code {rc}")
    done.write_text(" ".join(producers) + "\n")
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
                b = budget * (2 if r > 8 else 1)
                rw = P.rank_witness(C, r, budget=b)
                w.add(op.id, "rank", rw.arrays, rank=r, eps=(EPS,), claims=rw.claims,
                      producer={"name": "intrinsic-v1", "budget_seconds": b})
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
    out = []
    for r in recs:
        t0 = time.process_time()
        res = check_record(r, ops, eps.get(r.operator, []))
        # CPU seconds of this process (the record's "seconds" is wall-clock)
        res["cpu_seconds"] = round(time.process_time() - t0, 4)
        out.append(res)
    return out


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


def cli_check(store: Path, jobs: int) -> dict[str, Any]:
    """Runs ``softrank-certify check STORE --json`` (every bracket record and every intrinsic
    record of the store) and returns {"exit", "cpu_seconds", "wall_seconds", "doc"} (cached in
    the store folder).  CPU counts this process and its finished worker processes."""
    import contextlib
    import io

    from softrank.cli import main as cli_main

    cache = store / "check_results.json"
    if cache.is_file():
        return json.loads(cache.read_text())
    buf = io.StringIO()
    t0, w0 = os.times(), time.monotonic()
    with contextlib.redirect_stdout(buf):
        rc = cli_main(["check", str(store), "--json", "--jobs", str(jobs)])
    t1 = os.times()
    cpu = (t1.user + t1.system + t1.children_user + t1.children_system
           - t0.user - t0.system - t0.children_user - t0.children_system)
    out = {"exit": rc, "cpu_seconds": round(cpu, 2),
           "wall_seconds": round(time.monotonic() - w0, 2), "doc": json.loads(buf.getvalue())}
    cache.write_text(json.dumps(out))
    return out


def validated(check: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """Returns per operator the validated bracket (L, U) at eps = 0.25 from the kernel's
    results of ``check``: L = the largest proved lower end, U = the smallest proved upper end
    over the store's records (the rule of ``quality_minilm.validated_brackets``)."""
    best: dict[str, list[int]] = {}
    for r in check["doc"]["records"]:
        if "error" in r:
            raise SystemExit(f"input error: {r['error']}")
        if Fraction(r["eps"]) != EPS:
            continue
        cur = best.setdefault(r["operator"], [0, min(r["shape"])])
        cur[1] = min(cur[1], int(r["upper"]))
        if r.get("lower") is not None:
            cur[0] = max(cur[0], int(r["lower"]))
    return {o: (lu[0], lu[1]) for o, lu in best.items()}


def intrinsic_proved(check: dict[str, Any], res: list[dict[str, Any]], rank_c: int
                     ) -> dict[str, Any]:
    """Returns what ``check`` proved of the intrinsic records: counts of records, of input
    errors, of rank records with both kappa ends and both tau ends, of rank-C records whose
    profile at eps = 1/4 is applicable, and
    whether its kappa / log-profile ends equal those of the study's own kernel run ``res``."""
    doc = check["doc"]
    recs = doc.get("intrinsic", [])
    ok = applicable = 0
    for r in recs:
        if "error" in r or r["kind"] != "rank":
            continue
        if all(r[q]["lo"] is not None and r[q]["hi"] is not None for q in ("kappa", "tau")):
            ok += 1
        prof = [p for p in r["profiles"] if Fraction(p["eps"]) == EPS]
        if r["rank"] == rank_c and prof and prof[0]["status"] == "applicable":
            applicable += 1
    mine = {x["id"]: (x["kappa"], x["profiles"]) for x in res if "error" not in x}
    same = all(mine.get(r["id"]) == (r["kappa"], r["profiles"]) for r in recs
               if "error" not in r)
    return {"exit": check["exit"], "records": len(recs),
            "errors": sum("error" in r for r in recs), "rank_records_proved": ok,
            "rank_records": sum(r.get("kind") == "rank" for r in recs),
            "profile_applicable_rank_C": applicable,
            "bracket_records": doc["summary"]["brackets"],
            "bracket_errors": doc["summary"]["errors"],
            "same_as_study_run": same, "cpu_seconds": check["cpu_seconds"],
            "wall_seconds": check["wall_seconds"]}


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


# log(n) for an integer n >= 1 as a float, widened by this absolute margin on each side: a
# float log is within 1 ulp (< 1e-14 for n < 2**40), so [log - m, log + m] contains log n
_LOG_MARGIN = Fraction(1, 10**12)


def _log_encl(n: int) -> tuple[Fraction, Fraction]:
    v = Fraction(float(np.log(n)))
    return v - _LOG_MARGIN, v + _LOG_MARGIN


def _gap(score: tuple[Fraction, Fraction], n: int) -> list[float] | None:
    """Returns [a, b] with a <= score.lo - log n and b >= score.hi - log n (rounded outward),
    or None when n = 0."""
    if n < 1:
        return None
    lo, hi = _log_encl(n)
    return [float_down(score[0] - hi), float_up(score[1] - lo)]


def _stats(v: list[float]) -> dict[str, float]:
    a = np.asarray(v, dtype=float)
    return {"n": len(v), "median": float(np.median(a)), "p90": float(np.percentile(a, 90)),
            "max": float(a.max())}


def producer_cpu(store: Path) -> dict[tuple[str, int], float]:
    """Returns per (operator, rank) the producer's CPU seconds (its ``claims.seconds``:
    time.process_time around ``rank_witness``)."""
    from softrank.witnesses.intrinsic_store import INTRINSIC_FILE

    out = {}
    for ln in (store / INTRINSIC_FILE).read_text().splitlines():
        rec = json.loads(ln)
        if rec.get("kind") == "rank":
            out[(rec["operator"], int(rec["rank"]))] = _q(str(rec["claims"]["seconds"]))
    return out


def producer_budgets(store: Path, r: int) -> str:
    """Returns the distinct CPU budgets (claims.budget) of the stored rank-r records."""
    from softrank.witnesses.intrinsic_store import INTRINSIC_FILE

    recs = [json.loads(ln) for ln in (store / INTRINSIC_FILE).read_text().splitlines()]
    return ", ".join(sorted({str(Fraction(str(x["claims"].get("budget")))) for x in recs
                             if x.get("kind") == "rank" and x.get("rank") == r}))


def analyse(tokens: int, res: list[dict[str, Any]], gam: dict[str, Any],
            brackets: dict[str, tuple[int, int]], rC: int, boot: int,
            cpu_produce: dict[tuple[str, int], float], proved: dict[str, Any]
            ) -> dict[str, Any]:
    """Returns the study of one sequence length: per head the proved kappa(C), score and
    profile brackets at r = rank C, the profile gaps against the validated rank ends, and
    summary rows.  Every float that stands for a proved end is rounded outward from the
    kernel's exact ends (float_down / float_up); medians and correlations are statistics of
    those floats."""
    by = {(r["operator"], r["rank"]): r for r in res if r["kind"] == "rank"}
    ops = sorted({r["operator"] for r in res})
    ranks = sorted({r["rank"] for r in res if r["kind"] == "rank"})
    summary: dict[str, Any] = {"tokens": tokens, "heads": len(ops), "eps": str(EPS),
                               "kappa_ratio": {}, "kappa_ratio_minus_1": {}, "tau_ratio_max": {},
                               "cpu_produce": {}, "cpu_check": {}, "check": proved}
    for r in ranks:
        ratios = [float_up(Fraction(by[(o, r)]["kappa"]["hi"])
                           / Fraction(by[(o, r)]["kappa"]["lo"])) for o in ops]
        taus = [by[(o, r)]["tau"] for o in ops]
        tr = [_q(t["hi"]) / _q(t["lo"]) for t in taus if _q(t["lo"]) > 1e-12]
        summary["kappa_ratio"][r] = _stats(ratios)
        # hi/lo - 1 from the exact ends (rounded up): resolves ratios closer to 1 than 1 ulp
        summary["kappa_ratio_minus_1"][r] = _stats(
            [float_up(Fraction(by[(o, r)]["kappa"]["hi"]) / Fraction(by[(o, r)]["kappa"]["lo"])
                      - 1) for o in ops])
        summary["tau_ratio_max"][r] = float(max(tr)) if tr else None
        summary["cpu_produce"][r] = _stats([cpu_produce[(o, r)] for o in ops])
        summary["cpu_check"][r] = _stats([by[(o, r)]["cpu_seconds"] for o in ops])
    heads = []
    for o in ops:
        rec = by[(o, rC)]
        prof = next(p for p in rec["profiles"] if Fraction(p["eps"]) == EPS)
        g = gam[o]["Gamma"]
        k = rec["kappa"]
        klo, khi = Fraction(k["lo"]), Fraction(k["hi"])
        L, U = brackets[o]
        h: dict[str, Any] = {
            "operator": o, "L": L, "U": U,
            "kappa_C": [float_down(klo), float_up(khi)],
            "kappa_ratio": float_up(khi / klo),
            "kappa_ratio_minus_1": float_up(khi / klo - 1),
            "tau_C_hi": float_up(Fraction(rec["tau"]["hi"])),
            "profile_status": prof["status"],
            "score": None, "profile": None, "gap_U": None, "gap_L": None, "gap_T": None,
            "Gamma": [float_down(Fraction(g["lo"])), float_up(Fraction(g["hi"]))],
            "Gamma_over_kappa": [float_down(Fraction(g["lo"]) / khi),
                                 float_up(Fraction(g["hi"]) / klo)],
            "kappa_r": {r: [float_down(Fraction(by[(o, r)]["kappa"]["lo"])),
                            float_up(Fraction(by[(o, r)]["kappa"]["hi"]))] for r in ranks},
            "cpu_produce": cpu_produce[(o, rC)], "cpu_check": rec["cpu_seconds"],
            "qk_vs_logits": gam[o]["qk_vs_logits"],
        }
        if prof["status"] == "applicable":
            lp = (Fraction(prof["log_profile"]["lo"]), Fraction(prof["log_profile"]["hi"]))
            pp = prof["profile"]
            h["score"] = [float_down(lp[0]), float_up(lp[1])]
            h["profile"] = [float_down(Fraction(pp["lo"])), float_up(Fraction(pp["hi"]))]
            h["gap_U"], h["gap_L"], h["gap_T"] = _gap(lp, U), _gap(lp, L), _gap(lp, tokens)
        heads.append(h)
    ok = [h for h in heads if h["score"] is not None]
    sc = np.array([np.sqrt(h["score"][0] * h["score"][1]) for h in ok])
    for end in ("L", "U"):
        rho, lo, hi = spearman_ci(sc, np.array([h[end] for h in ok], dtype=float), boot)
        summary[f"spearman_{end}"] = {"rho": rho, "ci95": [lo, hi], "heads": len(ok)}
    for key in ("gap_U", "gap_L", "gap_T"):
        vals = [h[key] for h in ok if h[key] is not None]
        summary[key] = {"min_lower_end": min(v[0] for v in vals),
                        "median_lower_end": float(np.median([v[0] for v in vals])),
                        "max_upper_end": max(v[1] for v in vals), "heads": len(vals)}
    summary["score_width"] = _stats([h["score"][1] - h["score"][0] for h in ok])
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


def _iv(x: list[float] | None, digits: int = 4) -> str:
    # display of a proved interval: both ends rounded outward to `digits` significant digits
    if x is None:
        return "n/a"
    return (f"[{sig(Fraction(x[0]), digits, 'down', strip=False, fixed_below=6)}, "
            f"{sig(Fraction(x[1]), digits, 'up', strip=False, fixed_below=6)}]")


def _fx(x: list[float] | None, places: int = 2) -> str:
    # display of a proved interval in fixed point, rounded outward
    if x is None:
        return "n/a"
    return (f"[{fixed(Fraction(x[0]), places, 'down')}, "
            f"{fixed(Fraction(x[1]), places, 'up')}]")


def write_outputs(results: Path, studies: list[dict[str, Any]]) -> None:
    results.mkdir(parents=True, exist_ok=True)
    (results / "study.json").write_text(json.dumps(studies, indent=1, default=str) + "\n")
    rC = studies[0]["summary"]["rank_C"]
    lines = ["# Intrinsic geometry of the MiniLM heads (text 0, all 72 heads)", "",
             "Produced by `benchmarks/study_intrinsic.py`; every interval below is a validated",
             "bracket from the kernel (`certify.intrinsic`), every rank bracket [L, U] a validated",
             "bracket at eps = 1/4 (`softrank-certify check` of the same store).  Intervals are",
             "printed rounded outward from the kernel's exact ends; statistics (median, p90,",
             "Spearman) are of those rounded floats.", "",
             "## Protocol and cost", "",
             "| T | heads | ranks r | producer budget at r = rank C (CPU s) | producer CPU s per "
             "head at r = rank C (median / p90 / max) | kernel CPU s per head at r = rank C "
             "(median / p90 / max) | `check` exit | rank records with both kappa and tau ends "
             "proved / input errors | profile applicable at r = rank C, eps = 1/4 | "
             "bracket records |", "|---|---|---|---|---|---|---|---|---|---|"]
    for st in studies:
        s = st["summary"]
        cp, cc, ck = s["cpu_produce"][rC], s["cpu_check"][rC], s["check"]
        lines.append(f"| {s['tokens']} | {s['heads']} | {', '.join(map(str, s['kappa_ratio']))} "
                     f"| {s.get('budget_rank_C', '?')} | {cp['median']:.2f} / {cp['p90']:.2f} / "
                     f"{cp['max']:.2f} | {cc['median']:.2f} / {cc['p90']:.2f} / {cc['max']:.2f} | "
                     f"{ck['exit']} | {ck['rank_records_proved']} of {ck['rank_records']} / "
                     f"{ck['errors']} | {ck['profile_applicable_rank_C']} | "
                     f"{ck['bracket_records']} ({ck['bracket_errors']} errors) |")
    lines += ["", "`check` exit 0 means every bracket record of the store proved its claims "
              "and no record (bracket or intrinsic) is an input error; an intrinsic rank "
              "record counts as proved when the kernel returned both ends of its kappa and "
              "tau brackets (the profile applies only where tau < eps; at r < rank C it may "
              "not).  Kernel CPU is `time.process_time` "
              "around `check_record` in the study's own pass (the CLI pass gives the same "
              "exact ends: "
              + ", ".join(f"T = {st['summary']['tokens']}: "
                          f"{'yes' if st['summary']['check']['same_as_study_run'] else 'NO'}"
                          for st in studies) + ").", "",
              "Rank brackets [L, U] at eps = 1/4: "
              + "; ".join(f"T = {st['summary']['tokens']}: "
                          + (f"the shipped store `{bp}` (a copy)" if isinstance(bp, str)
                             else f"`produce` on text 0 with producers {', '.join(bp)}")
                          for st in studies
                          for bp in [st["summary"].get("bracket_producers", "?")])
              + ".", "",
              "## kappa bracket quality: hi/lo - 1 of the proved bracket (rounded up)", "",
              "| T | r | median | p90 | max | max tau hi/lo - 1 (tau > 1e-12) |",
              "|---|---|---|---|---|---|"]
    for st in studies:
        s = st["summary"]
        for r, v in s["kappa_ratio_minus_1"].items():
            t = s["tau_ratio_max"][r]
            lines.append(f"| {s['tokens']} | {r} | {sci(Fraction(v['median']), 2, 'up')} | "
                         f"{sci(Fraction(v['p90']), 2, 'up')} | {sci(Fraction(v['max']), 2, 'up')}"
                         f" | {'-' if t is None else f'{t - 1:.1e}'} |")
    lines += ["", "## Intrinsic score vs validated rank ends (Spearman, 95% bootstrap)", "",
              f"Score = log profile at r = rank C = {rC}, eps = 1/4: (r/2) log(1 + kappa(C)/eps^2) "
              "(the kernel's bracket from the proved kappa(C) and tau ends; tau = 0 up to "
              "rounding at r = rank C), taken at the geometric midpoint of its interval.", "",
              "| T | heads | score width (median / max, log units) | rho(score, L) [95%] | "
              "rho(score, U) [95%] | Gamma/kappa(C) median [min, max] |",
              "|---|---|---|---|---|---|"]
    for st in studies:
        s = st["summary"]
        sl, su, g, w = s["spearman_L"], s["spearman_U"], s["Gamma_over_kappa"], s["score_width"]
        lines.append(f"| {s['tokens']} | {sl['heads']} | {w['median']:.2e} / {w['max']:.2e} | "
                     f"{sl['rho']:.3f} [{sl['ci95'][0]:.3f}, {sl['ci95'][1]:.3f}] | "
                     f"{su['rho']:.3f} [{su['ci95'][0]:.3f}, {su['ci95'][1]:.3f}] | "
                     f"{g['median']:.2f} [{g['min']:.2f}, {g['max']:.2f}] |")
    lines += ["", "## Profile gap at r = rank C", "",
              "The theorem gives r_eps <= min(p, C_r * profile) with profile = (1 + kappa(C) / "
              "eps^2)^{r/2} at r = rank C (tau = 0) and a dimension constant C_r that is not "
              "known (no value of C_r is proved or assumed here).  The profile gap of a head is "
              "log(profile) - log(U) (and - log(L)), in natural-log units: how far the profile "
              "lies above the validated rank ends, up to the unknown log C_r (the bound "
              "C_r * profile is above U exactly when gap_U > -log C_r).  gap_T = log(profile) - "
              "log(T) compares with the trivial bound p = T.  Gap intervals come from the proved "
              "score interval and an enclosure of log U (log L, log T), rounded outward.", "",
              "| T | heads | gap_U: min lower end / median lower end / max upper end | "
              "gap_L: same | gap_T: same |", "|---|---|---|---|---|"]
    for st in studies:
        s = st["summary"]
        cells = [f"{fixed(Fraction(s[k]['min_lower_end']), 2, 'down')} / "
                 f"{fixed(Fraction(s[k]['median_lower_end']), 2, 'down')} / "
                 f"{fixed(Fraction(s[k]['max_upper_end']), 2, 'up')}"
                 for k in ("gap_U", "gap_L", "gap_T")]
        lines.append(f"| {s['tokens']} | {s['gap_U']['heads']} | " + " | ".join(cells) + " |")
    lines += ["", f"## Per head at r = rank C = {rC}, eps = 1/4", "",
              "kappa(C) and profile intervals rounded outward to 4 significant digits, score "
              "intervals to 6, hi/lo - 1 rounded up, gaps rounded outward to 2 decimals "
              "(log units).", "",
              "| T | head | L | U | kappa(C) | hi/lo - 1 | score = log profile | profile | "
              "gap_U = log profile - log U | gap_L = log profile - log L | Gamma |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for st in studies:
        for h in st["heads"]:
            lines.append(f"| {st['summary']['tokens']} | {h['operator']} | {h['L']} | {h['U']} | "
                         f"{_iv(h['kappa_C'])} | "
                         f"{sci(Fraction(h['kappa_ratio_minus_1']), 2, 'up')} | "
                         f"{_iv(h['score'], 6)} | {_iv(h['profile'])} | {_fx(h['gap_U'])} | "
                         f"{_fx(h['gap_L'])} | {_iv(h['Gamma'])} |")
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
        chk = cli_check(store, args.jobs)
        brk = validated(chk)
        print(f"T={T}: checked ({time.monotonic() - t0:.0f}s)", file=sys.stderr)
        studies.append(analyse(T, res, gam, brk, args.rank_c, args.boot, producer_cpu(store),
                               intrinsic_proved(chk, res, args.rank_c)))
        studies[-1]["summary"]["budget_rank_C"] = producer_budgets(store, args.rank_c)
        studies[-1]["summary"]["bracket_producers"] = (
            "examples/minilm" if T == 64 else args.producers)
    if studies:
        write_outputs(Path(args.results), studies)
        for st in studies:
            print(json.dumps(st["summary"], default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
