"""hopline's authorization server (auth.signin), request by request, and the attacks on it.

One gateway per module in front of oidc-provider (tests/signin/conftest.py); the browser is an httpx client
submitting the forms it is shown (tests/signin/harness.py). Client ID Metadata Documents come from a small
HTTP server in this process on loopback (allowed by the gateway's ``client_metadata.allow_addresses``).
"""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import orjson
import pytest
from authlib.oauth2.rfc8414 import AuthorizationServerMetadata

from hopline.signin.keys import SigningKeys
from hopline.signin.store import SqliteStore
from tests.signin import harness as h

STATIC = "static-cli"
REDIRECT = "http://127.0.0.1:41234/callback"  # the static client registered http://127.0.0.1/callback: any port
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
MCP_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
FORM = {"content-type": "application/x-www-form-urlencoded"}


def authorize_url(client_id: str = STATIC, redirect_uri: str | None = REDIRECT, **extra: str | None) -> str:
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect_uri,
        "state": "client-state",
        "scope": "mcp",
        "code_challenge_method": "S256",
        **extra,
    }
    return h.PUBLIC + "/oauth/authorize?" + urlencode({k: v for k, v in params.items() if v is not None})


async def code_for(browser: httpx.AsyncClient, user: str = "alice", client_id: str = STATIC, redirect=REDIRECT, **kw):
    """A full sign-in: (code, verifier, the redirect's parameters)."""
    verifier, challenge = h.pkce()
    out = await h.sign_in(browser, authorize_url(client_id, redirect, code_challenge=challenge, **kw), user, redirect)
    assert "code" in out, out
    return out["code"], verifier, out


async def token(browser: httpx.AsyncClient, **form: str) -> httpx.Response:
    return await browser.post(h.PUBLIC + "/oauth/token", content=urlencode(form), headers=FORM)


async def exchange(browser, code, verifier, client_id=STATIC, redirect=REDIRECT, **extra) -> httpx.Response:
    return await token(
        browser,
        grant_type="authorization_code",
        code=code,
        redirect_uri=redirect,
        client_id=client_id,
        code_verifier=verifier,
        **extra,
    )


async def refresh(browser, refresh_token: str, client_id: str = STATIC) -> httpx.Response:
    return await token(browser, grant_type="refresh_token", refresh_token=refresh_token, client_id=client_id)


async def mcp_status(browser: httpx.AsyncClient, access_token: str) -> httpx.Response:
    return await browser.post(
        h.RESOURCE, content=orjson.dumps(INIT), headers={**MCP_HEADERS, "authorization": f"Bearer {access_token}"}
    )


@pytest.fixture
async def browser(gateway):
    async with h.browser(gateway) as b:
        yield b


# -- metadata ------------------------------------------------------------------------------------------------
async def test_metadata_jwks_and_protected_resource_metadata_point_at_hopline(browser):
    r = await browser.get(h.PUBLIC + "/.well-known/oauth-authorization-server")
    assert r.status_code == 200
    meta = r.json()
    AuthorizationServerMetadata(meta).validate()  # Authlib's RFC 8414 checks
    assert meta["issuer"] == h.PUBLIC and meta["code_challenge_methods_supported"] == ["S256"]
    assert meta["authorization_response_iss_parameter_supported"] is True
    assert meta["client_id_metadata_document_supported"] is True
    assert meta["registration_endpoint"] == h.PUBLIC + "/oauth/register"
    prm = (await browser.get(h.PUBLIC + "/.well-known/oauth-protected-resource/mcp")).json()
    assert prm["authorization_servers"] == [h.PUBLIC] and prm["resource"] == h.RESOURCE
    assert prm["scopes_supported"] == ["mcp"]
    jwks = (await browser.get(meta["jwks_uri"])).json()
    assert [k["alg"] for k in jwks["keys"]] == ["RS256"] and all("d" not in k for k in jwks["keys"])


