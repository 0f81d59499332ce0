"""The life of one chain position, as a table (STYLE habit 2).

A position is a component (proxy or agent) or, in proxy mode, the conductor's
own successor reached through its parent. It starts ``IDLE``; the first
``initialize`` reaching it either offers it the proxy role (``PROBING``: the
dialect is not known yet) or initialises it plainly (``READY``). A probing
proxy becomes ``READY`` when it shows its dialect by forwarding ``initialize``
to its successor (a proxy must do so before answering; an answer without it,
even a success, is a refusal: that is how an agent that treats
``_proxy/initialize`` as just another extension method is recognised). It
becomes ``FAILED`` when every handshake it was offered was refused, or when it
answered without acknowledging the role (D1's ``_meta.proxy`` echo). A component whose
process exits is ``DEAD``; under the bypass policy it is then ``BYPASSED`` and
routing skips it. Under the restart policy a dead component is ``RESTARTING`` while
the shell spawns it again, ``REJOINING`` while it is offered the role again (a
terminal agent: while it answers ``initialize`` again), and
``RELOADING`` while its sessions are re-established with ``session/load``; they
hold its traffic, delivered in order once it is ``READY`` (while reloading, only
what travels down: what its successor sends up is the reload's own traffic).

What a position does with traffic, per state, is :data:`TRAFFIC`: hold it until
the dialect is known, deliver it, answer it with an error, or skip the position.
"""

from __future__ import annotations

from enum import Enum


class State(str, Enum):
    IDLE = "idle"
    PROBING = "probing"
    READY = "ready"
    FAILED = "failed"
    DEAD = "dead"
    BYPASSED = "bypassed"
    RESTARTING = "restarting"
    REJOINING = "rejoining"
    RELOADING = "reloading"


class Event(str, Enum):
    OFFER = "offer"  # a proxy handshake was sent
    INITIALIZE = "initialize"  # a plain initialize was sent (agent, or parent's successor)
    FORWARDED = "forwarded"  # the proxy forwarded initialize to its successor
    ACCEPTED = "accepted"  # the proxy (READY) answered the handshake, acknowledging the role
    REFUSED = "refused"  # the handshake was refused; another dialect is left to try
    EXHAUSTED = "exhausted"  # no dialect left, or the role was not acknowledged
    EXITED = "exited"  # the process is gone
    BYPASS = "bypass"  # policy: route around it from now on
    RESTART = "restart"  # policy: spawn it again
    RELOADED = "reloaded"  # a restarted proxy's sessions are loaded again


S, E = State, Event
TRANSITIONS: dict[tuple[State, Event], State] = {
    (S.IDLE, E.OFFER): S.PROBING,
    (S.IDLE, E.INITIALIZE): S.READY,
    (S.PROBING, E.FORWARDED): S.READY,
    (S.READY, E.ACCEPTED): S.READY,  # it forwarded initialize first, then answered
    (S.PROBING, E.REFUSED): S.PROBING,
    (S.PROBING, E.EXHAUSTED): S.FAILED,
    (S.READY, E.EXHAUSTED): S.FAILED,  # D1: forwarded, then answered without the echo
    (S.DEAD, E.BYPASS): S.BYPASSED,
    (S.DEAD, E.RESTART): S.RESTARTING,
    (S.RESTARTING, E.OFFER): S.REJOINING,
    (S.RESTARTING, E.INITIALIZE): S.REJOINING,  # a terminal agent: initialised again
    (S.REJOINING, E.ACCEPTED): S.RELOADING,
    (S.REJOINING, E.EXHAUSTED): S.FAILED,
    (S.RELOADING, E.RELOADED): S.READY,
}
for _state in (S.IDLE, S.PROBING, S.READY, S.FAILED, S.RESTARTING, S.REJOINING, S.RELOADING):
    TRANSITIONS[(_state, E.EXITED)] = S.DEAD

# What happens to a message routed to a position in each state ("hold-down":
# hold what travels down to it, deliver what travels up).
TRAFFIC: dict[State, str] = {
    S.IDLE: "expect-initialize",
    S.PROBING: "hold",
    S.READY: "deliver",
    S.FAILED: "refuse",
    S.DEAD: "refuse",
    S.BYPASSED: "skip",
    S.RESTARTING: "hold",
    S.REJOINING: "hold",
    S.RELOADING: "hold-down",
}

# An initialize reaching a position that is past IDLE: (code, message), as the
# reference conductors answer it (Rust: re-entered; Thinkwell: already initialized).
REENTRY: dict[State, tuple[int, str]] = {
    S.PROBING: (-32603, "conductor initialization was re-entered"),
    S.READY: (-32600, "conductor already initialized"),
    S.FAILED: (-32600, "conductor already initialized (and the chain failed to start)"),
    S.RESTARTING: (-32600, "conductor already initialized"),
    S.REJOINING: (-32600, "conductor already initialized"),
    S.RELOADING: (-32600, "conductor already initialized"),
}


class IllegalTransition(Exception):
    def __init__(self, state: State, event: Event) -> None:
        super().__init__(f"no transition from {state.value!r} on {event.value!r}")
        self.state, self.event = state, event


def step(state: State, event: Event) -> State:
    try:
        return TRANSITIONS[(state, event)]
    except KeyError:
        raise IllegalTransition(state, event) from None
