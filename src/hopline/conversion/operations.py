"""OpenAPI operations → MCP tool descriptions (draft §5.7, the translation sublayer).

In: a parsed OpenAPI 3.0/3.1 document and an optional allow-list of operationIds.
Out: :class:`Converted`, one :class:`Operation` per converted operation (the tool's
name, description, input schema, annotations, and how each argument travels in the
HTTP request), plus the operations that were skipped and why. Pure: no I/O.

Naming: the tool name is the operationId with every run of characters outside
``[A-Za-z0-9_-]`` (and every run of ``_``) replaced by one ``_`` (at most 64 characters); without a usable
operationId it is ``{method}_{path}`` slugged the same way. A name already taken
gets ``_2``, ``_3``, ... so names are unique.

Arguments (the input schema's properties):
- each path, query, header and cookie parameter by its name; when two parameters
  share a name (``id`` in the path and in the query) both are renamed
  ``{in}_{name}``. Header parameters named Accept, Content-Type or Authorization are
  ignored, as OpenAPI says (credentials come from the backend's ``headers``).
- a JSON (or form) request body whose schema is an object with ``properties`` is
  *flattened*: its properties become arguments, unless one collides with a parameter's
  name; otherwise the whole body is one argument ``body`` (``request_body`` if a
  parameter is called ``body``).

Annotations: GET/HEAD/OPTIONS → ``readOnlyHint``; PUT → ``idempotentHint``; DELETE →
``idempotentHint`` and ``destructiveHint``; POST → ``destructiveHint: false``. The
gateway's retry layer trusts these.

An operation that cannot be converted (a broken ``$ref``, a path placeholder with no
declared parameter, a required body of a media type other than JSON or form) is skipped, unless the allow-list \
names it: then it is
an error, as is an allow-list entry that names no operation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from hopline.conversion.errors import SpecError
from hopline.conversion.refs import Resolver

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
MAX_NAME = 64
MAX_DESCRIPTION = 8192
_OUTSIDE = re.compile(r"[^A-Za-z0-9_-]+")
_RUNS = re.compile(r"_{2,}")
_PLACEHOLDER = re.compile(r"\{([^{}]+)\}")
_IGNORED_HEADERS = frozenset({"accept", "content-type", "authorization"})
_ANNOTATIONS: dict[str, dict[str, bool]] = {
    "get": {"readOnlyHint": True},
    "head": {"readOnlyHint": True},
    "options": {"readOnlyHint": True},
    "trace": {"readOnlyHint": True},
    "post": {"readOnlyHint": False, "destructiveHint": False},
    "put": {"readOnlyHint": False, "idempotentHint": True},
    "patch": {"readOnlyHint": False},
    "delete": {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True},
}
Location = Literal["path", "query", "header", "cookie"]


@dataclass(frozen=True, slots=True)
class Param:
    arg: str  # the argument's name in the input schema
    name: str  # the parameter's name on the wire
    location: Location
    style: str
    explode: bool
    as_json: bool = False  # a `content` parameter: the value is sent as JSON text


@dataclass(frozen=True, slots=True)
class Body:
    media_type: str  # application/json (or +json), or application/x-www-form-urlencoded
    arg: str | None  # the argument holding the whole body; None when flattened
    fields: tuple[str, ...] = ()  # the flattened properties
    required: bool = False


@dataclass(frozen=True, slots=True)
class Operation:
    tool: str
    method: str
    path: str
    operation_id: str | None
    description: str
    input_schema: dict[str, Any]
    annotations: dict[str, Any]
    params: tuple[Param, ...]
    body: Body | None

    def describe(self) -> str:
        return f"{self.method.upper()} {self.path}"


@dataclass
class Converted:
    operations: list[Operation] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # "GET /path" → why


def convert(document: dict[str, Any], allow: list[str] | None = None) -> Converted:
    resolver = Resolver(document)
    out = Converted()
    taken: set[str] = set()
    found: set[str] = set()
    wanted = set(allow) if allow is not None else None
    paths = document.get("paths") or {}
    for path, raw_item in paths.items():
        try:
            item = resolver.follow(raw_item)
        except SpecError as exc:
            out.skipped[str(path)] = str(exc)
            continue
        if not isinstance(item, dict):
            continue
        for method in METHODS:
            op = item.get(method)
            if not isinstance(op, dict):
                continue
            op_id = op.get("operationId") if isinstance(op.get("operationId"), str) else None
            if op_id:
                found.add(op_id)
            if wanted is not None and op_id not in wanted:
                continue
            label = f"{method.upper()} {path}"
            try:
                operation = _operation(resolver, str(path), method, item, op, op_id, taken)
            except SpecError as exc:
                if wanted is not None:
                    raise SpecError(
                        f"operation {op_id!r} ({label}) cannot be converted: {exc}", key="operations"
                    ) from None
                out.skipped[label] = str(exc)
                continue
            taken.add(operation.tool)
            out.operations.append(operation)
    if wanted is not None:
        unknown = [name for name in allow or [] if name not in found]
        if unknown:
            known = ", ".join(sorted(found)[:20]) + (", ..." if len(found) > 20 else "") or "none"
            raise SpecError(
                f"`operations` names operationIds the spec does not have: {', '.join(unknown)} (the spec's: {known})",
                key="operations",
            )
    if not out.operations:
        raise SpecError(
            "the spec has no operations to convert" + (f" ({len(out.skipped)} skipped)" if out.skipped else "")
        )
    return out


def tool_name(op_id: str | None, method: str, path: str, taken: set[str]) -> str:
    base = _slug(op_id or "") or _slug(f"{method}_{path}") or method
    name, n = base, 1
    while name in taken:
        n += 1
        suffix = f"_{n}"
        name = base[: MAX_NAME - len(suffix)] + suffix
    return name


def _slug(text: str) -> str:
    # Runs of "_" collapse too: "__" is the gateway's default NAME-DELIMITER.
    return _RUNS.sub("_", _OUTSIDE.sub("_", text)).strip("_")[:MAX_NAME]


def _operation(
    resolver: Resolver, path: str, method: str, item: dict, op: dict, op_id: str | None, taken: set[str]
) -> Operation:
    raw_params = _merged_params(resolver, item.get("parameters"), op.get("parameters"))
    counts: dict[str, int] = {}
    for p in raw_params:
        counts[p["name"]] = counts.get(p["name"], 0) + 1
    props: dict[str, Any] = {}
    required: list[str] = []
    params: list[Param] = []
    for p in raw_params:
        location: Location = p["in"]
        arg = p["name"] if counts[p["name"]] == 1 else f"{location}_{p['name']}"
        schema, as_json = _param_schema(resolver, p)
        if isinstance(p.get("description"), str) and "description" not in schema:
            schema = {**schema, "description": p["description"]}
        props[arg] = schema
        if p.get("required") is True or location == "path":
            required.append(arg)
        style = p.get("style") or ("simple" if location in ("path", "header") else "form")
        explode = p.get("explode") if isinstance(p.get("explode"), bool) else style == "form"
        params.append(Param(arg, p["name"], location, str(style), explode, as_json))
    undeclared = [
        n for n in _PLACEHOLDER.findall(path) if not any(p.location == "path" and p.name == n for p in params)
    ]
    if undeclared:
        raise SpecError(f"path parameter {{{undeclared[0]}}} is not declared")
    body = _body(resolver, op.get("requestBody"), props, required)
    description = "\n\n".join(
        s.strip() for s in (op.get("summary"), op.get("description")) if isinstance(s, str) and s.strip()
    )
    description = description or f"{method.upper()} {path}"
    if op.get("deprecated") is True:
        description = "(deprecated) " + description
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        schema["required"] = list(dict.fromkeys(required))
    schema["additionalProperties"] = False
    annotations: dict[str, Any] = dict(_ANNOTATIONS.get(method, {}))
    if isinstance(op.get("summary"), str) and op["summary"].strip():
        annotations = {"title": op["summary"].strip()[:200], **annotations}
    return Operation(
        tool=tool_name(op_id, method, path, taken),
        method=method,
        path=path,
        operation_id=op_id,
        description=description[:MAX_DESCRIPTION],
        input_schema=schema,
        annotations=annotations,
        params=tuple(params),
        body=body,
    )


def _merged_params(resolver: Resolver, shared: Any, own: Any) -> list[dict[str, Any]]:
    """Path-item parameters overridden by the operation's, keyed by (name, in)."""
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for group in (shared, own):
        for raw in group if isinstance(group, list) else []:
            p = resolver.follow(raw)
            if (
                not isinstance(p, dict)
                or not isinstance(p.get("name"), str)
                or p.get("in") not in ("path", "query", "header", "cookie")
            ):
                raise SpecError("a parameter needs a `name` and an `in` of path, query, header or cookie")
            if p["in"] == "header" and p["name"].lower() in _IGNORED_HEADERS:
                continue
            merged[(p["name"], p["in"])] = p
    return list(merged.values())


