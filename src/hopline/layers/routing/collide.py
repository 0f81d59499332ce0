"""Collision resolution for a composed name surface (draft §8: "MUST resolve such
collisions deterministically"; the strategy is declared).

Contract
- In: claims, each a (backend, original) with its candidate exposed names in
  preference order (``names[0]`` the preferred one, ``names[-1]`` the prefixed
  fallback) and a :class:`Collision` strategy.
- Out: each claim either settles on one of its candidates (``claim.name``) or is
  marked ``refused``; settled names are unique. Diagnostics are appended.
- Decisions depend only on the *set* of claims and their ranks (priority, the
  operator's ``order``, backend id, original name), never on list positions, so a
  shuffled relist of the same input settles the same way (test-battery BAD-11).
- Each round looks at every clashing name at once and, per name, picks at most one
  keeper; the others fall back to their next candidate (PREFIX, PRIORITY) or are
  refused. Every round moves or refuses at least one claim, so it terminates.

Keepers per strategy
- REJECT: none; every claim on a clashing name is refused.
- RENAME: the one claim holding an explicit operator rename, if exactly one;
  everything else on that name is refused (only renames resolve collisions).
- PREFIX: claims that can still fall back do so; among those that cannot, the one
  nearest its preferred name keeps it if no other is as near; the rest are refused.
- PRIORITY: the highest rank keeps it: higher ``priority``, then earlier in
  ``order``, then backend id; within one backend, a claim at its preferred name
  (so a loser that fell back is refused if its fallback is taken), then one that
  cannot fall back, then the smaller original name.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Mapping


class Collision(enum.Enum):
    PREFIX = "prefix"
    PRIORITY = "priority"
    RENAME = "rename"
    REJECT = "reject"


@dataclass(slots=True, eq=False)
class Claim:
    """One backend name competing for an exposed name (mutable while settling)."""

    backend: str
    original: str
    item: Mapping[str, Any]
    priority: int
    rank: int  # position of the backend in the operator's order
    names: list[str]  # realized candidates, preferred first, prefixed form last
    wanted: list[str]  # the same candidates before aliasing
    renamed: bool = False  # names[0] is an operator rename
    pos: int = 0
    refused: bool = False

    @property
    def name(self) -> str:
        return self.names[self.pos]

    @property
    def movable(self) -> bool:
        return self.pos + 1 < len(self.names)

    def __str__(self) -> str:
        return f"{self.backend}:{show(self.original)}"


def show(value: object, limit: int = 72) -> str:
    """``repr`` cut to ``limit`` characters, so a 1 KB name cannot flood a log line."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


FALLBACK = frozenset({Collision.PREFIX, Collision.PRIORITY})


def _keeper(group: list[Claim], strategy: Collision) -> Claim | None:
    if strategy is Collision.RENAME:
        renamed = [c for c in group if c.renamed and c.pos == 0]
        return renamed[0] if len(renamed) == 1 else None
    if strategy is Collision.PREFIX:
        stuck = [c for c in group if not c.movable]
        if not stuck:
            return None
        best = min(c.pos for c in stuck)
        at_best = [c for c in stuck if c.pos == best]
        return at_best[0] if len(at_best) == 1 else None
    if strategy is Collision.PRIORITY:
        return min(group, key=lambda c: (-c.priority, c.rank, c.backend, c.pos, c.movable, c.original))
    return None  # REJECT


def settle(claims: list[Claim], strategy: Collision, diagnostics: list[str]) -> None:
    """Settle every claim on a unique name or refuse it (see module docstring)."""
    active = [c for c in claims if not c.refused]
    while True:
        groups: dict[str, list[Claim]] = {}
        for c in active:
            groups.setdefault(c.name, []).append(c)
        clashes = sorted(((n, g) for n, g in groups.items() if len(g) > 1), key=lambda t: t[0])
        if not clashes:
            return
        for name, group in clashes:
            keep = _keeper(group, strategy)
            rivals = ", ".join(str(c) for c in group)
            for c in group:
                if c is keep:
                    continue
                if strategy in FALLBACK and c.movable:
                    c.pos += 1
                    diagnostics.append(
                        f"{c}: {show(name)} collides ({rivals}); falls back to {show(c.name)} [{strategy.value}]"
                    )
                else:
                    c.refused = True
                    diagnostics.append(f"{c}: {show(name)} collides ({rivals}); refused [{strategy.value}]")
        active = [c for c in active if not c.refused]
