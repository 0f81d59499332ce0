"""The SigninStore contract (signin/store.py), over every implementation.

What hopline's authorization server keeps, and what each operation promises:

- signing keys: kept in order; ``add_key(first=True)`` keeps one only while there is none (replicas starting
  at once agree on one);
- clients: ``add_client`` within ``limit`` (False past it, or for an id already kept), ``client`` reads it back;
- sign-ins in flight: ``put_pending`` replaces a sign-in's state and raises :class:`Full` past ``max_pending``
  (the same sign-in again takes no new place); ``take_pending`` answers once; expired ones are gone;
- codes: ``use_code`` is ``ok`` once, ``replayed`` after (naming the grant the code made), ``unknown`` for
  a code never kept or expired;
- grants and refresh tokens: ``use_refresh`` is ``ok`` once, ``replayed`` after; ``revoke_grant`` ends the
  grant and every refresh token of it; a grant lives as long as its newest refresh token;
- values are kept by keyed hash only: the store never holds a code, refresh token or sign-in id in clear.

Implementations: SqliteStore (a file), and RedisStore against the real redis-server.
"""

from __future__ import annotations

import secrets
import time

import pytest

from hopline.signin.redis_store import RedisStore
from hopline.signin.store import Full, SigninStore, SqliteStore

SECRET = b"s" * 32


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["sqlite", "redis"])
def make(request, tmp_path):
    made: list[SigninStore] = []
    prefix = f"c{secrets.token_hex(6)}:"

    def build(*, max_pending: int = 100, clock=time.time) -> SigninStore:
        if request.param == "sqlite":
            store = SqliteStore(str(tmp_path / "s.sqlite3"), SECRET, clock=clock, max_pending=max_pending)
        else:
            url = request.getfixturevalue("redis_url")
            store = RedisStore.from_url(url, SECRET, timeout=2.0, prefix=prefix, clock=clock, max_pending=max_pending)
        made.append(store)
        return store

    build.kind = request.param
    yield build
    for store in made:
        store.close()


def test_the_first_key_is_kept_once_and_later_ones_in_order(make):
    a, b = make(), make()  # two replicas on one state
    assert a.add_key("k1", b"sealed-1", first=True) is True
    assert b.add_key("k2", b"sealed-2", first=True) is False
    assert b.keys() == [("k1", b"sealed-1")]
    assert a.add_key("k3", b"sealed-3") is True
    assert [k for k, _ in b.keys()] == ["k1", "k3"]


def test_clients_are_bounded_and_read_back(make):
    store = make()
    assert store.add_client("c1", {"redirect_uris": ["http://127.0.0.1/cb"]}, limit=2)
    assert store.add_client("c2", {"redirect_uris": []}, limit=2)
    assert not store.add_client("c3", {"redirect_uris": []}, limit=2)
    assert store.client("c1") == {"redirect_uris": ["http://127.0.0.1/cb"]}
    assert store.client("c3") is None


def test_sign_ins_in_flight_are_bounded_taken_once_and_expire(make):
    clock = Clock()
    store = make(max_pending=2, clock=clock)
    other = make(max_pending=2, clock=clock)  # another replica
    store.put_pending("a", {"n": 1}, 60)
    store.put_pending("b", {"n": 2}, 60)
    store.put_pending("a", {"n": 3}, 60)  # the same sign-in again: no new place
    with pytest.raises(Full):
        other.put_pending("c", {}, 60)
    assert other.pending("a") == {"n": 3}
    assert other.take_pending("a") == {"n": 3} and store.take_pending("a") is None
    store.put_pending("c", {}, 60)  # a's place is free again
    if make.kind == "sqlite":  # (Redis expires in real time: its expiry is Redis's own)
        clock.now += 61
        assert store.pending("b") is None and store.take_pending("c") is None


def test_a_code_is_used_once_and_its_replay_names_the_grant(make):
    store, other = make(), make()
    store.put_code("code-1", {"client_id": "c1"}, 60)
    assert other.use_code("code-1") == ("ok", {"client_id": "c1"})
    store.code_grant("code-1", "g1")
    status, doc = store.use_code("code-1")
    assert status == "replayed" and doc["grant_id"] == "g1" and doc["client_id"] == "c1"
    assert other.use_code("never-issued") == ("unknown", None)


def test_a_refresh_token_is_spent_once_and_revocation_ends_its_grant(make):
    store, other = make(), make()
    store.add_grant("g1", "c1", {"sub": "alice"}, 60)
    store.put_refresh("r1", "g1", 600)
    assert other.grant("g1") == {"sub": "alice"} and other.refresh_grant("r1") == "g1"
    assert other.use_refresh("r1") == ("ok", "g1")
    assert store.use_refresh("r1") == ("replayed", "g1") and store.refresh_grant("r1") is None
    store.put_refresh("r2", "g1", 600)
    other.revoke_grant("g1")
    assert store.grant("g1") is None and store.use_refresh("r2") == ("unknown", None)
    other.revoke_grant("never-granted")  # no error


def test_nothing_is_kept_in_clear(make, tmp_path):
    store = make()
    store.put_pending("sign-in-id-in-clear", {}, 60)
    store.put_code("code-in-clear", {}, 60)
    store.add_grant("g", "c", {}, 60)
    store.put_refresh("refresh-in-clear", "g", 60)
    if make.kind == "sqlite":
        raw = b"".join(f.read_bytes() for f in tmp_path.iterdir())
    else:
        raw = b" ".join(store.r.keys(store.p + "*"))  # type: ignore[attr-defined]
    for secret in (b"sign-in-id-in-clear", b"code-in-clear", b"refresh-in-clear"):
        assert secret not in raw
