"""The compiled launch check bound to a ledger (`launch_compiled.bound`): one `Check` per ledger,
kept while its columns and the tables stay the ones bound, bound again when `ledger.cols` is
replaced (the step is then judged by the new columns), and gone with its ledger."""

import gc
import weakref

import numpy as np
import pytest

from slotwarden.model.errors import IllegalStep
from slotwarden.model.vocabulary import NOBODY
from slotwarden.runtime import launch_compiled
from slotwarden.runtime.launch import Tables, check_step
from slotwarden.verification.edges import write_set as edges

pytestmark = pytest.mark.skipif(not launch_compiled.AVAILABLE, reason="the compiled check is not built")

IDS = np.array([1, 2, 3, 5, 0], dtype=np.int64)  # slots 1-3 request 1's, 5 request 7's, a pad row
WHO = np.array([1, 1, 1, 7, NOBODY], dtype=np.int64)


def bound_check(pool):
    return getattr(pool.ledger, launch_compiled.ATTRIBUTE, None)


def test_one_check_per_ledger_kept_across_calls():
    a, b = edges.running(), edges.running()
    check_step(a, IDS, WHO, 0, None, a.fills)
    first = bound_check(a)
    for _ in range(3):
        check_step(a, IDS, WHO, 0, None, a.fills)
        check_step(a, IDS.tolist(), WHO.tolist(), 0, None, a.fills)  # converted first, the same check
    check_step(b, IDS, WHO, 0, None, b.fills)
    assert first is not None and bound_check(a) is first
    assert bound_check(b) is not None and bound_check(b) is not first


def test_replaced_columns_are_bound_again_and_judged():
    pool = edges.running()
    check_step(pool, IDS, WHO, 0, None, pool.fills)
    first = bound_check(pool)
    c = pool.ledger.cols
    owner = c.owner.copy()
    owner[2] = 9  # slot 2 now another request's
    pool.ledger.cols = c._replace(owner=owner)
    with pytest.raises(IllegalStep) as refused:
        check_step(pool, IDS, WHO, 0, None, pool.fills)
    assert (refused.value.row, refused.value.slot_id) == (1, 2)
    assert bound_check(pool) is not first
    pool.ledger.cols = c  # back to the ledger's own columns: the step passes again
    check_step(pool, IDS, WHO, 0, None, pool.fills)


def test_other_tables_are_bound_again():
    pool = edges.running()
    check_step(pool, IDS, WHO, 0, None, pool.fills)
    first, other = bound_check(pool), Tables()
    check_step(pool, IDS, WHO, 0, None, pool.fills, tables=other)
    assert bound_check(pool) is not first


def test_the_check_goes_with_its_ledger():
    pool = edges.running()
    check_step(pool, IDS, WHO, 0, None, pool.fills)
    assert bound_check(pool) is not None
    ledger, owner = weakref.ref(pool.ledger), weakref.ref(pool.ledger.cols.owner)
    del pool
    gc.collect()
    assert ledger() is None and owner() is None  # nothing holds the ledger or the columns it bound
