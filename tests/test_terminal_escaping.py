"""One escaping rule for every terminal line that shows store, report or bundle text
(softrank.terminal.shown; replay/replay.py carries a copy): control characters, newlines,
bidi and zero-width marks become visible \\uXXXX text, in check, diff, producers, audit and
the error messages of the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replay import replay as rp
from softrank.audit import escape
from softrank.audit.report import REPORT_FORMAT
from softrank.cli import main
from softrank.commands.producers import format_table
from softrank.terminal import shown

from .storefactory import build_store

EVIL = "x\x1b[2J\x1b]0;title\x07\nresult: every claim proved (exit 0)\r\u202e\u2066\u200b\ufe0f"
RAW = ("\x1b", "\x07", "\r", "\u202e", "\u2066", "\u200b", "\ufe0f")


def _clean(text: str) -> None:
    """No raw control, bidi or invisible character, and no store text starting a line."""
    for c in RAW:
        assert c not in text, repr(c)
    assert "\nresult: every claim proved" not in text


def test_the_replayer_and_the_cli_escape_every_code_point_alike():
    for n in range(0x110000):
        c = chr(n)
        assert rp.shown(c) == shown(c) == escape.visible(c), hex(n)


def test_shown_examples():
    assert shown("op-0.T64 é 中") == "op-0.T64 é 中"
    assert shown(EVIL).startswith("x\\u001b[2J\\u001b]0;title\\u0007\\u000aresult")
    assert shown("a\u00a0b\u3164c") == "a\\u00a0b\\u3164c"  # no-break space, Hangul filler
    assert "\n" not in shown("\n\u2028\u2029\u0085")


def _records(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def _write_records(path: Path, recs: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))


def test_check_escapes_a_hostile_sha256_field(tmp_path, capsys):
    """The first characters of a record's sha256 field are quoted in the mismatch message."""
    store = tmp_path / "store"
    build_store(store, n_ops=1, family=EVIL)
    ops = _records(store / "operators.jsonl")
    ops[0]["sha256"] = EVIL + "0" * 40
    _write_records(store / "operators.jsonl", ops)
    capsys.readouterr()
    assert main(["check", str(store), "-v"]) == 2
    out = capsys.readouterr()
    _clean(out.out + out.err)
    assert "record says x\\u001b[2J\\u001b]" in out.err


def test_check_escapes_hostile_bracket_sha256_and_error_lines(tmp_path, capsys):
    store = tmp_path / "store"
    build_store(store, n_ops=1)
    brs = _records(store / "brackets.jsonl")
    brs[0]["sha256"] = "\x1b[31m" + "f" * 60
    _write_records(store / "brackets.jsonl", brs)
    capsys.readouterr()
    assert main(["check", str(store), "-v"]) == 2
    out = capsys.readouterr()
    _clean(out.out + out.err)
    assert "record says \\u001b[31mfffffff..., file has" in out.err


def _unshown(text: str) -> str:
    """Inverts shown(): the test that the display is one-to-one."""
    out, i = [], 0
    while i < len(text):
        if text[i] != "\\":
            out.append(text[i])
            i += 1
        elif text[i + 1] == "\\":
            out.append("\\")
            i += 2
        else:
            width = 4 if text[i + 1] == "u" else 8
            out.append(chr(int(text[i + 2:i + 2 + width], 16)))
            i += 2 + width
    return "".join(out)


def test_shown_is_one_to_one():
    """A store's literal text "\\u001b" must not show as an escaped ESC (it did: the display
    was not one-to-one), and no mix of backslashes, escapes and hidden characters collides."""
    import random

    assert shown("a\\u001b") == "a\\\\u001b" != shown("a\x1b") == "a\\u001b"
    assert rp.shown("a\\u001b") == shown("a\\u001b")
    alphabet = ["\\", "u", "U", "0", "1", "b", "e", "\x1b", "\n", "\u202e", "\U000e0001", "x"]
    rng = random.Random(7)
    seen: dict[str, str] = {}
    for _ in range(20_000):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randrange(8)))
        d = shown(s)
        assert _unshown(d) == s and seen.setdefault(d, s) == s, repr(s)


