"""Configuration: one YAML file, validated, with ``${VAR}`` secrets, the desktop
``mcpServers`` import (and VS Code's ``servers``) and hot reload (DESIGN §3.8).

- ``schema``: the pydantic models (:class:`GatewayConfig` and its sections).
- ``load``: :func:`load_config` / :func:`parse_config` and :class:`ConfigError`.
- ``interpolate``, ``desktop``, ``ids``: the pure steps ``load`` applies.
- ``watch``: :class:`ConfigWatcher` and :func:`diff_backends` for hot reload.
- ``hopline schema`` and ``hopline check`` are :mod:`hopline.commands`.

Names below are imported on first use, so importing this package (as the CLI does
for ``hopline --help``) does not import pydantic or PyYAML.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "GatewayConfig": "schema",
    "BackendConfig": "schema",
    "RoutingConfig": "schema",
    "ListenConfig": "schema",
    "ConfigError": "errors",
    "load_config": "load",
    "parse_config": "load",
    "ConfigWatcher": "watch",
    "BackendDiff": "watch",
    "diff_backends": "watch",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
