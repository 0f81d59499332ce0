"""Where one HTTP response stands, as a small state table (like h11's).

The Streamable HTTP writer (streamable_http_writer.py) moves each response it writes
through these states, and only along the table's edges; any other move is a bug and
raises :class:`IllegalTransition` instead of writing a malformed response::

    WAITING ──▶ JSON_SENT                       the answer came first: one JSON body
       │
       ├──────▶ STREAMING ──▶ DONE              the stream ended with the answer
       │            ├───────▶ CUT               ended without it (overflow, backend gone, client left)
       │            └───────▶ RESUMED           the client took the stream over on another response
       ├──────▶ CUT                             before a byte: the client left, or an overflow
       └──────▶ RESUMED                         before a byte: resumed elsewhere

JSON_SENT, DONE, CUT and RESUMED are final. The state is a local of the writer's
coroutine and each move is one dict look-up and one set test (no object per response; an
IntEnum, whose members hash as ints do, without a Python call: bench/profile_call.py).
"""

from __future__ import annotations

import enum


class ResponseState(enum.IntEnum):
    WAITING = 0  # nothing written yet
    JSON_SENT = 1  # the whole response: one JSON body (final)
    STREAMING = 2  # an SSE stream is open
    DONE = 3  # the stream ended with the answer (final)
    CUT = 4  # ended without the answer: overflow, backend closed, client left (final)
    RESUMED = 5  # the client resumed the stream on another response (final)

    @property
    def label(self) -> str:
        return "resumed elsewhere" if self is ResponseState.RESUMED else self.name.lower().replace("_", " ")


WAITING, JSON_SENT, STREAMING, DONE, CUT, RESUMED = ResponseState

TRANSITIONS: dict[ResponseState, frozenset[ResponseState]] = {
    WAITING: frozenset({JSON_SENT, STREAMING, CUT, RESUMED}),
    STREAMING: frozenset({DONE, CUT, RESUMED}),
    JSON_SENT: frozenset(),
    DONE: frozenset(),
    CUT: frozenset(),
    RESUMED: frozenset(),
}
FINAL = frozenset(state for state, onward in TRANSITIONS.items() if not onward)


class IllegalTransition(RuntimeError):
    """A response was moved along no edge of the table (a bug in its writer)."""


def move(state: ResponseState, to: ResponseState) -> ResponseState:
    """``to``, if the table allows it from ``state``; else :class:`IllegalTransition`."""
    if to not in TRANSITIONS[state]:
        raise IllegalTransition(f"a response cannot go from {state.label} to {to.label}")
    return to
