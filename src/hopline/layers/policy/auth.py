"""Authentication at the gateway's front: the OAuth 2.1 resource server (mcp-wire §7).

In: one HTTP request's headers and query string. Out: the caller's
:class:`~hopline.context.Principal`, or an :class:`AuthError` carrying the HTTP
answer (401 with ``WWW-Authenticate: Bearer resource_metadata="…"``; 403
``insufficient_scope`` naming the scopes needed; 431 for an oversized credential).
It runs on every request to an MCP endpoint, before anything reaches a listener, so a
refused request never reaches a backend and a session id is never a credential.

Bearer JWTs (RFC 9068 shape) are checked in this order: size; the Authorization header
only (a token in the query string is refused, a cookie is never read); three base64url
segments of JSON; no ``crit``; an accepted ``typ``; a trusted ``iss`` (exact match),
whose own keys alone are searched for the ``kid`` (jwks.py); the token's ``alg`` must
equal the key's pinned algorithm (``none`` can never match); the signature; ``exp``
(required unless configured otherwise), ``nbf`` and ``iat`` with the configured leeway;
``aud`` must hold this gateway's canonical resource exactly (RFC 8707); ``sub`` must be
a non-empty string. A verified token is cached (bounded, until it expires) so a repeat
costs a dict lookup.

API keys (simple deployments): the configured header (``x-api-key``), or a bearer
value that is not JWT-shaped; compared in constant time against every configured key;
the key's name becomes the subject (issuer ``"api-key"``).

Never: log, echo or put in an error a credential or a claim of a refused token.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
import re
import time
from typing import Any, Callable, Protocol
from urllib.parse import parse_qsl, urlsplit

import orjson

from hopline.context import Principal
from hopline.layers.policy.jwks import Fetch, HttpFetcher, KeySet
from hopline.layers.policy.settings import AuthSettings

log = logging.getLogger("hopline.auth")

LOCAL = Principal("local")  # the client on hopline's own stdio: no authentication (mcp-wire §7 is HTTP's)
API_KEY_ISSUER = "api-key"
WELL_KNOWN = "/.well-known/oauth-protected-resource"
QUERY_TOKEN_KEYS = ("access_token",)
NO_EXP_CACHE_SECONDS = 300.0
_B64URL = re.compile(r"[A-Za-z0-9_-]*")
_B64TOKEN = re.compile(r"[A-Za-z0-9._~+/-]+=*")  # RFC 6750 §2.1 b64token


def key_principal(name: str, scopes: Any = ()) -> Principal:
    """The caller an API key named ``name`` authenticates (the admin page previews it too)."""
    return Principal(name, {"sub": name}, frozenset(scopes), API_KEY_ISSUER)


class HeaderSource(Protocol):
    def get(self, name: bytes, default: str | None = None) -> str | None: ...


class AuthError(Exception):
    """A refused request: the HTTP status, the RFC 6750 error code and a safe description."""

    def __init__(self, status: int, error: str | None, description: str, *, scope: str | None = None) -> None:
        super().__init__(description)
        self.status = status
        self.error = error
        self.description = description
        self.scope = scope

    def headers(self, metadata_url: str) -> dict[str, str]:
        if self.status not in (401, 403):
            return {}
        params = [f'resource_metadata="{metadata_url}"']
        if self.error:
            params.append(f'error="{self.error}"')
            params.append(f'error_description="{self.description}"')
        if self.scope:
            params.append(f'scope="{self.scope}"')
        return {"www-authenticate": "Bearer " + ", ".join(params)}

    def body(self) -> bytes:
        return orjson.dumps({"error": self.error or "unauthorized", "error_description": self.description})

    def __repr__(self) -> str:
        return f"<AuthError {self.status} {self.error} {self.description!r}>"


def _invalid(description: str) -> AuthError:
    return AuthError(401, "invalid_token", description)


def metadata_url(resource: str) -> str:
    """RFC 9728 §3.1: the well-known path inserted between the host and the resource's path."""
    parts = urlsplit(resource)
    return f"{parts.scheme}://{parts.netloc}{WELL_KNOWN}{parts.path}"