# -- the whole flow, and what the token carries -------------------------------------------------------------
async def test_sign_in_gives_a_token_for_this_resource_that_the_gateway_accepts(browser):
    code, verifier, params = await code_for(browser, "bob")
    assert params["state"] == "client-state" and params["iss"] == h.PUBLIC
    r = await exchange(browser, code, verifier)
    assert r.status_code == 200 and r.headers["cache-control"] == "no-store", r.text
    body = r.json()
    claims = json.loads(base64.urlsafe_b64decode(body["access_token"].split(".")[1] + "=="))
    assert claims["sub"] == "bob" and claims["aud"] == h.RESOURCE and claims["groups"] == ["sales"]
    assert body["expires_in"] == 300 and claims["exp"] - claims["iat"] == 300
    assert (await mcp_status(browser, body["access_token"])).status_code == 200


async def test_denying_consent_sends_access_denied_back_with_state_and_iss(browser):
    verifier, challenge = h.pkce()
    out = await h.sign_in(browser, authorize_url(code_challenge=challenge), "alice", REDIRECT, decision="deny")
    out.pop("error_description", None)
    assert out == {"error": "access_denied", "state": "client-state", "iss": h.PUBLIC}


# -- redirect URIs ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "redirect",
    [
        "https://evil.example/callback",  # another origin altogether (open redirect)
        "http://127.0.0.1:41234/callback/../evil",  # another path
        "http://127.0.0.1:41234/callbackx",
        "http://127.0.0.1.evil.example/callback",  # a name that starts like loopback
        "http://localhost:41234/callback",  # another loopback host than registered
        "http://127.0.0.1:41234/callback?next=https://evil.example",  # an added query
        None,  # none at all (OAuth 2.1: required)
    ],
)
async def test_a_redirect_uri_that_does_not_match_is_refused_without_redirecting(browser, redirect):
    _, challenge = h.pkce()
    r = await browser.get(authorize_url(redirect_uri=redirect, code_challenge=challenge))
    assert r.status_code == 400 and "location" not in r.headers, r.headers
    assert "Sign-in refused" in r.text


async def test_a_loopback_redirect_uri_matches_on_any_port(browser):
    _, challenge = h.pkce()
    for port in (1024, 65000):
        r = await browser.get(authorize_url(redirect_uri=f"http://127.0.0.1:{port}/callback", code_challenge=challenge))
        assert r.status_code == 302 and r.headers["location"].startswith("http://127.0.0.1:"), r.text  # the IdP


async def test_an_unknown_client_is_refused_without_redirecting(browser):
    _, challenge = h.pkce()
    r = await browser.get(authorize_url(client_id="nobody", code_challenge=challenge))
    assert r.status_code == 400 and "location" not in r.headers


# -- PKCE ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["plain", None, "S512"])
async def test_pkce_other_than_s256_is_refused_at_the_client_redirect(browser, method):
    verifier, challenge = h.pkce()
    r = await browser.get(authorize_url(code_challenge=verifier, code_challenge_method=method))
    assert r.status_code == 302
    params = parse_qs(urlsplit(r.headers["location"]).query)
    assert r.headers["location"].startswith(REDIRECT)  # the client hears of it; no login is started
    assert params["error"] == ["invalid_request"] and params["state"] == ["client-state"]
    assert params["iss"] == [h.PUBLIC]


async def test_a_request_without_pkce_is_refused(browser):
    r = await browser.get(authorize_url(code_challenge_method=None))
    assert r.status_code == 302 and "error=invalid_request" in r.headers["location"]


async def test_the_code_needs_its_verifier(browser):
    code, verifier, _ = await code_for(browser)
    missing = await token(browser, grant_type="authorization_code", code=code, redirect_uri=REDIRECT, client_id=STATIC)
    assert missing.status_code == 400 and missing.json()["error"] == "invalid_request"
    code, verifier, _ = await code_for(browser)
    wrong = await exchange(browser, code, h.pkce()[0])
    assert wrong.status_code == 400 and wrong.json()["error"] == "invalid_grant"


# -- code replay, refresh rotation and replay, revocation -----------------------------------------------------------
async def test_a_replayed_code_is_refused_and_revokes_the_grant_it_produced(browser):
    code, verifier, _ = await code_for(browser)
    first = await exchange(browser, code, verifier)
    assert first.status_code == 200
    again = await exchange(browser, code, verifier)
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"
    r = await refresh(browser, first.json()["refresh_token"])
    assert r.status_code == 400 and r.json()["error"] == "invalid_grant"  # the grant went with the replay


