"""The authenticator on its own (layers/policy/auth.py, jwks.py): the AUTH battery's token cases.

Static keys and a fake clock for the pure checks; a real local JWKS server
(tests/servers/oauth_server.py) wherever keys are fetched, so fetches are counted
where they happen.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import logging
import secrets

import jwt
import orjson
import pytest

from hopline.config.auth import AuthConfig
from hopline.layers.policy.auth import AuthError, Authenticator, metadata_url
from hopline.transports.http_util import Headers
from tests.peers import stop
from tests.servers import oauth_server
from tests.servers.oauth_server import ISSUER, RESOURCE, SigningKeys

NOW = 1_800_000_000.0
HS_SECRET = "s3cret-" * 10  # 70 bytes


class Clock:
    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def keys() -> SigningKeys:
    return SigningKeys()


def static_config(keys: SigningKeys, **extra) -> AuthConfig:
    issuers = [{"issuer": ISSUER, "keys": [{"kid": "rsa-1", "alg": "RS256", "pem": keys.public_pem("rsa")}, {"kid": "ec-1", "alg": "ES256", "jwk": keys.jwk("ec")}]}]
    return AuthConfig.model_validate({"resource": RESOURCE, "issuers": issuers, "leeway": 5, **extra})


def authenticator(keys: SigningKeys, clock: Clock | None = None, **extra) -> Authenticator:
    return Authenticator(static_config(keys, **extra), clock=clock or Clock())


def bearer(token: str, **more: str) -> Headers:
    return Headers([(b"authorization", f"Bearer {token}".encode()), *((k.encode(), v.encode()) for k, v in more.items())])


def mint(keys: SigningKeys, which: str = "rsa", *, headers: dict | None = None, **claims) -> str:
    claims.setdefault("exp", NOW + 600)
    claims.setdefault("iat", NOW)
    return keys.mint(which, headers=headers, **claims)


def forge(header: dict, claims: dict, sign=None) -> str:
    """A JWT assembled by hand (for what PyJWT refuses to produce)."""
    h = base64.urlsafe_b64encode(json.dumps(header).encode()).rstrip(b"=").decode()
    p = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    sig = sign(f"{h}.{p}".encode()) if sign else b""
    return f"{h}.{p}.{base64.urlsafe_b64encode(sig).rstrip(b'=').decode()}"


async def refused(auth: Authenticator, headers: Headers, query: bytes = b"") -> AuthError:
    with pytest.raises(AuthError) as info:
        await auth.authenticate(headers, query)
    return info.value


# -- valid tokens --------------------------------------------------------------------------
async def test_a_valid_token_becomes_a_principal(keys):
    auth = authenticator(keys)
    token = mint(keys, sub="alice", scope="mcp tools:read")
    principal = await auth.authenticate(bearer(token))
    assert principal.subject == "alice" and principal.issuer == ISSUER
    assert principal.scopes == {"mcp", "tools:read"} and principal.claims["aud"] == RESOURCE
    assert principal.token == token and token not in repr(principal)
    assert principal.key == (ISSUER, "alice")


async def test_ec_keys_and_scp_lists(keys):
    auth = authenticator(keys)
    principal = await auth.authenticate(bearer(mint(keys, "ec", scope=None, scp=["a", "b"])))
    assert principal.scopes == {"a", "b"}


async def test_a_verified_token_is_cached_until_it_expires(keys):
    clock = Clock()
    auth = authenticator(keys, clock)
    token = mint(keys, exp=NOW + 60)
    first = await auth.authenticate(bearer(token))
    assert await auth.authenticate(bearer(token)) is first  # the cache, not a second verification
    clock.now = NOW + 60 + 5 + 1  # past exp + leeway: verified again, and refused
    assert "expired" in (await refused(auth, bearer(token))).description


async def test_the_cache_is_bounded(keys):
    auth = authenticator(keys, cache_size=3)
    for n in range(10):
        await auth.authenticate(bearer(mint(keys, sub=f"user{n}")))
    assert len(auth._cache) <= 3


# -- AUTH-01: where the token may come from ---------------------------------------------------
async def test_missing_token_is_401_with_resource_metadata(keys):
    auth = authenticator(keys)
    err = await refused(auth, Headers([]))
    assert err.status == 401 and err.error is None
    header = err.headers(auth.metadata_url)["www-authenticate"]
    assert header == 'Bearer resource_metadata="https://gateway.test/.well-known/oauth-protected-resource/mcp"'


@pytest.mark.parametrize("value", ["Bearer", "Bearer ", "Bearer    ", "Basic YWxpY2U6cHc=", "bearer", "Token abc", "Bearer a b"])
async def test_empty_or_foreign_authorization_is_401(keys, value):
    err = await refused(authenticator(keys), Headers([(b"authorization", value.encode())]))
    assert err.status == 401


async def test_a_token_in_the_query_string_is_refused_even_beside_a_valid_one(keys):
    auth = authenticator(keys)
    token = mint(keys)
    err = await refused(auth, Headers([]), f"access_token={token}".encode())
    assert err.status == 401 and err.error == "invalid_request"
    err = await refused(auth, bearer(token), f"session_id=1&access_token={token}".encode())
    assert err.status == 401 and err.error == "invalid_request"
    assert (await auth.authenticate(bearer(token), b"session_id=access_token")).subject == "alice"  # only the key counts


async def test_a_token_in_a_cookie_is_never_read(keys):
    err = await refused(authenticator(keys), Headers([(b"cookie", f"access_token={mint(keys)}".encode())]))
    assert err.status == 401


# -- AUTH-02, AUTH-03: algorithms ----------------------------------------------------------------
@pytest.mark.parametrize("alg", ["none", "None", "NONE", "nOnE"])
async def test_unsigned_tokens_are_refused(keys, alg):
    token = forge({"alg": alg, "kid": "rsa-1", "typ": "JWT"}, keys.claims(exp=NOW + 60, iat=NOW))
    err = await refused(authenticator(keys), bearer(token))
    assert err.status == 401 and err.error == "invalid_token"


async def test_an_empty_signature_is_refused(keys):
    token = mint(keys).rsplit(".", 1)[0] + "."
    assert (await refused(authenticator(keys), bearer(token))).status == 401


async def test_hs256_signed_with_the_rsa_public_key_is_refused(keys):
    """Key confusion: the attacker knows the public key and uses it as an HMAC secret."""
    pem = keys.public_pem("rsa").encode()
    claims = keys.claims(exp=NOW + 60, iat=NOW)
    for kid in ("rsa-1", None):
        header = {"alg": "HS256", "typ": "JWT", **({"kid": kid} if kid else {})}
        token = forge(header, claims, lambda data: hmac.new(pem, data, hashlib.sha256).digest())
        assert (await refused(authenticator(keys), bearer(token))).description in ("algorithm not allowed for this key", "unknown signing key")


async def test_an_hmac_key_only_verifies_its_pinned_algorithm(keys):
    config = {"issuers": [{"issuer": ISSUER, "keys": [{"alg": "HS256", "secret": HS_SECRET}]}]}
    auth = Authenticator(AuthConfig.model_validate({"resource": RESOURCE, **config}), clock=Clock())
    good = jwt.encode(keys.claims(exp=NOW + 60, iat=NOW), HS_SECRET, algorithm="HS256")
    assert (await auth.authenticate(bearer(good))).subject == "alice"
    other = jwt.encode(keys.claims(exp=NOW + 60, iat=NOW), HS_SECRET, algorithm="HS512")
    assert (await refused(auth, bearer(other))).description == "algorithm not allowed for this key"
    rsa_signed = mint(keys, headers={"kid": None})
    assert (await refused(auth, bearer(rsa_signed))).status == 401


async def test_a_token_signed_by_another_key_is_refused(keys):
    other = SigningKeys()
    assert (await refused(authenticator(keys), bearer(other.mint(exp=NOW + 60, iat=NOW)))).description == "bad signature"


# -- AUTH-04: audience --------------------------------------------------------------------------
@pytest.mark.parametrize(
    "aud, ok",
    [
        (RESOURCE, True),
        ([RESOURCE, "https://other.test"], True),
        (["https://other.test"], False),
        ("https://other.test/mcp", False),
        (None, False),
        (RESOURCE + "/", False),
        ("https://GATEWAY.test/mcp", False),
        ("HTTPS://gateway.test/mcp", False),
        ("https://gateway.test:443/mcp", False),
        ("https://gateway.test", False),
        ([], False),
    ],
)
async def test_the_audience_must_be_our_canonical_resource(keys, aud, ok):
    auth = authenticator(keys)
    token = mint(keys, aud=aud)
    if ok:
        assert (await auth.authenticate(bearer(token))).subject == "alice"
    else:
        assert (await refused(auth, bearer(token))).status == 401


async def test_the_configured_resource_is_canonicalised(keys):
    auth = Authenticator(static_config(keys, resource="HTTPS://Gateway.TEST:443/mcp/"), clock=Clock())
    assert auth.resource == RESOURCE
    assert (await auth.authenticate(bearer(mint(keys)))).subject == "alice"
    assert metadata_url("https://gw.test") == "https://gw.test/.well-known/oauth-protected-resource"
    assert metadata_url("https://gw.test:8443/a/mcp") == "https://gw.test:8443/.well-known/oauth-protected-resource/a/mcp"


async def test_an_id_token_for_a_client_is_not_an_access_token(keys):
    """An ID token's aud is the client id and its typ is often JWT: the audience refuses it."""
    token = mint(keys, aud="my-client-id", headers={"typ": "JWT"})
    assert (await refused(authenticator(keys), bearer(token))).description.endswith("(aud)")