class Authenticator:
    """Turns a request's credentials into a Principal (see the module docstring)."""

    # hopline's own authorization server (hopline.signin, ``auth.signin``), when configured: the HTTP app
    # serves its paths, and its issuer is among ``config.issuers`` (composed in, so nothing here changes).
    signin: Any = None

    def __init__(
        self,
        config: AuthSettings,
        *,
        fetch: Fetch | None = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.resource = config.resource
        self.metadata_url = metadata_url(config.resource)
        self._clock = clock
        self._fetcher: HttpFetcher | None = None  # ours to close, when nobody gave us a fetch
        if fetch is None:
            fetch = self._fetcher = HttpFetcher()
        self._issuers = {
            i.issuer: KeySet(i, where=f"auth.issuers[{n}]", fetch=fetch, clock=monotonic)
            for n, i in enumerate(config.issuers)
        }
        self._leeway = config.leeway
        self._types = frozenset(t.lower() for t in config.token_types)
        self._max = config.max_token_bytes
        self._required = frozenset(config.required_scopes)
        self._required_text = " ".join(config.required_scopes) or None
        self._cache: dict[str, tuple[Principal, float]] = {}
        self._cache_size = config.cache_size
        self._key_header = config.api_key_header.encode("latin-1")
        self._api_keys = [
            (hashlib.sha256(k.key.encode()).digest(), key_principal(k.name, k.scopes)) for k in config.api_keys
        ]

    # -- the protected resource metadata (RFC 9728) -----------------------------------------
    def metadata(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "resource": self.resource,
            "authorization_servers": self.config.metadata_servers,
            "bearer_methods_supported": ["header"],
        }
        if self.config.scopes_supported or self.config.required_scopes:
            doc["scopes_supported"] = self.config.scopes_supported or self.config.required_scopes
        if self.config.resource_name:
            doc["resource_name"] = self.config.resource_name
        return doc

    def metadata_paths(self, *local_paths: str) -> frozenset[str]:
        """Where the metadata is served: the bare well-known path and its path-suffixed forms."""
        suffixes = {"", urlsplit(self.resource).path, *local_paths}
        return frozenset(WELL_KNOWN + s.rstrip("/") for s in suffixes)

    # -- per request -------------------------------------------------------------------------
    async def check(self, headers: HeaderSource, query: bytes = b"") -> Principal | AuthError:
        """The caller, or the refusal to answer with (a decision, for the HTTP front)."""
        try:
            return await self.authenticate(headers, query)
        except AuthError as exc:
            return exc

    async def authenticate(self, headers: HeaderSource, query: bytes = b"") -> Principal:
        if query and _has_query_token(query):
            raise AuthError(401, "invalid_request", "access tokens are accepted only in the Authorization header")
        value = headers.get(b"authorization")
        if value is None:
            key = headers.get(self._key_header) if self._api_keys else None
            if key is not None:
                return self._api_key(key)
            raise AuthError(401, None, "authentication required", scope=self._required_text)
        if len(value) > self._max:
            raise AuthError(431, "invalid_request", "the Authorization header is too large")
        scheme, _, token = value.partition(" ")
        if scheme.lower() != "bearer":
            raise AuthError(401, None, "a Bearer token is required", scope=self._required_text)
        token = token.strip(" ")
        cached = self._cache.get(token)
        if cached is not None:
            if self._clock() < cached[1]:
                return cached[0]
            self._cache.pop(token, None)
        if not token or not _B64TOKEN.fullmatch(token):
            raise AuthError(401, "invalid_request", "malformed Authorization header")
        if token.count(".") != 2 and self._api_keys:
            return self._api_key(token)
        principal, expires = await self._verify(token)
        if not self._required <= principal.scopes:
            raise AuthError(403, "insufficient_scope", "the token lacks a required scope", scope=self._required_text)
        if self._cache_size:
            if len(self._cache) >= self._cache_size:
                self._evict()
            self._cache[token] = (principal, expires)
        return principal

    def _evict(self) -> None:
        now = self._clock()
        for token in [t for t, (_, exp) in self._cache.items() if exp <= now]:
            del self._cache[token]
        while len(self._cache) >= self._cache_size:
            del self._cache[next(iter(self._cache))]  # the oldest entry

    def _api_key(self, presented: str) -> Principal:
        if len(presented) > self._max:
            raise AuthError(431, "invalid_request", "the API key header is too large")
        digest = hashlib.sha256(presented.encode("utf-8", "surrogateescape")).digest()
        found = None
        for expected, principal in self._api_keys:  # no early exit: time does not depend on which key
            if hmac.compare_digest(digest, expected):
                found = principal
        if found is None:
            raise _invalid("unknown API key")
        if not self._required <= found.scopes:
            raise AuthError(403, "insufficient_scope", "the API key lacks a required scope", scope=self._required_text)
        return found

    async def _verify(self, token: str) -> tuple[Principal, float]:
        """Verify a JWT; returns the principal and until when it may be cached."""
        h64, p64, s64 = _segments(token)
        header, claims, signature = _json(h64), _json(p64), _b64(s64)
        alg = header.get("alg")
        if not isinstance(alg, str) or alg.lower() == "none" or not signature:
            raise _invalid("unsigned tokens are not accepted")
        if "crit" in header:
            raise _invalid("unsupported critical header parameter")
        typ = header.get("typ")
        if typ is not None and (not isinstance(typ, str) or typ.lower() not in self._types):
            raise _invalid("not an access token (typ)")
        kid = header.get("kid")
        if kid is not None and not (isinstance(kid, str) and 0 < len(kid) <= 256):
            raise _invalid("malformed key id")
        iss = claims.get("iss")
        keys = self._issuers.get(iss) if isinstance(iss, str) else None
        if keys is None:
            raise _invalid("untrusted issuer")
        key = await keys.find(kid)
        if key is None:
            raise _invalid("unknown signing key")
        if key.alg != alg:  # pinned per key: the header may only agree with it
            raise _invalid("algorithm not allowed for this key")
        if not key.verify(f"{h64}.{p64}".encode("ascii"), signature):
            raise _invalid("bad signature")
        expires = self._check_times(claims)
        aud = claims.get("aud")
        if not (aud == self.resource or isinstance(aud, list) and self.resource in aud):
            raise _invalid("the token is not for this resource (aud)")
        sub = claims.get("sub")
        if not isinstance(sub, str) or not sub:
            raise _invalid("the token has no subject")
        return Principal(sub, claims, _scopes(claims), iss, token), expires

    def _check_times(self, claims: dict[str, Any]) -> float:
        now, leeway = self._clock(), self._leeway
        exp, nbf, iat = claims.get("exp"), claims.get("nbf"), claims.get("iat")
        for value in (exp, nbf, iat):
            if value is not None and not _number(value):
                raise _invalid("malformed time claim")
        if exp is None:
            if self.config.require_exp:
                raise _invalid("the token has no expiry")
            expires = now + NO_EXP_CACHE_SECONDS
        elif now > exp + leeway:
            raise _invalid("the token has expired")
        else:
            expires = exp + leeway
        if nbf is not None and nbf > now + leeway:
            raise _invalid("the token is not valid yet")
        if iat is not None and iat > now + leeway:
            raise _invalid("the token was issued in the future")
        return expires

    async def aclose(self) -> None:
        if self._fetcher is not None:
            await self._fetcher.aclose()
        if self.signin is not None:
            await self.signin.aclose()

    def __repr__(self) -> str:
        return (
            f"<Authenticator resource={self.resource} issuers={len(self._issuers)} api_keys={len(self._api_keys)} "
            f"cached={len(self._cache)}>"
        )


def _has_query_token(query: bytes) -> bool:
    if not any(k.encode() in query for k in QUERY_TOKEN_KEYS):
        return False
    return any(k in QUERY_TOKEN_KEYS for k, _ in parse_qsl(query.decode("latin-1"), keep_blank_values=True))


def _segments(token: str) -> tuple[str, str, str]:
    parts = token.split(".")
    if len(parts) != 3 or not parts[0] or not parts[1] or not all(_B64URL.fullmatch(p) for p in parts):
        raise _invalid("malformed token")
    return parts[0], parts[1], parts[2]


def _b64(segment: str) -> bytes:
    if len(segment) % 4 == 1:
        raise _invalid("malformed token")
    try:
        return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))
    except (binascii.Error, ValueError):
        raise _invalid("malformed token") from None


def _json(segment: str) -> dict[str, Any]:
    try:
        value = orjson.loads(_b64(segment))
    except orjson.JSONDecodeError:
        raise _invalid("malformed token") from None
    if not isinstance(value, dict):
        raise _invalid("malformed token")
    return value


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _scopes(claims: dict[str, Any]) -> frozenset[str]:
    scope = claims.get("scope", claims.get("scp"))
    if isinstance(scope, str):
        return frozenset(scope.split())
    if isinstance(scope, list):
        return frozenset(s for s in scope if isinstance(s, str))
    return frozenset()
