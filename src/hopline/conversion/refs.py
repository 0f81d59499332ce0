"""Local ``$ref`` resolution and OpenAPI → JSON Schema clean-up, for tool input schemas.

In: the whole OpenAPI document and a node of it (a schema, parameter, request body).
Out: a self-contained JSON Schema (dict) with every local ``$ref`` (``#/...``) inlined,
or a :class:`~hopline.conversion.errors.SpecError` for a reference that names
nothing or points outside the document.

Rules
- A reference already being expanded on the current path (a recursive schema such as
  a tree of categories) is *cut*: replaced by ``{"type": <its type>, "description":
  "recursive: <name> (not expanded further)"}``, so the result is finite and a model
  still reads what belongs there. Depth and total size are bounded too (diamonds of
  shared references could otherwise grow exponentially).
- ``$ref`` siblings (OpenAPI 3.1) override the referenced schema's keys.
- Values are data, never walked: ``example``, ``examples``, ``default``, ``enum``,
  ``const``; a property *named* ``$ref`` is a property.
- OpenAPI 3.0 spellings become JSON Schema: ``nullable: true`` adds ``"null"`` to the
  type; boolean ``exclusiveMinimum``/``exclusiveMaximum`` become numeric. Keys that
  mean nothing to a caller (``discriminator``, ``xml``, ``externalDocs``) are dropped,
  and ``readOnly`` properties are left out, since these schemas describe *inputs*.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from hopline.conversion.errors import SpecError

MAX_DEPTH = 24  # nested $ref expansions on one path
MAX_NODES = 50_000  # schema nodes produced for one operation
_DATA_KEYS = frozenset({"example", "examples", "default", "enum", "const"})
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
_DROPPED = frozenset({"discriminator", "xml", "externalDocs"})


class Resolver:
    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document
        self._nodes = 0

    def lookup(self, ref: str) -> Any:
        """The node a local reference names."""
        if not ref.startswith("#"):
            raise SpecError(f"$ref {ref!r} points outside the document (only local #/... references are supported)")
        node: Any = self.document
        for raw in ref[1:].split("/")[1:] if ref != "#" else []:
            key = unquote(raw).replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and key in node:
                node = node[key]
            elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
                node = node[int(key)]
            else:
                raise SpecError(f"$ref {ref!r} names nothing in the document")
        return node

    def follow(self, node: Any) -> Any:
        """A parameter, request body or response object with its own ``$ref`` chain
        followed (siblings of a ``$ref`` win); its schema is not expanded here."""
        seen: set[str] = set()
        while isinstance(node, dict) and isinstance(node.get("$ref"), str):
            ref = node["$ref"]
            if ref in seen:
                raise SpecError(f"$ref {ref!r} refers to itself")
            seen.add(ref)
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            target = self.lookup(ref)
            node = {**target, **siblings} if isinstance(target, dict) else target
        return node

    def schema(self, node: Any) -> dict[str, Any]:
        """``node`` as a self-contained JSON Schema object."""
        self._nodes = 0
        out = self._walk(node, (), 0)
        return out if isinstance(out, dict) else {}

    # -- the walk -----------------------------------------------------------------------
    def _walk(self, node: Any, stack: tuple[str, ...], depth: int) -> Any:
        self._nodes += 1
        if self._nodes > MAX_NODES:
            raise SpecError(f"a schema grows beyond {MAX_NODES} nodes once its $refs are expanded")
        if isinstance(node, list):
            return [self._walk(item, stack, depth) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str):
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            target = self.lookup(ref)
            if ref in stack or depth >= MAX_DEPTH:
                resolved: Any = _cut(ref, target)
            else:
                resolved = self._walk(target, (*stack, ref), depth + 1)
            if siblings and isinstance(resolved, dict):
                resolved = {**resolved, **self._walk(siblings, stack, depth)}
            return resolved
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in _DROPPED:
                continue
            if key in _DATA_KEYS:
                out[key] = value
            elif key in _SCHEMA_MAPS and isinstance(value, dict):
                out[key] = {name: self._walk(sub, stack, depth) for name, sub in value.items()}
            else:
                out[key] = self._walk(value, stack, depth)
        return _json_schema(out)


def _cut(ref: str, target: Any) -> dict[str, Any]:
    name = ref.rsplit("/", 1)[-1]
    out: dict[str, Any] = {"description": f"recursive: {name} (not expanded further)"}
    if isinstance(target, dict) and isinstance(target.get("type"), (str, list)):
        out["type"] = target["type"]
    return out


def _json_schema(out: dict[str, Any]) -> dict[str, Any]:
    """OpenAPI 3.0 spellings → JSON Schema; readOnly properties out (inputs only)."""
    nullable = out.pop("nullable", None)
    if nullable is True:
        kind = out.get("type")
        if isinstance(kind, str):
            out["type"] = [kind, "null"]
        elif isinstance(kind, list) and "null" not in kind:
            out["type"] = [*kind, "null"]
    for flag, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        value = out.get(flag)
        if isinstance(value, bool):  # 3.0: a flag on `minimum`; JSON Schema: the bound itself
            del out[flag]
            if value and bound in out:
                out[flag] = out.pop(bound)
    props = out.get("properties")
    if isinstance(props, dict):
        hidden = [k for k, v in props.items() if isinstance(v, dict) and v.get("readOnly") is True]
        if hidden:
            out["properties"] = {k: v for k, v in props.items() if k not in hidden}
            if isinstance(out.get("required"), list):
                out["required"] = [r for r in out["required"] if r not in hidden]
    return out