# -- AUTH-05: times --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "claims, ok",
    [
        ({"exp": NOW - 4}, True),  # within the 5 s leeway
        ({"exp": NOW - 6}, False),  # beyond it
        ({"exp": None}, False),  # missing exp
        ({"nbf": NOW + 4}, True),
        ({"nbf": NOW + 6}, False),
        ({"iat": NOW + 6}, False),
        ({"iat": NOW + 86400 * 365}, False),
        ({"exp": "tomorrow"}, False),
        ({"exp": True}, False),
    ],
)
async def test_expiry_and_not_before_with_leeway(keys, claims, ok):
    auth = authenticator(keys)
    token = mint(keys, **claims)
    if ok:
        assert (await auth.authenticate(bearer(token))).subject == "alice"
    else:
        assert (await refused(auth, bearer(token))).status == 401


async def test_a_token_without_exp_only_where_configured(keys):
    auth = authenticator(keys, require_exp=False)
    assert (await auth.authenticate(bearer(mint(keys, exp=None)))).subject == "alice"


# -- AUTH-06: issuers -----------------------------------------------------------------------------
@pytest.mark.parametrize("iss", ["https://evil.test", ISSUER + "/", ISSUER.upper(), None, 42])
async def test_untrusted_issuers_are_refused(keys, iss):
    assert (await refused(authenticator(keys), bearer(mint(keys, iss=iss)))).status == 401


