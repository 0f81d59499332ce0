"""The JSON-RPC core: envelope checks, original bytes kept, the error tree."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, strategies as st

from hopline import jsonrpc as j


def test_unmodified_message_forwards_its_original_bytes():
    raw = b'{"jsonrpc": "2.0",  "id": 7, "method": "tools/call", "params": {"x-unknown": [1, 2]}}'
    msg = j.parse(raw)
    assert msg.encode() is raw  # not re-encoded, whitespace and all


def test_replace_drops_the_bytes_and_leaves_the_original_alone():
    msg = j.parse(b'{"jsonrpc":"2.0","id":7,"method":"m"}')
    changed = msg.replace(id=8)
    assert orjson.loads(changed.encode())["id"] == 8
    assert msg.id == 7 and msg.raw is not None


def test_unknown_fields_and_methods_pass_through():
    body = {"jsonrpc": "2.0", "id": "a", "method": "vendor/new-thing", "params": {"_meta": {"x.y/z": 1}}, "extra": True}
    msg = j.parse(orjson.dumps(body))
    assert msg.body == body and msg.is_request()


@pytest.mark.parametrize(
    "raw,kind",
    [
        (b'{"jsonrpc":"2.0","id":1,"method":"m"}', "request"),
        (b'{"jsonrpc":"2.0","method":"m"}', "notification"),
        (b'{"jsonrpc":"2.0","id":1,"result":{}}', "response"),
        (b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}', "response"),
    ],
)
def test_classification(raw, kind):
    msg = j.parse(raw)
    assert {"request": msg.is_request(), "notification": msg.is_notification(), "response": msg.is_response()}[kind]


@pytest.mark.parametrize(
    "raw,code",
    [
        (b"", -32700),
        (b"{", -32700),
        (b"[]", -32600),
        (b'[{"jsonrpc":"2.0","id":1,"method":"m"}]', -32600),
        (b"42", -32600),
        (b'{"jsonrpc":"2.0","id":true,"method":"m"}', -32600),
        (b'{"jsonrpc":"2.0","id":1.0,"method":"m"}', -32600),
        (b'{"jsonrpc":"2.0","id":1,"method":"m","params":[1]}', -32600),
        (b'{"jsonrpc":"2.0","id":1}', -32600),
    ],
)
def test_bad_frames(raw, code):
    with pytest.raises(j.ProtocolError) as info:
        j.parse(raw)
    assert info.value.code == code and info.value.http_status == 400


def test_invalid_request_echoes_a_valid_id():
    with pytest.raises(j.InvalidRequest) as info:
        j.parse(b'{"jsonrpc":"1.0","id":"k","method":"m"}')
    assert info.value.to_response().body["id"] == "k"


def test_error_tree_codes_and_statuses():
    assert (j.MethodNotFound("x").code, j.MethodNotFound("x").http_status) == (-32601, 404)
    assert j.SessionNotFound("x").http_status == 404
    assert j.PayloadTooLarge("x").http_status == 413
    assert j.Forbidden("x").http_status == 403
    unavailable = j.UnavailableError("down", backend="b", reason="backend_closed")
    assert unavailable.http_status == 200 and not (-32768 <= unavailable.code <= -32000)
    assert unavailable.to_error_object() == {"code": -31001, "message": "down", "data": {"backend": "b", "reason": "backend_closed"}}
    assert not (-32768 <= j.BackendTimeout("t").code <= -32000)
    assert isinstance(j.BackendTimeout("t"), j.UnavailableError)
    assert not isinstance(j.UnavailableError("x"), j.ProtocolError)


json_ids = st.one_of(st.integers(min_value=-(2**53), max_value=2**53), st.text(max_size=20))


@given(json_ids, st.dictionaries(st.text(max_size=8), st.integers(min_value=-(2**63), max_value=2**63 - 1) | st.text(max_size=8), max_size=4))
def test_round_trip_keeps_id_type(msg_id, params):
    msg = j.request(msg_id, "m", params)
    again = j.parse(msg.encode())
    assert again.id == msg_id and type(again.id) is type(msg_id) and again.params == params
