"""The ``auth`` section (config/auth.py): what it accepts, what it refuses, and where it says so."""

from __future__ import annotations

import pytest
import yaml

from hopline.config.load import ConfigError, parse_config
from hopline.layers.policy.auth import Authenticator
from hopline.layers.policy.jwks import KeyProblem
from hopline.layers.policy.resource import canonical_resource
from tests.servers.oauth_server import SigningKeys

ISSUER = {"issuer": "https://issuer.test", "jwks_url": "https://issuer.test/jwks"}


def problems(text: str, env: dict[str, str] | None = None) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as info:
        parse_config(text, env=env or {})
    return info.value.problems


def config(auth: dict, env: dict[str, str] | None = None):
    doc = {"backends": {"web": {"url": "https://backend.test/mcp"}, "local": {"command": "x"}}, "auth": auth}
    return parse_config(yaml.safe_dump(doc), env=env or {})


@pytest.mark.parametrize(
    "given, canonical",
    [
        ("https://gw.test/mcp", "https://gw.test/mcp"),
        ("HTTPS://GW.Test/mcp/", "https://gw.test/mcp"),
        ("https://gw.test:443/mcp", "https://gw.test/mcp"),
        ("http://gw.test:80", "http://gw.test"),
        ("https://gw.test:8443/a/B", "https://gw.test:8443/a/B"),  # the path keeps its case
        ("https://[::1]:8000/mcp", "https://[::1]:8000/mcp"),
        ("https://gw.test/", "https://gw.test"),
    ],
)
def test_canonical_resource(given, canonical):
    assert canonical_resource(given) == canonical


@pytest.mark.parametrize("bad", ["gw.test/mcp", "ftp://gw.test", "https://gw.test/mcp#frag", "https://user:pw@gw.test", "https://gw.test:99999", "https://"])
def test_not_a_resource(bad):
    with pytest.raises(ValueError):
        canonical_resource(bad)


def test_secrets_come_from_the_environment_and_never_appear_in_messages():
    env = {"KEY": "k" * 20, "SHORT": "tiny-secret", "TOKEN": "backend-token"}
    c = config({"resource": "https://gw.test/mcp", "api_keys": [{"name": "bot", "key": "${KEY}"}], "backends": {"web": {"mode": "inject", "secret": "${TOKEN}"}}}, env)
    assert c.auth.api_keys[0].key == "k" * 20 and c.auth.backends["web"].secret == "backend-token"
    text = yaml.safe_dump({"backends": {"web": {"url": "https://b.test"}}, "auth": {"resource": "https://gw.test", "api_keys": [{"name": "bot", "key": "${SHORT}"}]}})
    found = problems(text, env)
    assert found and all("tiny-secret" not in msg for _, msg in found)


@pytest.mark.parametrize(
    "auth, where",
    [
        ({"issuers": [ISSUER]}, "auth.resource"),
        ({"resource": "https://gw.test"}, "auth"),
        ({"resource": "https://gw.test", "issuers": [{"issuer": "https://i.test"}]}, "auth.issuers[0]"),
        ({"resource": "https://gw.test", "issuers": [{"issuer": "https://i.test", "jwks_url": "http://i.test/jwks"}]}, "auth.issuers[0].jwks_url"),
        ({"resource": "https://gw.test", "issuers": [{"issuer": "https://i.test", "keys": [{"alg": "HS256", "secret": "short"}]}]}, "auth.issuers[0].keys[0].secret"),
        ({"resource": "https://gw.test", "issuers": [{"issuer": "https://i.test", "keys": [{"alg": "RS256", "secret": "x" * 64}]}]}, "auth.issuers[0].keys[0].secret"),
        ({"resource": "https://gw.test", "issuers": [{"issuer": "https://i.test", "keys": [{"alg": "HS256", "pem": "x"}]}]}, "auth.issuers[0].keys[0].pem"),
        ({"resource": "https://gw.test", "issuers": [{"issuer": "https://i.test", "keys": [{"alg": "RS256"}]}]}, "auth.issuers[0].keys[0]"),
        ({"resource": "https://gw.test", "issuers": [{"issuer": "https://i.test", "keys": [{"alg": "none", "pem": "x"}]}]}, "auth.issuers[0].keys[0].alg"),
        ({"resource": "https://gw.test", "issuers": [{"issuer": "https://i.test", "jwks_url": "https://i.test/j", "algorithms": ["HS256"]}]}, "auth.issuers[0].algorithms[0]"),
        ({"resource": "https://gw.test", "issuers": [ISSUER, ISSUER]}, "auth.issuers[1].issuer"),
        ({"resource": "https://gw.test", "api_keys": [{"name": "a", "key": "short"}]}, "auth.api_keys[0].key"),
        ({"resource": "https://gw.test", "api_keys": [{"name": "a", "key": "k" * 16}, {"name": "a", "key": "j" * 16}]}, "auth.api_keys[1].name"),
        ({"resource": "https://gw.test", "issuers": [ISSUER], "leeway": 3600}, "auth.leeway"),
        ({"resource": "https://gw.test", "issuers": [ISSUER], "api_key_header": "Authorization"}, "auth.api_key_header"),
        ({"resource": "https://gw.test", "issuers": [ISSUER], "backends": {"web": {"mode": "inject"}}}, "auth.backends.web.secret"),
        ({"resource": "https://gw.test", "issuers": [ISSUER], "backends": {"web": {"mode": "exchange", "client_id": "c"}}}, "auth.backends.web.token_endpoint"),
        ({"resource": "https://gw.test", "issuers": [ISSUER], "backends": {"web": {"mode": "passthrough", "secret": "x"}}}, "auth.backends.web.secret"),
        ({"resource": "https://gw.test", "issuers": [ISSUER], "backends": {"web": {"mode": "inject", "secret": "a\r\nX-Evil: 1"}}}, "auth.backends.web.secret"),
        ({"resource": "https://gw.test", "issuers": [ISSUER], "backends": {"web": {"mode": "inject", "secret": "x", "header": "mcp-session-id"}}}, "auth.backends.web.header"),
        ({"resource": "https://gw.test", "issuers": [ISSUER], "backends": {"web": {"mode": "tunnel"}}}, "auth.backends.web.mode"),
        ({"resource": "https://gw.test", "issuers": [ISSUER], "unknown": 1}, "auth.unknown"),
    ],
)
def test_bad_auth_sections_are_refused_at_their_key(auth, where):
    text = yaml.safe_dump({"backends": {"web": {"url": "https://backend.test/mcp"}}, "auth": auth})
    paths = [path for path, _ in problems(text)]
    assert where in paths, paths


