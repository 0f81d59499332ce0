"""A tool call's arguments → the parts of one HTTP request (pure, no I/O).

In: an :class:`~hopline.conversion.operations.Operation` and the ``arguments`` object of
a ``tools/call``. Out: :func:`problem` returns a message a model can act on (a missing
required argument, a wrong type) or None; :func:`build` returns a :class:`Request`.

Validation is deliberately small: ``type``, ``enum``, ``required``, unknown keys where
``additionalProperties`` is false, ``items``, and ``anyOf``/``oneOf``/``allOf`` as "some /
all branches pass". The API stays the judge of the rest (its 4xx comes back as an
``isError`` result).

Serialisation follows OpenAPI's parameter styles: path ``simple`` (and ``label``,
``matrix``), every path value percent-encoded (a ``/`` in a value never changes the
path); query ``form`` (exploded or comma-joined), ``spaceDelimited``,
``pipeDelimited``, ``deepObject``; headers ``simple``; cookies ``form``. Booleans are
``true``/``false``; a ``content`` parameter is sent as JSON text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import orjson

from hopline.conversion.operations import Operation, Param

MAX_DEPTH = 32
_NAMES = {
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    str: "a string",
    list: "an array",
    dict: "an object",
    type(None): "null",
}


@dataclass
class Request:
    method: str
    path: str  # already expanded and encoded; relative to the base URL
    query: list[tuple[str, str]] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    json: Any = None
    form: dict[str, str] | None = None
    has_json: bool = False


# -- validation -------------------------------------------------------------------------
def problem(operation: Operation, arguments: dict[str, Any]) -> str | None:
    schema = operation.input_schema
    missing = [r for r in schema.get("required", []) if r not in arguments]
    if missing:
        return f"missing required argument{'s' if len(missing) > 1 else ''}: {', '.join(missing)}" + _takes(schema)
    unknown = [k for k in arguments if k not in schema.get("properties", {})]
    if unknown:
        return f"unknown argument{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}" + _takes(schema)
    for name, value in arguments.items():
        found = _check(value, schema["properties"][name], name, 0)
        if found:
            return found
    return None


def _takes(schema: dict[str, Any]) -> str:
    names = list(schema.get("properties", {}))
    return f" (this tool takes: {', '.join(names)})" if names else " (this tool takes no arguments)"


def _is(value: Any, kind: str) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "array":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, dict)
    if kind == "null":
        return value is None
    return True  # a type we do not know: the API decides


def _check(value: Any, schema: Any, where: str, depth: int) -> str | None:
    if not isinstance(schema, dict) or depth > MAX_DEPTH:
        return None
    kinds = schema.get("type")
    kinds = [kinds] if isinstance(kinds, str) else kinds if isinstance(kinds, list) else []
    if kinds and not any(_is(value, k) for k in kinds if isinstance(k, str)):
        return (
            f"argument {where} must be {' or '.join(map(str, kinds))}, "
            f"got {_NAMES.get(type(value), type(value).__name__)}"
        )
    enum = schema.get("enum")
    if isinstance(enum, list) and value not in enum:
        return f"argument {where} must be one of {', '.join(orjson.dumps(e).decode() for e in enum[:20])}"
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list) and branches and all(_check(value, b, where, depth + 1) for b in branches):
            return f"argument {where} matches none of the shapes it may take"
    for branch in schema.get("allOf") if isinstance(schema.get("allOf"), list) else []:
        found = _check(value, branch, where, depth + 1)
        if found:
            return found
    if isinstance(value, dict):
        props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        missing = [r for r in schema.get("required", []) if isinstance(r, str) and r not in value]
        if missing:
            return f"argument {where} is missing {', '.join(missing)}"
        if schema.get("additionalProperties") is False:
            extra = [k for k in value if k not in props]
            if extra:
                return f"argument {where} has unknown field{'s' if len(extra) > 1 else ''} {', '.join(extra)}"
        for key, sub in value.items():
            found = _check(sub, props.get(key), f"{where}.{key}", depth + 1)
            if found:
                return found
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value[:1000]):
            found = _check(item, schema["items"], f"{where}[{i}]", depth + 1)
            if found:
                return found
    return None


# -- serialisation ------------------------------------------------------------------------
def build(operation: Operation, arguments: dict[str, Any]) -> Request:
    request = Request(operation.method.upper(), operation.path)
    cookies: list[str] = []
    for param in operation.params:
        if param.arg not in arguments:
            continue
        value = arguments[param.arg]
        if param.location == "path":
            request.path = request.path.replace("{" + param.name + "}", _path_value(param, value))
        elif param.location == "query":
            request.query += _query_pairs(param, value)
        elif param.location == "header":
            request.headers[param.name] = _text(value) if param.as_json else _joined(value, ",", param.explode)
        else:
            cookies.append(
                f"{param.name}={quote(_text(value) if param.as_json else _joined(value, ',', False), safe='')}"
            )
    if cookies:
        request.headers["Cookie"] = "; ".join(cookies)
    body = operation.body
    if body is not None:
        if body.arg is not None:
            present, payload = body.arg in arguments, arguments.get(body.arg)
        else:
            payload = {f: arguments[f] for f in body.fields if f in arguments}
            present = bool(payload) or body.required
        if present:
            if body.media_type.lower().startswith("application/x-www-form-urlencoded") and isinstance(payload, dict):
                request.form = {k: _scalar(v) for k, v in payload.items()}
            else:
                request.json, request.has_json = payload, True
    return request


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return _text(value)
    return str(value)


def _text(value: Any) -> str:
    return orjson.dumps(value).decode()


def _joined(value: Any, sep: str, explode: bool) -> str:
    if isinstance(value, list):
        return sep.join(_scalar(v) for v in value)
    if isinstance(value, dict):
        return sep.join(f"{k}={_scalar(v)}" if explode else f"{k}{sep}{_scalar(v)}" for k, v in value.items())
    return _scalar(value)


def _path_value(param: Param, value: Any) -> str:
    if param.as_json:
        return quote(_text(value), safe="")
    if isinstance(value, (list, dict)):
        items = value.items() if isinstance(value, dict) else None
        parts = (
            [quote(_scalar(v), safe="") for v in value]
            if items is None
            else [
                f"{quote(str(k), safe='')}={quote(_scalar(v), safe='')}"
                if param.explode
                else f"{quote(str(k), safe='')},{quote(_scalar(v), safe='')}"
                for k, v in items
            ]
        )
        encoded = ",".join(parts)
    else:
        encoded = quote(_scalar(value), safe="")
    if param.style == "label":
        return "." + encoded
    if param.style == "matrix":
        return f";{quote(param.name, safe='')}={encoded}"
    return encoded


def _query_pairs(param: Param, value: Any) -> list[tuple[str, str]]:
    if param.as_json:
        return [(param.name, _text(value))]
    if isinstance(value, dict):
        if param.style == "deepObject":
            return [(f"{param.name}[{k}]", _scalar(v)) for k, v in value.items()]
        if param.explode:
            return [(str(k), _scalar(v)) for k, v in value.items()]
        return [(param.name, _joined(value, ",", False))]
    if isinstance(value, list):
        if param.explode and param.style == "form":
            return [(param.name, _scalar(v)) for v in value]
        sep = {"spaceDelimited": " ", "pipeDelimited": "|"}.get(param.style, ",")
        return [(param.name, sep.join(_scalar(v) for v in value))]
    return [(param.name, _scalar(value))]
