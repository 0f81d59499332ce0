"""Start-up check of every ``openapi`` backend: can its spec be loaded and converted?

``hopline check`` and ``hopline serve`` call :func:`check_specs` before anything
runs, so a missing file, a document that is not OpenAPI 3.x, or an ``operations``
entry that names no operation, a spec URL that redirects to another origin, a server
on another origin than the spec URL for a backend with ``headers`` and no ``base_url``,
and a link-local or cloud-metadata address (:mod:`hopline.conversion.netguard`) is a \
:class:`~hopline.config.errors.ConfigError` at
``backends.<id>.<key>``, printed like every other configuration problem, never a
traceback. Synchronous (URL specs are fetched with a blocking client): it runs before
the event loop starts. Disabled backends are not checked.

The documents it read are kept in :data:`PRELOADED` until the backend's connector takes
them (:func:`take`), so a spec is read once per start, not once here and once there.
"""

from __future__ import annotations

from typing import Any

from hopline.config.errors import ConfigError, format_path
from hopline.conversion.document import base_url_for, is_url, load_document
from hopline.conversion.errors import SpecError
from hopline.conversion.netguard import Network, check_credentials, check_url, networks
from hopline.conversion.operations import Converted, convert

PRELOADED: dict[tuple[str, str | None], dict[str, Any]] = {}  # (location, base dir) → document


def take(location: str, base_dir: str | None) -> dict[str, Any] | None:
    """The document the start-up check read for this location, once (None after that)."""
    return PRELOADED.pop((location, base_dir), None)


def load_spec(backend: Any, base_dir: str | None) -> tuple[dict[str, Any], tuple[Network, ...]]:
    """The backend's document, fetched only from an address it may reach, and its allowed networks."""
    allowed = networks(backend.allow_addresses)
    if is_url(backend.openapi):
        check_url(backend.openapi, allowed, "the spec URL", key="openapi")
    return load_document(backend.openapi, base_dir, allowed=allowed), allowed


def api_base(document: dict[str, Any], backend: Any, allowed: tuple[Network, ...]) -> str:
    """Where the API calls go: the base URL, on an origin the credentials may go to, at an address hopline may reach."""
    base_url = base_url_for(document, backend.base_url, backend.openapi)
    check_credentials(base_url, backend.base_url, backend.openapi, backend.headers)
    check_url(base_url, allowed, "the API's base URL", key="base_url")
    return base_url


def check_specs(config: Any, source: str = "<config>") -> dict[str, tuple[Converted, str]]:
    """Backend id → (its conversion, its base URL), for every enabled ``openapi``
    backend; raises :class:`ConfigError` listing each one that cannot be used."""
    problems: list[tuple[str, str]] = []
    out: dict[str, tuple[Converted, str]] = {}
    for backend_id, backend in config.backends.items():
        if not backend.enabled or getattr(backend, "openapi", None) is None:
            continue
        try:
            document, allowed = load_spec(backend, config.base_dir)
            PRELOADED[(backend.openapi, config.base_dir)] = document
            converted = convert(document, backend.operations)
            out[backend_id] = (converted, api_base(document, backend, allowed))
        except SpecError as exc:
            problems.append((format_path(("backends", backend_id, exc.key)), str(exc)))
        except RecursionError:
            problems.append(
                (format_path(("backends", backend_id, "openapi")), "the spec is nested too deeply to convert")
            )
    if problems:
        raise ConfigError(source, problems)
    return out
