"""The bounds of one stream's buffer and of a session's logs (transports/admission.py, http_session.py)."""

from __future__ import annotations

import asyncio

import pytest

from hopline.jsonrpc import notification
from hopline.layers.transport import inbox as inbox_module
from hopline.layers.transport.inbox import BURST, STALL, Inbox
from hopline.transports.admission import Admission, BoundedLog, StreamLimits, StreamOverflow
from hopline.transports.sink import Sink


def note(size: int):
    return notification("notifications/message", {"data": "x" * size})


@pytest.fixture
def clock(monkeypatch):
    """The stall clock (inbox.monotonic), moved by hand: ``clock.now += STALL``."""

    class Clock:
        now = 1000.0

    monkeypatch.setattr(inbox_module, "monotonic", lambda: Clock.now)
    return Clock


def test_a_sink_overflows_once_its_writer_took_nothing_for_the_stall_time_and_drops_everything_after(clock):
    sink = Sink(1, 7, StreamLimits(messages=3, bytes=1 << 20))
    assert [sink.put(note(1)) for _ in range(3)] == [False, False, False]
    assert sink.put(note(1)) is False  # past the bound: kept while the writer may still take (a burst)
    clock.now += STALL - 0.1
    assert sink.put(note(1)) is False
    clock.now += 0.1  # the writer took nothing for STALL seconds past the bound: the client does not read
    assert sink.put(note(1)) is True  # the caller cuts the stream off
    assert sink.overflowed and sink.inbox.empty() and sink.size == 0
    assert sink.put(note(1)) is False and sink.inbox.empty()


async def test_a_burst_past_the_bound_is_kept_while_the_writer_takes(clock):
    """What is measured is the client's reading (the writer taking), not the burst's size: a
    burst of 20 times the bound put at once, while the writer takes now and then, is kept whole."""
    sink = Sink(1, 7, StreamLimits(messages=3, bytes=1 << 20))
    taken = 0
    for n in range(60):
        assert sink.put(note(1)) is False
        clock.now += 1.0
        if n % 4 == 3:  # the writer takes one every STALL-ish seconds: slow, but reading
            await sink.receive()
            taken += 1
    assert not sink.overflowed and sink.inbox.qsize() == 60 - taken


def test_a_sink_overflows_at_burst_times_its_bound_whatever_the_writer_does(clock):
    sink = Sink(1, 7, StreamLimits(messages=3, bytes=1 << 20))
    assert not any(sink.put(note(1)) for _ in range(3 * BURST))
    assert sink.put(note(1)) is True


def test_a_sink_overflows_at_twice_its_byte_bound_whatever_the_writer_does(clock):
    sink = Sink(1, 7, StreamLimits(messages=1000, bytes=1000))
    assert [sink.put(note(400)) for _ in range(4)] == [False, False, False, False]  # 1.7 KB: past the bound, kept
    assert sink.put(note(400)) is True


async def test_a_bounded_inbox_keeps_a_burst_for_a_consumer_that_takes_and_cuts_one_that_does_not(clock):
    """The stateless exchange's buffer (the writer sets its limit): the same rule."""
    box: Inbox[int] = Inbox()
    box.limit = 2
    cut = []
    box.on_overflow = lambda: cut.append(True)
    for n in range(10):
        box.put_nowait(n)
    await box.get()
    clock.now += STALL  # it took one since the bound was passed: the clock starts again at the next put
    box.put_nowait(10)
    assert not cut and box.qsize() == 10
    clock.now += STALL
    box.put_nowait(11)
    assert cut == [True] and box.overflowed and box.empty()


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


async def test_the_guard_wakes_a_writer_blocked_elsewhere(clock):
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
    assert sink.put(note(1)) is False
    clock.now += STALL
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
