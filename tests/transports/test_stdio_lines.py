"""Our own stdin's reader (transports/stdio.py ``_Lines`` and ``_StdinChannel``) against the
``asyncio.StreamReader`` and :class:`StreamChannel` it replaces: fed the same bytes in any
chunking, they give the same messages, drop and count the same garbage, and close for the
same reason; over a real pipe, reading pauses and resumes at the same points."""

from __future__ import annotations

import asyncio
import logging
import os

import pytest
from hypothesis import given, settings, strategies as st

from hopline.layers.transport.channel import ChannelClosed
from hopline.transports.stdio import StreamChannel, _Lines, _StdinChannel

pytestmark = pytest.mark.timeout(60)
LIMIT = 64

FRAMES = [
    b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n',
    b'{"jsonrpc":"2.0","id":"a","result":{}}\r\n',
    b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n',
    b"\n",
    b"   \n",
    b"\r\n",
    b"not json\n",
    b'{"jsonrpc":"2.0","id":2,"result":"\xff"}\n',
    b"[]\n",
    b' {"jsonrpc":"2.0","id":3,"method":"ping"}\n',
    b"x" * (LIMIT + 5) + b"\n",  # a line over the limit
    b"y" * LIMIT + b"\n",  # a line exactly at the limit
]
TAILS = [b"", b'{"jsonrpc":"2.0","id":9', b"   ", b"z" * (LIMIT + 3)]


async def outcome(make, stream: bytes, cuts: list[int]) -> tuple[list, str, int]:
    """What a channel made by ``make(max_frame)`` gives for ``stream`` fed in ``cuts``: the
    bodies received, the reason it closed, the garbage it counted."""
    channel, reader = make()
    pos = 0
    for cut in cuts:
        if pos >= len(stream):
            break
        reader.feed_data(stream[pos : pos + cut])
        pos += cut
    if pos < len(stream):
        reader.feed_data(stream[pos:])
    reader.feed_eof()
    got = []
    try:
        while True:
            message = await asyncio.wait_for(channel.receive(), 5)
            got.append((message.body, message.encode()))  # the bytes kept for forwarding too
    except ChannelClosed as exc:
        return got, exc.reason, channel.garbage_frames


def old() -> tuple[StreamChannel, asyncio.StreamReader]:
    reader = asyncio.StreamReader(limit=LIMIT)
    return StreamChannel(reader, None, name="stdio-client", max_frame=LIMIT), reader


def new() -> tuple[StreamChannel, _Lines]:
    reader = _Lines(limit=LIMIT)
    return _StdinChannel(reader, None, name="stdio-client", max_frame=LIMIT), reader  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(FRAMES), max_size=12),
    st.sampled_from(TAILS),
    st.lists(st.integers(min_value=1, max_value=80), min_size=1, max_size=30),
)
def test_any_input_in_any_chunking_gives_what_the_stream_reader_gave(frames, tail, cuts):
    stream = b"".join(frames) + tail
    logging.getLogger("hopline.stdio").setLevel(logging.CRITICAL)  # the garbage warnings are not the point here

    async def both():
        return await outcome(old, stream, cuts), await outcome(new, stream, cuts)

    before, after = asyncio.run(both())
    assert after == before


