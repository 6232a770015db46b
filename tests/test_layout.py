"""The package layout a referee walks: no import cycles in the application or the kernel, the
kinds the docs list are the kinds the kernel checks, and proofs_notes/README.md maps every
check to a note, a kernel function, a replay function and tests that exist."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

from softrank.certify.lower import KINDS

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"softrank": ROOT / "softrank", "softrank.certify": ROOT / "certify",
            "softrank.exact": ROOT / "exact", "softrank.witnesses": ROOT / "witnesses"}


def _modules() -> dict[str, Path]:
    mods = {}
    for base, folder in PACKAGES.items():
        for p in folder.rglob("*.py"):
            parts = list(p.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join([base, *parts])] = p
    return mods


def _imports(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    """Every project module ``name`` imports, at the top or inside a function."""
    pkg = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = pkg[:len(pkg) - node.level + 1] if node.level else []
            prefix = ".".join(base + ([node.module] if node.module else []))
            for a in node.names:
                full = f"{prefix}.{a.name}"
                out.add(full if full in mods else prefix)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return {m for m in out if m in mods and m != name}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_module_imports_a_module_that_imports_it_back():
    mods = _modules()
    graph = {n: _imports(n, p, mods) for n, p in mods.items()}
    assert len(graph) > 100  # the walk saw the whole package, not an empty folder
    assert "softrank.recheck" in graph["softrank.audit.executors"]
    assert _cycles(graph) == []


def test_the_walk_finds_a_planted_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_kernel_never_imports_the_application_or_a_producer():
    mods = _modules()
    for name, path in mods.items():
        if name.startswith("softrank.certify"):
            bad = {m for m in _imports(name, path, mods)
                   if not m.startswith("softrank.certify")}
            assert not bad, (name, bad)


def _doc_kinds(text: str) -> set[str]:
    return set(re.findall(r"``([a-z_]+)``", text)) & (set(KINDS) | {"factors"})


def test_docstrings_and_readme_list_the_kernel_kinds():
    import softrank.certify as certify
    import softrank.certify.lower as lower

    doc = certify.__doc__ or ""
    part = doc[doc.index(":func:`check_lower`"):doc.index(":func:`check_bracket`")]
    assert _doc_kinds(part) == set(KINDS)
    assert _doc_kinds(lower.__doc__ or "") >= set(KINDS)
    readme = (ROOT / "README.md").read_text()
    for kind in KINDS:
        assert f"`{kind}`" in readme or kind.replace("_", " ") in readme, kind


# ------------------------------------------------------------------ the notes table

def _table() -> list[dict[str, str]]:
    text = (ROOT / "proofs_notes" / "README.md").read_text()
    lines = [ln for ln in text.splitlines() if ln.startswith("|")]
    def cells_of(line: str) -> list[str]:  # cells split on the unescaped pipes
        return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip()[1:-1])]

    head = [c.lower() for c in cells_of(lines[0])]
    rows = []
    for ln in lines[2:]:
        cells = cells_of(ln)
        rows.append(dict(zip(head, cells, strict=True)))
    return rows


def _names(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def test_notes_table_has_a_row_per_kind_and_quantity():
    checks = {n for r in _table() for n in _names(r["check"])}
    assert set(KINDS) <= checks
    assert {"factors", "chi", "C", "tau", "kappa", "radius", "Gamma", "profile",
            "tightened"} <= checks


@pytest.mark.parametrize("row", _table(), ids=lambda r: _names(r["check"])[0])
def test_notes_table_row_points_at_things_that_exist(row):
    for note in _names(row["note"]):
        assert (ROOT / "proofs_notes" / note).is_file(), note
    for fn in _names(row["kernel"]):
        mod, _, attr = fn.rpartition(".")
        assert callable(getattr(importlib.import_module(mod), attr)), fn
    replay_src = (ROOT / "replay" / "replay.py").read_text()
    for fn in _names(row["replay"]):
        assert re.search(rf"^def {re.escape(fn)}\(", replay_src, re.M), fn
    tests = _names(row["invalid certificates rejected in"])
    assert tests, "every check names a test that tries invalid input against it"
    for t in tests:
        file, _, func = t.partition("::")
        src = (ROOT / file).read_text()
        assert not func or re.search(rf"^def {re.escape(func)}\(", src, re.M), t
