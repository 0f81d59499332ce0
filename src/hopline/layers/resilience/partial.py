"""Partial failure of a fan-out list (draft §11.2): fail open or fail closed.

A LIST-METHOD goes to every available backend. When some of them fail or outlast
the list timeout, the gateway either answers with what the healthy ones gave and
names the missing ones in ``_meta`` (**fail-open**, the default: one dead backend
must not blank the catalogue, anchors §3 item 4), or fails the whole list with
``UnavailableError`` (**fail-closed**, for deployments where an incomplete
catalogue is worse than none).

A backend withdrawn on purpose (its circuit is open, draft §11.1) is not part of
the advertised surface, so its absence is not a failure in either mode.
"""

from __future__ import annotations

import enum
from typing import Iterable

from hopline.jsonrpc import UnavailableError


class FailMode(enum.Enum):
    OPEN = "fail-open"
    CLOSED = "fail-closed"


class FanOut:
    __slots__ = ("mode",)

    def __init__(self, mode: FailMode = FailMode.OPEN) -> None:
        self.mode = mode

    @property
    def fail_closed(self) -> bool:
        return self.mode is FailMode.CLOSED

    def check(self, method: str, missing: Iterable[str], withdrawn: Iterable[str] = ()) -> None:
        """Raise if this partial answer must not be given (fail-closed); else return."""
        if self.mode is FailMode.OPEN:
            return
        failed = sorted(set(missing) - set(withdrawn))
        if failed:
            names = ", ".join(failed)
            raise UnavailableError(
                (
                    f"{method}: backend(s) {names} did not answer and this gateway does not give partial lists "
                    "(fail-closed)"
                ),
                backend=names,
                reason="partial_failure",
            )

    def __repr__(self) -> str:
        return f"<FanOut {self.mode.value}>"
