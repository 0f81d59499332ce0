"""hopline's authorization server for MCP clients, in front of an OpenID Connect identity provider
(``auth.signin``; docs/features/signin.md).

:func:`build` makes the whole of it from the ``auth`` section: the store (:mod:`.store`), the signing keys
(:mod:`.keys`), the clients (:mod:`.clients`), the relying party of the identity provider (:mod:`.upstream`),
Authlib's server with hopline's rules (:mod:`.server`) and the HTTP endpoints (:mod:`.app`). The resource
server learns hopline's keys through :func:`issuer_settings`: an issuer among ``auth.issuers``, its static keys
the published ones, so hopline's own tokens are checked by the same code (and at the same cost) as any JWT.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hopline.signin.app import SigninApp


@dataclass(frozen=True)
class LocalKey:
    """A static public key of hopline's own issuer (the shape of layers.policy.settings.KeySettings)."""

    alg: str
    kid: str | None
    jwk: dict[str, Any]
    pem: str | None = None
    pem_file: str | None = None
    jwk_file: str | None = None
    secret: str | None = None


@dataclass(frozen=True)
class LocalIssuer:
    """hopline's own issuer for the resource server (the shape of layers.policy.settings.IssuerSettings)."""

    issuer: str
    keys: list[LocalKey]
    jwks_url: str | None = None
    algorithms: list[str] = field(default_factory=lambda: ["RS256"])
    jwks_max_age: float = 300.0
    jwks_min_interval: float = 30.0


def build(auth: Any, *, check: bool = False, state: Any = None) -> SigninApp:
    """The authorization server of ``auth.signin`` (opens, or creates, its store). ``check``: built as
    ``hopline check`` builds it, writing nothing: an existing store is opened read-only and its signing keys
    must open with ``secret_key``; a missing one must be creatable; the rest is built on a store in memory.
    ``state``: the configuration's ``state:`` section, whose Redis holds the state with ``store_backend: redis``."""
    from hopline.signin.app import CALLBACK, SigninApp
    from hopline.signin.clients import Clients
    from hopline.signin.keys import SigningKeys
    from hopline.signin.server import AuthServer
    from hopline.signin.store import SqliteStore
    from hopline.signin.upstream import Upstream

    config = auth.signin
    issuer = config.issuer_for(auth.resource)
    secret = config.key_bytes()
    redis = config.store_backend == "redis" and not check  # (check connects to nothing)
    if check and config.store_backend == "sqlite":
        _check_store(config.store, secret)
    store: Any
    if redis:
        from hopline.signin.redis_store import RedisStore

        bound, url = config.max_sign_ins_in_flight, state.redis_url
        store = RedisStore.from_url(url, secret, timeout=state.timeout, prefix=state.prefix, max_pending=bound)
    else:
        store = SqliteStore(":memory:" if check else config.store, secret, max_pending=config.max_sign_ins_in_flight)
    try:
        keys = SigningKeys(store, secret)
        clients = Clients(config, store)
    except Exception as exc:
        store.close()
        if redis and type(exc).__module__.startswith("redis"):
            raise StoreProblem(f"the state's Redis did not answer ({type(exc).__name__}): {exc}") from None
        raise
    server = AuthServer(config, issuer, [auth.resource], store, clients, keys)
    upstream = Upstream(config.upstream, config.claims, issuer + CALLBACK)
    return SigninApp(config, issuer, server, clients, upstream, secret)


class StoreProblem(ValueError):
    """``auth.signin.store`` cannot be used (what ``hopline check`` reports at that key)."""


class _ReadOnly:
    """The signing keys of an existing store, read without writing (for :class:`SigningKeys` to open)."""

    def __init__(self, rows: list[tuple[str, bytes]]) -> None:
        self.rows = rows

    def keys(self) -> list[tuple[str, bytes]]:
        return self.rows


def _check_store(path: str, secret: bytes) -> None:
    """What ``build`` would meet in the store, found without writing: an existing store opens read-only
    and its keys open with ``secret``; a missing one could be created (its nearest existing directory
    is writable)."""
    import os
    import sqlite3
    from pathlib import Path

    from hopline.signin.keys import SigningKeys

    if path == ":memory:":
        return
    where = Path(path)
    if not where.exists():
        parent = where.parent
        while not parent.exists():
            parent = parent.parent
        if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
            raise StoreProblem(f"{path} cannot be created: {parent} is not a writable directory")
        return
    try:
        db = sqlite3.connect(f"{where.resolve().as_uri()}?mode=ro&immutable=1", uri=True)  # no -wal, -shm made
        try:
            rows = [(k, bytes(s)) for k, s in db.execute("SELECT kid, sealed FROM keys")]
        finally:
            db.close()
    except sqlite3.Error as exc:
        raise StoreProblem(f"{path} is not a readable sign-in store ({exc})") from None
    if rows:
        SigningKeys(_ReadOnly(rows), secret)  # type: ignore[arg-type]  # ValueError if the key changed


def issuer_settings(app: SigninApp) -> LocalIssuer:
    keys = [LocalKey(alg=k["alg"], kid=k["kid"], jwk=k) for k in app.server.keys.jwks()["keys"]]
    return LocalIssuer(issuer=app.issuer, keys=keys)
