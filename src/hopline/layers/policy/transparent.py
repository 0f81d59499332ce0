"""Transparent mode's header policy (Layer 5 at awareness level 1): what a CEL rule over
``http`` may judge, so that what it judged is exactly what the destination gets.

Three things keep a rule honest when the body is not read:

- **Repeated headers.** A rule sees one value per header; a destination that takes the
  last of two (or all of them) would act on a value no rule judged. So a header that a
  rule may read, or that routes or frames an MCP request (:data:`ROUTING`), is refused
  (400) when it is repeated. Which headers the rules read is found from their text
  (:func:`relevance`): ``http.headers["x-team"]``, ``"x-team" in http.headers`` and
  ``http.headers.x_team``; any other use of ``http.headers`` (a macro, ``size()``…) makes
  every header relevant, so every repeated header is refused.
- **The protocol version first** (reference/mcp-wire.md, "Request metadata headers": an
  intermediary that enforces policy on the mirror headers rejects versions older than
  2026-07-28, where nobody validates them). A request that claims 2026-07-28 must carry
  ``Mcp-Method`` (and ``Mcp-Name`` where its method has one); the destination checks them
  against the body (400 -32020 otherwise), so the rules may trust them. Any other request
  has no trustworthy ``Mcp-Method``: its mirror headers are hidden from ``http.headers``
  and ``http.mcp_method`` is unknown, unless the request has no body (``""``).
- **An unknown method** under rules that read ``mcp_method`` is refused (403, fail closed)
  unless ``transparent.unknown_method`` is ``read_body`` (the JSON-RPC envelope's
  ``method`` is read from a body of at most ``max_method_body`` bytes, which is then
  forwarded byte for byte) or ``allow`` (the rules see ``""``, as before).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from hopline.binding import MODERN_VERSIONS, NAME_HEADER_PARAM
from hopline.header_codec import decode_header_value

log = logging.getLogger("hopline.transparent")

HEADER_ERROR = -32020  # the 2026-07-28 HeaderMismatchError: a missing, mismatched or repeated header
# Headers that route, frame or authenticate an MCP request: never judged on one copy and forwarded with two.
ROUTING = frozenset(
    {
        "mcp-method",
        "mcp-name",
        "mcp-protocol-version",
        "mcp-session-id",
        "host",
        "authorization",
        "content-type",
        "content-length",
    }
)
_MIRRORS = ("mcp-method", "mcp-name", "mcp-param-")  # validated by the destination against the body in 2026-07-28 only

_STR = r"""(?:"(?:[^"\\\n])*"|'(?:[^'\\\n])*')"""  # a plain CEL string literal (no escapes: those count as dynamic)
_INDEX = re.compile(r"\bhttp\s*\.\s*headers\s*\[\s*(" + _STR + r")\s*\]")
_IN = re.compile(r"(" + _STR + r")\s+in\s+http\s*\.\s*headers\b(?!\s*[.\[])")
_FIELD = re.compile(r"\bhttp\s*\.\s*headers\s*\.\s*([A-Za-z_]\w*)\b(?!\s*\()")
_HEADERS = re.compile(r"\bheaders\b")
_HTTP_FIELD = re.compile(r"\bhttp\s*\.\s*[A-Za-z_]\w*")
_HTTP = re.compile(r"\bhttp\b")


def compile_rules(exprs: Iterable[str]) -> list[Any]:
    """CEL programs over ``http``; raises ValueError naming what is wrong with a rule
    (ImportError without the ``cel`` extra: only rules need it, config/extras.py)."""
    programs = []
    for expr in exprs:
        import cel

        try:
            program = cel.compile(expr)
        except Exception as exc:  # noqa: BLE001 (the CEL library raises plain exceptions for syntax errors)
            raise ValueError(f"not a valid CEL expression: {str(exc).splitlines()[0][:200]}") from None
        unknown = sorted(set(program.references().get("variables", [])) - {"http"})
        if unknown:
            raise ValueError(
                (
                    "rules see only `http` (method, path, destination, source, headers, mcp_method); this one names "
                    f"{', '.join(unknown)}"
                )
            )
        programs.append(program)
    return programs


@dataclass(frozen=True)
class Relevance:
    """What the rules read: ``headers`` (lower-case names; None: any header) and whether ``mcp_method``."""

    headers: frozenset[str] | None
    method: bool

    def refused_when_repeated(self, extra: Iterable[str] = ()) -> frozenset[str] | None:
        return None if self.headers is None else ROUTING | self.headers | frozenset(extra)