def _param_schema(resolver: Resolver, p: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    if "schema" in p:
        return resolver.schema(p["schema"]), False
    content = p.get("content")
    if isinstance(content, dict) and content:
        media = next(iter(content.values()))
        return resolver.schema(media.get("schema", {}) if isinstance(media, dict) else {}), True
    return {}, False


def _is_json(media_type: str) -> bool:
    base = media_type.split(";", 1)[0].strip().lower()
    return base == "application/json" or base.endswith("+json")


def _body(resolver: Resolver, raw: Any, props: dict[str, Any], required: list[str]) -> Body | None:
    if raw is None:
        return None
    request = resolver.follow(raw)
    content = request.get("content") if isinstance(request, dict) else None
    if not isinstance(content, dict) or not content:
        return None
    media_type = next((m for m in content if _is_json(m)), None) or next(
        (m for m in content if m.lower().startswith("application/x-www-form-urlencoded")), None
    )
    body_required = isinstance(request, dict) and request.get("required") is True
    if media_type is None:
        if body_required:
            raise SpecError(f"its request body is {', '.join(content)}; only JSON and form bodies are supported")
        return None
    media = content[media_type] if isinstance(content[media_type], dict) else {}
    schema = resolver.schema(media.get("schema", {}))
    fields = schema.get("properties") if schema.get("type") in ("object", None) else None
    if isinstance(fields, dict) and fields and not (set(fields) & set(props)):
        props.update(fields)
        if body_required:
            required.extend(r for r in schema.get("required", []) if isinstance(r, str) and r in fields)
        return Body(media_type, None, tuple(fields), body_required)
    arg = "body" if "body" not in props else "request_body"
    if isinstance(request.get("description"), str) and "description" not in schema:
        schema = {**schema, "description": request["description"]}
    props[arg] = schema
    if body_required:
        required.append(arg)
    return Body(media_type, arg, (), body_required)
