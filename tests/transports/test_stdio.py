"""StdioChild and StreamChannel (src/hopline/transports/stdio.py): broken answers from a real
child get a prompt -31003 for exactly their call, garbage is counted and bounded, and a child
starts with a clean environment (issue 13)."""

from __future__ import annotations

import asyncio
import json
import logging
import sys

import pytest

from hopline import jsonrpc as j
from hopline.layers.transport.channel import ChannelClosed
from hopline.layers.transport.rpc import RpcPeer
from hopline.transports.stdio import SAFE_ENV, StdioChild, StreamChannel, child_environment

pytestmark = pytest.mark.timeout(30)
PY = sys.executable

# A backend that answers method "m" according to params.how: "ok", "utf8" (invalid UTF-8 in a
# string), "json" (not JSON), "noid" (invalid UTF-8 and no id), "flood" (N garbage lines first).
BACKEND = r"""
import json, sys
out = sys.stdout.buffer
for line in sys.stdin.buffer:
    req = json.loads(line)
    if "id" not in req:
        continue
    how, rid = req["params"]["how"], json.dumps(req["id"]).encode()
    if how == "utf8":
        out.write(b'{"jsonrpc":"2.0","id":' + rid + b',"result":{"text":"bad \xff\xfe bytes"}}\n')
    elif how == "json":
        out.write(b'{"jsonrpc":"2.0","id":' + rid + b',"result":{"text":NaN}}\n')
    elif how == "noid":
        out.write(b'{"jsonrpc":"2.0","result":{"text":"\xff"}}\n')
        out.write(b'{"jsonrpc":"2.0","id":' + rid + b',"result":{"text":"after"}}\n')
    elif how == "flood":
        out.write(b"not json\n" * req["params"]["n"])
        out.write(b'{"jsonrpc":"2.0","id":' + rid + b',"result":{"text":"after the flood"}}\n')
    else:
        out.write(b'{"jsonrpc":"2.0","id":' + rid + b',"result":{"text":"fine"}}\n')
    out.flush()
"""


async def backend() -> tuple[StdioChild, RpcPeer]:
    child = await StdioChild.spawn([PY, "-c", BACKEND], name="b")
    return child, RpcPeer(child, name="b")


@pytest.mark.parametrize("how", ["utf8", "json"])
async def test_a_broken_answer_fails_its_call_at_once_and_the_session_goes_on(how):
    child, peer = await backend()
    try:
        answer = await peer.call("m", {"how": how}, timeout=300)  # the default: a hang would hit the test's timeout
        error = answer.body["error"]
        assert error["code"] == j.PeerError.code == -31003
        assert error["message"] == "b: backend sent invalid UTF-8 / malformed JSON in its answer to this request"
        assert error["data"] == {"backend": "b", "reason": "malformed_answer"}
        assert child.garbage_frames == 1
        assert (await peer.call("m", {"how": "ok"}, timeout=300)).body["result"] == {"text": "fine"}
    finally:
        await peer.aclose()


async def test_a_broken_frame_without_a_readable_id_stays_dropped_and_counted():
    child, peer = await backend()
    try:
        answer = await peer.call("m", {"how": "noid"}, timeout=300)
        assert answer.body["result"] == {"text": "after"}
        assert child.garbage_frames == 1
    finally:
        await peer.aclose()


async def test_a_flood_of_garbage_is_counted_with_bounded_log_output(caplog):
    child, peer = await backend()
    try:
        with caplog.at_level(logging.WARNING, logger="hopline.stdio"):
            answer = await peer.call("m", {"how": "flood", "n": 50_000}, timeout=300)
        assert answer.body["result"] == {"text": "after the flood"}
        assert child.garbage_frames == 50_000
        assert 1 <= len([r for r in caplog.records if r.name == "hopline.stdio"]) <= 6
    finally:
        await peer.aclose()


async def test_buffered_garbage_does_not_hold_the_event_loop():
    reader = asyncio.StreamReader()
    reader.feed_data(b"garbage\n" * 1000 + b'{"jsonrpc":"2.0","id":1,"result":{}}\n')
    channel = StreamChannel(reader, None, name="t")
    ran = asyncio.Event()
    other = asyncio.get_running_loop().call_soon(ran.set)
    message = await channel.receive()  # every line is already buffered: nothing to wait for
    assert message.id == 1 and channel.garbage_frames == 1000
    assert ran.is_set()  # yet other work got its turn while the garbage was skipped
    other.cancel()


