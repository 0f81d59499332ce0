"""``mode: user_oauth`` in ``auth.backends`` and ``auth.connect``: what ``hopline check`` accepts and refuses."""

from __future__ import annotations

import base64
import os
import subprocess
import sys

import pytest
import yaml

from hopline.config.load import ConfigError, parse_config

KEY = base64.urlsafe_b64encode(b"k" * 32).decode()
SHORT = base64.urlsafe_b64encode(b"k" * 31).decode()
CONNECT = {"public_url": "https://gateway.example", "secret_key": "${CONNECT_KEY}"}
ISSUERS = [{"issuer": "https://idp.example", "jwks_url": "https://idp.example/jwks"}]
UPSTREAM = {"mode": "user_oauth", "client_id": "hopline", "client_secret": "${UP_SECRET}"}


def conf(**auth) -> dict:
    return {
        "backends": {"up": {"url": "https://mcp.example/mcp"}},
        "auth": {"resource": "https://gateway.example/mcp", "backends": {"up": UPSTREAM}, **auth},
    }


def check(tmp_path, config: dict) -> subprocess.CompletedProcess:
    path = tmp_path / "g.yaml"
    path.write_text(yaml.safe_dump(config))
    env = {**os.environ, "CONNECT_KEY": KEY, "UP_SECRET": "upstream-secret-value"}
    return subprocess.run([sys.executable, "-m", "hopline", "check", str(path)], capture_output=True, text=True,
                          timeout=60, env=env)  # fmt: skip


def test_check_refuses_per_user_upstream_auth_without_people_at_the_front_door(tmp_path):
    proc = check(tmp_path, conf(api_keys=[{"name": "ci", "key": "${UP_SECRET}"}], connect=CONNECT))
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "auth.backends.up.mode" in out and "authenticated as persons" in out and "issuers" in out
    assert "upstream-secret-value" not in out and KEY not in out


def test_check_accepts_it_with_issuers_and_names_no_secret(tmp_path):
    proc = check(tmp_path, conf(issuers=ISSUERS, connect=CONNECT))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "upstream-secret-value" not in out and KEY not in out
    assert not (tmp_path / "hopline-connections.sqlite3").exists()  # check writes nothing
    assert "backend up: credential user_oauth" in out
    assert "redirect URI https://gateway.example/connect/callback" in out  # what to register upstream


@pytest.mark.parametrize(
    "auth, said",
    [
        ({"issuers": ISSUERS}, "auth.connect: is required by the user_oauth backends (up)"),
        ({"issuers": ISSUERS, "connect": {**CONNECT, "secret_key": SHORT}}, "at least 32 bytes"),
        ({"issuers": ISSUERS, "connect": {**CONNECT, "public_url": "http://gateway.example"}}, "must use https"),
    ],
)
def test_the_connect_section_is_checked(auth, said):
    with pytest.raises(ConfigError) as caught:
        parse_config(yaml.safe_dump(conf(**auth)).replace("${CONNECT_KEY}", KEY).replace("${UP_SECRET}", "x" * 20))
    assert said in str(caught.value)


@pytest.mark.parametrize(
    "backend, said",
    [
        ({"mode": "user_oauth"}, "client_id: is required with mode user_oauth"),
        ({"mode": "user_oauth", "client_id": "h"}, "client_secret: is required with client_auth basic or post"),
        ({"mode": "user_oauth", "client_id": "h", "client_auth": "none", "scope": "a"}, "use `scopes`"),
        ({"mode": "inject", "secret": "x" * 20, "scopes": ["a"]}, "applies to mode user_oauth only"),
    ],
)
def test_the_backend_entry_is_checked(backend, said):
    config = conf(issuers=ISSUERS, connect={**CONNECT, "secret_key": KEY})
    config["auth"]["backends"]["up"] = backend
    with pytest.raises(ConfigError) as caught:
        parse_config(yaml.safe_dump(config))
    assert said in str(caught.value)


def test_a_public_client_or_a_client_metadata_document_needs_no_secret():
    config = conf(issuers=ISSUERS, connect={**CONNECT, "secret_key": KEY})
    config["auth"]["backends"]["up"] = {"mode": "user_oauth", "client_metadata_document": True}
    assert parse_config(yaml.safe_dump(config)).auth.backends["up"].client_id is None
    config["auth"]["backends"]["up"] = {"mode": "user_oauth", "client_id": "h", "client_auth": "none"}
    assert parse_config(yaml.safe_dump(config)).auth.backends["up"].client_auth == "none"


@pytest.mark.parametrize("command", ["check", "serve"])
@pytest.mark.parametrize("damage", ["corrupt", "other key"])
def test_a_corrupt_or_foreign_store_is_a_clear_refusal_and_stays_as_it_was(tmp_path, command, damage):
    from hopline.connect.store import TokenStore

    store = tmp_path / "tokens.sqlite3"
    if damage == "corrupt":
        store.write_bytes(b"not a database" * 100)
    else:
        other = TokenStore(str(store), b"o" * 32)
        other.put("p", "up", {"access_token": "at-9", "expires_at": 1.0})
        other.close()  # checkpointed: the file is whole
    before = store.read_bytes()
    config = conf(issuers=ISSUERS, connect={**CONNECT, "store": str(store)})
    path = tmp_path / "g.yaml"
    path.write_text(yaml.safe_dump(config))
    env = {**os.environ, "CONNECT_KEY": KEY, "UP_SECRET": "upstream-secret-value"}
    argv = [sys.executable, "-m", "hopline", command, str(path)] + (["--port", "0"] if command == "serve" else [])
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    said = "cannot be opened as a SQLite database" if damage == "corrupt" else "sealed under another secret_key"
    assert "auth.connect.store" in out and said in out and "Traceback" not in out
    assert store.read_bytes() == before


def test_without_the_signin_extra_check_names_it_at_the_backend(tmp_path, monkeypatch, capsys):
    """Authlib (the signin extra) is what the per-user accounts use: missing, the file is refused at the
    key that asks for it, with the install command, never an ImportError at the first call."""
    from hopline.cli import main

    path = tmp_path / "g.yaml"
    path.write_text(yaml.safe_dump(conf(issuers=ISSUERS, connect=CONNECT)))
    monkeypatch.setenv("CONNECT_KEY", KEY)
    monkeypatch.setenv("UP_SECRET", "upstream-secret-value")
    monkeypatch.setitem(sys.modules, "authlib.oauth2", None)
    monkeypatch.setitem(sys.modules, "authlib", None)
    assert main(["check", str(path)]) == 1
    err = capsys.readouterr().err
    assert "auth.backends.up.mode: per-user upstream accounts (user_oauth) need the signin extra" in err
    assert "pip install 'hopline[signin]'" in err and "Traceback" not in err
