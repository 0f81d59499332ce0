"""``auth.signin``: hopline's own authorization server for MCP clients, in front of an identity provider.

With this section hopline is an OAuth 2.1 authorization server (RFC 8414 metadata at
``/.well-known/oauth-authorization-server``) on the same listener as its MCP endpoint, and its
protected resource metadata (RFC 9728) names it. An MCP client (a ``client_id`` URL pointing at
its Client ID Metadata Document, a client registered with RFC 7591, or one configured here)
signs the user in: hopline sends the browser to the ``upstream`` identity provider as its
OpenID Connect relying party (code flow, PKCE, nonce; the ID token is validated), maps the
identity's claims, shows a consent page, and issues its own short-lived access token (a JWT
signed with a key kept in ``store``, audience: the resource) and a rotating refresh token.
The resource server path that checks every MCP request is the one ``auth.issuers`` uses: CEL
policy sees ``jwt.sub``, ``jwt.email``, ``jwt.groups`` and ``jwt.roles`` as with any JWT.

Example::

    auth:
      resource: https://gateway.example.com/mcp
      signin:
        secret_key: ${HOPLINE_SIGNIN_KEY}     # 32 random bytes, base64url
        upstream:
          issuer: https://login.example.com    # OpenID Connect discovery
          client_id: hopline
          client_secret: ${IDP_CLIENT_SECRET}
        claims: {groups: groups, roles: roles}
        registration: {enabled: true}
"""

from __future__ import annotations

import base64
import binascii
import os
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from hopline.bound import loopback_name
from hopline.config.section import Loc, Section, http_parts, raise_problems


def _endpoint(url: str) -> str:
    """An http(s) URL hopline calls: https, or http on loopback only."""
    parts = http_parts(url)
    if parts.scheme == "http" and not loopback_name(parts.hostname):
        raise ValueError("must use https (plain http is allowed for loopback addresses only)")
    return url


def _default_store() -> str:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return str(Path(base) / "hopline" / "signin.sqlite3")


class UpstreamConfig(Section):
    """The identity provider users sign in with; hopline is its OpenID Connect relying party (a client of its own
    there, whose redirect URI is ``<issuer>/oauth/callback``)."""

    issuer: str | None = Field(
        None, description="OpenID Connect issuer: its discovery document gives the endpoints and the keys."
    )
    authorization_endpoint: str | None = Field(None, description="Explicit endpoint (instead of discovery).")
    token_endpoint: str | None = Field(None, description="Explicit endpoint (instead of discovery).")
    jwks_uri: str | None = Field(None, description="Explicit key set of the ID tokens (instead of discovery).")
    client_id: str = Field(min_length=1, description="hopline's client id at the identity provider.")
    client_secret: str | None = Field(None, description="hopline's client secret there (use ${VAR}).")
    scopes: list[str] = Field(
        default_factory=lambda: ["openid", "email", "profile"], description="Scopes asked of the identity provider."
    )
    timeout: float = Field(10.0, gt=0, le=60, description="Seconds a call to the identity provider may take.")

    @field_validator("issuer", "authorization_endpoint", "token_endpoint", "jwks_uri")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        return v if v is None else _endpoint(v)

    @model_validator(mode="after")
    def _endpoints(self) -> UpstreamConfig:
        explicit = [self.authorization_endpoint, self.token_endpoint, self.jwks_uri]
        if self.issuer is None and not all(explicit):
            raise_problems(
                [((), "set `issuer` (discovery) or all of authorization_endpoint, token_endpoint and jwks_uri")]
            )
        if "openid" not in self.scopes:
            raise_problems([(("scopes",), "must include `openid`: hopline reads the user from the ID token")])
        return self


class ClaimMapping(Section):
    """Which upstream ID token claim becomes which claim of hopline's access token (what CEL policy reads as
    ``jwt.<name>``). A claim the identity provider does not send is left out."""

    subject: str = Field("sub", min_length=1, description="Upstream claim that becomes `sub`.")
    email: str | None = Field("email", description="Upstream claim that becomes `email` (null: none).")
    groups: str | None = Field("groups", description="Upstream claim that becomes `groups` (null: none).")
    roles: str | None = Field("roles", description="Upstream claim that becomes `roles` (null: none).")


class StaticClient(Section):
    """A client configured here (a desktop client's fixed id, a CI tool)."""

    client_id: str = Field(min_length=1, max_length=256, description="Its client id.")
    client_name: str | None = Field(None, max_length=200, description="Shown on the consent page.")
    client_secret: str | None = Field(
        None, min_length=16, description="A confidential client's secret (use ${VAR}); absent: a public client."
    )
    redirect_uris: list[str] = Field(
        min_length=1, description="Exact redirect URIs (a loopback one matches on any port, RFC 8252)."
    )

    @field_validator("redirect_uris")
    @classmethod
    def _uris(cls, v: list[str]) -> list[str]:
        for uri in v:
            if "#" in uri:
                raise ValueError(f"{uri!r}: a redirect URI has no fragment")
            parts = urlsplit(uri)
            if parts.scheme == "http" and not loopback_name(parts.hostname or ""):
                raise ValueError(f"{uri!r}: http redirect URIs are for loopback addresses only")
            if not parts.scheme:
                raise ValueError(f"{uri!r}: not an absolute URI")
        return v


