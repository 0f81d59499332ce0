"""``auth.signin`` in the configuration: what is accepted, and each refusal at its key with its reason."""

from __future__ import annotations

import base64

import pytest
import yaml

from hopline.cli import main
from hopline.config.load import ConfigError, parse_config

KEY = base64.urlsafe_b64encode(b"s" * 32).decode()
UPSTREAM = {"issuer": "https://login.example.com", "client_id": "hopline", "client_secret": "${IDP_SECRET}"}


def conf(store: str = "/nonexistent/signin.sqlite3", **signin) -> str:
    base = {"secret_key": KEY, "upstream": UPSTREAM, "store": store}
    return yaml.safe_dump(
        {
            "backends": {"demo": {"command": "python", "args": ["-m", "hopline.demo"]}},
            "auth": {"resource": "https://gw.example.com/mcp", "signin": {**base, **signin}},
        }
    )


def problems(text: str) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as info:
        parse_config(text, env={"IDP_SECRET": "x" * 20})
    return info.value.problems


def test_signin_alone_is_enough_and_the_metadata_names_hopline():
    config = parse_config(conf(), env={"IDP_SECRET": "x" * 20})
    signin = config.auth.signin
    assert signin.issuer_for(config.auth.resource) == "https://gw.example.com"
    assert config.auth.metadata_servers == ["https://gw.example.com"]
    assert signin.upstream.client_secret == "x" * 20 and signin.scopes == ["mcp"]
    assert signin.access_token_ttl == 300 and signin.registration.enabled is False


@pytest.mark.parametrize(
    "change, where, why",
    [
        ({"secret_key": base64.urlsafe_b64encode(b"s" * 16).decode()}, "secret_key", "at least 32 bytes"),
        ({"upstream": {"client_id": "h"}}, "upstream", "set `issuer` (discovery) or all of"),
        ({"upstream": {**UPSTREAM, "issuer": "http://login.example.com"}}, "upstream.issuer", "must use https"),
        ({"upstream": {**UPSTREAM, "scopes": ["email"]}}, "upstream.scopes", "must include `openid`"),
        ({"issuer": "https://gw.example.com/auth"}, "issuer", "must be an origin"),
        ({"clients": [{"client_id": "a", "redirect_uris": ["http://app.example/cb"]}]}, "clients[0].redirect_uris",
         "loopback addresses only"),  # fmt: skip
        ({"clients": [{"client_id": "https://x.example/c.json", "redirect_uris": ["https://x/cb"]}]},
         "clients[0].client_id", "metadata document's"),  # fmt: skip
        ({"clients": [{"client_id": "b", "redirect_uris": ["http://127.evil.example/cb"]}]},
         "clients[0].redirect_uris", "loopback addresses only"),  # fmt: skip  (a name, not 127.0.0.0/8)
        ({"access_token_ttl": 86400}, "access_token_ttl", "less than or equal to 3600"),
        ({"store_backend": "redis"}, "store_backend", "keeps the state in `state.redis_url`"),
        ({"store_backend": "memcached"}, "store_backend", "'sqlite' or 'redis'"),
    ],
)
def test_a_bad_signin_section_is_refused_at_its_key(change, where, why):
    found = problems(conf(**change))
    assert any(loc.startswith("auth.signin." + where) or loc == "auth.signin." + where for loc, _ in found), found
    assert any(why in msg for _, msg in found), found


def test_hopline_check_writes_nothing_and_opens_an_existing_store_read_only(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("IDP_SECRET", "x" * 20)
    path = tmp_path / "gw.yaml"
    store = tmp_path / "state" / "signin.sqlite3"
    path.write_text(conf(store=str(store)))
    assert main(["check", str(path)]) == 0
    assert not store.parent.exists()  # check creates neither the store nor its directory (serve does)
    from hopline.signin.keys import SigningKeys
    from hopline.signin.store import SqliteStore

    made = SqliteStore(str(store), b"s" * 32)
    first = SigningKeys(made, b"s" * 32).jwks()  # as serve makes it
    made.close()
    before = {f.name: f.read_bytes() for f in store.parent.iterdir()}
    assert main(["check", str(path)]) == 0
    assert {f.name: f.read_bytes() for f in store.parent.iterdir()} == before
    assert SigningKeys(SqliteStore(str(store), b"s" * 32), b"s" * 32).jwks() == first
    capsys.readouterr()
    path.write_text(conf(store=str(store), secret_key=base64.urlsafe_b64encode(b"t" * 32).decode()))
    assert main(["check", str(path)]) == 1  # the stored signing key does not open with another secret
    assert "cannot be opened with this secret_key" in capsys.readouterr().err


def test_hopline_check_names_a_store_that_cannot_be_created_or_read(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("IDP_SECRET", "x" * 20)
    path = tmp_path / "gw.yaml"
    occupied = tmp_path / "occupied"
    occupied.write_text("a file where the store's directory would be")
    path.write_text(conf(store=str(occupied / "sub" / "signin.sqlite3")))
    assert main(["check", str(path)]) == 1
    err = capsys.readouterr().err
    assert "auth.signin.store" in err and "cannot be created" in err
    junk = tmp_path / "junk.sqlite3"
    junk.write_bytes(b"not a database at all" * 10)
    path.write_text(conf(store=str(junk)))
    assert main(["check", str(path)]) == 1
    err = capsys.readouterr().err
    assert "auth.signin.store" in err and "not a readable sign-in store" in err


def test_an_http_resource_off_loopback_cannot_be_the_issuer():
    text = conf().replace("https://gw.example.com/mcp", "http://gw.example.com/mcp")
    found = problems(text)
    assert found == [("auth.signin", found[0][1])] and "must use https" in found[0][1] and "signin.issuer" in found[0][1]


def test_sign_ins_in_flight_are_bounded(tmp_path):
    from hopline.signin.store import Full, SqliteStore

    store = SqliteStore(str(tmp_path / "s.sqlite3"), b"s" * 32, max_pending=2)
    store.put_pending("a", {}, 60)
    store.put_pending("b", {}, 60)
    store.put_pending("a", {"again": True}, 60)  # the same sign-in again takes no new place
    with pytest.raises(Full):
        store.put_pending("c", {}, 60)
    assert store.take_pending("a") == {"again": True}
    store.put_pending("c", {}, 60)
