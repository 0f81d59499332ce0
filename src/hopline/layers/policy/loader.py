"""Loading operator interceptors named in the configuration: a ``module:Class`` (or
dotted) path, or an entry point in the ``hopline.interceptors`` group, instantiated with
the entry's ``options``. Errors are ``ValueError``/``TypeError`` with a message naming
what could not be loaded; the builder turns them into located config errors.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from typing import Any, Mapping

ENTRY_POINT_GROUP = "hopline.interceptors"


def entry_points(name: str) -> list[importlib.metadata.EntryPoint]:
    return list(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP, name=name))


def load_class(path: str | None = None, entry_point: str | None = None) -> type:
    """The class named by ``module:Class`` / ``module.Class``, or by an entry point.
    Raises ``ValueError`` with a message fit for a configuration error."""
    if entry_point is not None:
        found = entry_points(entry_point)
        if not found:
            raise ValueError(
                f"no entry point {entry_point!r} in group {ENTRY_POINT_GROUP!r} (is its package installed?)"
            )
        try:
            return found[0].load()
        except Exception as exc:
            raise ValueError(f"entry point {entry_point!r} cannot be loaded: {type(exc).__name__}: {exc}") from None
    assert path is not None
    module_name, sep, attr = path.partition(":")
    if not sep:
        module_name, _, attr = path.rpartition(".")
    if not module_name or not attr:
        raise ValueError(f"{path!r} is not `package.module:Class` or `package.module.Class`")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        hint = (
            " (is its directory on PYTHONPATH, or its package installed?)"
            if exc.name == module_name.split(".")[0]
            else ""
        )
        raise ValueError(f"module {module_name!r} cannot be imported: {type(exc).__name__}: {exc}{hint}") from None
    except Exception as exc:
        raise ValueError(f"module {module_name!r} cannot be imported: {type(exc).__name__}: {exc}") from None
    obj: Any = module
    for part in attr.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise ValueError(f"module {module_name!r} has no {attr!r}")
    return obj


def instantiate(cls: Any, options: Mapping[str, Any]) -> Any:
    try:
        return cls(**options)
    except TypeError as exc:
        raise ValueError(f"{getattr(cls, '__name__', cls)!s} does not accept these options: {exc}") from None
