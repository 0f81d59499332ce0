"""Start-up check of every ``openapi`` backend: can its spec be loaded and converted?

``hopline check`` and ``hopline serve`` call :func:`check_specs` before anything
runs, so a missing file, a document that is not OpenAPI 3.x, or an ``operations``
entry that names no operation is a :class:`~hopline.config.errors.ConfigError` at
``backends.<id>.<key>``, printed like every other configuration problem, never a
traceback. Synchronous (URL specs are fetched with a blocking client): it runs before
the event loop starts. Disabled backends are not checked.

The documents it read are kept in :data:`PRELOADED` until the backend's connector takes
them (:func:`take`), so a spec is read once per start, not once here and once there.
"""

from __future__ import annotations

from typing import Any

from hopline.config.errors import ConfigError, format_path
from hopline.conversion.document import SpecError, base_url_for, load_document
from hopline.conversion.operations import Converted, convert

PRELOADED: dict[tuple[str, str | None], dict[str, Any]] = {}  # (location, base dir) → document


def take(location: str, base_dir: str | None) -> dict[str, Any] | None:
    """The document the start-up check read for this location, once (None after that)."""
    return PRELOADED.pop((location, base_dir), None)


def check_specs(config: Any, source: str = "<config>") -> dict[str, tuple[Converted, str]]:
    """Backend id → (its conversion, its base URL), for every enabled ``openapi``
    backend; raises :class:`ConfigError` listing each one that cannot be used."""
    problems: list[tuple[str, str]] = []
    out: dict[str, tuple[Converted, str]] = {}
    for backend_id, backend in config.backends.items():
        if not backend.enabled or getattr(backend, "openapi", None) is None:
            continue
        try:
            document = load_document(backend.openapi, config.base_dir)
            PRELOADED[(backend.openapi, config.base_dir)] = document
            converted = convert(document, backend.operations)
            out[backend_id] = (converted, base_url_for(document, backend.base_url, backend.openapi))
        except SpecError as exc:
            problems.append((format_path(("backends", backend_id, exc.key)), str(exc)))
        except RecursionError:
            problems.append((format_path(("backends", backend_id, "openapi")), "the spec is nested too deeply to convert"))
    if problems:
        raise ConfigError(source, problems)
    return out