def test_recover_answer_id_reads_only_a_safe_id():
    r = j.recover_answer_id
    assert r(b'{"jsonrpc":"2.0","id":5,"result":{"t":"a\xff\xfe"}}') == 5
    assert r(b'{"jsonrpc":"2.0","id":"x-1","result":{"t":NaN') == "x-1"  # the strict head form
    assert r(b'{"result":{"t":nope},"jsonrpc":"2.0","id":7}') == 7  # the tail form (Node SDK order)
    assert r(b'{"result":{"a":{"jsonrpc":"2.0","id":3}}') is None  # a nested id is not the answer's
    assert r(b'{"jsonrpc":"2.0","id":5,"method":"x\xff"}') is None  # a request, not an answer
    assert r(b'{"jsonrpc":"2.0","id":1.5,"result":{}}') is None
    assert r(b"\xff\xfe") is None and r(b"garbage") is None


# -- the environment of a child ---------------------------------------------------------------
REPORT = "import json, os, sys; print(json.dumps({'jsonrpc': '2.0', 'method': 'env', 'params': dict(os.environ)}), flush=True)"


async def child_env(**spawn) -> dict[str, str]:
    child = await StdioChild.spawn([PY, "-c", REPORT], name="report", **spawn)
    try:
        return (await asyncio.wait_for(child.receive(), 20)).params
    finally:
        await child.aclose()


async def test_a_child_gets_the_safe_list_and_its_own_env_but_not_other_secrets(monkeypatch):
    monkeypatch.setenv("OTHER_BACKEND_TOKEN", "s3cret-of-another-backend")
    monkeypatch.setenv("LC_TIME", "C")
    monkeypatch.setenv("BASH_FUNC_x%%", "() { echo hi; }")
    seen = await child_env(env={"OWN_TOKEN": "mine"})
    assert "s3cret-of-another-backend" not in json.dumps(seen)
    assert seen["OWN_TOKEN"] == "mine" and seen["LC_TIME"] == "C"
    assert seen["PATH"] == child_environment(None)["PATH"]
    assert "BASH_FUNC_x%%" not in seen


async def test_inherit_env_opts_in_by_name_or_pattern_or_everything(monkeypatch):
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_PROFILE", "dev")
    monkeypatch.setenv("OTHER_BACKEND_TOKEN", "s3cret")
    seen = await child_env(inherit=["AWS_*"], env={"AWS_PROFILE": "own wins"})
    assert seen["AWS_REGION"] == "eu-west-1" and seen["AWS_PROFILE"] == "own wins" and "OTHER_BACKEND_TOKEN" not in seen
    assert (await child_env(inherit=True))["OTHER_BACKEND_TOKEN"] == "s3cret"


def test_child_environment_is_the_safe_list_plus_what_is_asked():
    environ = {"PATH": "/bin", "HOME": "/h", "LC_ALL": "C", "SECRET": "x", "KEEP_1": "a", "KEEP_2": "b", "TERM": "() { :; }"}
    assert child_environment(None, environ=environ) == {"PATH": "/bin", "HOME": "/h", "LC_ALL": "C"}  # TERM: a shell function
    assert child_environment({"SECRET": "own"}, ["KEEP_?"], environ=environ)["SECRET"] == "own"
    assert {"KEEP_1", "KEEP_2"} <= set(child_environment(None, ["KEEP_?"], environ=environ))
    assert child_environment(None, True, environ=environ) == environ
    assert "PATH" in SAFE_ENV