async def test_refresh_tokens_rotate_and_a_replayed_one_revokes_the_grant(browser):
    code, verifier, _ = await code_for(browser)
    rt1 = (await exchange(browser, code, verifier)).json()["refresh_token"]
    second = await refresh(browser, rt1)
    assert second.status_code == 200, second.text
    rt2 = second.json()["refresh_token"]
    assert rt2 != rt1 and (await mcp_status(browser, second.json()["access_token"])).status_code == 200
    replay = await refresh(browser, rt1)  # the spent one again: a thief or the client, the grant ends
    assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
    after = await refresh(browser, rt2)
    assert after.status_code == 400 and after.json()["error"] == "invalid_grant"


async def test_a_refresh_token_of_another_client_is_refused(browser):
    code, verifier, _ = await code_for(browser)
    rt = (await exchange(browser, code, verifier)).json()["refresh_token"]
    other = await token(
        browser,
        grant_type="refresh_token",
        refresh_token=rt,
        client_id="confidential",
        client_secret="confidential-secret-0123456789",
    )
    assert other.status_code == 400 and other.json()["error"] == "invalid_grant"


async def test_revocation_ends_the_grant(browser):
    code, verifier, _ = await code_for(browser)
    rt = (await exchange(browser, code, verifier)).json()["refresh_token"]
    r = await browser.post(
        h.PUBLIC + "/oauth/revoke", content=urlencode({"token": rt, "client_id": STATIC}), headers=FORM
    )
    assert r.status_code == 200
    assert (await refresh(browser, rt)).json()["error"] == "invalid_grant"
    unknown = await browser.post(
        h.PUBLIC + "/oauth/revoke", content=urlencode({"token": "nope", "client_id": STATIC}), headers=FORM
    )
    assert unknown.status_code == 200  # RFC 7009 §2.2: an unknown token is not an error


# -- audience (RFC 8707) ---------------------------------------------------------------------------------------------
async def test_a_resource_this_server_does_not_serve_is_refused(browser):
    _, challenge = h.pkce()
    r = await browser.get(authorize_url(code_challenge=challenge, resource="https://other.test/mcp"))
    assert r.status_code == 302 and "error=invalid_target" in r.headers["location"]
    code, verifier, _ = await code_for(browser, resource=h.RESOURCE)
    r = await exchange(browser, code, verifier, resource="https://other.test/mcp")
    assert r.status_code == 400 and r.json()["error"] == "invalid_target"


async def test_a_token_signed_by_hopline_for_another_endpoint_is_refused(browser, gateway):
    store = SqliteStore(str(gateway.store), base64.urlsafe_b64decode(h.SECRET_KEY))
    keys = SigningKeys(store, base64.urlsafe_b64decode(h.SECRET_KEY))  # the gateway's own key, read from its store
    now = int(time.time())
    base = {"iss": h.PUBLIC, "sub": "alice", "iat": now, "exp": now + 300, "scope": "mcp"}
    other = keys.sign({**base, "aud": "https://other.test/mcp"})
    ours = keys.sign({**base, "aud": h.RESOURCE})
    store.close()
    refused = await mcp_status(browser, other)
    assert refused.status_code == 401 and 'error="invalid_token"' in refused.headers["www-authenticate"]
    assert (await mcp_status(browser, ours)).status_code == 200  # the same key and claims, the right audience


# -- the consent page: framing and CSRF; the login's binding to the browser ------------------------------------------
async def consent_page(browser: httpx.AsyncClient) -> httpx.Response:
    """Walk a sign-in up to hopline's consent page and return it."""
    pages: list[httpx.Response] = []
    _, challenge = h.pkce()
    await h.sign_in(browser, authorize_url(code_challenge=challenge), "alice", REDIRECT, pages=pages)
    return pages[0]


async def test_the_consent_page_cannot_be_framed_and_names_the_client_and_scopes(gateway):
    async with h.browser(gateway) as b:
        page = await consent_page(b)
    assert page.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert page.headers["cache-control"] == "no-store"
    assert "Static CLI" in page.text and "<li>mcp</li>" in page.text and "alice@example.com" in page.text