class RegistrationConfig(Section):
    """RFC 7591 dynamic client registration at ``/oauth/register``."""

    enabled: bool = Field(False, description="Accept registrations (public clients, `none` authentication).")
    max_clients: int = Field(1000, ge=1, le=100_000, description="Registered clients kept at most; then 503.")
    per_minute: int = Field(10, ge=1, le=10_000, description="Registrations accepted per minute, from everyone.")


class ClientMetadataConfig(Section):
    """Client ID Metadata Documents: a ``client_id`` that is an https URL names its own metadata document."""

    enabled: bool = Field(True, description="Accept URL client ids (fetched, cached).")
    max_bytes: int = Field(5120, ge=256, le=65536, description="Largest document read; a larger one is refused.")
    timeout: float = Field(5.0, gt=0, le=30, description="Seconds the whole fetch may take.")
    cache_seconds: float = Field(300.0, ge=0, le=86400, description="How long a fetched document is reused.")
    cache_size: int = Field(1024, ge=1, le=100_000, description="Documents kept at most.")
    allow_addresses: list[str] = Field(
        default_factory=list,
        description="Networks a document may be fetched from besides public ones (loopback, private ranges are "
        "refused unless listed here; link-local and cloud-metadata addresses are refused unless listed too).",
    )


class SigninConfig(Section):
    """hopline's authorization server for MCP clients, in front of an identity provider (see the module docs)."""

    issuer: str | None = Field(
        None,
        description="This authorization server's issuer URL (an origin: no path); default: the origin of "
        "`auth.resource`. Its endpoints live under /oauth/ there.",
    )
    secret_key: str = Field(
        description="32 random bytes in base64url (use ${VAR}): encrypts the signing key at rest and keys the "
        "hashes of codes and refresh tokens. Every replica needs the same key."
    )
    upstream: UpstreamConfig = Field(description="The identity provider users sign in with.")
    claims: ClaimMapping = Field(default_factory=ClaimMapping, description="Upstream claims → principal claims.")
    clients: list[StaticClient] = Field(default_factory=list, description="Clients configured here.")
    registration: RegistrationConfig = Field(default_factory=RegistrationConfig, description="RFC 7591.")
    client_metadata: ClientMetadataConfig = Field(
        default_factory=ClientMetadataConfig, description="Client ID Metadata Documents."
    )
    scopes: list[str] = Field(
        default_factory=lambda: ["mcp"],
        min_length=1,
        description="Scopes clients may ask for (published; a request naming another is refused).",
    )
    access_token_ttl: int = Field(300, ge=30, le=3600, description="Seconds an access token lives.")
    refresh_token_ttl: int = Field(
        14 * 86400, ge=60, le=90 * 86400, description="Seconds a refresh token lives (each use rotates it)."
    )
    login_ttl: int = Field(600, ge=60, le=3600, description="Seconds a sign-in may take, login and consent included.")
    max_sign_ins_in_flight: int = Field(
        10_000, ge=1, le=1_000_000, description="Sign-ins begun and not finished kept at most; more get 503."
    )
    store: str = Field(
        default_factory=_default_store,
        description="SQLite file of clients, grants and refresh tokens (hashed) and the signing key (encrypted); "
        "default: $XDG_STATE_HOME/hopline/signin.sqlite3.",
    )
    store_backend: Literal["sqlite", "redis"] = Field(
        "sqlite",
        description="Where the state lives: `sqlite` (the `store` file, one process) or `redis` (the `state:` "
        "section's Redis, shared by replicas: a sign-in one began another finishes).",
    )

    @field_validator("issuer")
    @classmethod
    def _issuer(cls, v: str | None) -> str | None:
        if v is None:
            return v
        _endpoint(v)
        parts = urlsplit(v)
        if parts.path not in ("", "/") or parts.query or parts.fragment:
            raise ValueError("must be an origin (scheme://host[:port]), without a path")
        return f"{parts.scheme}://{parts.netloc}".lower()

    @field_validator("secret_key")
    @classmethod
    def _secret(cls, v: str) -> str:
        try:
            raw = base64.urlsafe_b64decode(v + "=" * (-len(v) % 4))
        except (binascii.Error, ValueError):
            raise ValueError("must be base64url") from None
        if len(raw) < 32:
            raise ValueError(
                "must decode to at least 32 bytes; make one with "
                '`python -c "import secrets,base64;print(base64.urlsafe_b64encode(secrets.token_bytes(32)).decode())"`'
            )
        return v

    @model_validator(mode="after")
    def _whole(self) -> SigninConfig:
        problems: list[tuple[Loc, str]] = []
        seen: set[str] = set()
        for i, client in enumerate(self.clients):
            if client.client_id in seen:
                problems.append((("clients", i, "client_id"), "duplicate client id"))
            seen.add(client.client_id)
            if client.client_id.startswith(("https://", "http://")):
                problems.append((("clients", i, "client_id"), "a URL client id is a metadata document's, not ours"))
        raise_problems(problems)
        return self

    def key_bytes(self) -> bytes:
        return base64.urlsafe_b64decode(self.secret_key + "=" * (-len(self.secret_key) % 4))

    def issuer_for(self, resource: str) -> str:
        if self.issuer is not None:
            return self.issuer
        parts = urlsplit(resource)
        return f"{parts.scheme}://{parts.netloc}"
