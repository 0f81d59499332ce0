"""JSON Patch (RFC 6902), the part mutating webhooks use: ``add``, ``remove``, ``replace``.

A minimal implementation, sans-io, on plain JSON values: ``apply(doc, ops)`` returns a new
document and never changes ``doc``. ``move``, ``copy`` and ``test`` are refused
(:class:`PatchError`), as is a patch of more than ``MAX_OPS`` operations. Pointers are
RFC 6901 (``~1`` is ``/``, ``~0`` is ``~``; ``-`` appends to an array).
"""

from __future__ import annotations

import copy
from typing import Any

MAX_OPS = 1000


class PatchError(ValueError):
    pass


def _tokens(pointer: Any) -> list[str]:
    if not isinstance(pointer, str) or (pointer and not pointer.startswith("/")):
        raise PatchError(f"path {str(pointer)[:60]!r} is not a JSON pointer")
    if pointer == "":
        return []
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/")]


def _index(container: list[Any], token: str, *, append: bool) -> int:
    if append and token == "-":
        return len(container)
    if not token.isdigit() or (token != "0" and token.startswith("0")):
        raise PatchError(f"array index {token[:20]!r} is not a number")
    i = int(token)
    if i > len(container) or (not append and i == len(container)):
        raise PatchError(f"array index {i} is out of range")
    return i


def _parent(doc: Any, tokens: list[str]) -> Any:
    node = doc
    for t in tokens[:-1]:
        if isinstance(node, dict):
            if t not in node:
                raise PatchError(f"no member {t[:40]!r}")
            node = node[t]
        elif isinstance(node, list):
            node = node[_index(node, t, append=False)]
        else:
            raise PatchError("path goes through a value that is not a container")
    return node


def apply(doc: Any, ops: Any) -> Any:
    """``doc`` with ``ops`` applied, all or none."""
    if not isinstance(ops, list):
        raise PatchError("a patch is a list of operations")
    if len(ops) > MAX_OPS:
        raise PatchError(f"a patch of {len(ops)} operations (at most {MAX_OPS})")
    out = copy.deepcopy(doc)
    for op in ops:
        if not isinstance(op, dict):
            raise PatchError("an operation is not an object")
        kind = op.get("op")
        if kind not in ("add", "remove", "replace"):
            raise PatchError(f"operation {str(kind)[:20]!r} is not supported (add, remove, replace)")
        tokens = _tokens(op.get("path"))
        if kind != "remove" and "value" not in op:
            raise PatchError(f"{kind} without a value")
        value = copy.deepcopy(op.get("value"))
        if not tokens:  # the whole document
            if kind == "remove":
                raise PatchError("cannot remove the whole document")
            out = value
            continue
        parent, last = _parent(out, tokens), tokens[-1]
        if isinstance(parent, dict):
            if kind != "add" and last not in parent:
                raise PatchError(f"no member {last[:40]!r} to {kind}")
            if kind == "remove":
                del parent[last]
            else:
                parent[last] = value
        elif isinstance(parent, list):
            i = _index(parent, last, append=kind == "add")
            if kind == "add":
                parent.insert(i, value)
            elif kind == "remove":
                del parent[i]
            else:
                parent[i] = value
        else:
            raise PatchError("path's parent is not a container")
    return out
