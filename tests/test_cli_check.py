"""The ``check`` command: exit codes, JSON output, parallel runs, input errors."""

from __future__ import annotations

import json
import shutil

import pytest

from softrank.cli import main

from .storefactory import build_store


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_check_reports_proved_and_does_not_hold(tmp_path, capsys):
    expected = build_store(tmp_path / "s", n_ops=2)
    code, out, _ = run_cli(capsys, "check", str(tmp_path / "s"), "--json")
    assert code == 1  # half the upper inequalities are false on purpose
    doc = json.loads(out)
    recs = {r["bracket"]: r for r in doc["records"]}
    assert set(recs) == set(expected)
    for bid, exp in expected.items():
        r = recs[bid]
        # a witness that misses eps proves nothing about r_eps (the lower end is 1 < k):
        # its claim is not refuted, only its inequality does not hold
        assert r["upper_result"] == ("proved" if exp["upper_holds"] else "does_not_hold")
        assert r["upper_outcome"] == ("confirmed" if exp["upper_holds"] else "refuted")
        assert r["upper"] == (exp["rank"] if exp["upper_holds"] else exp["full_rank"])
        assert r["lower_result"] == "proved" and r["lower"] == 1
        assert r["lower_outcome"] == "confirmed"
    assert doc["summary"]["upper_results"] == {"proved": 2, "does_not_hold": 2}
    assert doc["summary"]["upper"] == {"confirmed": 2, "refuted": 2}  # deprecated alias


def test_check_all_true_exits_zero_and_text_lines(tmp_path, capsys):
    build_store(tmp_path / "s", n_ops=2)
    p = tmp_path / "s" / "brackets.jsonl"
    p.write_text("".join(x + "\n" for x in p.read_text().splitlines() if '"op0-t"' in x
                         or '"op1-t"' in x))
    code, out, _ = run_cli(capsys, "check", str(tmp_path / "s"))
    assert code == 0
    # default: summary only, one line per record only with -v
    assert "checked 2 stored brackets" in out and "every claim proved" in out
    assert "op0-t" not in out
    code, out, _ = run_cli(capsys, "check", str(tmp_path / "s"), "-v")
    assert code == 0 and "OUTCOME:" in out
    assert sum("proved" in line and "op" in line for line in out.splitlines()) == 2
    code, out, _ = run_cli(capsys, "check", str(tmp_path / "s"), "-q")
    assert code == 0 and "op0-t" not in out


def test_quiet_and_verbose_exclude_each_other(tmp_path, capsys):
    build_store(tmp_path / "s", n_ops=1)
    with pytest.raises(SystemExit) as exc:
        run_cli(capsys, "check", str(tmp_path / "s"), "-q", "-v")
    assert exc.value.code == 2


def test_parallel_matches_serial(tmp_path, capsys):
    build_store(tmp_path / "s", n_ops=3)
    _, out1, _ = run_cli(capsys, "check", str(tmp_path / "s"), "--json")
    _, out2, _ = run_cli(capsys, "check", str(tmp_path / "s"), "--json", "--jobs", "2")
    assert json.loads(out1)["records"] == json.loads(out2)["records"]


@pytest.mark.parametrize("tier", ["arb", "exact"])
def test_forced_tier_agrees(tmp_path, capsys, tier):
    build_store(tmp_path / "s", n_ops=1)
    _, out1, _ = run_cli(capsys, "check", str(tmp_path / "s"), "--json")
    _, out2, _ = run_cli(capsys, "check", str(tmp_path / "s"), "--json", "--tier", tier)
    a, b = json.loads(out1)["records"], json.loads(out2)["records"]
    assert [r["upper_outcome"] for r in a] == [r["upper_outcome"] for r in b]
    assert all(r["upper_check"]["tier"] == tier for r in b)


def test_tampered_array_is_input_error(tmp_path, capsys):
    build_store(tmp_path / "s", n_ops=1)
    f = next((tmp_path / "s" / "arrays").glob("op0-t.npz"))
    f.write_bytes(f.read_bytes()[:-3])
    code, out, err = run_cli(capsys, "check", str(tmp_path / "s"))
    assert code == 2
    assert "op0-t.npz" in err and "sha256" in err


def test_rank_claim_mismatch_is_input_error(tmp_path, capsys):
    build_store(tmp_path / "s", n_ops=1)
    p = tmp_path / "s" / "brackets.jsonl"
    p.write_text(p.read_text().replace('"rank": 5', '"rank": 3', 1))
    code, _, err = run_cli(capsys, "check", str(tmp_path / "s"))
    assert code == 2 and "rank" in err and ".npz" in err


def test_usage_errors(tmp_path, capsys):
    with pytest.raises(SystemExit) as ei:
        main(["check"])
    assert ei.value.code == 2
    with pytest.raises(SystemExit) as ei:
        main(["--help"])
    assert ei.value.code == 0
    code, _, err = run_cli(capsys, "check", str(tmp_path / "nowhere"))
    assert code == 2 and "nowhere" in err


def test_store_copy_is_independent_of_location(tmp_path, capsys):
    build_store(tmp_path / "s", n_ops=1)
    shutil.copytree(tmp_path / "s", tmp_path / "t")
    code, _, _ = run_cli(capsys, "check", str(tmp_path / "t"), "--quiet")
    assert code == 1


