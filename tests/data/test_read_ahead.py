"""``data.read_ahead``: items made in a background thread, in order, a bounded number ahead."""
from __future__ import annotations

import threading
import time

import pytest

from coordinator.data import read_ahead


def test_items_come_in_order_made_in_one_other_thread():
    made_in = []

    def items():
        for i in range(20):
            made_in.append(threading.get_ident())
            yield i

    assert list(read_ahead(items(), 3)) == list(range(20))
    assert len(set(made_in)) == 1 and made_in[0] != threading.get_ident()


def test_at_most_depth_items_are_made_ahead_of_the_one_in_hand():
    made = []

    def items():
        for i in range(10):
            made.append(i)
            yield i

    for i in read_ahead(items(), 2):
        time.sleep(0.02)  # time for the thread to run ahead as far as it may
        assert len(made) <= i + 1 + 2


def test_an_error_comes_where_its_item_would_have():
    def items():
        yield 1
        yield 2
        raise ValueError("bad line 3")

    got = []
    with pytest.raises(ValueError, match="bad line 3"):
        for item in read_ahead(items(), 2):
            got.append(item)
    assert got == [1, 2]


def test_stopping_early_closes_the_items_and_leaves_no_thread():
    closed = []

    def items():
        try:
            yield from range(100)
        finally:
            closed.append(True)

    before = threading.active_count()
    ahead = read_ahead(items(), 2)
    assert next(ahead) == 0
    ahead.close()
    assert closed == [True]
    assert threading.active_count() == before