async def test_a_malformed_request_with_a_readable_id_is_answered_on_the_channel():
    # A peer whose request is JSON but no valid JSON-RPC would otherwise wait for it forever
    # (`hopline relay --stdio URL` dropped it, logged); the HTTP listener answers the same 400.
    import os

    loop = asyncio.get_running_loop()
    read_fd, write_fd = os.pipe()
    reader_file = os.fdopen(read_fd, "rb", buffering=0)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, os.fdopen(write_fd, "wb"))
    reader = asyncio.StreamReader()
    reader.feed_data(
        b'{"jsonrpc":"2.0","id":7,"method":5}\n'  # method not a string: answered, id 7
        b'{"jsonrpc":"1.0","id":"a","method":"ping"}\n'  # wrong version: answered, id "a"
        b'{"jsonrpc":"2.0","id":{},"method":"ping"}\n'  # no id to answer: dropped
        b'{"jsonrpc":"1.0","id":8,"result":{}}\n'  # a broken response: never answered
        b"{not json\n"  # no id: dropped
        b'{"jsonrpc":"2.0","id":9,"method":"ping"}\n'
    )
    channel = StreamChannel(reader, asyncio.StreamWriter(transport, protocol, None, loop), name="client")
    message = await channel.receive()
    assert message.id == 9 and channel.garbage_frames == 5
    await channel.aclose()
    answers = [json.loads(line) for line in (await asyncio.to_thread(reader_file.read)).splitlines()]
    assert [(a["id"], a["error"]["code"]) for a in answers] == [(7, -32600), ("a", -32600)]
    assert answers[0]["error"]["message"] == '"method" must be a string'
    reader_file.close()


async def test_send_nowait_writes_only_what_the_pipe_takes_without_waiting():
    # The relay's pump writes an answer from the backend's delivery when it can (send_nowait);
    # a client that stops reading makes it say no, so the pump's down task waits instead.
    import os

    loop = asyncio.get_running_loop()
    read_fd, write_fd = os.pipe()
    reader_file = os.fdopen(read_fd, "rb", buffering=0)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, os.fdopen(write_fd, "wb"))
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    channel = StreamChannel(asyncio.StreamReader(), writer, name="client")
    frame = j.notification("notifications/message", {"data": "x" * 60000})
    assert channel.send_nowait(j.request(1, "ping"))
    assert reader_file.read(64).startswith(b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
    sent = 0
    while channel.send_nowait(frame):  # nobody reads: the pipe fills, then the buffer passes 64 KiB
        sent += 1
        assert sent < 100, "send_nowait never said no"
    assert transport.get_write_buffer_size() > 65536
    await channel.aclose()
    assert not channel.send_nowait(j.request(2, "ping"))  # closed: nothing written
    reader_file.close()


async def test_a_child_gone_before_the_first_write_names_its_exit_status_not_closed():
    """Issue 29 item 11: a server that crashes at once read as "unavailable: closed"."""
    child = await StdioChild.spawn([PY, "-c", "import sys; sys.stderr.write('boom: no config\\n'); sys.exit(7)"], name="crash")
    await child.process.wait()
    while not child._transport.is_closing():  # the pipe's reader is gone (the loop notices it)
        await asyncio.sleep(0.01)
    with pytest.raises(ChannelClosed) as caught:
        await child.send(j.Message({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
    assert str(caught.value) == "crash: backend exited with status 7"
    assert child.said() == "its stderr ended: 'boom: no config'"  # serve's log and status, never the client
    await child.aclose()


async def test_junk_on_stdout_is_quoted_bounded_and_redacted(caplog):
    code = ("import sys; print('hello token=abc123def456 Authorization: Bearer zzzzyyyyxxxx12 ' + 'x' * 500); "
            "print('sk_0123456789abcdefghijklmnop and ' + sys.argv[1]); sys.stdout.flush(); sys.stdin.read()")
    child = await StdioChild.spawn([PY, "-c", code, "my-own-env-secret"], env={"API_KEY": "my-own-env-secret"}, name="junk")
    with caplog.at_level(logging.WARNING, logger="hopline.stdio"):
        peer = RpcPeer(child, name="junk")
        while child.garbage_frames < 2:
            await asyncio.sleep(0.01)
    first, second = [r.getMessage() for r in caplog.records if "dropped a frame" in r.getMessage()]
    quoted = ("hello token=<redacted> Authorization: <redacted> " + "x" * 500)[:119] + "…"  # 120 characters at most
    assert first.endswith(f": {quoted!r}")
    assert second.endswith(": '<redacted> and <redacted>'")
    assert child.said() == f"it wrote to stdout what is not JSON-RPC: {quoted!r}"  # the first junk line
    await peer.aclose()
