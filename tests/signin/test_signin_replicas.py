"""Sign-in across replicas (auth.signin.store_backend: redis): any replica finishes what another began.

Two ``hopline serve`` replicas share the state's real redis-server behind one public origin
(https://gateway.test). The browser's requests are spread over them the way a load balancer without
stickiness would: the sign-in begins on A, the identity provider's answer and the consent land on B,
the code is redeemed on A, the refresh token on B, and each replica accepts the tokens the other
signed (one signing key, agreed on at start). A code or refresh token is still spent once overall.
"""

from __future__ import annotations

import base64
import secrets

import httpx
import orjson
import pytest
import yaml

from tests.conftest import PY, start
from tests.signin import harness as h
from tests.signin.test_signin_flows import MCP_HEADERS, INIT, authorize_url, exchange, refresh


@pytest.fixture(scope="module")
def replicas(idp, redis_url, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("signin-replicas")
    static = {"client_id": "static-cli", "redirect_uris": ["http://127.0.0.1/callback"]}
    path = h.gateway_config(tmp, idp, store_backend="redis", clients=[static])
    conf = yaml.safe_load(path.read_text())
    key = base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()
    conf["state"] = {"session_key": key, "redis_url": redis_url, "prefix": f"r{secrets.token_hex(4)}:", "timeout": 2}
    path.write_text(yaml.safe_dump(conf))
    procs = [start([PY, "-m", "hopline", "serve", "--port", "0", "--lazy", str(path)], h.ENV) for _ in range(2)]
    try:
        urls = [p.wait_line(r"at (http://\S+) \(Streamable HTTP\)").group(1).rsplit("/mcp", 1)[0] for p in procs]
        yield urls
    finally:
        for p in procs:
            p.stop()


def spread(urls: list[str], route) -> httpx.AsyncClient:
    """A browser whose requests for https://gateway.test go to the replica ``route(path)`` names."""
    transports = [h.mapped(u) for u in urls]

    class Spread(httpx.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            return await transports[route(request.url.path)].handle_async_request(request)

    return httpx.AsyncClient(transport=Spread(), follow_redirects=False, timeout=20, trust_env=False)


async def test_a_sign_in_begun_on_one_replica_finishes_on_the_other(replicas):
    redirect = "http://127.0.0.1:41234/callback"
    on_b = ("/oauth/callback", "/oauth/consent")
    async with spread(replicas, lambda path: 1 if path.startswith(on_b) else 0) as browser:
        verifier, challenge = h.pkce()
        url = authorize_url("static-cli", redirect, code_challenge=challenge)
        out = await h.sign_in(browser, url, "alice", redirect)
        assert "code" in out, out  # begun on A, the IdP's answer and the consent on B
        r = await exchange(browser, out["code"], verifier, "static-cli", redirect)  # B's code, redeemed on A
        assert r.status_code == 200, r.text
        tokens = r.json()
    for replica in (0, 1):  # each accepts the token (signed with the key both agreed on)
        async with spread(replicas, lambda path, n=replica: n) as client:
            headers = {**MCP_HEADERS, "authorization": f"Bearer {tokens['access_token']}"}
            assert (await client.post(h.RESOURCE, content=orjson.dumps(INIT), headers=headers)).status_code == 200
    async with spread(replicas, lambda path: 1) as on_b_only:
        renewed = await refresh(on_b_only, tokens["refresh_token"], "static-cli")
        assert renewed.status_code == 200, renewed.text
    async with spread(replicas, lambda path: 0) as on_a_only:
        replayed = await refresh(on_a_only, tokens["refresh_token"], "static-cli")
        assert replayed.status_code == 400  # spent on B: a replay on A revokes the grant
        assert (await refresh(on_a_only, renewed.json()["refresh_token"], "static-cli")).status_code == 400
        again = await exchange(on_a_only, out["code"], verifier, "static-cli", redirect)
        assert again.status_code == 400 and again.json()["error"] == "invalid_grant"  # a code once, too
    jwks = []
    for replica in (0, 1):
        async with spread(replicas, lambda path, n=replica: n) as client:
            jwks.append((await client.get(h.PUBLIC + "/oauth/jwks")).json())
    assert jwks[0] == jwks[1] and len(jwks[0]["keys"]) == 1