async def test_consent_without_the_page_csrf_token_is_refused(gateway):
    async with h.browser(gateway) as victim:
        page = await consent_page(victim)
        csrf = h.form_of(page.text).fields["csrf"]
        # A cross-site form post carries the victim's cookie but not the page's token:
        forged = await victim.post(h.PUBLIC + "/oauth/consent", content="decision=approve&csrf=x", headers=FORM)
        assert forged.status_code == 403 and "location" not in forged.headers
        # The attacker's own page token does not fit the victim's sign-in either:
        async with h.browser(gateway) as attacker:
            mine = h.form_of((await consent_page(attacker)).text).fields["csrf"]
        stolen = await victim.post(h.PUBLIC + "/oauth/consent", content=f"decision=approve&csrf={mine}", headers=FORM)
        assert stolen.status_code == 403
        # Without the cookie (another browser), the victim's token is worth nothing:
        async with h.browser(gateway) as other:
            r = await other.post(h.PUBLIC + "/oauth/consent", content=f"decision=approve&csrf={csrf}", headers=FORM)
            assert r.status_code == 403
        ok = await victim.post(h.PUBLIC + "/oauth/consent", content=f"decision=approve&csrf={csrf}", headers=FORM)
        assert (
            ok.status_code == 302 and ok.headers["location"].startswith(REDIRECT) and "code=" in ok.headers["location"]
        )


async def test_an_identity_provider_answer_for_another_browser_is_refused(gateway):
    async with h.browser(gateway) as b:
        _, challenge = h.pkce()
        r = await b.get(authorize_url(code_challenge=challenge))
        state = parse_qs(urlsplit(r.headers["location"]).query)["state"][0]
    async with h.browser(gateway) as other:  # login CSRF: the attacker's callback URL in the victim's browser
        r = await other.get(h.PUBLIC + "/oauth/callback?" + urlencode({"state": state, "code": "attacker-code"}))
        assert r.status_code == 400 and "location" not in r.headers


# -- Client ID Metadata Documents -------------------------------------------------------------------------------------
class Documents:
    """A loopback HTTP server of client metadata documents, counting fetches."""

    def __init__(self) -> None:
        self.fetches: dict[str, int] = {}
        docs = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                docs.fetches[self.path] = docs.fetches.get(self.path, 0) + 1
                url = docs.base + self.path
                good = {"client_id": url, "client_name": "CIMD App", "redirect_uris": ["http://127.0.0.1/cb"]}
                if self.path == "/redirect.json":
                    self.send_response(302)
                    self.send_header("location", docs.base + "/good.json")
                    self.end_headers()
                    return
                if self.path == "/slow.json":
                    time.sleep(3)
                body = {
                    "/huge.json": {**good, "client_name": "x" * 100_000},
                    "/wrong-id.json": {**good, "client_id": docs.base + "/good.json"},
                    "/secret.json": {**good, "token_endpoint_auth_method": "client_secret_basic"},
                }.get(self.path, good)
                raw = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                try:
                    self.wfile.write(raw)
                except OSError:
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def documents():
    d = Documents()
    yield d
    d.close()


async def test_a_client_metadata_document_client_signs_in_and_its_document_is_cached(browser, documents):
    client_id = documents.base + "/good.json"
    code, verifier, _ = await code_for(browser, client_id=client_id, redirect="http://127.0.0.1:5000/cb")
    r = await exchange(browser, code, verifier, client_id=client_id, redirect="http://127.0.0.1:5000/cb")
    assert r.status_code == 200, r.text
    assert json.loads(base64.urlsafe_b64decode(r.json()["access_token"].split(".")[1] + "=="))["client_id"] == client_id
    assert documents.fetches == {"/good.json": 1}  # fetched once, then cached


@pytest.mark.parametrize(
    "path, why",
    [
        ("/huge.json", "over 4096 bytes"),
        ("/slow.json", "did not arrive within 1 s"),
        ("/redirect.json", "redirects"),
        ("/wrong-id.json", "does not name its own URL"),
        ("/secret.json", "must be public"),
    ],
)
async def test_a_bad_client_metadata_document_is_refused(browser, documents, path, why):
    _, challenge = h.pkce()
    started = time.monotonic()
    r = await browser.get(authorize_url(client_id=documents.base + path, redirect_uri="http://127.0.0.1:5000/cb",
                                        code_challenge=challenge))  # fmt: skip
    assert r.status_code == 400 and "location" not in r.headers and why in r.text, r.text
    if path == "/slow.json":
        assert time.monotonic() - started < 2.9  # given up at the 1 s bound, not waited out
    assert documents.fetches.get("/good.json", 0) == 0  # the redirect was not followed


