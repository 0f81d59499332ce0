"""Token propagation (draft §9.1): the credentials the gateway presents to each HTTP backend.

In: a backend id and the caller's :class:`~hopline.context.Principal`. Out: the
headers to add to that backend's requests (:meth:`Propagator.headers_for`), or an
``httpx.Auth`` that adds them to every request and renews them when they run out
(:meth:`Propagator.auth_for`, for ``RemoteTarget.auth``).

Patterns, per ``auth.backends.<id>.mode`` (config/auth.py):

- ``inject``: a static secret from the environment. Same for every caller.
- ``client_credentials``: the gateway's own OAuth token for the backend (RFC 6749
  §4.4, with the backend's RFC 8707 ``resource``), cached until shortly before it
  expires. Same for every caller.
- ``exchange``: RFC 8693 token exchange of the caller's token for one with the
  backend's own audience, cached per (backend, caller token) until the earlier of the
  two expiries. Differs per caller: backend sessions must be keyed by principal.
- ``passthrough``: the caller's own token. Only for a gateway that is invisible
  (its audience is the backend's); mcp-wire §7 forbids it otherwise. Per caller.
- ``user_oauth``: the caller's own account at the backend (hopline/connect/): a token
  each user granted hopline through a consent link, refreshed as needed; none yet is the
  URL-elicitation-required error (-32042) with that link. Per caller.
- ``none`` / absent: nothing (the backend's own configured ``headers`` only).

The caller's token reaches a backend only in ``passthrough`` (and, to the token
endpoint only, in ``exchange``). Concurrent requests for the same credential share
one token request; a failed one is not retried for a few seconds. Errors name the
backend, the HTTP status and the OAuth ``error`` code, never a token or a secret.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import time
from typing import Any, AsyncGenerator, Callable, Mapping
from urllib.parse import quote

import httpx
import orjson

from hopline.context import Principal
from hopline.jsonrpc import UnavailableError
from hopline.layers.policy.resource import canonical_resource
from hopline.layers.policy.settings import BackendAuthSettings

log = logging.getLogger("hopline.auth")

GRANT_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
PER_PRINCIPAL = frozenset({"exchange", "passthrough", "user_oauth"})
PATTERNS = {
    "inject": "credential-injection",
    "client_credentials": "credential-injection",
    "exchange": "token-exchange",
    "passthrough": "passthrough",
    "user_oauth": "token-exchange",  # the nearest declared pattern: a per-user token for the backend's audience
}
MAX_LIFETIME = 24 * 3600.0
DEFAULT_LIFETIME = 300.0  # a token response without expires_in
RETRY_AFTER_FAILURE = 5.0
MAX_RESPONSE = 64 * 1024
CACHE_SIZE = 4096
_ERROR_CODE = re.compile(r"[A-Za-z0-9_.-]{1,64}")


class PropagationError(UnavailableError):
    """No credentials for this backend and caller: the backend is unavailable to them."""

    def __init__(self, backend: str, why: str) -> None:
        super().__init__(f"backend {backend}: no credentials ({why})", backend=backend, reason="credentials")
        self.why = why


class _Credential:
    __slots__ = ("headers", "expires")

    def __init__(self, headers: dict[str, str], expires: float) -> None:
        self.headers, self.expires = headers, expires


class Propagator:
    """Credentials toward every configured backend (see the module docstring)."""

    def __init__(
        self,
        settings: Mapping[str, BackendAuthSettings],
        backend_urls: Mapping[str, str | None],
        *,
        client: httpx.AsyncClient | None = None,
        clock: Callable[[], float] = time.time,
        connections: Any = None,
    ) -> None:
        self.settings = dict(settings)
        self._resources = {b: s.resource or _canonical(backend_urls.get(b)) for b, s in self.settings.items()}
        self._client = client
        self._own_client = client is None
        self._clock = clock
        self._cache: dict[tuple[str, str], _Credential] = {}
        self._inflight: dict[tuple[str, str], asyncio.Future[_Credential]] = {}
        self._failed: dict[tuple[str, str], tuple[float, str]] = {}
        self._connect_config: Any = None  # auth (with `connect`), for the user_oauth backends
        self._backend_urls = dict(backend_urls)
        self._connections: Any = connections

    @classmethod
    def from_config(cls, config: Any, **kwargs: Any) -> Propagator:
        """From a GatewayConfig (``auth.backends`` and each backend's ``url``)."""
        settings = config.auth.backends if config.auth is not None else {}
        out = cls(settings, {b: spec.url for b, spec in config.backends.items()}, **kwargs)
        out._connect_config = config.auth
        return out

    def connections(self) -> Any:
        """The per-user accounts of the user_oauth backends (hopline/connect/), opened on first use (its
        token store is a file); None without such backends."""
        if self._connections is None and any(s.mode == "user_oauth" for s in self.settings.values()):
            from hopline.connect.manager import Connections

            self._connections = Connections.from_config(self._connect_config, self._backend_urls)
        return self._connections

    # -- what the gateway asks --------------------------------------------------------------
    def mode(self, backend_id: str) -> str:
        spec = self.settings.get(backend_id)
        return spec.mode if spec is not None else "none"

    def per_principal(self, backend_id: str) -> bool:
        """True if the credentials depend on the caller (exchange, passthrough): such a
        backend's sessions, shared ones included, must be keyed by ``principal.key``."""
        return self.mode(backend_id) in PER_PRINCIPAL

    def pattern(self) -> str:
        """The declaration's token-propagation value for this configuration."""
        found = sorted({PATTERNS[s.mode] for s in self.settings.values() if s.mode in PATTERNS})
        return "+".join(found) or "none"

    async def headers_for(self, backend_id: str, principal: Principal | None) -> dict[str, str]:
        """The headers carrying this caller's credentials to ``backend_id`` ({} for none).
        Raises :class:`PropagationError` if they cannot be had."""
        spec = self.settings.get(backend_id)
        if spec is None or spec.mode == "none":
            return {}
        if spec.mode == "inject":
            return {spec.header: _value(spec, spec.secret or "")}
        if spec.mode == "passthrough":
            return {spec.header: _value(spec, self._token(backend_id, principal))}
        if spec.mode == "user_oauth":
            return await self.connections().headers(backend_id, principal, spec)
        key = (
            (backend_id, "")
            if spec.mode == "client_credentials"
            else (backend_id, _digest(self._token(backend_id, principal)))
        )
        found = self._cache.get(key)
        if found is not None and self._clock() < found.expires:
            return found.headers
        return (await self._obtain(key, spec, principal)).headers

    def auth_for(self, backend_id: str, principal: Principal | None = None) -> httpx.Auth | None:
        """An ``httpx.Auth`` for ``RemoteTarget.auth``: adds :meth:`headers_for` to each
        request and, after a 401 from the backend, renews the credential once. None if
        the backend has no propagation configured."""
        if self.mode(backend_id) == "none":
            return None
        return CredentialAuth(self, backend_id, principal)

    def invalidate(self, backend_id: str, principal: Principal | None = None) -> None:
        """Forget the cached credential (the backend refused it)."""
        spec = self.settings.get(backend_id)
        if spec is not None and spec.mode == "user_oauth":
            self.connections().invalidate(backend_id, principal)
            return
        if spec is None or spec.mode not in ("client_credentials", "exchange"):
            return
        token = principal.token if principal is not None else None
        key = (backend_id, "") if spec.mode == "client_credentials" else (backend_id, _digest(token or ""))
        self._cache.pop(key, None)

    async def aclose(self) -> None:
        if self._connections is not None:
            await self._connections.aclose()
            self._connections = None
        if self._own_client and self._client is not None:
            await self._client.aclose()
            self._client = None

    # -- token requests ---------------------------------------------------------------------
    def _token(self, backend_id: str, principal: Principal | None) -> str:
        token = principal.token if principal is not None else None
        if not token:
            raise PropagationError(
                backend_id, f"{self.mode(backend_id)} needs the caller's bearer token, and this caller has none"
            )
        return token

    async def _obtain(
        self, key: tuple[str, str], spec: BackendAuthSettings, principal: Principal | None
    ) -> _Credential:
        failed = self._failed.get(key)
        if failed is not None and self._clock() < failed[0]:
            raise PropagationError(key[0], failed[1])
        future = self._inflight.get(key)
        if future is None:
            future = asyncio.ensure_future(self._request(key, spec, principal))
            self._inflight[key] = future
            future.add_done_callback(lambda f, k=key: self._settled(k, f))
        return await asyncio.shield(future)

    def _settled(self, key: tuple[str, str], future: asyncio.Future[_Credential]) -> None:
        self._inflight.pop(key, None)
        if not future.cancelled():
            future.exception()  # retrieved: every waiter may have gone

    async def _request(
        self, key: tuple[str, str], spec: BackendAuthSettings, principal: Principal | None
    ) -> _Credential:
        backend_id = key[0]
        form: dict[str, str] = {}
        if spec.mode == "client_credentials":
            form["grant_type"] = "client_credentials"
        else:
            form.update(
                grant_type=GRANT_EXCHANGE,
                subject_token=self._token(backend_id, principal),
                subject_token_type=ACCESS_TOKEN_TYPE,
                requested_token_type=spec.requested_token_type,
            )
            if spec.audience:
                form["audience"] = spec.audience
        resource = self._resources.get(backend_id)
        if resource:
            form["resource"] = resource
        if spec.scope:
            form["scope"] = spec.scope
        auth = None
        if spec.client_auth == "basic" and spec.client_secret is not None:
            auth = httpx.BasicAuth(
                quote(spec.client_id or "", safe=""), quote(spec.client_secret, safe="")
            )  # RFC 6749 §2.3.1
        else:
            form["client_id"] = spec.client_id or ""
            if spec.client_secret is not None:
                form["client_secret"] = spec.client_secret
        started = self._clock()
        try:
            token, lifetime = await self._post(backend_id, spec, form, auth)
        except PropagationError as exc:
            if len(self._failed) >= CACHE_SIZE:
                self._failed.clear()
            self._failed[key] = (self._clock() + RETRY_AFTER_FAILURE, exc.why)
            log.warning("%s", exc.message)
            raise
        self._failed.pop(key, None)
        expires = started + lifetime
        if spec.mode == "exchange" and principal is not None:
            exp = principal.claims.get("exp")
            if isinstance(exp, (int, float)) and not isinstance(exp, bool):
                expires = min(expires, float(exp))  # never outlive the token it was exchanged for
        expires -= min(30.0, lifetime / 10)  # renew a little early
        credential = _Credential({spec.header: _value(spec, token)}, expires)
        if len(self._cache) >= CACHE_SIZE:
            now = self._clock()
            for k in [k for k, c in self._cache.items() if c.expires <= now] or [next(iter(self._cache))]:
                del self._cache[k]
        self._cache[key] = credential
        log.info(
            "auth: obtained %s credentials for backend %s (valid %.0f s)",
            spec.mode,
            backend_id,
            max(0.0, expires - self._clock()),
        )
        return credential

    async def _post(
        self, backend_id: str, spec: BackendAuthSettings, form: dict[str, str], auth: httpx.Auth | None
    ) -> tuple[str, float]:
        if self._client is None:
            self._client = httpx.AsyncClient(follow_redirects=False)
        try:
            async with self._client.stream(
                "POST",
                spec.token_endpoint or "",
                data=form,
                auth=auth or httpx.USE_CLIENT_DEFAULT,
                headers={"accept": "application/json"},
                timeout=spec.timeout,
            ) as resp:
                body = b""
                async for chunk in resp.aiter_bytes():
                    body += chunk
                    if len(body) > MAX_RESPONSE:
                        raise PropagationError(backend_id, "the token endpoint's answer is too large")
                status = resp.status_code
        except httpx.HTTPError as exc:
            raise PropagationError(backend_id, f"token endpoint unreachable: {type(exc).__name__}") from None
        try:
            answer = orjson.loads(body)
        except orjson.JSONDecodeError:
            answer = None
        if not isinstance(answer, dict):
            raise PropagationError(backend_id, f"the token endpoint answered HTTP {status} without a JSON object")
        if status != 200:
            code = answer.get("error")
            code = code if isinstance(code, str) and _ERROR_CODE.fullmatch(code) else "no error code"
            raise PropagationError(backend_id, f"the token endpoint refused: HTTP {status}, {code}")
        token = answer.get("access_token")
        if not isinstance(token, str) or not token or any(c in token for c in "\r\n\0"):
            raise PropagationError(backend_id, "the token endpoint's answer has no usable access_token")
        lifetime = answer.get("expires_in")
        if not isinstance(lifetime, (int, float)) or isinstance(lifetime, bool) or lifetime <= 0:
            lifetime = DEFAULT_LIFETIME
        return token, min(float(lifetime), MAX_LIFETIME)

    def __repr__(self) -> str:
        return f"<Propagator backends={sorted(self.settings)} cached={len(self._cache)}>"


class CredentialAuth(httpx.Auth):
    """Per-request credentials for one backend (and one caller, for per-principal modes).

    ``principal`` may be replaced when the same caller presents a newer token."""

    def __init__(self, propagator: Propagator, backend_id: str, principal: Principal | None) -> None:
        self.propagator, self.backend_id, self.principal = propagator, backend_id, principal

    @property
    def per_user(self) -> bool:
        """A user_oauth backend: its sessions open through the consent gate (compose/consent_gate.py)."""
        return self.propagator.mode(self.backend_id) == "user_oauth"

    async def ready(self) -> None:
        """Returns if this caller's credentials are at hand; raises the consent error (-32042) or another
        :class:`UnavailableError` if not."""
        await self.propagator.headers_for(self.backend_id, self.principal)

    def renewable(self) -> bool:
        return self.propagator.mode(self.backend_id) in ("client_credentials", "exchange", "user_oauth")

    def refused(self) -> None:
        """The backend answered 401: forget the credential, so the next request gets a new one.
        (For HTTP clients that do not run the second leg of an auth flow.)"""
        self.propagator.invalidate(self.backend_id, self.principal)

    async def async_auth_flow(self, request: httpx.Request) -> AsyncGenerator[httpx.Request, httpx.Response]:
        principal = self.principal
        request.headers.update(await self._headers(principal))
        response = yield request
        if response.status_code == 401 and self.renewable():
            self.propagator.invalidate(self.backend_id, principal)
            request.headers.update(await self._headers(principal))
            yield request

    async def _headers(self, principal: Principal | None) -> dict[str, str]:
        try:
            return await self.propagator.headers_for(self.backend_id, principal)
        except PropagationError as exc:  # an httpx error, so the upstream answers "unavailable"
            raise httpx.RequestError(exc.message) from None
        except UnavailableError as exc:  # user_oauth: consent needed (the message carries no token)
            raise ConsentNeeded(exc) from None

    def sync_auth_flow(self, request: httpx.Request):  # pragma: no cover - hopline is async only
        raise RuntimeError("CredentialAuth is for httpx.AsyncClient")


class ConsentNeeded(httpx.RequestError):
    """An httpx error (what the HTTP upstreams catch) carrying the caller's consent request (user_oauth)."""

    def __init__(self, error: UnavailableError) -> None:
        super().__init__(error.message)
        self.error = error


def _value(spec: BackendAuthSettings, credential: str) -> str:
    return f"{spec.scheme} {credential}" if spec.scheme else credential


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).hexdigest()


def _canonical(url: str | None) -> str | None:
    if url is None:
        return None
    try:
        return canonical_resource(url)
    except ValueError:
        return None