def test_an_error_quoting_store_text_escapes_it_once(tmp_path, capsys):
    """Messages quote store text raw and the printer escapes the whole line once: an ESC shows
    as \\u001b and a literal backslash-u as \\\\u, never the one as the other."""
    lines = []
    for bad in ("\x1b", "\\u001b"):
        store = tmp_path / f"store{len(lines)}"
        build_store(store, n_ops=1)
        brs = _records(store / "brackets.jsonl")
        brs[0]["sha256"] = bad + "f" * 60
        _write_records(store / "brackets.jsonl", brs)
        capsys.readouterr()
        assert main(["check", str(store)]) == 2
        err = capsys.readouterr().err
        lines.append(next(x for x in err.splitlines() if "record says" in x))
    assert "record says \\u001bfffff" in lines[0]
    assert "record says \\\\u001bff" in lines[1]


@pytest.mark.parametrize("field", ["id", "operator"])
def test_an_id_with_a_final_newline_is_refused_and_escaped(tmp_path, capsys, field):
    """The id pattern ended in "$", which also matches before a final newline."""
    store = tmp_path / "store"
    build_store(store, n_ops=1)
    name = "operators.jsonl" if field == "id" else "brackets.jsonl"
    recs = _records(store / name)
    recs[0][field] = recs[0][field] + "\n"
    _write_records(store / name, recs)
    capsys.readouterr()
    assert main(["check", str(store)]) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err.count("\n") == 1 and "op0\\\\n'" in out.err  # repr, shown
    assert ("invalid id" if field == "id" else "unknown operator") in out.err


def test_top_level_error_messages_are_escaped(tmp_path, capsys):
    """A path (from a listing, a download) is quoted by the error message."""
    capsys.readouterr()
    assert main(["check", str(tmp_path / EVIL)]) == 2
    out = capsys.readouterr()
    _clean(out.out + out.err)
    assert out.err.count("\n") == 1


def _report(path: Path, op: str, bracket: str, outcome: str, upper: int) -> Path:
    rec = {"bracket": bracket, "operator": op, "family": EVIL, "eps": "1/4",
           "shape": [16, 16], "lower": 2, "upper": upper, "upper_outcome": outcome,
           "lower_outcome": "confirmed"}
    path.write_text(json.dumps({"format": REPORT_FORMAT, "records": [rec]}))
    return path


def test_diff_escapes_hostile_report_ids_and_outcomes(tmp_path, capsys):
    # ids outside the store's rule are refused, and the message naming one is escaped
    old = _report(tmp_path / "old.json", "A" + EVIL, "b" + EVIL, "confirmed", 5)
    capsys.readouterr()
    assert main(["diff", str(old), str(old)]) == 2
    out = capsys.readouterr()
    _clean(out.out + out.err)
    assert out.err.count("\n") == 1 and "records[0].bracket" in out.err
    # outcomes and families are shown, escaped
    old = _report(tmp_path / "old2.json", "A", "b", "confirmed", 5)
    new = _report(tmp_path / "new2.json", "A", "b", "refuted" + EVIL, 6)
    assert main(["diff", str(old), str(new)]) == 1
    out = capsys.readouterr()
    _clean(out.out + out.err)
    lines = out.out.splitlines()
    assert len(lines) == 2 and lines[-1] == "1 of 1 (operator, eps) pairs changed"
    assert "refutedx\\u001b[2J" in lines[0]
    assert EVIL in json.loads(_json_diff(old, new, capsys))["changed"][0]["claims"][0]["new"]


def _json_diff(old: Path, new: Path, capsys) -> str:
    main(["diff", str(old), str(new), "--json"])
    text = capsys.readouterr().out
    assert text.isascii()  # the JSON keeps the exact strings, escaped by JSON itself
    return text


def test_producers_escapes_producer_names():
    table = {EVIL: {"brackets": 1, "proved": 1, "median_rank": 3, "median_ratio": None,
                    "mean_ratio": None, "pairs": 0, "seconds": None}}
    text = format_table(table, "tsvd" + EVIL)
    _clean(text)
    assert text.count("\n") == 1 and "x\\u001b[2J" in text