async def test_a_kid_is_never_trusted_across_issuers(keys):
    """Issuer B's key has the same kid as issuer A's: a token claiming A signed with B's key fails."""
    other = SigningKeys(issuer="https://second.test")
    config = AuthConfig.model_validate({"resource": RESOURCE, "issuers": [
        {"issuer": ISSUER, "keys": [{"kid": "rsa-1", "alg": "RS256", "pem": keys.public_pem()}]},
        {"issuer": "https://second.test", "keys": [{"kid": "rsa-1", "alg": "RS256", "pem": other.public_pem()}]},
    ]})
    auth = Authenticator(config, clock=Clock())
    assert (await auth.authenticate(bearer(other.mint(exp=NOW + 60, iat=NOW)))).issuer == "https://second.test"
    assert (await auth.authenticate(bearer(mint(keys)))).issuer == ISSUER
    forged = other.mint(iss=ISSUER, exp=NOW + 60, iat=NOW)  # B's key, A's name
    assert (await refused(auth, bearer(forged))).description == "bad signature"


# -- AUTH-08: malformed ---------------------------------------------------------------------------
def _malformed(keys: SigningKeys) -> dict[str, str]:
    good = mint(keys)
    h, p, s = good.split(".")
    b64 = lambda raw: base64.urlsafe_b64encode(raw).rstrip(b"=").decode()  # noqa: E731
    string_payload = b64(b'"x"')
    return {
        "two segments": f"{h}.{p}",
        "four segments": f"{good}.{s}",
        "bad base64url": f"{h}.{p[:-2]}!!.{s}",
        "padding": f"{h}=.{p}.{s}",
        "length 1 mod 4": f"{h}.{p}a.{s}" if len(p) % 4 == 0 else f"{h}.{p}.{s}a",
        "not JSON": f"{b64(b'not json')}.{p}.{s}",
        "JSON array header": f"{b64(b'[1,2]')}.{p}.{s}",
        "JSON string payload": f"{h}.{string_payload}.{s}",
        "empty header": f".{p}.{s}",
        "crit header": mint(keys, headers={"crit": ["exp"], "exp": 1}),
        "ID-token typ": mint(keys, headers={"typ": "id_token+jwt"}),
        "dpop typ": mint(keys, headers={"typ": "dpop+jwt"}),
        "numeric typ": mint(keys, headers={"typ": 7}),
        "no sub": mint(keys, sub=None),
        "empty sub": mint(keys, sub=""),
        "numeric sub": mint(keys, sub=12),
        "unicode": good[:20] + "é" + good[21:],
        "spaces": good[:20] + " " + good[21:],
    }


