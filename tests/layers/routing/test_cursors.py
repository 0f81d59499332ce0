"""CursorCodec: signed, binding-bound, size-limited opaque cursors (mcp-wire.md §9 "Cursors")."""

from __future__ import annotations

import base64

import orjson
import pytest
from hypothesis import given, settings, strategies as st

from hopline.jsonrpc import InvalidParams
from hopline.layers.routing.cursors import MAX_CURSOR, CursorCodec

CODEC = CursorCodec(b"k" * 32)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
states = st.dictionaries(st.text(max_size=10), json_values, max_size=5)
bindings = st.text(max_size=40)


def rejected(cursor, binding="s1", codec=CODEC):
    with pytest.raises(InvalidParams) as info:
        codec.decode(cursor, binding=binding)
    assert info.value.code == -32602 and info.value.message == "Invalid cursor"
    return True


@settings(max_examples=300)
@given(states, bindings)
def test_round_trip(state, binding):
    cursor = CODEC.encode(state, binding=binding)
    assert CODEC.decode(cursor, binding=binding) == state
    assert len(cursor) <= MAX_CURSOR and cursor.isascii()


@settings(max_examples=400)
@given(states, st.data())
def test_any_single_character_change_is_rejected(state, data):
    cursor = CODEC.encode(state, binding="s1")
    i = data.draw(st.integers(0, len(cursor) - 1))
    c = data.draw(st.characters().filter(lambda ch: ch != cursor[i]))
    rejected(cursor[:i] + c + cursor[i + 1:])


@settings(max_examples=200)
@given(states, st.data())
def test_any_single_byte_change_deletion_or_insertion_is_rejected(state, data):
    raw = bytearray(CODEC.encode(state, binding="s1").encode())
    i = data.draw(st.integers(0, len(raw) - 1))
    changed = bytearray(raw)
    changed[i] = data.draw(st.integers(0, 255).filter(lambda b: b != raw[i]))
    rejected(changed.decode("latin-1"))
    rejected((raw[:i] + raw[i + 1:]).decode())
    rejected((raw[:i] + data.draw(st.sampled_from([b"A", b"-", b"_", b".", b"="])) + raw[i:]).decode())


@settings(max_examples=300)
@given(states, bindings, bindings)
def test_bound_to_one_binding_rejected_under_another(state, a, b):
    if a != b:
        rejected(CODEC.encode(state, binding=a), binding=b)


def test_other_secret_or_random_secret_rejects():
    cursor = CODEC.encode({"o": 5}, binding="s1")
    rejected(cursor, codec=CursorCodec(b"other-secret"))
    x, y = CursorCodec(), CursorCodec()
    rejected(x.encode({"o": 1}, binding="s"), binding="s", codec=y)
    assert x.decode(x.encode({"o": 1}, binding="s"), binding="s") == {"o": 1}
    assert "hidden" in repr(x)


@pytest.mark.parametrize("cursor", ["", ".", "abc", "a.b.c", "....", "x" * (MAX_CURSOR + 1), "é.é", "YQ==.YQ==", None, 12, ["a"]])
def test_malformed_is_rejected(cursor):
    rejected(cursor)


def test_oversized_even_if_well_signed_is_rejected_and_encode_refuses_big_state():
    with pytest.raises(ValueError):
        CODEC.encode({"big": "x" * MAX_CURSOR}, binding="s1")
    payload = orjson.dumps({"big": "x" * 3100})
    cursor = f"{_b64(payload)}.{_b64(CODEC._tag(payload, 's1'))}"
    assert len(cursor) > MAX_CURSOR
    rejected(cursor)


@pytest.mark.parametrize("payload", [b"[1, 2]", b"\"o\"", b"not json", b"\xff\xfe", b"null"])
def test_well_signed_but_not_an_object_is_rejected(payload):
    rejected(f"{_b64(payload)}.{_b64(CODEC._tag(payload, 's1'))}")


def test_bad_secret_is_refused():
    for secret in (b"", "text"):
        with pytest.raises(ValueError):
            CursorCodec(secret)  # type: ignore[arg-type]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()
