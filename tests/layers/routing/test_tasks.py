"""TaskIds: backend-minted task ids made routable and reversible (mcp-wire.md §8, §9 "Tasks")."""

from __future__ import annotations

import string

import pytest
from hypothesis import given, settings, strategies as st

from hopline.layers.routing.tasks import TaskIds

T = TaskIds()
backends = st.text(alphabet=string.ascii_letters + string.digits + "_-", min_size=1, max_size=30)


@settings(max_examples=500)
@given(backends, st.text())
def test_round_trip(backend, task_id):
    exposed = T.expose(backend, task_id)
    assert exposed == f"{backend}:{task_id}"
    assert T.resolve(exposed) == (backend, task_id)


@settings(max_examples=200)
@given(backends, backends, st.text())
def test_two_backends_minting_the_same_id_stay_apart(a, b, task_id):
    if a != b:
        assert T.expose(a, task_id) != T.expose(b, task_id)


def test_examples_and_refusals():
    assert T.resolve("gh:task:42") == ("gh", "task:42")  # split on the first separator
    assert T.resolve("gh:") == ("gh", "")
    for bad in ["no-separator", ":orphan", "", None, 5]:
        assert T.resolve(bad) is None
    for backend in ["", "a:b", None]:
        with pytest.raises(ValueError):
            T.expose(backend, "t")  # type: ignore[arg-type]
    dotted = TaskIds(".")
    assert dotted.resolve(dotted.expose("gh", "a.b")) == ("gh", "a.b")
    with pytest.raises(ValueError):
        TaskIds("")
    assert "':'" in repr(T)