def test_chi_changed_outcomes_are_counted(tmp_path, capsys):
    """A float32-stored softmax with logits: a witness within eps of A_hat but not of the
    operator of record does not hold, and the record says chi changed that outcome."""
    import numpy as np

    from softrank.certify import exact_error, operator_slack
    from softrank.witnesses import Store

    from .helpers import softmax_rows

    rng = np.random.default_rng(3)
    logits = rng.normal(size=(6, 6))
    A = softmax_rows(logits).astype(np.float32)
    U, V = np.zeros((6, 0)), np.zeros((0, 6))  # B = 0: error = ||A_hat||_row1
    err = exact_error(A.astype(np.float64), U, V)
    chi = operator_slack({"A": A, "logits": logits}).chi
    assert chi > 0
    with Store.create(tmp_path / "s") as st:
        oid = st.add_operator(A, family="f", logits=logits)
        st.add_bracket(oid, err + chi / 4, {"kind": "factors", "rank": 0, "U": U, "V": V},
                       id="b0")
    code, out, _ = run_cli(capsys, "check", str(tmp_path / "s"), "--json")
    rec = json.loads(out)["records"][0]
    assert code == 1 and rec["upper_result"] == "does_not_hold"
    assert rec["chi_changed"] == ["upper"]
    assert json.loads(out)["summary"]["chi_changed"] == 1


@pytest.mark.parametrize("damage,needle", [
    ("pickle", "pickle"),
    ("eps0", "eps"),
    ("nan", "NaN"),
])
def test_bad_store_inputs_exit_2_naming_file_and_field(tmp_path, capsys, damage, needle):
    import pickle

    import numpy as np

    build_store(tmp_path / "s", n_ops=1)
    root = tmp_path / "s"
    if damage == "pickle":
        f = root / "arrays" / "op0-t.npz"
        f.write_bytes(pickle.dumps({"upper.U": np.eye(2)}))
        _fix_sha(root / "brackets.jsonl", "op0-t", f)
    elif damage == "eps0":
        p = root / "brackets.jsonl"
        recs = [json.loads(x) for x in p.read_text().splitlines()]
        recs[0]["eps"] = "0"
        p.write_text("".join(json.dumps(r) + "\n" for r in recs))
    else:
        f = root / "arrays" / "op0-t.npz"
        with np.load(f) as z:
            arrs = {k: z[k] for k in z.files}
        arrs["upper.U"][0, 0] = np.nan
        np.savez(f, **arrs)
        _fix_sha(root / "brackets.jsonl", "op0-t", f)
    code, _, err = run_cli(capsys, "check", str(root))
    assert code == 2
    assert needle in err and ("brackets.jsonl" in err or "op0-t.npz" in err)


def _fix_sha(jsonl, bid, f):
    import hashlib

    recs = [json.loads(x) for x in jsonl.read_text().splitlines()]
    for r in recs:
        if r["id"] == bid:
            r["sha256"] = hashlib.sha256(f.read_bytes()).hexdigest()
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in recs))


def test_a_store_with_nothing_to_check_exits_1(tmp_path, capsys):
    """Exit 0 says every claim was proved; a store with no brackets (all of them deleted,
    say) has no claim, so it is exit 1 and says why, in text and JSON alike."""
    from softrank.witnesses import Store

    Store.create(tmp_path / "empty").close()
    code, out, err = run_cli(capsys, "check", str(tmp_path / "empty"))
    assert code == 1 and "nothing was checked" in err
    assert "(exit 1)" in out and "every claim proved" not in out
    code, out, err = run_cli(capsys, "check", str(tmp_path / "empty"), "--json")
    assert code == 1 and json.loads(out)["records"] == [] and "nothing was checked" in err
    import numpy as np

    with Store.create(tmp_path / "one") as st:  # one true claim: exit 0
        oid = st.add_operator(np.eye(3), family="f")
        st.add_bracket(oid, "1/4", {"kind": "factors", "rank": 3, "U": np.eye(3),
                                    "V": np.eye(3)})
    assert run_cli(capsys, "check", str(tmp_path / "one"))[0] == 0


def test_a_records_checks_share_one_meter(tmp_path, capsys, monkeypatch):
    """The comparison at chi = 0 (and a check at the tight chi) spend what the record's first
    check left: a review had each run under a fresh limit, three limits for one record."""
    import numpy as np

    from softrank import recheck
    from softrank.certify import exact_error, operator_slack
    from softrank.certify.numerics import workbound
    from softrank.witnesses import Store

    from .helpers import softmax_rows

    rng = np.random.default_rng(3)
    logits = rng.normal(size=(6, 6))
    A = softmax_rows(logits).astype(np.float32)
    U, V = np.zeros((6, 0)), np.zeros((0, 6))
    err = exact_error(A.astype(np.float64), U, V)
    chi = operator_slack({"A": A, "logits": logits}).chi
    with Store.create(tmp_path / "s") as st:
        oid = st.add_operator(A, family="f", logits=logits)
        st.add_bracket(oid, err + chi / 4, {"kind": "factors", "rank": 0, "U": U, "V": V},
                       id="b0")
    seen = []
    real = recheck.certify.check_bracket

    def spy(*a, **k):
        seen.append((workbound._METER.get(), k.get("max_work")))
        return real(*a, **k)

    monkeypatch.setattr(recheck.certify, "check_bracket", spy)
    code, out, _ = run_cli(capsys, "check", str(tmp_path / "s"), "--json", "--max-work",
                           "10000000000")
    assert code == 1 and json.loads(out)["records"][0]["chi_changed"] == ["upper"]
    assert len(seen) >= 2  # the check at chi and the comparison at chi = 0
    meter = seen[0][0]
    assert meter is not None and meter.limit == 10**10
    assert all(m is meter and w is None for m, w in seen)