def test_backend_ids_are_checked_against_the_backends():
    """The whole-file check refuses them when the file loads (so `hopline check` does too)."""
    from hopline.config.load import ConfigError

    with pytest.raises(ConfigError) as info:
        config({"resource": "https://gw.test", "issuers": [ISSUER], "backends": {"nobody": {"mode": "passthrough"}, "local": {"mode": "passthrough"}, "web": {"mode": "passthrough"}}})
    found = dict(info.value.problems)
    assert set(found) == {"auth.backends.nobody", "auth.backends.local"}
    assert "local, web" in found["auth.backends.nobody"] and "url" in found["auth.backends.local"]


def test_metadata_document_and_paths():
    c = config({"resource": "https://GW.test/mcp", "issuers": [ISSUER], "scopes_supported": ["mcp"], "resource_name": "Team gateway"})
    auth = Authenticator(c.auth)
    assert auth.metadata() == {
        "resource": "https://gw.test/mcp",
        "authorization_servers": ["https://issuer.test"],
        "bearer_methods_supported": ["header"],
        "scopes_supported": ["mcp"],
        "resource_name": "Team gateway",
    }
    assert auth.metadata_paths("/mcp", "/sse") == {
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource/sse",
    }
    root = Authenticator(config({"resource": "https://gw.test", "issuers": [ISSUER]}).auth)
    assert "/.well-known/oauth-protected-resource" in root.metadata_paths("/mcp")


def test_keys_that_cannot_be_loaded_are_reported_by_location(tmp_path):
    keys = SigningKeys()
    private = tmp_path / "private.pem"
    from cryptography.hazmat.primitives import serialization

    private.write_bytes(keys.rsa.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    cases = {
        "cannot read": {"alg": "RS256", "pem_file": str(tmp_path / "missing.pem")},
        "private key": {"alg": "RS256", "pem_file": str(private)},
        "not a usable": {"alg": "RS256", "pem": "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"},
        "cannot verify": {"alg": "RS256", "jwk": keys.jwk("ec")},
        "needs curve": {"alg": "ES384", "jwk": keys.jwk("ec")},
    }
    for expected, key in cases.items():
        c = config({"resource": "https://gw.test", "issuers": [{"issuer": "https://i.test", "keys": [key]}]})
        with pytest.raises(KeyProblem) as info:
            Authenticator(c.auth)
        assert "auth.issuers[0].keys[0]" in str(info.value) and expected in str(info.value), str(info.value)
        assert "PRIVATE" not in str(info.value)


def test_the_auth_sections_have_the_shape_the_layers_read():
    """The layers take the ``auth`` sections as they are (layers/policy/settings.py):
    a field renamed or dropped in config/auth.py fails here, not on a live request."""
    from hopline.layers.policy.settings import ApiKeySettings, AuthSettings, BackendAuthSettings, IssuerSettings, KeySettings

    auth = config(
        {
            "resource": "https://gw.test",
            "issuers": [{"issuer": "https://i.test", "keys": [{"alg": "HS256", "secret": "s" * 32}]}],
            "api_keys": [{"name": "bot", "key": "k" * 16}],
            "backends": {"web": {"mode": "inject", "secret": "token"}},
        }
    ).auth
    assert isinstance(auth, AuthSettings)
    assert isinstance(auth.issuers[0], IssuerSettings) and isinstance(auth.issuers[0].keys[0], KeySettings)
    assert isinstance(auth.api_keys[0], ApiKeySettings)
    assert isinstance(auth.backends["web"], BackendAuthSettings)

    class Missing:  # a settings object lacking a field the layer reads is not one
        issuer = "https://i.test"

    assert not isinstance(Missing(), IssuerSettings)
