"""page(): slices and next offsets that walk a composed list exactly once."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from hopline.layers.routing.paging import page


@settings(max_examples=300)
@given(st.lists(st.integers(), max_size=60), st.integers(1, 25))
def test_walking_the_pages_yields_every_item_once(items, size):
    seen, offset, pages = [], 0, 0
    while True:
        chunk, offset = page(items, offset, size)
        seen += chunk
        pages += 1
        assert len(chunk) <= size
        if offset is None:
            break
        assert chunk  # a page that promises more is never empty
    assert seen == items
    assert pages == max(1, -(-len(items) // size))


def test_examples():
    assert page([1, 2, 3], 0, 2) == ([1, 2], 2)
    assert page([1, 2, 3], 2, 2) == ([3], None)
    assert page([1, 2], 0, 2) == ([1, 2], None)  # exactly full: no further page
    assert page([], 0, 5) == ([], None)
    assert page([1, 2], 7, 5) == ([], None)  # list shrank between pages
    assert page((1, 2, 3), 1, 1) == ([2], 2)


@pytest.mark.parametrize(("offset", "size"), [(-1, 5), (0, 0), (0, -3)])
def test_caller_bugs_raise(offset, size):
    with pytest.raises(ValueError):
        page([1], offset, size)
    with pytest.raises(TypeError):
        page([1], 0.5, 1)  # type: ignore[arg-type]
