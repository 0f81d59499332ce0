"""The clients the authorization server knows: configured ones, RFC 7591 registrations (in the store), and
Client ID Metadata Documents (a ``client_id`` that is a URL).

A metadata document is fetched only from an https URL (http is accepted for a loopback host only), through
hopline's SSRF guard (:mod:`hopline.conversion.netguard`: every address the name resolves to is checked and
the connection goes to a checked one) that refuses link-local and cloud-metadata addresses, loopback and
private ranges unless ``client_metadata.allow_addresses`` lists them; no redirect is followed; at most
``max_bytes`` are read within ``timeout`` seconds; the document must name its own URL as ``client_id``. A
valid document is cached (bounded, ``cache_seconds``).

Redirect URIs match exactly, except that a loopback ``http`` one (127.0.0.1, [::1], localhost) matches on any
port (RFC 8252 §7.3).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import secrets
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import urlsplit

import orjson
from authlib.oauth2.rfc6749 import ClientMixin

from hopline.conversion import netguard
from hopline.signin.store import SigninStore

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})
# Besides netguard's link-local and cloud-metadata networks: nobody's metadata document lives on these.
INTERNAL = tuple(
    ipaddress.ip_network(n)
    for n in ("127.0.0.0/8", "::1/128", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7", "0.0.0.0/8")
)
MAX_URL = 2048
MAX_REDIRECT_URIS = 16


class ClientError(Exception):
    """An unknown or unusable client (the message is safe to show: no secret, no fetched content)."""

    def __init__(self, message: str, error: str = "invalid_client") -> None:
        super().__init__(message)
        self.error = error


def is_loopback(host: str | None) -> bool:
    return host is not None and (host.lower() in LOOPBACK_HOSTS or host.startswith("127."))


def check_redirect_uris(uris: Any) -> list[str]:
    if not isinstance(uris, list) or not uris or len(uris) > MAX_REDIRECT_URIS:
        raise ClientError(f"redirect_uris must be a list of 1 to {MAX_REDIRECT_URIS} URIs", "invalid_redirect_uri")
    for uri in uris:
        if not isinstance(uri, str) or len(uri) > MAX_URL or "#" in uri:
            raise ClientError("a redirect URI must be an absolute URI without a fragment", "invalid_redirect_uri")
        parts = urlsplit(uri)
        if not parts.scheme or (parts.scheme in ("http", "https") and not parts.hostname):
            raise ClientError("a redirect URI must be an absolute URI", "invalid_redirect_uri")
        if parts.scheme == "http" and not is_loopback(parts.hostname):
            raise ClientError("an http redirect URI must be on a loopback address", "invalid_redirect_uri")
        if parts.scheme in ("javascript", "data", "file", "vbscript"):
            raise ClientError("this redirect URI scheme is not allowed", "invalid_redirect_uri")
    return list(uris)


def redirect_matches(registered: str, presented: str) -> bool:
    """Exact match, or any port for a loopback http URI (RFC 8252 §7.3)."""
    if registered == presented:
        return True
    r, p = urlsplit(registered), urlsplit(presented)
    if r.scheme != "http" or p.scheme != "http" or not is_loopback(r.hostname):
        return False
    try:
        p.port  # noqa: B018 - a bad port is no match
    except ValueError:
        return False
    return (r.hostname, r.path, r.query, r.username, r.password) == (
        p.hostname,
        p.path,
        p.query,
        p.username,
        p.password,
    ) and p.fragment == ""


@dataclass
class Client(ClientMixin):
    client_id: str
    redirect_uris: list[str]
    client_name: str | None = None
    secret_hash: bytes | None = None  # None: a public client
    source: str = "static"  # static, registered, metadata
    grant_types: list[str] = field(default_factory=lambda: ["authorization_code", "refresh_token"])

    @property
    def public(self) -> bool:
        return self.secret_hash is None

    # Authlib's ClientMixin ----------------------------------------------------------------------
    def get_client_id(self) -> str:
        return self.client_id

    def get_default_redirect_uri(self) -> str | None:
        return None  # OAuth 2.1: the request always names its redirect URI

    def get_allowed_scope(self, scope: str | None) -> str:
        return scope or ""  # the server checked each scope against auth.signin.scopes

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        return any(redirect_matches(r, redirect_uri) for r in self.redirect_uris)

    def check_client_secret(self, client_secret: str) -> bool:
        if self.secret_hash is None:
            return False
        return hmac.compare_digest(hashlib.sha256(client_secret.encode()).digest(), self.secret_hash)

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        if self.public:
            return method == "none"
        return method in ("client_secret_basic", "client_secret_post")

    def check_response_type(self, response_type: str) -> bool:
        return response_type == "code"

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type in self.grant_types

    @property
    def shown_name(self) -> str:
        return self.client_name or self.client_id


class Clients:
    """Looks clients up (see the module docstring); :meth:`load` first, then :meth:`get` is synchronous."""

    def __init__(
        self,
        config: Any,
        store: SigninStore,
        *,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.store = store
        self._clock = clock
        self._monotonic = monotonic
        self._static = {
            c.client_id: Client(
                c.client_id,
                list(c.redirect_uris),
                c.client_name,
                hashlib.sha256(c.client_secret.encode()).digest() if c.client_secret else None,
            )
            for c in config.clients
        }
        cm = config.client_metadata
        self._allowed = netguard.networks(cm.allow_addresses)
        self._cache: dict[str, tuple[Client, float]] = {}
        self._registrations: deque[float] = deque()
        self._http = netguard.async_client(self._allowed, timeout=cm.timeout, forbidden=netguard.FORBIDDEN + INTERNAL)

    def get(self, client_id: str) -> Client | None:
        client = self._static.get(client_id)
        if client is not None:
            return client
        cached = self._cache.get(client_id)
        if cached is not None and cached[1] > self._monotonic():
            return cached[0]
        if is_url(client_id):
            return None
        doc = self.store.client(client_id)
        if doc is None:
            return None
        return Client(
            client_id,
            doc["redirect_uris"],
            doc.get("client_name"),
            bytes.fromhex(doc["secret_hash"]) if doc.get("secret_hash") else None,
            "registered",
        )

    async def load(self, client_id: str) -> Client:
        """The client, fetching its metadata document if ``client_id`` is a URL not cached. A registered
        client is read from the store in a worker thread (never on the event loop)."""
        client = self._static.get(client_id)
        if client is None:
            client = await asyncio.to_thread(self.get, client_id)
        if client is not None:
            return client
        if not is_url(client_id):
            raise ClientError("unknown client")
        if not self.config.client_metadata.enabled:
            raise ClientError("URL client ids (client metadata documents) are not accepted here")
        client = await self._fetch(client_id)
        cm = self.config.client_metadata
        if cm.cache_seconds > 0:
            if len(self._cache) >= cm.cache_size:
                now = self._monotonic()
                for key in [k for k, (_, exp) in self._cache.items() if exp <= now] or [next(iter(self._cache))]:
                    del self._cache[key]
            self._cache[client_id] = (client, self._monotonic() + cm.cache_seconds)
        return client

    async def _fetch(self, url: str) -> Client:
        check_client_id_url(url)
        cm = self.config.client_metadata
        try:
            async with asyncio.timeout(cm.timeout):
                async with self._http.stream("GET", url, headers={"accept": "application/json"}) as r:
                    if r.is_redirect:
                        raise ClientError("the client metadata document redirects (redirects are not followed)")
                    if r.status_code != 200:
                        raise ClientError(f"the client metadata document answered HTTP {r.status_code}")
                    body = bytearray()
                    async for chunk in r.aiter_raw():
                        body += chunk
                        if len(body) > cm.max_bytes:
                            raise ClientError(f"the client metadata document is over {cm.max_bytes} bytes")
        except TimeoutError:
            raise ClientError(f"the client metadata document did not arrive within {cm.timeout:g} s") from None
        except ClientError:
            raise
        except Exception as exc:  # httpx/httpcore errors, the SSRF guard's refusal among them
            reason = "its address is not allowed" if "resolves to" in str(exc) else type(exc).__name__
            raise ClientError(f"the client metadata document cannot be fetched ({reason})") from None
        try:
            doc = orjson.loads(bytes(body))
        except orjson.JSONDecodeError:
            raise ClientError("the client metadata document is not JSON") from None
        if not isinstance(doc, dict) or doc.get("client_id") != url:
            raise ClientError("the client metadata document does not name its own URL as client_id")
        method = doc.get("token_endpoint_auth_method", "none")
        if method != "none":
            raise ClientError("a client metadata document client must be public (token_endpoint_auth_method none)")
        name = doc.get("client_name")
        return Client(url, check_redirect_uris(doc.get("redirect_uris")), _name(name), None, "metadata")

    # -- RFC 7591 -------------------------------------------------------------------------------
    def register(self, body: Any) -> dict[str, Any]:
        """Register a client from a registration request's JSON; the RFC 7591 response (a ClientError if refused)."""
        reg = self.config.registration
        now = self._monotonic()
        while self._registrations and self._registrations[0] <= now - 60:
            self._registrations.popleft()
        if len(self._registrations) >= reg.per_minute:
            raise ClientError("too many registrations; try again in a minute", "rate_limited")
        if not isinstance(body, dict):
            raise ClientError("the registration request must be a JSON object", "invalid_client_metadata")
        uris = check_redirect_uris(body.get("redirect_uris"))
        method = body.get("token_endpoint_auth_method", "none")
        if method not in ("none", "client_secret_basic", "client_secret_post"):
            raise ClientError("token_endpoint_auth_method must be none, client_secret_basic or client_secret_post",
                              "invalid_client_metadata")  # fmt: skip
        grants = body.get("grant_types", ["authorization_code", "refresh_token"])
        if not isinstance(grants, list) or not set(grants) <= {"authorization_code", "refresh_token"}:
            raise ClientError("grant_types may be authorization_code and refresh_token", "invalid_client_metadata")
        if body.get("response_types", ["code"]) != ["code"]:
            raise ClientError("response_types must be [code]", "invalid_client_metadata")
        name = _name(body.get("client_name"))
        client_id = "hl-" + secrets.token_urlsafe(18)
        secret = secrets.token_urlsafe(32) if method != "none" else None
        doc: dict[str, Any] = {"redirect_uris": uris, "client_name": name, "grant_types": grants}
        if secret is not None:
            doc["secret_hash"] = hashlib.sha256(secret.encode()).hexdigest()
        self._registrations.append(now)
        if not self.store.add_client(client_id, doc, reg.max_clients):
            raise ClientError("no more clients can be registered here", "temporarily_unavailable")
        out: dict[str, Any] = {
            "client_id": client_id,
            "client_id_issued_at": int(self._clock()),
            "redirect_uris": uris,
            "grant_types": grants,
            "response_types": ["code"],
            "token_endpoint_auth_method": method,
        }
        if name:
            out["client_name"] = name
        if secret is not None:
            out.update(client_secret=secret, client_secret_expires_at=0)
        return out

    async def aclose(self) -> None:
        await self._http.aclose()


def _name(value: Any) -> str | None:
    if isinstance(value, str) and value.strip():
        return "".join(c for c in value if c.isprintable())[:200]
    return None


def is_url(client_id: str) -> bool:
    return client_id.startswith(("https://", "http://"))


def check_client_id_url(url: str) -> None:
    """A metadata document URL: https with a path (http only on loopback), no fragment, no userinfo."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018
    except ValueError:
        raise ClientError("the client_id URL is malformed") from None
    if len(url) > MAX_URL or parts.fragment or parts.username or parts.password or not parts.hostname:
        raise ClientError("the client_id URL is malformed")
    if parts.scheme != "https" and not (parts.scheme == "http" and is_loopback(parts.hostname)):
        raise ClientError("a client_id URL must use https (http only on a loopback address)")
    if parts.path in ("", "/"):
        raise ClientError("a client_id URL must have a path")
