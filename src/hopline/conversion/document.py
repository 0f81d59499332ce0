"""Reading an OpenAPI document: where it is, what it is, and the API's base URL.

In: a location from ``backends.<id>.openapi`` (a file path, relative to the
configuration file's directory, or an http(s) URL) and the optional ``base_url``.
Out: the parsed document (a dict) and the base URL requests go to, or a
:class:`~hopline.conversion.errors.SpecError` whose message an operator can act on.

Rules
- JSON or YAML (YAML is parsed safely); at most :data:`MAX_SPEC_BYTES`.
- Only OpenAPI 3.0 and 3.1 (``openapi: 3.x``); Swagger 2.0 is refused by name.
- A URL is fetched without credentials, through :mod:`hopline.conversion.netguard`
  (no link-local or metadata address, same-origin redirects only).
- A URL is never part of an error message (it may carry a token in its query);
  the message says "the spec URL" and what went wrong.
- The base URL is ``base_url`` if configured, else the spec's first ``servers[].url``
  with its ``{variables}`` set to their defaults; a relative server URL is resolved
  against the spec's URL, and is an error for a spec read from a file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import orjson
import yaml

from hopline.conversion.errors import SpecError

MAX_SPEC_BYTES = 20 * 1024 * 1024


def is_url(location: str) -> bool:
    return urlsplit(location).scheme in ("http", "https")


def resolve_path(location: str, base_dir: str | None) -> Path:
    path = Path(location).expanduser()
    if not path.is_absolute() and base_dir:
        path = Path(base_dir) / path
    return path


def read_source(
    location: str, base_dir: str | None = None, *, timeout: float = 30.0, allowed: tuple[Any, ...] = ()
) -> bytes:
    """The document's bytes, from a file or (synchronously) from a URL: guarded, same-origin
    redirects only (:func:`hopline.conversion.netguard.fetch_spec`); ``allowed``: the
    backend's ``allow_addresses`` networks."""
    if is_url(location):
        import httpx

        from hopline.conversion.netguard import fetch_spec

        try:
            return fetch_spec(location, allowed, timeout=timeout, read=_capped)
        except httpx.HTTPError as exc:
            raise SpecError(f"cannot fetch the spec: {type(exc).__name__} from the spec URL") from None
    path = resolve_path(location, base_dir)
    try:
        if path.stat().st_size > MAX_SPEC_BYTES:
            raise SpecError(f"the spec file {location} is larger than {MAX_SPEC_BYTES // (1024 * 1024)} MiB")
        return path.read_bytes()
    except OSError as exc:
        raise SpecError(f"cannot read the spec file {location}: {exc.strerror or type(exc).__name__}") from None


def _capped(chunks: Any) -> bytes:
    out = bytearray()
    for chunk in chunks:
        out += chunk
        if len(out) > MAX_SPEC_BYTES:
            raise SpecError(f"the spec is larger than {MAX_SPEC_BYTES // (1024 * 1024)} MiB")
    return bytes(out)


def parse_document(raw: bytes, where: str = "the spec") -> dict[str, Any]:
    """Parse JSON or YAML and check that it is an OpenAPI 3.0/3.1 document."""
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise SpecError(f"{where} is not UTF-8 text") from None
    data: Any
    try:
        data = orjson.loads(text) if text.lstrip().startswith("{") else yaml.safe_load(text)
    except (orjson.JSONDecodeError, yaml.YAMLError) as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" (line {mark.line + 1})" if mark is not None else ""
        raise SpecError(f"{where} is not valid JSON or YAML{at}") from None
    if not isinstance(data, dict):
        raise SpecError(f"{where} is not an OpenAPI document (expected a mapping at the top)")
    if "swagger" in data:
        raise SpecError(
            f"{where} is Swagger {data.get('swagger')}; only OpenAPI 3.0 and 3.1 are supported (convert it first)"
        )
    version = data.get("openapi")
    if isinstance(version, float):  # `openapi: 3.1` unquoted is a YAML number
        version = str(version)
    if not isinstance(version, str) or not version.startswith("3."):
        raise SpecError(f"{where} is not an OpenAPI 3.x document (no `openapi: 3.x` version field)")
    if not isinstance(data.get("paths", {}), dict):
        raise SpecError(f"{where}: `paths` must be a mapping")
    return data


def load_document(
    location: str, base_dir: str | None = None, *, timeout: float = 30.0, allowed: tuple[Any, ...] = ()
) -> dict[str, Any]:
    where = "the spec" if is_url(location) else f"the spec file {location}"
    return parse_document(read_source(location, base_dir, timeout=timeout, allowed=allowed), where)


def base_url_for(document: dict[str, Any], configured: str | None, location: str) -> str:
    """Where the API's requests go (see the module docstring)."""
    if configured:
        return configured.rstrip("/")
    servers = document.get("servers")
    first = servers[0] if isinstance(servers, list) and servers and isinstance(servers[0], dict) else None
    url = first.get("url") if first is not None else None
    if not isinstance(url, str) or not url:
        raise SpecError("the spec names no servers[].url; set `base_url`", key="base_url")
    variables = first.get("variables") if isinstance(first.get("variables"), dict) else {}
    for name, var in variables.items():
        if isinstance(var, dict) and "default" in var:
            url = url.replace("{" + str(name) + "}", str(var["default"]))
    if "{" in url:
        raise SpecError("the spec's servers[0].url has a variable without a default; set `base_url`")
    if not is_url(url):
        if not is_url(location):
            raise SpecError("the spec's servers[0].url is relative and the spec is a file; set `base_url`")
        url = urljoin(location, url)
    return url.rstrip("/")
