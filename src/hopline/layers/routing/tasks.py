"""Reversible task ids for an aggregating gateway (draft §6.3 routing;
reference/mcp-wire.md §8 "2026-07-28 extension", §9 "Tasks").

Task ids are minted by backends, so two backends may mint the same one, and
``tasks/get``, ``tasks/update`` and ``tasks/cancel`` must reach the backend that
holds the task. The id the gateway exposes carries its route in front
(``backend:…``), readable in logs and in the ``Mcp-Name`` header a load balancer
routes on. What follows the separator is the gateway's own random id, not the
backend's: which caller owns the task and the backend's own id are kept in the
session layer's task store (``layers/session/task_store.py``), which resolves
every ``tasks/*`` request.

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
- Routing only: it does not authorize (the task store binds each task to its caller,
  policy rules see ``tasks/*`` as items). Pure; no I/O.
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
