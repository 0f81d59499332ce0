"""``SpecError``: an OpenAPI document that cannot be loaded or converted (a start-up error).

Raised while reading the document (:mod:`.document`, :mod:`.netguard`), resolving its
references (:mod:`.refs`) and turning its operations into tools (:mod:`.operations`);
the message is one an operator can act on and never carries the spec URL.
"""

from __future__ import annotations


class SpecError(Exception):
    """An OpenAPI document that cannot be loaded or converted (a start-up error).

    ``key`` is the backend setting the problem belongs to (``openapi``, ``operations``)."""

    def __init__(self, message: str, *, key: str = "openapi") -> None:
        super().__init__(message)
        self.key = key
