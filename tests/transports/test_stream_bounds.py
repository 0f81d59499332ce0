"""The bounds of one stream's buffer and of a session's logs (transports/admission.py, http_session.py)."""

from __future__ import annotations

import asyncio

import pytest

from hopline.jsonrpc import notification
from hopline.transports.admission import Admission, BoundedLog, StreamLimits, StreamOverflow
from hopline.transports.sink import Sink


def note(size: int):
    return notification("notifications/message", {"data": "x" * size})


def test_a_sink_overflows_past_its_message_bound_and_drops_everything_after():
    sink = Sink(1, 7, StreamLimits(messages=3, bytes=1 << 20))
    assert [sink.put(note(1)) for _ in range(3)] == [False, False, False]
    assert sink.put(note(1)) is True  # the one past the bound: the caller cuts the stream off
    assert sink.overflowed and sink.inbox.empty() and sink.size == 0
    assert sink.put(note(1)) is False and sink.inbox.empty()


def test_a_sink_counts_bytes_and_a_message_alone_always_fits():
    sink = Sink(1, None, StreamLimits(messages=1000, bytes=1000))
    assert sink.put(note(5000)) is False  # a large result alone passes
    assert sink.size > 5000
    assert sink.put(note(10)) is True


async def test_the_writer_wakes_with_stream_overflow():
    sink = Sink(1, 7, StreamLimits(messages=1, bytes=1 << 20))
    waiting = asyncio.ensure_future(sink.receive())
    await asyncio.sleep(0)
    sink.overflow()
    with pytest.raises(StreamOverflow):
        await asyncio.wait_for(waiting, 5)


async def test_the_guard_wakes_a_writer_blocked_elsewhere():
    sink = Sink(1, 7, StreamLimits(messages=1, bytes=1 << 20))
    blocked = asyncio.Event()

    async def writer():
        async with asyncio.timeout(None) as guard:
            sink.guard = guard
            blocked.set()
            await asyncio.Event().wait()  # a send() on a client that does not read

    task = asyncio.ensure_future(writer())
    await blocked.wait()
    sink.put(note(1))
    assert sink.put(note(1)) is True
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(task, 5)


def test_bounded_log_drops_oldest_by_count_and_by_bytes():
    counters = Admission()
    log: BoundedLog[str] = BoundedLog(StreamLimits(messages=3, bytes=100), counters)
    for name in "abcd":
        log.append(name, 10)
    assert list(log) == ["b", "c", "d"] and counters.dropped == 1
    log.append("big", 85)
    assert list(log) == ["d", "big"] and log.size == 95 and counters.dropped == 3
    log.append("huge", 500)  # alone it stays
    assert list(log) == ["huge"] and log.popleft() == "huge" and log.size == 0
