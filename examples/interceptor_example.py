"""An operator's own policy interceptor for hopline (the API: src/hopline/layers/policy/interceptor.py).

Use it from a configuration file (examples/policy.yaml does)::

    policy:
      interceptors:
        - class: interceptor_example:GuardDestructive
          options: {role: admin}

and make the module importable, e.g. ``PYTHONPATH=examples hopline serve examples/policy.yaml``
(or package it and declare an entry point in group ``hopline.interceptors``).

An interceptor is a plain class: a ``name`` and any of the four hooks ``pre_route``,
``post_route``, ``pre_response``, ``post_response``. Each hook gets a frozen view and
returns a decision — ``None`` (continue), ``mutate(new)`` or ``reject(error)`` — and may
be ``async``. Every decision is written to the audit log by the chain; ``reason`` is
for the log, never shown to the client.
"""

from __future__ import annotations

from typing import Any

from hopline.layers.policy.chain import Decision, PostRoute, PostResponse, PreResponse, mutate, reject


class GuardDestructive:
    """Refuse tools their backend marks destructive unless the caller holds ``role``;
    label every other tool result with the backend it came from."""

    name = "guard-destructive"

    def __init__(self, role: str = "admin", label: bool = True) -> None:
        self.role = role
        self.label = label
        self.seen = 0

    def post_route(self, view: PostRoute) -> Decision | None:
        if view.method != "tools/call" or view.direction != "to_backend":
            return None
        annotations: dict[str, Any] = (view.definition or {}).get("annotations") or {}
        if annotations.get("destructiveHint") is True and self.role not in _roles(view.principal.claims):
            return reject(f"{view.name} needs the {self.role} role", reason="destructive tool without the role")
        return None

    def pre_response(self, view: PreResponse) -> Decision | None:
        result = view.result
        if not self.label or result is None or view.method != "tools/call":
            return None
        meta = {**(result.get("_meta") or {}), "example.org/backend": view.backend}
        return mutate({**result, "_meta": meta}, reason="labelled")

    def post_response(self, view: PostResponse) -> None:
        self.seen += 1  # observation only: count what went out


def _roles(claims: dict[str, Any]) -> set[str]:
    roles = claims.get("roles", [])
    return {roles} if isinstance(roles, str) else {r for r in roles if isinstance(r, str)} if isinstance(roles, list) else set()
