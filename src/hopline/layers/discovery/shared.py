"""Who uses one backend session that several client sessions share (pure, sans-io).

A shared backend session cannot tell its clients apart, so the gateway keeps, per
session, what a client's own session would have known by itself:

- **calls in flight per owner**: a server→client request (sampling, elicitation,
  roots) or a log line goes to the one owner with a call in flight; with none or
  several, there is no right answer and the gateway refuses (never guesses);
- **resource subscriptions, refcounted**: the backend is sent ``resources/subscribe``
  for the first subscriber of a URI and ``resources/unsubscribe`` for the last;
- **logging levels**: the backend runs at the most verbose level any owner asked
  for; each owner is delivered only what its own level admits.

Owners are opaque hashable objects (the gateway passes its client sessions). Bounded
by the owners that exist: an owner that goes away is :meth:`forget`-ten.
"""

from __future__ import annotations

from typing import Any

LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")  # RFC 5424, as MCP uses them
_RANK = {name: rank for rank, name in enumerate(LEVELS)}


class Owners:
    def __init__(self) -> None:
        self.inflight: dict[Any, int] = {}  # owner → calls in flight
        self.subscribers: dict[str, set[Any]] = {}  # backend URI → owners subscribed to it
        self.levels: dict[Any, str] = {}  # owner → the logging level it asked for
        self.sent_level: str | None = None  # the level the backend was last set to

    # -- calls in flight ------------------------------------------------------------------
    def enter(self, owner: Any) -> None:
        self.inflight[owner] = self.inflight.get(owner, 0) + 1

    def leave(self, owner: Any) -> None:
        left = self.inflight.get(owner, 0) - 1
        if left > 0:
            self.inflight[owner] = left
        else:
            self.inflight.pop(owner, None)

    def sole(self) -> Any | None:
        """The one owner with calls in flight, or None when there are none or several."""
        if len(self.inflight) != 1:
            return None
        return next(iter(self.inflight))

    # -- subscriptions ----------------------------------------------------------------------
    def subscribe(self, uri: str, owner: Any) -> bool:
        """Note ``owner``'s subscription; True if it is the URI's first (send it on)."""
        owners = self.subscribers.setdefault(uri, set())
        first = not owners
        owners.add(owner)
        return first

    def unsubscribe(self, uri: str, owner: Any) -> bool:
        """Drop ``owner``'s subscription; True if it was the URI's last (send it on)."""
        owners = self.subscribers.get(uri)
        if not owners or owner not in owners:
            return False
        owners.discard(owner)
        if owners:
            return False
        del self.subscribers[uri]
        return True

    def subscribed(self, uri: str) -> set[Any]:
        return self.subscribers.get(uri, set())

    # -- logging ----------------------------------------------------------------------------
    def set_level(self, owner: Any, level: str) -> str | None:
        """Note ``owner``'s level; the level to send the backend if the effective one changed."""
        if level in _RANK:
            self.levels[owner] = level
        return self.level_change()

    def admits(self, owner: Any, level: Any) -> bool:
        """Whether a log line at ``level`` is for ``owner`` (no level asked: everything)."""
        asked = self.levels.get(owner)
        return asked is None or _RANK.get(level, len(LEVELS)) >= _RANK[asked]

    def level_change(self) -> str | None:
        """The effective level (the most verbose asked for), if the backend was not sent it yet."""
        effective = min(self.levels.values(), key=_RANK.__getitem__) if self.levels else None
        if effective is None or effective == self.sent_level:
            return None
        self.sent_level = effective
        return effective

    # -- owners coming and going ----------------------------------------------------------------
    def forget(self, owner: Any) -> tuple[list[str], str | None]:
        """``owner`` went away: the URIs it was the last subscriber of, and the level to send
        the backend if the effective one changed (both to send on)."""
        self.inflight.pop(owner, None)
        last = [uri for uri in list(self.subscribers) if self.unsubscribe(uri, owner)]
        level = None
        if self.levels.pop(owner, None) is not None:
            level = self.level_change()
        return sorted(last), level

    def adopt(self, old: Owners) -> None:
        """Take over a replaced session's subscriptions and levels (not its calls: they failed)."""
        self.subscribers = {uri: set(owners) for uri, owners in old.subscribers.items() if owners}
        self.levels = dict(old.levels)
        self.sent_level = None
