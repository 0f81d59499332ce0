"""The composed, namespaced surface of one kind (tools or prompts) (draft §8, §6.3).

Contract
- In: each backend's list items (``{backend_id: [item, ...]}``, items as the
  backend sent them), a :class:`Namespace`, a :class:`Collision` strategy, optional
  per-backend :class:`BackendNames` and the operator's backend ``order``.
- Out: a :class:`Catalog`: ``items`` to show the client (shallow copies with
  ``"name"`` replaced, backends in ``order`` — default sorted ids — and items in
  backend order), the exposed-name table (``resolve``, ``exposed_for``), human-readable
  ``diagnostics`` and a ``version`` hash that is equal for equal input.
- The table is the only source of truth for routing: exposed names are unique, and
  ``resolve`` never parses a name. Every exposed name is in the charset and within
  ``max_length``.
- Never depends on mapping iteration order or on item positions for which name an
  item gets (test-battery BAD-11); never performs I/O. Backend ids must pass
  ``Namespace.check_backend_id`` (ValueError otherwise: config is checked at load).

Naming rules, in order, per (backend, original):
1. Items without a non-empty string ``name`` are skipped; a repeated name within one
   backend keeps its first item. Both leave a diagnostic.
2. Candidates: the preferred name is the operator's ``rename`` target if given
   (used as the exact final name, never prefixed), else the original when
   ``prefix=False``, else ``join(backend, original)``; the fallback is always
   ``join(backend, original)``.
3. A candidate that is not a valid name (charset, length) becomes an alias:
   ``Namespace.alias`` (sanitized, truncated, ``_`` + 8 hex of sha256(backend NUL
   original)). A rename target must be valid as given, or it is ignored.
4. Ownership (F13, BAD-12): a name containing the delimiter belongs to the backend
   it starts with. A backend-supplied or renamed name that lands in *another*
   backend's namespace (configured or not) is never exposed as is; the entry takes
   its prefixed form instead. So no backend can shadow, or later be shadowed by,
   ``other__x``; cross-backend collisions only happen on delimiter-free names.
5. Remaining collisions are settled by the strategy (see ``collide.py``); refused
   entries are absent from ``items`` and ``resolve``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from hopline.header_codec import param_map
from hopline.layers.routing.collide import Claim, Collision, settle, show
from hopline.layers.routing.namespace import Namespace

__all__ = ["BackendNames", "Catalog", "Collision", "Entry"]


@dataclass(frozen=True, slots=True)
class Entry:
    exposed: str
    backend: str
    original: str


@dataclass(frozen=True)
class BackendNames:
    """Per-backend naming options, from config."""

    prefix: bool = True
    priority: int = 0
    rename: Mapping[str, str] = field(default_factory=dict)


_DEFAULT = BackendNames()


class Catalog:
    """The composed, namespaced surface of one kind (tools or prompts) from many backends."""

    __slots__ = ("items", "entries", "diagnostics", "version", "_by_exposed", "_by_origin", "_position")

    def __init__(self, items: list[dict], entries: list[Entry], diagnostics: list[str]) -> None:
        self.items = items
        self.entries = entries  # parallel to items
        self.diagnostics = diagnostics
        self._by_exposed = {e.exposed: e for e in entries}
        self._by_origin = {(e.backend, e.original): e.exposed for e in entries}
        self._position = {e.exposed: i for i, e in enumerate(entries)}
        surface = [[e.exposed, e.backend, e.original, i] for e, i in zip(entries, items)]
        try:
            blob = json.dumps(surface, sort_keys=True, default=repr)
        except (TypeError, ValueError):  # keys JSON never produces (mixed types, cycles)
            blob = repr(surface)
        self.version = hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()[:16]

    @classmethod
    def build(
        cls,
        lists: Mapping[str, Sequence[Mapping[str, Any]]],
        *,
        namespace: Namespace,
        strategy: Collision,
        options: Mapping[str, BackendNames] | None = None,
        order: Sequence[str] | None = None,
    ) -> Catalog:
        options = options or {}
        first = [b for b in dict.fromkeys(order or ()) if b in lists]
        backends = first + sorted(set(lists) - set(first))
        diagnostics: list[str] = []
        claims: list[Claim] = []
        for rank, backend in enumerate(backends):
            namespace.check_backend_id(backend)
            opts = options.get(backend, _DEFAULT)
            seen: set[str] = set()
            for index, item in enumerate(lists[backend] or ()):
                name = item.get("name") if isinstance(item, Mapping) else None
                if not isinstance(name, str) or not name:
                    diagnostics.append(f"{backend}: item #{index} has no non-empty string name ({show(name)}); skipped")
                    continue
                if name in seen:
                    diagnostics.append(f"{backend}:{show(name)} listed more than once; later copies ignored")
                    continue
                schema = item.get("inputSchema")
                if isinstance(schema, dict) and param_map(schema) is None:  # SEP-2243: clients MUST exclude it
                    diagnostics.append(f"{backend}:{show(name)} has an invalid x-mcp-header annotation; not listed")
                    continue
                seen.add(name)
                claims.append(_claim(namespace, backend, name, item, opts, rank, diagnostics))
        settle(claims, strategy, diagnostics)
        items: list[dict] = []
        entries: list[Entry] = []
        for c in claims:
            if c.refused:
                continue
            if c.name != c.wanted[c.pos]:
                why = (
                    "too long"
                    if namespace.is_valid_name(c.wanted[c.pos][: namespace.max_length])
                    else "outside the charset"
                )
                diagnostics.append(f"{c}: {show(c.wanted[c.pos])} is {why}; exposed as alias {show(c.name)}")
            exposed = dict(c.item)
            exposed["name"] = c.name
            items.append(exposed)
            entries.append(Entry(c.name, c.backend, c.original))
        return cls(items, entries, diagnostics)

    def resolve(self, exposed: str) -> Entry | None:
        """The entry an exposed name routes to; None if it is not on the surface."""
        return self._by_exposed.get(exposed) if isinstance(exposed, str) else None

    def item(self, exposed: str) -> dict | None:
        """The exposed item (definition with its exposed name) for a name on the surface."""
        i = self._position.get(exposed) if isinstance(exposed, str) else None
        return None if i is None else self.items[i]

    def exposed_for(self, backend: str, original: str) -> str | None:
        return self._by_origin.get((backend, original))

    def __len__(self) -> int:
        return len(self.entries)

    def __repr__(self) -> str:
        return f"<Catalog {len(self.entries)} names version={self.version} diagnostics={len(self.diagnostics)}>"


def _claim(
    ns: Namespace,
    backend: str,
    name: str,
    item: Mapping[str, Any],
    opts: BackendNames,
    rank: int,
    diagnostics: list[str],
) -> Claim:
    """Candidates for one (backend, original), preferred first (rules 2-4)."""

    def realize(wanted: str) -> str:
        return wanted if ns.is_valid_name(wanted) else ns.alias(wanted, backend, name)

    def foreign(exposed: str) -> bool:
        """Whether ``exposed`` has the delimiter but not this backend's prefix (rule 4)."""
        head = ns.split(exposed)
        return ns.delimiter in exposed and (head is None or head[0] != backend)

    prefixed, own = ns.join(backend, name), ns.join(backend, "")
    preferred: tuple[str, str] | None = None
    renamed = False
    target = opts.rename.get(name)
    if target is not None:
        if not ns.is_valid_name(target):
            diagnostics.append(
                (
                    f"{backend}:{show(name)} rename to {show(target)} ignored: not a valid name ({ns.charset}, "
                    f"1..{ns.max_length})"
                )
            )
        elif foreign(target):
            diagnostics.append(
                (
                    f"{backend}:{show(name)} rename to {show(target)} ignored: it has {ns.delimiter!r} but not the "
                    f"prefix {own!r}"
                )
            )
        else:
            preferred, renamed = (target, target), True
    if preferred is None and not opts.prefix:
        exposed = realize(name)
        if foreign(exposed):
            diagnostics.append(
                (
                    f"{backend}:{show(name)} would be exposed as {show(exposed)}, which has {ns.delimiter!r} but not "
                    f"the prefix {own!r}; prefixed instead"
                )
            )
        else:
            preferred = (exposed, name)
    fallback = (realize(prefixed), prefixed)
    cands = [preferred, fallback] if preferred is not None and preferred[0] != fallback[0] else [fallback]
    return Claim(
        backend,
        name,
        item,
        opts.priority,
        rank,
        names=[n for n, _ in cands],
        wanted=[w for _, w in cands],
        renamed=renamed,
    )