@pytest.mark.parametrize("buffered", [b"", b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'])
async def test_a_read_error_closes_the_channel_as_the_stream_reader_did(buffered):
    reasons = []
    for make in (old, new):
        channel, reader = make()
        protocol = asyncio.StreamReaderProtocol(reader) if isinstance(reader, asyncio.StreamReader) else reader
        reader.feed_data(buffered)
        protocol.connection_lost(OSError(5, "Input/output error"))
        with pytest.raises(ChannelClosed) as closed:
            await channel.receive()
        reasons.append(closed.value.reason)
    assert reasons[1] == reasons[0] == "stdio-client: read failed: [Errno 5] Input/output error"


async def reading_states(protocol_of, reader, limit: int) -> list[bool]:
    """Over a real pipe: is the transport reading after 3 * limit bytes arrived unread, and
    after the lines are read down to limit or less, and to none."""
    loop = asyncio.get_running_loop()
    r, w = os.pipe()
    transport, _ = await loop.connect_read_pipe(lambda: protocol_of(reader), os.fdopen(r, "rb", buffering=0))
    line = b'{"jsonrpc":"2.0","method":"n"}\n'
    count = 3 * limit // len(line) + 1
    try:
        os.write(w, line * count)
        states = []
        for _ in range(100):
            await asyncio.sleep(0.01)
            if not transport.is_reading():
                break
        states.append(transport.is_reading())
        if isinstance(reader, asyncio.StreamReader):
            channel = StreamChannel(reader, None, name="t")
        else:
            channel = _StdinChannel(reader, None, name="t")  # type: ignore[arg-type]
        for _ in range(count - limit // len(line)):  # limit bytes or fewer left
            await channel.receive()
        states.append(transport.is_reading())
        return states
    finally:
        transport.close()
        os.close(w)


async def test_reading_pauses_and_resumes_at_the_same_points_over_a_pipe():
    limit = 320  # ten lines
    before = await reading_states(asyncio.StreamReaderProtocol, asyncio.StreamReader(limit=limit), limit)
    after = await reading_states(lambda reader: reader, _Lines(limit=limit), limit)
    assert before == after == [False, True]


def allocated_per_read(reader: _Lines, reads: list[bytes]) -> list[int]:
    """The most memory each ``feed_data`` call allocated at once (tracemalloc's peak over the
    call, above what was allocated before it): the bytes one read copies."""
    import tracemalloc

    peaks = []
    tracemalloc.start()
    try:
        for data in reads:
            before, _ = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            reader.feed_data(data)
            peaks.append(tracemalloc.get_traced_memory()[1] - before)
    finally:
        tracemalloc.stop()
    return peaks


async def test_a_long_line_read_in_many_pieces_is_copied_once_not_once_per_read():
    """A 4 MiB line arriving in 64 KiB reads (as a pipe delivers it): each read copies only
    itself, and the line is assembled once at its end, so the bytes copied grow with the line,
    not with its square (the whole unfinished line was re-joined on every read: 64 reads of a
    4 MiB line copied ~130 MiB)."""
    piece, count = 1 << 16, 64
    reads = [b"x" * piece for _ in range(count)] + [b'"}\n']
    reader = _Lines(limit=16 * 1024 * 1024)
    peaks = allocated_per_read(reader, reads)
    assert max(peaks[:-1]) < piece  # a read inside the line copies nothing of what came before
    assert sum(peaks) < 3 * piece * count  # the whole line: about one copy of it
    assert list(reader.lines) == [b"x" * piece * count + b'"}']


async def test_a_line_over_16_mib_in_pieces_is_refused_after_the_lines_before_it():
    """The default frame limit still holds for a line read in pieces: the lines before it are
    received, then the channel closes naming the limit, without waiting for the line's end."""
    from hopline.transports.stdio import DEFAULT_MAX_FRAME

    reader = _Lines(limit=DEFAULT_MAX_FRAME)
    channel = _StdinChannel(reader, None, name="stdio-client", max_frame=DEFAULT_MAX_FRAME)  # type: ignore[arg-type]
    reader.feed_data(b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n{"jsonrpc":"2.0","id":2,"method":"x","params":"')
    piece = b"y" * (1 << 20)
    fed = 0
    while not reader.overrun:
        reader.feed_data(piece)
        fed += len(piece)
        assert fed <= DEFAULT_MAX_FRAME + len(piece)
    assert fed > DEFAULT_MAX_FRAME - len(piece)
    assert reader.chunks == []  # the refused line is not kept
    assert (await channel.receive()).body["id"] == 1
    with pytest.raises(ChannelClosed) as closed:
        await channel.receive()
    assert closed.value.reason == f"stdio-client: a frame exceeded the {DEFAULT_MAX_FRAME}-byte limit"
