"""Each caller's own account at each ``mode: user_oauth`` backend: tokens, refresh, consent links.

:meth:`Connections.headers` is the hot path: a cached, unexpired token is a dict look-up (no disk, no lock).
An expired one is refreshed once per (principal, backend) however many calls wait for it (single flight in the
process); a rotated refresh token replaces the old one. No token, or one that cannot be refreshed, raises
:class:`ConsentRequired`: the MCP URL-elicitation-required error (-32042) whose URL is a consent link.

A consent link (``/connect/start?link=…``) names the principal and the backend, expires after ``link_ttl``, is
signed (HMAC-SHA256 under the secret key) and can be used once; the page it opens sends the browser to the
upstream authorization server with a fresh ``state`` (kept here, in memory, bounded, single use) and sets a
cookie that the callback must present with that state, so an authorization response cannot be finished in
another browser than the one that started it. A bearer token presented to the page must be the link's
principal's.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import logging
import secrets
import time
from typing import Any, Callable, Mapping

import httpx
import orjson

from hopline.connect.oauth import Client, Discovery, OAuthFailure, discover
from hopline.connect.store import TokenStore, principal_id
from hopline.context import Principal
from hopline.jsonrpc import UnavailableError

log = logging.getLogger("hopline.connect")

URL_ELICITATION_REQUIRED = -32042
REFRESH_EARLY = 30.0  # refresh this long before the expiry
MAX_PENDING = 10_000
PENDING_TTL = 600.0
CALLBACK_PATH = "/connect/callback"
START_PATH = "/connect/start"
METADATA_PATH = "/connect/client/"  # + <backend>.json: the Client ID Metadata Document


class ConsentRequired(UnavailableError):
    """The caller must connect their account at this backend first (the URL-elicitation-required error)."""

    code = URL_ELICITATION_REQUIRED

    def __init__(self, backend: str, url: str, elicitation_id: str) -> None:
        message = f"Connect your account at {backend} to use it through hopline"
        super().__init__(f"backend {backend}: {message.lower()}: open the URL", backend=backend, reason="consent")
        self.data = {
            "elicitations": [{"mode": "url", "elicitationId": elicitation_id, "url": url, "message": message}],
            "backend": backend,
            "reason": "consent",
        }


class LinkRefused(Exception):
    """A consent link or callback that must not be followed (the message is safe to show)."""


class Backend:
    """One ``user_oauth`` backend: its URL, client identity and (once discovered) its authorization server."""

    def __init__(self, backend_id: str, url: str, spec: Any, public_url: str) -> None:
        self.id, self.url, self.spec = backend_id, url, spec
        self.found: Discovery | None = None
        self.metadata_url = f"{public_url}{METADATA_PATH}{backend_id}.json"
        self.redirect_uri = public_url + CALLBACK_PATH
        self._lock = asyncio.Lock()

    def client(self) -> Client:
        found = self.found
        if self.spec.client_metadata_document and (self.spec.client_id is None or (found and found.cimd)):
            return Client(self.metadata_url, None, "none", self.redirect_uri, timeout=self.spec.timeout)
        return Client(
            self.spec.client_id, self.spec.client_secret, self.spec.client_auth, self.redirect_uri,
            timeout=self.spec.timeout,
        )  # fmt: skip

    def scopes(self) -> list[str]:
        """The configured scopes; else the challenge's (or scopes_supported), plus ``offline_access`` where the
        authorization server offers it (a refresh token)."""
        if self.spec.scopes is not None:
            return list(self.spec.scopes)
        if self.found is None:
            return []
        out = list(self.found.scopes)
        if "offline_access" in (self.found.metadata.get("scopes_supported") or []) and "offline_access" not in out:
            out.append("offline_access")
        return out

    async def discovered(self, http: httpx.AsyncClient) -> Discovery:
        if self.found is None:
            async with self._lock:
                if self.found is None:
                    self.found = await discover(http, self.url)
        return self.found

    def client_metadata(self) -> dict[str, Any]:
        """The Client ID Metadata Document hopline serves for this backend (its URL is the client_id)."""
        return {
            "client_id": self.metadata_url,
            "client_name": f"hopline ({self.id})",
            "redirect_uris": [self.redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        }


class Connections:
    def __init__(
        self,
        backends: Mapping[str, tuple[str, Any]],
        *,
        public_url: str,
        secret: bytes,
        store: TokenStore,
        link_ttl: float = 300.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``backends``: id → (URL, its ``auth.backends`` entry) for every ``user_oauth`` backend."""
        self.public_url = public_url
        self.backends = {b: Backend(b, url, spec, public_url) for b, (url, spec) in backends.items()}
        self.store = store
        self.link_ttl = link_ttl
        self._clock = clock
        self._sign_key = hmac.new(secret, b"hopline-connect-link", hashlib.sha256).digest()
        self._used: dict[str, float] = {}  # link nonce → its expiry (single use)
        self._pending: dict[str, dict[str, Any]] = {}  # state → the consent in flight
        self._inflight: dict[tuple[str, str], asyncio.Future[dict[str, Any] | None]] = {}
        self._http = httpx.AsyncClient(timeout=10.0, follow_redirects=False, trust_env=False)

    @classmethod
    def from_config(cls, auth: Any, backend_urls: Mapping[str, str | None]) -> Connections | None:
        per_user = {b: (backend_urls.get(b) or "", s) for b, s in auth.backends.items() if s.mode == "user_oauth"}
        if not per_user or auth.connect is None:
            return None
        raw = auth.connect.secret_key
        secret = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4))
        store = TokenStore(auth.connect.store, secret)
        return cls(per_user, public_url=auth.connect.public_url, secret=secret, store=store,
                   link_ttl=auth.connect.link_ttl)  # fmt: skip

    # -- the hot path ------------------------------------------------------------------------------
    async def headers(self, backend_id: str, principal: Principal | None, spec: Any) -> dict[str, str]:
        if principal is None:
            raise UnavailableError(f"backend {backend_id}: user_oauth needs an authenticated caller",
                                   backend=backend_id, reason="credentials")  # fmt: skip
        who = principal_id(principal.key)
        doc = self.store.get(who, backend_id)
        if doc is None or self._clock() >= doc["expires_at"] - REFRESH_EARLY:
            doc = await self._refreshed(who, backend_id, doc)
            if doc is None:
                raise self.consent(principal, backend_id)
        value = doc["access_token"]
        return {spec.header: f"{spec.scheme} {value}" if spec.scheme else value}

    def invalidate(self, backend_id: str, principal: Principal | None) -> None:
        """The backend refused the token (401): the next call refreshes it."""
        if principal is None:
            return
        who = principal_id(principal.key)
        doc = self.store.get(who, backend_id)
        if doc is not None and doc["expires_at"] > self._clock():
            self.store._remember((who, backend_id), {**doc, "expires_at": 0.0})

    async def _refreshed(self, who: str, backend_id: str, doc: dict[str, Any] | None) -> dict[str, Any] | None:
        if doc is None or not doc.get("refresh_token"):
            return None
        key = (who, backend_id)
        future = self._inflight.get(key)
        if future is None:
            future = asyncio.ensure_future(self._refresh(who, backend_id, doc))
            self._inflight[key] = future
            future.add_done_callback(lambda f, k=key: self._inflight.pop(k, None))
        return await asyncio.shield(future)

    async def _refresh(self, who: str, backend_id: str, doc: dict[str, Any]) -> dict[str, Any] | None:
        """The refreshed token set; None if the authorization server refused (the grant is gone: the token set
        is deleted, the caller asked to consent again). Unreachable or garbage: UnavailableError, token kept."""
        backend = self.backends[backend_id]
        try:
            found = await backend.discovered(self._http)
            new = await backend.client().refresh(found, backend.scopes(), doc["refresh_token"])
        except OAuthFailure as exc:
            if not exc.refused:
                log.warning("connect: a user's token for backend %s cannot be refreshed now (%s)", backend_id, exc)
                raise UnavailableError(
                    f"backend {backend_id}: the user's token cannot be refreshed now ({exc})",
                    backend=backend_id,
                    reason="credentials",
                ) from None
            log.warning("connect: a user's token for backend %s was refused (%s): consent asked again", backend_id, exc)
            self.store.delete(who, backend_id)
            return None
        self.store.put(who, backend_id, new)
        log.info("connect: refreshed a user's token for backend %s", backend_id)
        return new

    # -- consent links ---------------------------------------------------------------------------
    def consent(self, principal: Principal, backend_id: str) -> ConsentRequired:
        nonce = secrets.token_urlsafe(16)
        body = orjson.dumps({"p": list(principal.key), "b": backend_id, "n": nonce, "e": self._clock() + self.link_ttl})
        payload = base64.urlsafe_b64encode(body).rstrip(b"=").decode()
        sig = base64.urlsafe_b64encode(hmac.new(self._sign_key, payload.encode(), hashlib.sha256).digest())
        link = f"{payload}.{sig.rstrip(b'=').decode()}"
        return ConsentRequired(backend_id, f"{self.public_url}{START_PATH}?link={link}", nonce)

    def open_link(
        self, link: str, presented: Principal | None, *, spend: bool = True
    ) -> tuple[tuple[str | None, str], str, str]:
        """(principal key, backend, nonce) of a valid link, spent (unless ``spend=False``); :class:`LinkRefused`
        otherwise."""
        payload, _, sig = link.partition(".")
        want = base64.urlsafe_b64encode(hmac.new(self._sign_key, payload.encode(), hashlib.sha256).digest())
        if not sig or not hmac.compare_digest(want.rstrip(b"=").decode(), sig):
            raise LinkRefused("this consent link is not one hopline made")
        doc = orjson.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        now = self._clock()
        if doc["e"] < now:
            raise LinkRefused("this consent link has expired: call the tool again for a new one")
        key = (doc["p"][0], doc["p"][1])
        if presented is not None and presented.key != key:
            raise LinkRefused("this consent link was made for another user")
        if doc["b"] not in self.backends:
            raise LinkRefused("this consent link names no user_oauth backend")
        for n in [n for n, e in self._used.items() if e < now]:
            del self._used[n]
        if doc["n"] in self._used:
            raise LinkRefused("this consent link was used already: call the tool again for a new one")
        if len(self._used) >= MAX_PENDING:
            raise LinkRefused("too many consents are in flight; try again in a few minutes")
        if spend:
            self._used[doc["n"]] = doc["e"]
        return key, doc["b"], doc["n"]

    async def start(self, link: str, presented: Principal | None) -> tuple[str, str]:
        """(the upstream authorization URL, the browser cookie) for a consent link."""
        _key, backend_id, _nonce = self.open_link(link, presented, spend=False)
        backend = self.backends[backend_id]
        found = await backend.discovered(self._http)  # a discovery that fails leaves the link usable
        key, backend_id, _nonce = self.open_link(link, presented)
        scopes = backend.scopes()
        url, state, verifier = backend.client().authorization_url(found, scopes)
        now = self._clock()
        for s in [s for s, p in self._pending.items() if p["expires"] < now]:
            del self._pending[s]
        if len(self._pending) >= MAX_PENDING:
            raise LinkRefused("too many consents are in flight; try again in a few minutes")
        cookie = secrets.token_urlsafe(24)
        self._pending[state] = {
            "principal": key, "backend": backend_id, "verifier": verifier, "scopes": scopes,
            "cookie": hashlib.sha256(cookie.encode()).hexdigest(), "expires": now + PENDING_TTL,
        }  # fmt: skip
        return url, cookie

    async def finish(self, query: Mapping[str, str], cookie: str | None) -> tuple[str, str]:
        """Store the tokens of an authorization response; (backend, subject) it connected."""
        state = query.get("state") or ""
        pending = self._pending.pop(state, None)
        if pending is None or pending["expires"] < self._clock():
            raise LinkRefused("unknown or used state: start again from your MCP client")
        if not cookie or not hmac.compare_digest(hashlib.sha256(cookie.encode()).hexdigest(), pending["cookie"]):
            raise LinkRefused("this answer belongs to a consent started in another browser")
        backend = self.backends[pending["backend"]]
        found = await backend.discovered(self._http)
        iss = query.get("iss")
        if (
            iss is not None
            and iss != found.issuer
            or (iss is None and found.metadata.get("authorization_response_iss_parameter_supported") is True)
        ):
            raise LinkRefused("the authorization response comes from another issuer (mix-up refused)")
        if "error" in query:
            raise LinkRefused("the authorization server did not grant access")
        code = query.get("code")
        if not code:
            raise LinkRefused("the authorization response carries no code")
        try:
            doc = await backend.client().code(found, pending["scopes"], code, pending["verifier"])
        except OAuthFailure as exc:
            raise LinkRefused(str(exc)) from None
        self.store.put(principal_id(tuple(pending["principal"])), backend.id, doc)
        log.info("connect: a user connected their account at backend %s", backend.id)
        return backend.id, pending["principal"][1]

    def disconnect(self, principal: Principal, backend_id: str) -> None:
        self.store.delete(principal_id(principal.key), backend_id)

    def status(self) -> dict[str, Any]:
        """Counts only (never a token): connected users per backend, consents in flight."""
        return {"connected": self.store.count(), "pending": len(self._pending)}

    def counts(self, backend_id: str) -> dict[str, int]:
        """One backend's line of /status: users connected, consents in flight."""
        pending = sum(1 for p in self._pending.values() if p["backend"] == backend_id)
        return {"connected": self.store.count().get(backend_id, 0), "pending": pending}

    async def aclose(self) -> None:
        await self._http.aclose()
        self.store.close()
