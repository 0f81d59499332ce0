"""The authorization server's HTTP endpoints, served by the MCP listener (transports/app.py routes these paths).

- ``GET /.well-known/oauth-authorization-server``: RFC 8414 metadata (from memory);
- ``GET /oauth/jwks``: the public signing keys (from memory);
- ``GET /oauth/authorize``: validates the client's request (Authlib, :mod:`.server`), keeps it as a sign-in in
  flight bound to this browser by a cookie (``HttpOnly``, ``SameSite=Lax``, ``Secure`` on https; its value is
  also the ``state`` sent upstream), and redirects to the identity provider;
- ``GET /oauth/callback``: the identity provider's answer: the cookie must match ``state``; the code is
  exchanged and the ID token validated (:mod:`.upstream`); the consent page follows;
- ``POST /oauth/consent``: the user's decision, with the page's CSRF token (an HMAC of the sign-in, which only
  the cookie holder knows); approve issues the code (Authlib) and redirects to the client with ``code``,
  ``state`` and ``iss`` (RFC 9207); deny answers ``access_denied``;
- ``POST /oauth/token``, ``POST /oauth/revoke`` (RFC 7009), ``POST /oauth/register`` (RFC 7591, when enabled).

Pages carry ``X-Frame-Options: DENY`` and ``Content-Security-Policy: frame-ancestors 'none'`` (no framing:
clickjacking), ``Cache-Control: no-store`` and ``Referrer-Policy: no-referrer``. An error before the client and
its redirect URI are known is shown here, never sent to an unchecked URI. No token, code or secret is logged.
"""

from __future__ import annotations

import asyncio

import hashlib
import hmac
import html
import logging
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx
import orjson
from authlib.common.urls import add_params_to_uri
from authlib.oauth2.rfc6749 import OAuth2Error

from hopline.signin.clients import ClientError, Clients
from hopline.signin.server import AuthServer, Request
from hopline.signin.store import Full
from hopline.signin.upstream import Upstream, UpstreamError
from hopline.transports import http_util as hu

log = logging.getLogger("hopline.signin")

METADATA_PATH = "/.well-known/oauth-authorization-server"
AUTHORIZE, CALLBACK, CONSENT = "/oauth/authorize", "/oauth/callback", "/oauth/consent"
TOKEN, REVOKE, REGISTER, JWKS = "/oauth/token", "/oauth/revoke", "/oauth/register", "/oauth/jwks"
MAX_FORM = 16 * 1024
MAX_QUERY = 8 * 1024
PAGE_HEADERS = {
    "x-frame-options": "DENY",
    "content-security-policy": "frame-ancestors 'none'; default-src 'none'; style-src 'unsafe-inline'",
    "cache-control": "no-store",
    "referrer-policy": "no-referrer",
    "x-content-type-options": "nosniff",
}
JSON_HEADERS = {"cache-control": "no-store", "pragma": "no-cache"}