async def test_malformed_tokens_are_401_without_detail(keys):
    auth = authenticator(keys)
    for name, token in _malformed(keys).items():
        err = await refused(auth, bearer(token))
        assert err.status == 401, name
        assert token not in err.description and "Traceback" not in err.description, name


async def test_an_oversized_token_is_431(keys):
    auth = authenticator(keys)
    huge = mint(keys, padding="x" * 1_000_000)
    err = await refused(auth, bearer(huge))
    assert err.status == 431 and "www-authenticate" not in err.headers(auth.metadata_url)


async def test_typ_is_case_insensitive_and_may_be_absent(keys):
    auth = authenticator(keys)
    for typ in ("AT+JWT", "application/at+jwt", "JWT", None):
        assert (await auth.authenticate(bearer(mint(keys, headers={"typ": typ}, sub=f"typ-{typ}")))).subject == f"typ-{typ}"


# -- AUTH-07: kid injection and the JWKS ----------------------------------------------------------
@pytest.fixture
def jwks_server(tmp_path, keys):
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps(keys.jwks()))
    proc, base = oauth_server.start(path)
    yield path, base
    stop(proc)


def jwks_auth(base: str, monotonic: Clock | None = None, **issuer) -> Authenticator:
    config = AuthConfig.model_validate({"resource": RESOURCE, "issuers": [{"issuer": ISSUER, "jwks_url": base + "/jwks", **issuer}]})
    return Authenticator(config, clock=Clock(), monotonic=monotonic or Clock(0.0))


async def stats(base: str) -> dict:
    import httpx

    async with httpx.AsyncClient() as http:
        return (await http.get(base + "/stats")).json()


async def test_jwks_keys_verify_and_are_fetched_once(keys, jwks_server):
    _, base = jwks_server
    auth = jwks_auth(base)
    try:
        for which in ("rsa", "ec", "rsa"):
            assert (await auth.authenticate(bearer(mint(keys, which, sub=f"u-{which}-{secrets.token_hex(2)}")))).issuer == ISSUER
        assert (await stats(base))["jwks"] == 1
    finally:
        await auth.aclose()


