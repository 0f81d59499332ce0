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


def build(auth: Any) -> SigninApp:
    """The authorization server of ``auth.signin`` (opens, or creates, its store)."""
    from hopline.signin.app import CALLBACK, SigninApp
    from hopline.signin.clients import Clients
    from hopline.signin.keys import SigningKeys
    from hopline.signin.server import AuthServer
    from hopline.signin.store import SqliteStore
    from hopline.signin.upstream import Upstream

    config = auth.signin
    issuer = config.issuer_for(auth.resource)
    secret = config.key_bytes()
    store = SqliteStore(config.store, secret, max_pending=config.max_sign_ins_in_flight)
    try:
        keys = SigningKeys(store, secret)
        clients = Clients(config, store)
    except Exception:
        store.close()
        raise
    server = AuthServer(config, issuer, [auth.resource], store, clients, keys)
    upstream = Upstream(config.upstream, config.claims, issuer + CALLBACK)
    return SigninApp(config, issuer, server, clients, upstream, secret)


def issuer_settings(app: SigninApp) -> LocalIssuer:
    keys = [LocalKey(alg=k["alg"], kid=k["kid"], jwk=k) for k in app.server.keys.jwks()["keys"]]
    return LocalIssuer(issuer=app.issuer, keys=keys)