class SigninApp:
    """ASGI-ish handler (``(scope, receive, send, headers)``) for :data:`paths`."""

    def __init__(
        self, config: Any, issuer: str, server: AuthServer, clients: Clients, upstream: Upstream, secret: bytes
    ) -> None:
        self.config = config
        self.issuer = issuer
        self.server = server
        self.clients = clients
        self.upstream = upstream
        self._csrf_key = hmac.new(secret, b"hopline-signin-csrf", hashlib.sha256).digest()
        self.secure = issuer.startswith("https://")
        self.cookie = "__Host-hl-signin" if self.secure else "hl-signin"
        self.metadata = self._metadata()
        self._metadata_body = orjson.dumps(self.metadata)
        self.paths = frozenset({METADATA_PATH, AUTHORIZE, CALLBACK, CONSENT, TOKEN, REVOKE, REGISTER, JWKS})

    def _metadata(self) -> dict[str, Any]:
        i = self.issuer
        doc: dict[str, Any] = {
            "issuer": i,
            "authorization_endpoint": i + AUTHORIZE,
            "token_endpoint": i + TOKEN,
            "revocation_endpoint": i + REVOKE,
            "jwks_uri": i + JWKS,
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none", "client_secret_basic", "client_secret_post"],
            "revocation_endpoint_auth_methods_supported": ["none", "client_secret_basic", "client_secret_post"],
            "scopes_supported": list(self.config.scopes),
            "authorization_response_iss_parameter_supported": True,
            "client_id_metadata_document_supported": self.config.client_metadata.enabled,
        }
        if self.config.registration.enabled:
            doc["registration_endpoint"] = i + REGISTER
        return doc

    async def __call__(self, scope: hu.Scope, receive: hu.Receive, send: hu.Send, headers: hu.Headers) -> None:
        path, method = scope["path"], scope["method"]
        try:
            if path == METADATA_PATH and method == "GET":
                await hu.send_json(send, 200, self._metadata_body, {"cache-control": "max-age=3600"})
            elif path == JWKS and method == "GET":
                await hu.send_json(send, 200, orjson.dumps(self.server.keys.jwks()), {"cache-control": "max-age=300"})
            elif path == AUTHORIZE and method == "GET":
                await self._authorize(scope, send, headers)
            elif path == CALLBACK and method == "GET":
                await self._callback(scope, send, headers)
            elif path == CONSENT and method == "POST":
                await self._consent(receive, send, headers)
            elif path == TOKEN and method == "POST":
                await self._token(receive, send, headers)
            elif path == REVOKE and method == "POST":
                await self._revoke(receive, send, headers)
            elif path == REGISTER and method == "POST" and self.config.registration.enabled:
                await self._register(receive, send, headers)
            else:
                await hu.send_bytes(send, 405 if path != REGISTER else 404, b"Not allowed", b"text/plain")
        except hu.HoplineError as exc:
            await _oauth_error(send, exc.http_status, "invalid_request", str(exc))

    # -- the authorization endpoint ----------------------------------------------------------------
    async def _authorize(self, scope: hu.Scope, send: hu.Send, headers: hu.Headers) -> None:
        query = scope.get("query_string", b"")
        if len(query) > MAX_QUERY:
            await self._page(send, 414, "Request too long", "The authorization request is too long.")
            return
        pairs = parse_qsl(query.decode("latin-1"), keep_blank_values=True)
        client_id = dict(pairs).get("client_id")
        if not client_id:
            await self._page(send, 400, "Sign-in refused", "The request names no client (client_id).")
            return
        try:
            client = await self.clients.load(client_id)
        except ClientError as exc:
            await self._page(send, 400, "Sign-in refused", f"This client cannot sign in here: {exc}")
            return
        request = Request("GET", self.issuer + AUTHORIZE, pairs, headers)
        try:
            await asyncio.to_thread(self.server.get_consent_grant, request)
            request.payload.data["redirect_uri"]  # noqa: B018 - checked present by the grant
        except OAuth2Error as error:
            await self._oauth_redirect_or_page(send, error)
            return
        try:
            url, secrets = await self.upstream.login_url()
        except UpstreamError as exc:
            await self._page(send, 502, "Sign-in unavailable", str(exc))
            return
        txn = secrets["state"]
        doc = {"pairs": pairs, "client_id": client.client_id, "upstream": secrets}
        try:
            await asyncio.to_thread(self.server.store.put_pending, txn, doc, self.config.login_ttl)
        except Full:
            log.warning(
                "sign-in refused: %d sign-ins in flight (max_sign_ins_in_flight)", self.config.max_sign_ins_in_flight
            )
            await self._page(send, 503, "Sign-in unavailable", "Too many sign-ins are in progress; try again shortly.")
            return
        await hu.send_empty(send, 302, {"location": url, "set-cookie": self._set_cookie(txn), **PAGE_HEADERS})

    async def _oauth_redirect_or_page(self, send: hu.Send, error: OAuth2Error) -> None:
        if error.redirect_uri:
            status, _, hs = error()
            location = dict(hs)["Location"]
            location = add_params_to_uri(location, [("iss", self.issuer)])
            await hu.send_empty(send, 302, {"location": location, **PAGE_HEADERS})
        else:
            description = error.description or error.error
            await self._page(send, 400, "Sign-in refused", f"{error.error}: {description}")

    # -- the identity provider's answer ----------------------------------------------------------
    async def _callback(self, scope: hu.Scope, send: hu.Send, headers: hu.Headers) -> None:
        params = dict(parse_qsl(scope.get("query_string", b"")[:MAX_QUERY].decode("latin-1")))
        state = params.get("state", "")
        cookie = self._cookie(headers)
        if not state or cookie is None or not hmac.compare_digest(state.encode(), cookie.encode()):
            await self._page(send, 400, "Sign-in refused", "This sign-in was not started in this browser.")
            return
        pending = await asyncio.to_thread(self.server.store.pending, state)
        if pending is None:
            await self._page(send, 400, "Sign-in expired", "This sign-in has expired or was finished; start again.")
            return
        if "code" not in params:  # the identity provider refused (the user cancelled, ...)
            await asyncio.to_thread(self.server.store.take_pending, state)
            await self._finish(send, pending, None)
            return
        try:
            claims = await self.upstream.finish(params["code"], pending["upstream"])
        except UpstreamError as exc:
            await self._page(send, 502, "Sign-in failed", str(exc))
            return
        pending["claims"] = claims
        await asyncio.to_thread(self.server.store.put_pending, state, pending, self.config.login_ttl)
        client = await self.clients.load(pending["client_id"])
        scopes = dict(pending["pairs"]).get("scope") or ""
        await self._consent_page(send, state, client, scopes, claims)

    async def _consent_page(self, send: hu.Send, txn: str, client: Any, scopes: str, claims: dict[str, Any]) -> None:
        e = html.escape
        pending = await asyncio.to_thread(self.server.store.pending, txn)
        redirect = urlsplit(dict(pending["pairs"])["redirect_uri"])  # type: ignore[index]
        origin = f"{redirect.scheme}://{redirect.netloc}" if redirect.netloc else redirect.scheme + ":"
        shown_scopes = "".join(f"<li>{e(s)}</li>" for s in scopes.split()) or "<li>(none)</li>"
        source = {"metadata": "identified by its metadata document", "registered": "registered dynamically"}.get(
            client.source, "configured by the operator"
        )
        body = f"""<!doctype html><html><head><meta charset="utf-8"><title>Allow access?</title>
<style>body{{font-family:sans-serif;max-width:32em;margin:3em auto}}code{{word-break:break-all}}</style></head>
<body><h1>Allow {e(client.shown_name)}?</h1>
<p>Signed in as <b>{e(str(claims.get("email") or claims["sub"]))}</b>.</p>
<p>The application <b>{e(client.shown_name)}</b> (<code>{e(client.client_id)}</code>, {source}) asks to use this
gateway as you, with the scopes:</p><ul>{shown_scopes}</ul>
<p>You will be sent back to <code>{e(origin)}</code>.</p>
<form method="post" action="{CONSENT}">
<input type="hidden" name="csrf" value="{self._csrf(txn)}">
<button type="submit" name="decision" value="approve">Allow</button>
<button type="submit" name="decision" value="deny">Deny</button>
</form></body></html>"""
        await hu.send_bytes(send, 200, body.encode(), b"text/html; charset=utf-8", PAGE_HEADERS)

    # -- the user's decision ----------------------------------------------------------------------
    async def _consent(self, receive: hu.Receive, send: hu.Send, headers: hu.Headers) -> None:
        form = dict(parse_qsl((await hu.read_body(receive, headers, MAX_FORM)).decode("utf-8", "replace")))
        txn = self._cookie(headers)
        csrf = form.get("csrf", "")
        if txn is None or not hmac.compare_digest(csrf.encode(), self._csrf(txn).encode()):
            await self._page(send, 403, "Request refused", "The consent form was not sent from this sign-in's page.")
            return
        pending = await asyncio.to_thread(self.server.store.take_pending, txn)
        if pending is None or "claims" not in pending:
            await self._page(send, 400, "Sign-in expired", "This sign-in has expired or was finished; start again.")
            return
        await self._finish(send, pending, pending["claims"] if form.get("decision") == "approve" else None)

    async def _finish(self, send: hu.Send, pending: dict[str, Any], claims: dict[str, Any] | None) -> None:
        from hopline.signin.server import User

        try:
            await self.clients.load(pending["client_id"])
        except ClientError as exc:
            await self._page(send, 400, "Sign-in refused", f"This client cannot sign in here: {exc}")
            return
        pairs = [tuple(p) for p in pending["pairs"]]
        request = Request("GET", self.issuer + AUTHORIZE, pairs, {})  # type: ignore[arg-type]
        try:
            grant = await asyncio.to_thread(self.server.get_consent_grant, request)
        except OAuth2Error as error:
            await self._oauth_redirect_or_page(send, error)
            return
        status, _, hs = await asyncio.to_thread(
            self.server.create_authorization_response,
            request,
            grant_user=User(claims) if claims is not None else None,
            grant=grant,
        )
        location = add_params_to_uri(dict(hs)["Location"], [("iss", self.issuer)])
        log.info("sign-in %s for client %s", "granted" if claims else "denied", pending["client_id"][:200])
        await hu.send_empty(send, 302, {"location": location, "set-cookie": self._clear_cookie(), **PAGE_HEADERS})

    # -- token, revocation, registration ------------------------------------------------------------
    async def _form_request(self, path: str, receive: hu.Receive, headers: hu.Headers) -> Request:
        body = await hu.read_body(receive, headers, MAX_FORM)
        pairs = parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True)
        client_id = dict(pairs).get("client_id")
        if client_id:
            try:
                await self.clients.load(client_id)  # a metadata document's client: fetched if not cached
            except ClientError:
                pass  # Authlib answers invalid_client
        return Request(
            "POST", self.issuer + path, pairs, httpx.Headers({k.decode("latin-1"): v for k, v in headers.items()})
        )

    async def _token(self, receive: hu.Receive, send: hu.Send, headers: hu.Headers) -> None:
        request = await self._form_request(TOKEN, receive, headers)
        status, body, hs = await asyncio.to_thread(self.server.create_token_response, request)
        await _respond(send, status, body, hs)

    async def _revoke(self, receive: hu.Receive, send: hu.Send, headers: hu.Headers) -> None:
        request = await self._form_request(REVOKE, receive, headers)
        status, body, hs = await asyncio.to_thread(self.server.create_endpoint_response, "revocation", request)
        await _respond(send, status, body, hs)

    async def _register(self, receive: hu.Receive, send: hu.Send, headers: hu.Headers) -> None:
        raw = await hu.read_body(receive, headers, MAX_FORM)
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            await _oauth_error(send, 400, "invalid_client_metadata", "the registration request is not JSON")
            return
        try:
            out = await asyncio.to_thread(self.clients.register, body)
        except ClientError as exc:
            status = {"rate_limited": 429, "temporarily_unavailable": 503}.get(exc.error, 400)
            error = "invalid_client_metadata" if status == 429 else exc.error
            await _oauth_error(send, status, error, str(exc))
            return
        await hu.send_json(send, 201, orjson.dumps(out), JSON_HEADERS)

    # -- helpers ------------------------------------------------------------------------------------------
    def _csrf(self, txn: str) -> str:
        return hmac.new(self._csrf_key, txn.encode(), hashlib.sha256).hexdigest()

    def _set_cookie(self, value: str) -> str:
        secure = "; Secure" if self.secure else ""
        return f"{self.cookie}={value}; Path=/; HttpOnly; SameSite=Lax; Max-Age={self.config.login_ttl}{secure}"

    def _clear_cookie(self) -> str:
        secure = "; Secure" if self.secure else ""
        return f"{self.cookie}=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0{secure}"

    def _cookie(self, headers: hu.Headers) -> str | None:
        raw = headers.get(b"cookie")
        if not raw:
            return None
        for part in raw.split(";"):
            name, _, value = part.strip().partition("=")
            if name == self.cookie and value:
                return value
        return None

    async def _page(self, send: hu.Send, status: int, title: str, message: str) -> None:
        e = html.escape
        body = (
            f'<!doctype html><html><head><meta charset="utf-8"><title>{e(title)}</title></head>'
            f"<body><h1>{e(title)}</h1><p>{e(message)}</p></body></html>"
        )
        await hu.send_bytes(send, status, body.encode(), b"text/html; charset=utf-8", PAGE_HEADERS)

    async def aclose(self) -> None:
        await self.clients.aclose()
        await self.upstream.aclose()
        self.server.store.close()


async def _respond(send: hu.Send, status: int, body: Any, headers: list[tuple[str, str]]) -> None:
    extra = {k.lower(): v for k, v in headers if k.lower() != "content-type"}
    payload = body if isinstance(body, (bytes, str)) else orjson.dumps(body)
    if isinstance(payload, str):
        payload = payload.encode()
    await hu.send_json(send, status, payload, {**JSON_HEADERS, **extra})


async def _oauth_error(send: hu.Send, status: int, error: str, description: str) -> None:
    await hu.send_json(send, status, orjson.dumps({"error": error, "error_description": description}), JSON_HEADERS)
