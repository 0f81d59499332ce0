"""The SSE codec: what the listeners write, the upstreams can read back, in any chunking."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from hopline.transports.sse import SSEParser, encode_event


def test_encode_parse_round_trip_with_ids():
    stream = encode_event(b'{"a":1}', event_id="1-1") + b": ping\n\n" + encode_event(b'{"b":2}', event_id="1-2")
    parser = SSEParser()
    events = parser.feed(stream)
    assert [(e.event, e.data, e.id) for e in events] == [("message", '{"a":1}', "1-1"), ("message", '{"b":2}', "1-2")]
    assert parser.last_event_id == "1-2"


@given(st.lists(st.integers(min_value=1, max_value=7), min_size=1, max_size=50))
def test_any_chunking_gives_the_same_events(cuts):
    stream = (
        b"".join(encode_event(f'{{"n":{i}}}'.encode(), event_id=str(i)) for i in range(5))
        + b"event: endpoint\r\ndata: /messages?x=1\r\n\r\n"
    )
    parser, events, pos = SSEParser(), [], 0
    for cut in cuts * 40:
        if pos >= len(stream):
            break
        events += parser.feed(stream[pos : pos + cut])
        pos += cut
    events += parser.feed(stream[pos:])
    assert [e.data for e in events] == [f'{{"n":{i}}}' for i in range(5)] + ["/messages?x=1"]
    assert events[-1].event == "endpoint"


def test_multiline_data_retry_and_priming_event():
    events = SSEParser().feed(b"retry: 1500\nid: p\ndata:\n\ndata: a\ndata: b\n\n")
    assert events[0].id == "p" and events[0].data == "" and events[0].retry == 1500
    assert events[1].data == "a\nb"


def test_oversize_event_is_refused():
    parser = SSEParser(max_event=100)
    with pytest.raises(ValueError):
        parser.feed(b"data: " + b"x" * 200 + b"\n")


LINES = st.sampled_from(
    [
        b'data: {"a":1}',
        b"data:x",
        b"data",
        b"data: ",
        b"id: 7",
        b"id",
        b"event: other",
        b"event: message",
        b"event: messages",
        b"retry: 20",
        b"retry: x",
        b": ping",
        b"",
        b"datax: y",
        b"data: \xff\xfe",
    ]
)


@given(st.lists(LINES, max_size=30), st.lists(st.integers(min_value=1, max_value=9), min_size=1, max_size=20))
def test_the_fast_path_gives_what_the_line_by_line_path_gives(lines, cuts):
    stream = b"".join(line + b"\n" for line in lines)
    expected = SSEParser(errors="surrogateescape")._feed_lines(stream)  # one line at a time, the general path
    parser, events, pos = SSEParser(errors="surrogateescape"), [], 0
    for cut in cuts * 10:
        events += parser.feed(stream[pos : pos + cut])
        pos += cut
    events += parser.feed(stream[pos:])
    assert events == expected


WHOLE = [
    b'event: message\r\ndata: {"jsonrpc":"2.0","id":2,"result":{}}\r\n\r\n',  # the SDK's (sse-starlette's) answer
    b'event: message\ndata: {"a":1}\n\n',
    b"data: x\n\n",
    b"data: x\r\n\r\n",
    b"data: \r\n\r\n",
    b"event: message\ndata: \n\n",
    b"data: a\rb\r\n\r\n",  # a lone CR ends a line: data "a", then a field "b"
    b"data: a\nb\n\n",
    b"data: a\r\n\n",
    b"event: message\r\ndata: a\n\r\n\r\n",
    b"event: message\r\ndata: \xff\xfe\r\n\r\n",
    b"event: other\ndata: x\n\n",
    b"data:x\n\n",
    b"data: data: x\n\n",
    b"event: message\ndata: x\n",
]


@pytest.mark.parametrize("chunk", WHOLE)
def test_a_whole_event_in_one_chunk_gives_what_the_line_by_line_path_gives(chunk):
    reference = SSEParser(errors="surrogateescape")
    parser = SSEParser(errors="surrogateescape")
    assert parser.feed(chunk) == reference._feed_lines(chunk)
    then = b"id: 9\ndata: y\n\n"  # and the parser is left as the line-by-line one is
    assert parser.feed(then) == reference._feed_lines(then) and parser.last_event_id == reference.last_event_id == "9"


ENDING = st.sampled_from([b"\n", b"\r\n"])


@given(st.lists(st.tuples(st.lists(LINES, max_size=3), ENDING), max_size=8))
def test_events_fed_one_chunk_each_give_what_the_line_by_line_path_gives(events):
    chunks = [b"".join(line + end for line in lines) + end for lines, end in events]
    reference = SSEParser(errors="surrogateescape")
    expected = reference._feed_lines(b"".join(chunks))
    parser = SSEParser(errors="surrogateescape")
    assert [e for chunk in chunks for e in parser.feed(chunk)] == expected
    assert parser.last_event_id == reference.last_event_id


def test_a_whole_event_too_large_is_refused_all_the_same():
    for chunk in (b"data: " + b"x" * 200 + b"\n\n", b"event: message\r\ndata: " + b"x" * 200 + b"\r\n\r\n"):
        with pytest.raises(ValueError):
            SSEParser(max_event=100).feed(chunk)
    assert SSEParser(max_event=100).feed(b"data: " + b"x" * 100 + b"\n\n")[0].data == "x" * 100
