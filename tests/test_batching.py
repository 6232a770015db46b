"""Grouping operators into Dask tasks (softrank/audit/batching.py): every item exactly once,
in order; the automatic K follows the estimated work, the cap and the tasks-per-worker floor;
the estimates grow with the declared sizes; ``--batch`` is parsed and needs --scheduler."""

from __future__ import annotations

import numpy as np
import pytest

from softrank.audit import batching
from softrank.audit.batching import (
    MAX_BATCH,
    TARGET_TASK_WORK,
    TASKS_PER_WORKER,
    batches,
    chunk_works,
    parse_batch,
    produce_work,
)
from softrank.certify.errors import InputError
from softrank.cli import main
from softrank.recheck import operator_chunks
from softrank.witnesses import Store, open_store

from .helpers import random_attention, tsvd_witness


def _flat(groups: list[range]) -> list[int]:
    return [i for g in groups for i in g]


@pytest.mark.parametrize("batch", [None, 1, 2, 7, 1000])
@pytest.mark.parametrize("workers", [1, 2, 16])
def test_every_item_once_in_order(batch, workers):
    rng = np.random.default_rng(batch or 0)
    for n in (0, 1, 5, 63, 64, 65, 300, 2000):
        works = list(rng.integers(1, 3 * TARGET_TASK_WORK // 10, size=n))
        groups = batches(works, workers, batch)
        assert _flat(groups) == list(range(n))
        assert all(len(g) >= 1 for g in groups)
        if batch is not None:
            assert all(len(g) == batch for g in groups[:-1])
            assert all(len(g) <= batch for g in groups[-1:])


def test_tiny_items_are_capped_and_keep_every_worker_busy():
    tiny = [1_000] * 10_000
    groups = batches(tiny, workers=2)
    assert max(len(g) for g in groups) == MAX_BATCH  # the cap, not the target, binds
    assert len(groups) == -(-10_000 // MAX_BATCH)
    # few items: the cap drops so that there are at least 4 tasks per worker thread
    groups = batches([1_000] * 100, workers=2)
    assert len(groups) >= TASKS_PER_WORKER * 2 and max(len(g) for g in groups) > 1
    assert len(batches([1_000] * 7, workers=2)) == 7  # fewer items than 4 x workers


def test_work_target_bounds_a_task_and_big_items_go_alone():
    works = [TARGET_TASK_WORK // 10] * 1000
    groups = batches(works, workers=2)
    assert all(sum(works[i] for i in g) <= TARGET_TASK_WORK for g in groups)
    assert max(len(g) for g in groups) == 10
    big = [2 * TARGET_TASK_WORK] * 50
    assert [len(g) for g in batches(big, workers=2)] == [1] * 50


def _store(path, sizes, brackets=1):
    rng = np.random.default_rng(3)
    with Store.create(path) as st:
        for o, n in enumerate(sizes):
            A = random_attention(rng, n, n)
            oid = st.add_operator(A, family="f", id=f"op{o:03d}")
            k = max(1, n // 2)
            U, V = tsvd_witness(A, k)
            for b in range(brackets):
                st.add_bracket(oid, ("0.3", "0.4", "0.5")[b],
                               {"kind": "factors", "rank": k, "U": U, "V": V},
                               {"kind": "nonzero", "rank": 1}, id=f"{oid}-{b}")
    return open_store(path)


def test_chunk_work_grows_with_size_and_brackets(tmp_path):
    reader = _store(tmp_path / "s", [4, 16, 64])
    chunks = operator_chunks(reader.brackets)
    w = chunk_works(reader, chunks)
    assert w[0] < w[1] < w[2]
    reader3 = _store(tmp_path / "t", [4, 16, 64], brackets=3)
    w3 = chunk_works(reader3, operator_chunks(reader3.brackets))
    assert all(b > a for a, b in zip(w, w3, strict=True))
    # one of a chunk's brackets costs less than all three
    first = operator_chunks(reader3.brackets)[2][:1]
    assert chunk_works(reader3, [first])[0] < w3[2]


def test_chunk_work_charges_the_slack_of_logits(tmp_path):
    rng = np.random.default_rng(4)
    L = 2 * rng.standard_normal((16, 16))
    A = np.exp(L - L.max(axis=1, keepdims=True))
    A /= A.sum(axis=1, keepdims=True)
    U, V = tsvd_witness(A, 8)
    works = []
    for name, logits in (("plain", None), ("logits", L)):
        with Store.create(tmp_path / name) as st:
            st.add_operator(A, family="f", logits=logits, id="op")
            st.add_bracket("op", "0.3", {"kind": "factors", "rank": 8, "U": U, "V": V}, None)
        reader = open_store(tmp_path / name)
        works.append(chunk_works(reader, operator_chunks(reader.brackets))[0])
    assert works[1] == works[0] + batching.CHECK_SLACK_PER_ENTRY * 16 * 16


def test_produce_work_prices_budgeted_producers_and_scale():
    cheap = produce_work((128, 128), 1, ["tsvd", "nonzero"])
    budgeted = produce_work((128, 128), 1, ["tsvd", "bernstein"])
    assert budgeted > 100 * cheap
    assert produce_work((128, 128), 1, ["tsvd", "my_plugin"]) == budgeted  # unknown: budgeted
    assert produce_work((128, 128), 1, ["bernstein"], scale=0.1) < budgeted / 5
    assert produce_work((128, 128), 0, ["bernstein"]) == batching.PRODUCE_OPERATOR
    assert produce_work((512, 512), 2, ["tsvd"]) > produce_work((128, 128), 2, ["tsvd"])


@pytest.mark.parametrize("text,want", [("auto", None), ("AUTO", None), ("1", 1), ("64", 64)])
def test_parse_batch(text, want):
    assert parse_batch(text) == want


@pytest.mark.parametrize("text", ["0", "-2", "1.5", "x", ""])
def test_parse_batch_refuses(text):
    with pytest.raises(InputError, match="--batch"):
        parse_batch(text)


def test_batch_without_scheduler_is_a_usage_error(tmp_path, capsys):
    _store(tmp_path / "s", [4])
    assert main(["check", str(tmp_path / "s"), "--batch", "4"]) == 2
    assert "--scheduler" in capsys.readouterr().err
    assert main(["check", str(tmp_path / "s"), "--batch", "0", "--quiet"]) == 2
    # auto without a scheduler is the default and changes nothing
    assert main(["check", str(tmp_path / "s"), "--batch", "auto", "--quiet"]) in (0, 1)
