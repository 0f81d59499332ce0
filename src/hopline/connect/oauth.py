"""hopline as the OAuth 2.1 client of one upstream MCP server: discovery, the authorization request, the code and
refresh grants.

Discovery (MCP authorization, 2025-11-25 and 2026-07-28): the backend's 401 ``WWW-Authenticate`` names its
protected resource metadata (``resource_metadata``, RFC 9728) and maybe the ``scope`` it wants; without it the
well-known URIs are tried (path-suffixed, then at the root). The metadata's ``resource`` must be the backend's own
URL (canonical), its first ``authorization_servers`` entry is the issuer, whose metadata comes from RFC 8414 then
OpenID discovery (path-inserted, then path-appended) and must carry exactly that ``issuer`` (mix-up defence, RFC
8414 §3.3) and support PKCE S256. The authorization response's ``iss`` (RFC 9207) must be that issuer too.

The grants go through Authlib's httpx OAuth 2 client (``AsyncOAuth2Client``): it is the OAuth client hopline
already uses for sign-in (hopline/signin/upstream.py), it implements the client authentication methods
(``client_secret_basic``, ``client_secret_post``, ``none``), PKCE (RFC 7636, S256) and token parsing, so none of
that is hand-written here. What Authlib does not check (the metadata rules above, the token answer's shape) is
checked here. Every failure is an :class:`OAuthFailure` whose message names no token and no secret.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
from authlib.common.security import generate_token
from authlib.integrations.httpx_client import AsyncOAuth2Client

MAX_DOCUMENT = 256 * 1024
MAX_LIFETIME = 30 * 24 * 3600.0
DEFAULT_LIFETIME = 3600.0
_PARAM = re.compile(r'([A-Za-z_][A-Za-z0-9_-]*)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]+))')
_DEFAULT_PORTS = {"http": 80, "https": 443}
AUTH_METHODS = {"basic": "client_secret_basic", "post": "client_secret_post", "none": "none"}


class OAuthFailure(Exception):
    """The upstream server or its authorization server refused, or answered something unusable.

    ``refused``: the authorization server answered with an OAuth error (``invalid_grant``…): the grant is gone.
    Otherwise it could not be reached or answered garbage, and trying again later may work."""

    def __init__(self, message: str, *, refused: bool = False) -> None:
        super().__init__(message)
        self.refused = refused


def canonical(url: str) -> str:
    """RFC 8707 canonical form: lower-case scheme and host, no default port, no trailing slash, no fragment."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    port = parts.port
    netloc = host if port is None or port == _DEFAULT_PORTS.get(parts.scheme.lower()) else f"{host}:{port}"
    return urlunsplit((parts.scheme.lower(), netloc, parts.path.rstrip("/"), parts.query, ""))


def challenge_params(header: str | None) -> dict[str, str]:
    """The auth-params of a ``Bearer`` challenge (``resource_metadata``, ``scope``, ``error``)."""
    if not header or not header.lower().lstrip().startswith("bearer"):
        return {}
    return {m.group(1).lower(): m.group(2) if m.group(2) is not None else m.group(3) for m in _PARAM.finditer(header)}


@dataclass
class Discovery:
    """What an upstream server's metadata says: its resource, its issuer and the issuer's metadata."""

    resource: str
    issuer: str
    metadata: dict[str, Any]
    scopes: list[str] = field(default_factory=list)

    @property
    def cimd(self) -> bool:
        return self.metadata.get("client_id_metadata_document_supported") is True


def _safe_url(url: Any, what: str) -> str:
    if not isinstance(url, str):
        raise OAuthFailure(f"the {what} is missing")
    parts = urlsplit(url)
    loopback = parts.hostname in ("127.0.0.1", "localhost", "::1")
    if parts.scheme != "https" and not (parts.scheme == "http" and loopback):
        raise OAuthFailure(f"the {what} is not an https URL")
    return url


async def _json(http: httpx.AsyncClient, url: str, what: str) -> dict[str, Any] | None:
    """A metadata document; None for a 404 (try the next well-known URI)."""
    try:
        r = await http.get(url, headers={"accept": "application/json"})
    except httpx.HTTPError as exc:
        raise OAuthFailure(f"the {what} cannot be fetched ({type(exc).__name__})") from None
    if r.status_code in (404, 405, 400, 401):
        return None
    if r.status_code != 200 or len(r.content) > MAX_DOCUMENT:
        raise OAuthFailure(f"the {what} answered HTTP {r.status_code}")
    try:
        doc = r.json()
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        raise OAuthFailure(f"the {what} is not a JSON object")
    return doc


def _well_known(url: str, name: str) -> list[str]:
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    root = f"{parts.scheme}://{parts.netloc}"
    out = [f"{root}/.well-known/{name}{path}"] if path else []
    return out + [f"{root}/.well-known/{name}"]


