"""Reversible resource URI and URI-template rewrite for aggregation (draft §8, §6.3;
reference/mcp-wire.md §9 "Resource URIs and templates").

Contract
- ``expose(backend, uri)`` gives ``f"{scheme}://{backend}/{uri}"``: the backend's
  URI is kept verbatim after the first ``/`` that follows the authority, whatever it
  contains (another scheme, query, fragment, ``{expressions}``, non-ASCII).
- ``resolve(exposed)`` gives ``(backend, uri)`` back, or None for anything that is
  not in that form (another scheme, no ``/`` after the authority, an empty or
  ill-formed backend). The scheme is matched case-insensitively (RFC 3986 §3.1); the
  backend and the rest are matched exactly, since MCP URIs are opaque to clients.
- ``expose_template`` uses the same form. The prefix is a literal with no
  expressions, so RFC 6570 expansion of the exposed template is the prefix followed
  by the expansion of the original; a client that expands it and calls
  ``resources/read`` reaches ``resolve`` with the expanded original. Templates
  cannot be enumerated, which is why routing is by prefix rather than a table.
- Apply the same mapping to every URI-carrying field (resources/read, subscribe,
  unsubscribe, resourceSubscriptions, notifications/resources/updated, completion
  ``ref.uri``, ``Mcp-Name``); that is the caller's job. Pure; no I/O.
- Backend ids must be non-empty RFC 3986 unreserved characters (every id that
  passes ``Namespace.check_backend_id`` with the default charset does); ``expose``
  raises ValueError otherwise, because the result would not parse back.

MCP Apps (``ui://``, the ``io.modelcontextprotocol/ui`` extension)
- A host renders only resources whose scheme is ``ui://`` (ext-apps
  ``getToolUiResourceUri`` throws on anything else), so a ``ui://`` URI keeps its
  scheme and the backend goes inside its authority with the name delimiter:
  ``ui://weather/view.html`` from backend ``a`` is ``ui://a__weather/view.html``
  (the scheme as the backend spelled it, the rest verbatim). ``resolve`` splits at
  the first delimiter: ``Namespace.check_backend_id`` guarantees the id holds no
  delimiter and does not run into one, the same rule that makes ``a__tool``
  reversible; the id's characters (RFC 3986 unreserved) cannot reach past the
  authority. Templates too: ``ui://a__`` is a literal prefix, so expansion commutes.
- That is the only exposed form of a ``ui://`` URI: ``hopline://a/ui://x`` does not
  resolve (one name per resource, for policy and subscriptions alike), and the
  scheme ``ui`` cannot be the gateway's own.
"""

from __future__ import annotations

import re

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")
_BACKEND = re.compile(r"[A-Za-z0-9._~-]+")
UI = "ui://"  # MCP Apps resources (SEP-1865); hosts render this scheme only


def is_ui(uri: object) -> bool:
    """Whether ``uri`` is an MCP Apps ``ui://`` URI (scheme case-insensitive, ASCII folding)."""
    if not isinstance(uri, str):
        return False
    head = uri[: len(UI)]
    return head.isascii() and head.lower() == UI


class UriMapper:
    """Reversible resource URI rewrite: exposed = f"{scheme}://{backend}/{original}"
    (original kept verbatim, templates too); a ``ui://`` URI stays ``ui://`` with the
    backend inside: f"ui://{backend}{delimiter}{rest}"."""

    __slots__ = ("scheme", "delimiter", "_prefix")

    def __init__(self, scheme: str = "hopline", delimiter: str = "__") -> None:
        if not _SCHEME.fullmatch(scheme):
            raise ValueError(f"{scheme!r} is not a URI scheme (RFC 3986 §3.1)")
        if scheme.lower() == "ui":
            raise ValueError("'ui' is the MCP Apps scheme; ui:// resources are namespaced inside it")
        if not delimiter or _BACKEND.fullmatch(delimiter) is None:
            raise ValueError(f"delimiter {delimiter!r} cannot sit in a URI authority")
        self.scheme = scheme
        self.delimiter = delimiter
        self._prefix = f"{scheme.lower()}://"

    def expose(self, backend: str, uri: str) -> str:
        if not isinstance(backend, str) or not _BACKEND.fullmatch(backend):
            raise ValueError(f"backend id {backend!r} cannot be a URI authority")
        if is_ui(uri):
            return f"{uri[: len(UI)]}{backend}{self.delimiter}{uri[len(UI) :]}"
        return f"{self.scheme}://{backend}/{uri}"

    def resolve(self, exposed: str) -> tuple[str, str] | None:
        """``(backend, original)``, or None if ``exposed`` is not ours or malformed."""
        if not isinstance(exposed, str):
            return None
        if is_ui(exposed):
            backend, sep, rest = exposed[len(UI) :].partition(self.delimiter)
            if not sep or not _BACKEND.fullmatch(backend):
                return None
            return backend, exposed[: len(UI)] + rest
        head = exposed[: len(self._prefix)]
        if not head.isascii() or head.lower() != self._prefix:  # ASCII-only case folding
            return None
        backend, slash, original = exposed[len(self._prefix) :].partition("/")
        if not slash or not _BACKEND.fullmatch(backend) or is_ui(original):
            return None
        return backend, original

    def expose_template(self, backend: str, template: str) -> str:
        """Same form as :meth:`expose`; expansion commutes with the literal prefix."""
        return self.expose(backend, template)

    def __repr__(self) -> str:
        return f"UriMapper(scheme={self.scheme!r}, delimiter={self.delimiter!r})"


class SingleBackend:
    """Reverse mode (draft §5.3): one backend, presented as itself. URIs and task ids
    pass unchanged (the client cannot tell the gateway from the backend), and every one
    routes to that backend. Same interface as :class:`UriMapper` and ``TaskIds``."""

    __slots__ = ("backend",)

    def __init__(self, backend: str) -> None:
        self.backend = backend

    def expose(self, backend: str, value: str) -> str:
        return value

    expose_template = expose

    def resolve(self, exposed: str) -> tuple[str, str] | None:
        return (self.backend, exposed) if isinstance(exposed, str) else None

    def __repr__(self) -> str:
        return f"SingleBackend({self.backend!r})"