async def test_a_flood_of_unknown_kids_costs_at_most_one_fetch_per_interval(keys, jwks_server):
    _, base = jwks_server
    clock = Clock(0.0)
    auth = jwks_auth(base, clock, jwks_min_interval=30)
    try:
        assert (await auth.authenticate(bearer(mint(keys)))).subject == "alice"  # fetch 1
        flood = [mint(keys, headers={"kid": secrets.token_hex(8)}, sub=f"x{n}") for n in range(200)]
        for token in flood[:50]:  # right after a fetch: refused without fetching
            await refused(auth, bearer(token))
        assert (await stats(base))["jwks"] == 1
        clock.now = 40.0  # the interval has passed: the whole concurrent flood shares one fetch
        results = await asyncio.gather(*(auth.authenticate(bearer(t)) for t in flood), return_exceptions=True)
        assert all(isinstance(r, AuthError) and r.status == 401 for r in results)
        assert (await stats(base))["jwks"] == 2
        clock.now = 69.0
        await asyncio.gather(*(auth.authenticate(bearer(t)) for t in flood), return_exceptions=True)
        assert (await stats(base))["jwks"] == 2
        clock.now = 71.0
        await asyncio.gather(*(auth.authenticate(bearer(t)) for t in flood), return_exceptions=True)
        assert (await stats(base))["jwks"] == 3
    finally:
        await auth.aclose()


async def test_a_rotated_key_is_found_on_the_next_allowed_fetch(keys, jwks_server):
    path, base = jwks_server
    clock = Clock(0.0)
    auth = jwks_auth(base, clock, jwks_min_interval=30)
    new = SigningKeys()
    new.kids = {"rsa": "rsa-2", "ec": "ec-2"}
    try:
        assert (await auth.authenticate(bearer(mint(keys)))).subject == "alice"
        path.write_text(json.dumps({"keys": [keys.jwk("rsa"), new.jwk("rsa")]}))
        token = new.mint(exp=NOW + 600, iat=NOW, sub="bob")
        clock.now = 5.0
        assert (await refused(auth, bearer(token))).description == "unknown signing key"  # rate limited
        clock.now = 40.0
        assert (await auth.authenticate(bearer(token))).subject == "bob"
        assert (await stats(base))["jwks"] == 2
    finally:
        await auth.aclose()


@pytest.mark.parametrize("kid", ["../../../../etc/passwd", "' OR '1'='1' --", "k" * 10240, "", "rsa-1\x00", "$(reboot)"])
async def test_injected_kids_are_only_ever_dictionary_keys(keys, jwks_server, kid):
    _, base = jwks_server
    auth = jwks_auth(base, jwks_min_interval=30)
    try:
        await auth.authenticate(bearer(mint(keys, sub="warm")))
        assert (await refused(auth, bearer(mint(keys, headers={"kid": kid})))).status == 401
        assert (await stats(base))["jwks"] <= 2
    finally:
        await auth.aclose()


async def test_jku_x5u_and_embedded_jwk_headers_are_never_followed(keys, jwks_server):
    _, base = jwks_server
    attacker = SigningKeys()
    attacker.kids = {"rsa": "attacker", "ec": "attacker-ec"}
    auth = jwks_auth(base, jwks_min_interval=30)
    try:
        for extra in ({"jku": base + "/other-jwks"}, {"x5u": base + "/other-jwks"}, {"jwk": attacker.jwk("rsa")}):
            token = attacker.mint(headers=extra, exp=NOW + 60, iat=NOW)
            assert (await refused(auth, bearer(token))).status == 401
        assert (await stats(base))["other_jwks"] == 0
    finally:
        await auth.aclose()


async def test_symmetric_and_disallowed_keys_in_a_jwks_are_ignored(keys, jwks_server):
    path, base = jwks_server
    oct_key = {"kty": "oct", "kid": "shared", "k": base64.urlsafe_b64encode(HS_SECRET.encode()).rstrip(b"=").decode()}
    path.write_text(json.dumps(keys.jwks(oct_key)))
    auth = jwks_auth(base, algorithms=["RS256"])
    try:
        hs = jwt.encode(keys.claims(exp=NOW + 60, iat=NOW), HS_SECRET, algorithm="HS256", headers={"kid": "shared"})
        assert (await refused(auth, bearer(hs))).status == 401
        assert (await refused(auth, bearer(mint(keys, "ec")))).status == 401  # ES256 not allowed for this issuer
        assert (await auth.authenticate(bearer(mint(keys)))).subject == "alice"
    finally:
        await auth.aclose()