async def discover(http: httpx.AsyncClient, backend_url: str, challenge: str | None = None) -> Discovery:
    """Discovery from the backend's 401 challenge (``challenge``: its ``WWW-Authenticate``; None: probe it)."""
    if challenge is None:
        try:
            r = await http.post(
                backend_url,
                content=b'{"jsonrpc":"2.0","id":0,"method":"ping"}',
                headers={"content-type": "application/json", "accept": "application/json, text/event-stream"},
            )
        except httpx.HTTPError as exc:
            raise OAuthFailure(f"the backend cannot be reached ({type(exc).__name__})") from None
        challenge = r.headers.get("www-authenticate") if r.status_code == 401 else None
    params = challenge_params(challenge)
    resource = canonical(backend_url)
    urls = (
        [params["resource_metadata"]]
        if "resource_metadata" in params
        else _well_known(backend_url, "oauth-protected-resource")
    )
    prm = None
    for url in urls:
        prm = await _json(http, _safe_url(url, "protected resource metadata URL"), "protected resource metadata")
        if prm is not None:
            break
    if prm is None:
        raise OAuthFailure("the backend publishes no protected resource metadata (RFC 9728)")
    if not isinstance(prm.get("resource"), str) or canonical(prm["resource"]) != resource:
        raise OAuthFailure("the protected resource metadata names another resource than the backend's URL")
    servers = prm.get("authorization_servers")
    if not isinstance(servers, list) or not servers or not isinstance(servers[0], str):
        raise OAuthFailure("the protected resource metadata names no authorization server")
    issuer = _safe_url(servers[0], "authorization server")
    meta = None
    candidates = _well_known(issuer, "oauth-authorization-server") + _well_known(issuer, "openid-configuration")[:1]
    candidates.append(issuer.rstrip("/") + "/.well-known/openid-configuration")
    for url in dict.fromkeys(candidates):
        meta = await _json(http, url, "authorization server metadata")
        if meta is not None:
            break
    if meta is None:
        raise OAuthFailure("the authorization server publishes no metadata (RFC 8414 / OpenID discovery)")
    if meta.get("issuer") != issuer:
        raise OAuthFailure("the authorization server's metadata names another issuer (mix-up refused)")
    for key in ("authorization_endpoint", "token_endpoint"):
        _safe_url(meta.get(key), f"authorization server's {key}")
    if "S256" not in (meta.get("code_challenge_methods_supported") or []):
        raise OAuthFailure("the authorization server does not support PKCE S256")
    scopes = params["scope"].split() if params.get("scope") else prm.get("scopes_supported") or []
    scopes = [s for s in scopes if isinstance(s, str)]
    return Discovery(resource, issuer, meta, scopes)


class Client:
    """hopline's client identity at one upstream authorization server."""

    def __init__(
        self,
        client_id: str,
        client_secret: str | None,
        auth_method: str,
        redirect_uri: str,
        *,
        timeout: float = 10.0,
    ) -> None:
        self.client_id, self.redirect_uri, self.timeout = client_id, redirect_uri, timeout
        self._secret, self._method = client_secret, AUTH_METHODS[auth_method]

    def _oauth(self, scopes: list[str]) -> AsyncOAuth2Client:
        return AsyncOAuth2Client(
            client_id=self.client_id,
            client_secret=self._secret,
            token_endpoint_auth_method=self._method,
            redirect_uri=self.redirect_uri,
            scope=" ".join(scopes) or None,
            code_challenge_method="S256",
            timeout=self.timeout,
            follow_redirects=False,
            trust_env=False,
        )

    def authorization_url(self, found: Discovery, scopes: list[str]) -> tuple[str, str, str]:
        """(URL, state, PKCE verifier) of an authorization request for ``found.resource``."""
        state, verifier = generate_token(43), generate_token(64)
        client = self._oauth(scopes)
        url, _ = client.create_authorization_url(
            found.metadata["authorization_endpoint"], state=state, code_verifier=verifier, resource=found.resource
        )
        return url, state, verifier

    async def code(self, found: Discovery, scopes: list[str], code: str, verifier: str) -> dict[str, Any]:
        return await self._token(found, scopes, grant_type="authorization_code", code=code, code_verifier=verifier)

    async def refresh(self, found: Discovery, scopes: list[str], refresh_token: str) -> dict[str, Any]:
        # No scope: the grant's own (RFC 6749 §6); asking again for one the server dropped would be refused.
        out = await self._token(found, [], grant_type="refresh_token", refresh_token=refresh_token)
        out.setdefault("refresh_token", refresh_token)  # no rotation: the old one stays valid
        return out

    async def _token(self, found: Discovery, scopes: list[str], **form: str) -> dict[str, Any]:
        started = time.time()
        async with self._oauth(scopes) as client:
            try:
                if form["grant_type"] == "refresh_token":
                    token = await client.refresh_token(
                        found.metadata["token_endpoint"], refresh_token=form["refresh_token"], resource=found.resource
                    )
                else:
                    token = await client.fetch_token(
                        found.metadata["token_endpoint"],
                        grant_type="authorization_code",
                        code=form["code"],
                        code_verifier=form["code_verifier"],
                        resource=found.resource,
                    )
            except httpx.HTTPError as exc:
                raise OAuthFailure(f"the token endpoint cannot be reached ({type(exc).__name__})") from None
            except Exception as exc:  # Authlib's OAuthError, or a body that is not JSON
                code = getattr(exc, "error", None)
                code = code if isinstance(code, str) and re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", code) else None
                if code:
                    raise OAuthFailure(f"the token endpoint refused ({code})", refused=True) from None
                raise OAuthFailure("the token endpoint answered something unusable") from None
        access = token.get("access_token")
        if not isinstance(access, str) or not access or any(c in access for c in "\r\n\0 "):
            raise OAuthFailure("the token endpoint's answer has no usable access_token")
        if str(token.get("token_type", "bearer")).lower() != "bearer":
            raise OAuthFailure("the token endpoint's answer is not a bearer token")
        lifetime = token.get("expires_in")
        if not isinstance(lifetime, (int, float)) or isinstance(lifetime, bool) or lifetime <= 0:
            lifetime = DEFAULT_LIFETIME
        refresh = token.get("refresh_token")
        return {
            "access_token": access,
            "expires_at": started + min(float(lifetime), MAX_LIFETIME),
            "refresh_token": refresh if isinstance(refresh, str) and refresh else None,
            "scope": token.get("scope") if isinstance(token.get("scope"), str) else " ".join(scopes),
        }