def relevance(exprs: Iterable[str]) -> Relevance:
    """The headers and the method the rules may read, found from their text. Conservative:
    a use this does not recognise counts as reading everything (see the module docstring).
    Hand-written because the CEL library reports the variables a rule names, not the keys."""
    names: set[str] = set()
    dynamic = method = False
    for expr in exprs:
        method = method or "mcp_method" in expr
        rest = expr
        for pattern in (_INDEX, _IN, _FIELD):
            names.update(m.group(1).strip("'\"").lower() for m in pattern.finditer(rest))
            rest = pattern.sub(" ", rest)
        if _HEADERS.search(rest) or _HTTP.search(_HTTP_FIELD.sub(" ", rest)):
            dynamic = True  # http.headers used as a whole, or `http` itself (http["headers"], size(http)…)
    if dynamic:
        return Relevance(None, True)
    return Relevance(frozenset(names), method)


CONNECTION_FIELDS = frozenset({"destination", "source", "sni"})


def connection_only(exprs: Iterable[str]) -> list[int]:
    """The indexes of the rules that read more than connection metadata (``http.destination``,
    ``http.source``, ``http.sni``): what TLS passthrough cannot give them. Conservative, as
    :func:`relevance`: ``http`` used other than by one of those fields counts as more."""
    out = []
    for i, expr in enumerate(exprs):
        fields = {m.group(0).split(".")[-1].strip() for m in _HTTP_FIELD.finditer(expr)}
        rest = _HTTP_FIELD.sub(" ", expr)
        if fields - CONNECTION_FIELDS or _HTTP.search(rest) or _HEADERS.search(rest):
            out.append(i)
    return out


def read_headers(raw: list[tuple[bytes, bytes]], strict: frozenset[str] | None) -> tuple[dict[str, str], str | None]:
    """Lower-case name → value, and the first header of ``strict`` (None: any) that is repeated.
    Other repeated headers are joined with ", " (RFC 9110 §5.3), as no rule reads them."""
    out: dict[str, str] = {}
    repeated: str | None = None
    for name, value in raw:
        key = name.decode("latin-1").lower()
        if key in out:
            if repeated is None and (strict is None or key in strict):
                repeated = key
            out[key] += ", " + value.decode("latin-1")
        else:
            out[key] = value.decode("latin-1")
    return out, repeated


def has_body(headers: dict[str, str]) -> bool:
    return headers.get("content-length", "0") != "0" or "transfer-encoding" in headers


def claimed_method(scope_method: str, headers: dict[str, str]) -> tuple[str | None, str | None]:
    """(the request's JSON-RPC method as far as headers can be trusted — None: unknown, or
    ``""`` when there is no body — and a problem with its mirror headers, or None)."""
    if headers.get("mcp-protocol-version") in MODERN_VERSIONS:
        mirrored = headers.get("mcp-method")
        if mirrored is None:
            if scope_method == "POST":
                return None, "a 2026-07-28 request must carry Mcp-Method, the mirror of its body's method"
            return "", None
        method = decode_header_value(mirrored)
        if method in NAME_HEADER_PARAM and "mcp-name" not in headers:
            return (
                None,
                (
                    f"a 2026-07-28 {method} request must carry Mcp-Name, the mirror of its "
                    f"params.{NAME_HEADER_PARAM[method]}"
                ),
            )
        return method, None
    return (None if has_body(headers) else ""), None


def rules_view(headers: dict[str, str], modern: bool) -> dict[str, str]:
    """``http.headers`` for the rules: without the mirror headers when nobody validates them."""
    if modern:
        return headers
    return {k: v for k, v in headers.items() if not k.startswith(_MIRRORS)}


class _Repeated(dict):
    """An object of the body in which a key appeared twice (parsers disagree on which copy wins)."""


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    return _Repeated(out) if len(out) != len(pairs) else out


def body_method(body: bytes) -> str | None:
    """The top-level JSON-RPC object's ``method`` (``""`` for a response), or None when the
    body is not one JSON object with at most one ``method``: a batch, a repeated key, not
    UTF-8 JSON. The stdlib parser (not orjson) because it reports repeated keys."""
    try:
        envelope = json.loads(body.decode("utf-8"), object_pairs_hook=_pairs)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(envelope, dict) or isinstance(envelope, _Repeated):
        return None
    method = envelope.get("method", "")
    return method if isinstance(method, str) else None


class HeaderPolicy:
    """Layer 5 at awareness level 1: allow iff one rule is true (no rules: allow all). A
    rule that fails (a header that is absent, a type mismatch) allows nothing."""

    def __init__(self, exprs: list[str]) -> None:
        self.programs = compile_rules(exprs)
        self.reads = relevance(exprs)
        self._context: Any = None
        if self.programs:
            import cel

            self._context = cel.Context

    def allows(self, http: dict[str, Any]) -> bool:
        if not self.programs:
            return True
        context = self._context({"http": http})
        for program in self.programs:
            try:
                if program.execute(context) is True:
                    return True
            except Exception as exc:  # noqa: BLE001 (a rule that cannot be evaluated allows nothing: fail closed)
                log.debug("header rule failed: %s", type(exc).__name__)
        return False
