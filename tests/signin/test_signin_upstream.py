"""The ID token check of hopline's relying party (hopline/signin/upstream.py): what a sign-in trusts.

The identity provider's key set is given directly (no fetch); tokens are made with joserfc.
"""

from __future__ import annotations

import time

import pytest
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey

from hopline.config.signin import ClaimMapping, UpstreamConfig
from hopline.signin.upstream import Upstream, UpstreamError

ISSUER = "https://idp.example.com"
META = {"issuer": ISSUER, "jwks_uri": ISSUER + "/jwks"}


@pytest.fixture(scope="module")
def key():
    return RSAKey.generate_key(2048, parameters={"kid": "k1", "alg": "RS256"}, private=True)


@pytest.fixture
async def upstream(key):
    config = UpstreamConfig(
        authorization_endpoint=ISSUER + "/auth", token_endpoint=ISSUER + "/token", jwks_uri=ISSUER + "/jwks",
        client_id="hopline", client_secret="s" * 20,
    )  # fmt: skip
    up = Upstream(config, ClaimMapping(), "https://gw.example.com/oauth/callback")
    up._keys = KeySet.import_key_set({"keys": [key.as_dict(private=False)]})
    up._keys_at = time.monotonic()
    yield up
    await up.aclose()


def id_token(key, **claims):
    now = int(time.time())
    base = {"iss": ISSUER, "aud": "hopline", "sub": "alice", "nonce": "n-1", "iat": now, "exp": now + 300}
    base.update(claims)
    return jwt.encode({"alg": "RS256", "kid": "k1"}, {k: v for k, v in base.items() if v is not None}, key)


async def test_a_good_id_token_gives_the_mapped_claims(upstream, key):
    claims = await upstream._validate(id_token(key, groups=["eng"], email="a@x", roles="r1 r2"), "n-1", META)
    assert upstream.map(claims) == {"sub": "alice", "email": "a@x", "groups": ["eng"], "roles": ["r1", "r2"]}


@pytest.mark.parametrize(
    "claims",
    [
        {"nonce": "another-sign-in"},  # replayed into this sign-in
        {"nonce": None},
        {"aud": "another-client"},
        {"iss": "https://evil.example.com"},
        {"exp": int(time.time()) - 3600},
        {"exp": None},
    ],
)
async def test_an_id_token_that_is_not_for_this_sign_in_is_refused(upstream, key, claims):
    with pytest.raises(UpstreamError, match="ID token is not valid"):
        await upstream._validate(id_token(key, **claims), "n-1", META)


async def test_an_id_token_signed_by_another_key_or_unsigned_is_refused(upstream, key, monkeypatch):
    other = RSAKey.generate_key(2048, parameters={"kid": "k1"}, private=True)
    refetched = []

    async def no_fetch(url):
        refetched.append(url)
        return {"keys": [key.as_dict(private=False)]}

    monkeypatch.setattr(upstream, "_json", no_fetch)
    with pytest.raises(UpstreamError):
        await upstream._validate(id_token(other), "n-1", META)
    head = id_token(key).split(".")
    unsigned = "eyJhbGciOiJub25lIn0." + head[1] + "."
    with pytest.raises(UpstreamError):
        await upstream._validate(unsigned, "n-1", META)


def test_a_missing_subject_is_refused(upstream):
    with pytest.raises(UpstreamError, match="no 'sub' claim"):
        upstream.map({"email": "a@x"})
