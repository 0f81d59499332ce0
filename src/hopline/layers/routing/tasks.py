"""Reversible task ids for an aggregating gateway (draft §6.3 routing;
reference/mcp-wire.md §8 "2026-07-28 extension", §9 "Tasks").

Task ids are minted by backends, so two backends may mint the same one, and
``tasks/get``, ``tasks/update`` and ``tasks/cancel`` must reach the backend that
holds the task. Rather than a ``taskId -> backend`` table (state that would have
to be shared between gateway processes and expire with the task), the id itself
carries the route.

Contract
- ``expose(backend, task_id)`` gives ``f"{backend}{sep}{task_id}"``; the backend's
  id is kept verbatim (any string, empty included).
- ``resolve(exposed)`` splits on the *first* ``sep`` and returns
  ``(backend, task_id)``, or None when there is no separator, the backend part is
  empty, or the value is not a string. The caller answers None with -32602, as the
  extension does for an unknown ``taskId``.
- ``sep`` (default ``":"``) must not occur in backend ids. ``":"`` is outside MCP's
  tool-name charset and the draft's NAME-CHARSET alike, so no id that passes
  ``Namespace.check_backend_id`` contains it; ``expose`` raises ValueError on one
  that does. The exposed id is what the client echoes in the ``Mcp-Name`` header
  and (2025-11-25) in ``related-task`` ``_meta``; rewrite those with it too.
- Routing only: it does not authorize. Whether a principal may touch a task is the
  backend's (or a policy layer's) decision. Pure; no I/O.
"""

from __future__ import annotations


class TaskIds:
    """``backend:task_id`` and back."""

    __slots__ = ("sep",)

    def __init__(self, sep: str = ":") -> None:
        if not sep:
            raise ValueError("task id separator must be non-empty")
        self.sep = sep

    def expose(self, backend: str, task_id: str) -> str:
        if not isinstance(backend, str) or not backend or self.sep in backend:
            raise ValueError(f"backend id {backend!r} must be non-empty and free of {self.sep!r}")
        return f"{backend}{self.sep}{task_id}"

    def resolve(self, exposed: str) -> tuple[str, str] | None:
        if not isinstance(exposed, str):
            return None
        backend, sep, task_id = exposed.partition(self.sep)
        return (backend, task_id) if sep and backend else None

    def __repr__(self) -> str:
        return f"TaskIds(sep={self.sep!r})"