@pytest.mark.parametrize(
    "client_id, why",
    [
        ("https://169.254.169.254/latest/meta-data/client.json", "address is not allowed"),  # cloud metadata
        ("https://[fd00:ec2::254]/client.json", "address is not allowed"),
        ("https://10.0.0.1/client.json", "address is not allowed"),  # a private range, not in allow_addresses
        ("http://example.com/client.json", "must use https"),  # plain http outside loopback
        ("https://example.com/", "must have a path"),
        ("https://user:pw@example.com/c.json", "malformed"),
    ],
)
async def test_a_client_id_url_hopline_must_not_fetch_is_refused(browser, client_id, why):
    _, challenge = h.pkce()
    r = await browser.get(authorize_url(client_id=client_id, code_challenge=challenge))
    assert r.status_code == 400 and "location" not in r.headers and why in r.text, r.text


# -- dynamic registration (RFC 7591) ----------------------------------------------------------------------------------
async def test_registration_checks_redirect_uris_and_is_rate_limited(browser):
    async def register(body) -> httpx.Response:
        return await browser.post(h.PUBLIC + "/oauth/register", content=json.dumps(body),
                                  headers={"content-type": "application/json"})  # fmt: skip

    bad = await register({"redirect_uris": ["http://evil.example/cb"]})
    assert bad.status_code == 400 and bad.json()["error"] == "invalid_redirect_uri"
    ok = await register(
        {
            "redirect_uris": ["http://127.0.0.1/cb"],
            "client_name": "Reg",
            "token_endpoint_auth_method": "client_secret_post",
        }
    )
    assert ok.status_code == 201 and ok.json()["client_secret"] and ok.json()["client_id"].startswith("hl-")
    statuses = [(await register({"redirect_uris": ["http://127.0.0.1/cb"]})).status_code for _ in range(6)]
    assert statuses.count(429) >= 2 and statuses[0] == 201  # per_minute: 5 (the refused one counted)


# -- what the store keeps ---------------------------------------------------------------------------------------------
async def test_the_store_keeps_no_refresh_token_and_no_private_key_in_the_clear(browser, gateway):
    code, verifier, _ = await code_for(browser)
    body = (await exchange(browser, code, verifier)).json()
    await asyncio.sleep(0)
    raw = b"".join(p.read_bytes() for p in gateway.store.parent.glob("signin.sqlite3*"))
    assert body["refresh_token"].encode() not in raw and code.encode() not in raw
    assert b'"d"' not in raw and b"alice@example.com" in raw  # claims are kept; the key's private part is sealed


async def test_the_consent_form_is_accepted_from_the_issuer_origin_when_it_is_not_a_listed_host(idp, tmp_path):
    """A browser posts the consent form with ``Origin: <issuer>``; hopline's Origin rule lets it through even when
    the issuer's host is in neither listen.allowed_hosts nor allowed_origins (here: issuer on its own name)."""
    from tests.conftest import PY, start

    path = h.gateway_config(tmp_path, idp, issuer="https://login.gateway.test")
    proc = start([PY, "-m", "hopline", "serve", "--port", "0", "--lazy", str(path)], h.ENV)
    try:
        url = proc.wait_line(r"at (http://\S+) \(Streamable HTTP\)").group(1).rsplit("/mcp", 1)[0]
        async with h.browser(url) as b:
            r = await b.post(h.PUBLIC + "/oauth/consent", content="decision=approve&csrf=x",
                             headers={**FORM, "origin": "https://login.gateway.test"})  # fmt: skip
            assert (
                r.status_code == 403 and "not sent from this sign-in" in r.text
            )  # the CSRF check, not the Origin rule
            other = await b.post(h.PUBLIC + "/oauth/consent", content="decision=approve&csrf=x",
                                 headers={**FORM, "origin": "https://evil.example"})  # fmt: skip
            assert other.status_code == 403 and "Invalid Origin" in other.text
    finally:
        proc.stop()