async def test_an_unreachable_jwks_refuses_tokens_and_is_retried_later(keys):
    from tests.peers import free_port

    clock = Clock(0.0)
    auth = jwks_auth(f"http://127.0.0.1:{free_port()}", clock)
    try:
        assert (await refused(auth, bearer(mint(keys)))).description == "unknown signing key"
        keyset = auth._issuers[ISSUER]
        assert keyset.fetches == 1
        await refused(auth, bearer(mint(keys, sub="again")))
        assert keyset.fetches == 1
        clock.now = 6.0
        await refused(auth, bearer(mint(keys, sub="later")))
        assert keyset.fetches == 2
    finally:
        await auth.aclose()


# -- AUTH-16: scopes -----------------------------------------------------------------------------
async def test_missing_required_scope_is_403_naming_it(keys):
    auth = authenticator(keys, required_scopes=["mcp", "admin"])
    err = await refused(auth, bearer(mint(keys, scope="mcp")))
    assert err.status == 403 and err.error == "insufficient_scope"
    header = err.headers(auth.metadata_url)["www-authenticate"]
    assert 'error="insufficient_scope"' in header and 'scope="mcp admin"' in header and "resource_metadata=" in header
    assert (await auth.authenticate(bearer(mint(keys, scope="admin mcp extra")))).subject == "alice"
    assert 'scope="mcp admin"' in (await refused(auth, Headers([]))).headers(auth.metadata_url)["www-authenticate"]


# -- API keys ------------------------------------------------------------------------------------
async def test_api_keys_name_the_caller(keys):
    auth = authenticator(keys, api_keys=[{"name": "ci-bot", "key": "k" * 32, "scopes": ["mcp"]}, {"name": "ops", "key": "o" * 40}])
    principal = await auth.authenticate(Headers([(b"x-api-key", b"k" * 32)]))
    assert principal.subject == "ci-bot" and principal.issuer == "api-key" and principal.scopes == {"mcp"} and principal.token is None
    assert (await auth.authenticate(bearer("o" * 40))).subject == "ops"  # a bearer that is not a JWT
    assert (await refused(auth, Headers([(b"x-api-key", b"k" * 31)]))).status == 401
    assert (await refused(auth, bearer("nope" * 8))).status == 401
    assert (await auth.authenticate(bearer(mint(keys)))).subject == "alice"  # JWTs still work


# -- AUTH-17: nothing secret in errors or logs -----------------------------------------------------
async def test_no_credential_appears_in_errors_or_logs(keys, jwks_server, caplog):
    _, base = jwks_server
    caplog.set_level(logging.DEBUG)
    auth = jwks_auth(base)
    api_key = "api-" + secrets.token_hex(16)
    auth_keys = Authenticator(static_config(keys, api_keys=[{"name": "bot", "key": api_key}]), clock=Clock())
    tokens = [*_malformed(keys).values(), mint(keys, aud="x"), mint(keys, iss="https://evil.test"), mint(keys, exp=NOW - 100), mint(keys, headers={"kid": "zz"})]
    try:
        bodies = []
        for token in tokens:
            for a in (auth, auth_keys):
                err = await refused(a, bearer(token))
                bodies += [err.description, err.body().decode(), json.dumps(err.headers(a.metadata_url))]
        err = await refused(auth_keys, Headers([(b"x-api-key", (api_key + "x").encode())]))
        bodies.append(err.body().decode())
        await auth_keys.authenticate(Headers([(b"x-api-key", api_key.encode())]))
    finally:
        await auth.aclose()
    text = "\n".join(bodies) + "\n".join(r.getMessage() for r in caplog.records)
    for token in tokens:
        for part in token.split("."):
            if len(part) >= 16:
                assert part not in text
    assert api_key not in text and keys.public_pem().splitlines()[1] not in text


async def test_error_bodies_are_json(keys):
    err = await refused(authenticator(keys), bearer("a.b.c"))
    assert orjson.loads(err.body()) == {"error": "invalid_token", "error_description": err.description}
