"""Authentication of clients and token propagation to backends (Layer 5).

``auth`` absent: no authentication (the declaration says so). Present: every HTTP
request to the MCP endpoints carries a bearer JWT (validated against the configured
issuers) or one of the named API keys, and ``auth.backends.<id>`` says how the gateway
authenticates itself to each HTTP backend (draft §9.1). Secrets come from the
environment with ``${VAR}`` like everywhere else; no message here ever contains a value.

The audience is the gateway's canonical resource URI (RFC 8707, mcp-wire §7):
:func:`~hopline.layers.policy.resource.canonical_resource` lower-cases scheme and host, drops a default port, a
trailing slash and nothing else; a token is accepted only if its ``aud`` holds that
exact string (an upper-case host or a trailing slash in ``aud`` is another resource).

Example::

    auth:
      resource: https://gateway.example.com/mcp
      issuers:
        - issuer: https://login.example.com
          jwks_url: https://login.example.com/.well-known/jwks.json
      required_scopes: [mcp]
      api_keys:
        - {name: ci-bot, key: "${CI_BOT_KEY}"}
      backends:
        github: {mode: inject, secret: "${GITHUB_TOKEN}"}
        billing:
          mode: client_credentials
          token_endpoint: https://login.example.com/oauth/token
          client_id: hopline
          client_secret: ${BILLING_CLIENT_SECRET}
        reports: {mode: exchange, token_endpoint: https://login.example.com/oauth/token,
                  client_id: hopline, client_secret: "${EXCHANGE_SECRET}"}
"""

from __future__ import annotations

import re
from typing import Any, Literal, Mapping
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from hopline.bound import loopback_name
from hopline.config.section import Loc, Section, raise_problems
from hopline.config.signin import SigninConfig
from hopline.layers.policy.resource import DEFAULT_PORTS, canonical_resource

Algorithm = Literal[
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA", "HS256", "HS384", "HS512"
]
ASYMMETRIC: tuple[str, ...] = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
HMAC_MIN_BYTES = {"HS256": 32, "HS384": 48, "HS512": 64}  # RFC 7518 §3.2: at least the hash size
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # RFC 9110 §5.6.2
# Headers hopline owns toward a backend or that are hop-by-hop (header_codec.NOT_FORWARDED).
_RESERVED_HEADERS = frozenset(
    "host content-length content-type accept connection mcp-session-id mcp-protocol-version mcp-method mcp-name "
    "last-event-id".split()
)


def _endpoint(url: str) -> str:
    """An http(s) URL hopline fetches keys or tokens from: https, or http on loopback only."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError when out of range
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        raise ValueError("must be an http:// or https:// URL with a host")
    if parts.scheme == "http" and not loopback_name(parts.hostname):
        raise ValueError("must use https (plain http is allowed for loopback addresses only)")
    return url


class StaticKey(Section):
    """One verification key, its algorithm pinned: tokens naming another ``alg`` are refused."""

    alg: Algorithm = Field(description="The only algorithm this key verifies (never taken from a token).")
    kid: str | None = Field(
        None, min_length=1, max_length=256, description="Key id; tokens naming another kid never use this key."
    )
    pem: str | None = Field(None, description="PEM public key (RSA, EC or Ed25519), e.g. ${JWT_PUBLIC_KEY}.")
    pem_file: str | None = Field(None, min_length=1, description="Path of a PEM public key.")
    jwk: dict[str, Any] | None = Field(None, description="A public JWK (kty RSA, EC or OKP).")
    jwk_file: str | None = Field(None, min_length=1, description="Path of a JSON file holding one public JWK.")
    secret: str | None = Field(
        None, description="HMAC secret for HS256/384/512 (use ${VAR}); at least as long as the hash."
    )

    @model_validator(mode="after")
    def _one_source(self) -> StaticKey:
        sources = [k for k in ("pem", "pem_file", "jwk", "jwk_file", "secret") if getattr(self, k) is not None]
        problems: list[tuple[Loc, str]] = []
        if len(sources) != 1:
            problems.append(
                (
                    (),
                    "set exactly one of pem, pem_file, jwk, jwk_file or secret; "
                    f"{'none' if not sources else ', '.join(sources)} set",
                )
            )
        elif self.alg.startswith("HS") != (sources[0] == "secret"):
            problems.append(
                (
                    (sources[0],),
                    "HS256/384/512 keys are secrets (`secret`); public keys (pem/jwk) need an asymmetric alg",
                )
            )
        elif self.secret is not None and len(self.secret.encode()) < HMAC_MIN_BYTES[self.alg]:
            problems.append((("secret",), f"an {self.alg} secret must be at least {HMAC_MIN_BYTES[self.alg]} bytes"))
        raise_problems(problems)
        return self


class IssuerConfig(Section):
    """One trusted authorization server: its exact ``iss`` and where its keys come from."""

    issuer: str = Field(
        min_length=1, description="Exact `iss` value (no normalisation: a trailing slash is another issuer)."
    )
    jwks_url: str | None = Field(
        None, description="JWKS URL (https; http only on loopback). Keys are fetched, cached and refreshed."
    )
    algorithms: list[
        Literal["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"]
    ] = Field(
        default_factory=lambda: list(ASYMMETRIC),
        min_length=1,
        description="Algorithms a JWKS key may be pinned to (a key's own `alg`, else derived from kty/crv).",
    )
    keys: list[StaticKey] = Field(
        default_factory=list, description="Static keys for this issuer (besides or instead of jwks_url)."
    )
    jwks_max_age: float = Field(
        300.0, gt=0, description="Seconds before fetched keys are refreshed (removed keys stop being accepted)."
    )
    jwks_min_interval: float = Field(
        30.0,
        ge=0,
        description="Least seconds between two JWKS fetches; an unknown kid within it is refused without a fetch.",
    )

    @field_validator("jwks_url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        return v if v is None else _endpoint(v)

    @model_validator(mode="after")
    def _has_keys(self) -> IssuerConfig:
        problems: list[tuple[Loc, str]] = []
        if self.jwks_url is None and not self.keys:
            problems.append(((), "set `jwks_url` or `keys` (or both)"))
        kids = [k.kid for k in self.keys]
        if None in kids and len(kids) > 1:
            problems.append((("keys",), "with several static keys every key needs a `kid`"))
        seen: set[str] = set()
        for i, kid in enumerate(kids):
            if kid is not None and kid in seen:
                problems.append((("keys", i, "kid"), f"duplicate kid {kid!r}"))
            seen.add(kid or "")
        raise_problems(problems)
        return self


class ApiKey(Section):
    """A named key for simple deployments; the name becomes the caller's subject."""

    name: str = Field(
        min_length=1,
        max_length=128,
        description="Subject of callers presenting this key (shown in audit records; never the key).",
    )
    key: str = Field(min_length=16, description="The key itself (use ${VAR}); at least 16 characters.")
    scopes: list[str] = Field(default_factory=list, description="Scopes granted to this key.")


PropagationMode = Literal["none", "inject", "client_credentials", "exchange", "passthrough", "user_oauth"]


class BackendAuth(Section):
    """How the gateway authenticates to one HTTP backend (draft §9.1). The client's own
    token never travels unless ``mode: passthrough``."""

    mode: PropagationMode = Field(
        description="inject: a static secret; client_credentials: the gateway's own OAuth token; exchange: RFC 8693 "
        "token exchange for this backend's audience; passthrough: the client's token (transparent gateways only); "
        "none."
    )
    header: str = Field("authorization", description="Header that carries the credential.")
    scheme: str | None = Field(
        "Bearer", description="Prefix of the header value (`Bearer`); null sends the bare credential."
    )
    secret: str | None = Field(None, description="inject: the credential (use ${VAR}).")
    token_endpoint: str | None = Field(
        None, description="client_credentials / exchange: the authorization server's token endpoint."
    )
    client_id: str | None = Field(None, min_length=1, description="The gateway's client id at the token endpoint.")
    client_secret: str | None = Field(None, description="The gateway's client secret (use ${VAR}).")
    client_auth: Literal["basic", "post", "none"] = Field(
        "basic", description="client_secret_basic, client_secret_post, or none (a public client; user_oauth only)."
    )
    scope: str | None = Field(None, description="`scope` asked for.")
    resource: str | None = Field(
        None, description="RFC 8707 `resource` asked for; default: the backend's URL, canonicalised."
    )
    audience: str | None = Field(
        None, description="exchange: RFC 8693 `audience`, if the authorization server wants one."
    )
    requested_token_type: str = Field(
        "urn:ietf:params:oauth:token-type:access_token", description="exchange: RFC 8693 requested_token_type."
    )
    timeout: float = Field(10.0, gt=0, description="Seconds a token request may take.")
    scopes: list[str] | None = Field(
        None,
        description="user_oauth: scopes asked for; default: the backend's 401 challenge `scope`, else its "
        "`scopes_supported` (docs/features/upstream-oauth.md).",
    )
    client_metadata_document: bool = Field(
        False,
        description="user_oauth: identify hopline by a Client ID Metadata Document it serves (its URL is the "
        "client_id) where the authorization server supports it; `client_id` is then the fallback.",
    )

    @field_validator("token_endpoint")
    @classmethod
    def _token_url(cls, v: str | None) -> str | None:
        return v if v is None else _endpoint(v)

    @field_validator("resource")
    @classmethod
    def _resource(cls, v: str | None) -> str | None:
        return v if v is None else canonical_resource(v)

    @field_validator("header")
    @classmethod
    def _header(cls, v: str) -> str:
        if not _TOKEN.fullmatch(v):
            raise ValueError("must be an HTTP header name")
        if v.lower() in _RESERVED_HEADERS:
            raise ValueError("is a header hopline sets itself")
        return v.lower()

    @model_validator(mode="after")
    def _fields_for_mode(self) -> BackendAuth:
        problems: list[tuple[Loc, str]] = []
        oauth = self.mode in ("client_credentials", "exchange")
        user = self.mode == "user_oauth"
        wanted = {
            "secret": self.mode == "inject",
            "token_endpoint": oauth,
            "client_id": oauth or (user and not self.client_metadata_document),
        }
        for key, needed in wanted.items():
            if needed and getattr(self, key) is None:
                problems.append(((key,), f"is required with mode {self.mode}"))
            elif not needed and getattr(self, key) is not None and not (user and key == "client_id"):
                problems.append(((key,), f"does not apply to mode {self.mode}"))
        if user:
            for key in ("scope", "audience"):
                if getattr(self, key) is not None:
                    problems.append(((key,), "does not apply to mode user_oauth (use `scopes`)"))
            if self.client_auth != "none" and self.client_secret is None and self.client_id is not None:
                problems.append((("client_secret",), "is required with client_auth basic or post"))
        else:
            if self.scopes is not None or self.client_metadata_document:
                problems.append((("scopes",), "applies to mode user_oauth only"))
            if self.client_auth == "none":
                problems.append((("client_auth",), "none applies to mode user_oauth only"))
        if not oauth and not user:
            for key in ("client_secret", "scope", "resource", "audience"):
                if getattr(self, key) is not None:
                    problems.append(((key,), f"does not apply to mode {self.mode}"))
        for key in ("secret", "client_secret", "scheme"):
            value = getattr(self, key)
            if value is not None and any(c in value for c in "\r\n\0"):
                problems.append(((key,), "must not contain CR, LF or NUL"))
        raise_problems(problems)
        return self


class ConnectConfig(Section):
    """Per-user upstream accounts (``mode: user_oauth`` backends): where their tokens are kept and where the
    consent pages are (docs/features/upstream-oauth.md)."""

    public_url: str = Field(
        description="hopline's public base URL as browsers reach it (https; http on loopback only): consent links "
        "are {public_url}/connect/start, the upstream redirect URI {public_url}/connect/callback."
    )
    secret_key: str = Field(
        min_length=43,
        description="At least 32 random bytes, base64 (use ${VAR}): seals the stored tokens (AES-256-GCM) and "
        "signs consent links.",
    )
    store: str = Field("hopline-connections.sqlite3", min_length=1, description="The SQLite file of the tokens.")
    link_ttl: float = Field(300.0, gt=0, le=3600, description="Seconds a consent link is valid (used once).")

    @field_validator("public_url")
    @classmethod
    def _public(cls, v: str) -> str:
        return _endpoint(v).rstrip("/")

    @field_validator("secret_key")
    @classmethod
    def _key(cls, v: str) -> str:
        import base64
        import binascii

        try:
            raw = base64.urlsafe_b64decode(v + "=" * (-len(v) % 4))
        except (binascii.Error, ValueError):
            raise ValueError("must be base64 (e.g. `openssl rand -base64 32`)") from None
        if len(raw) < 32:
            raise ValueError("must decode to at least 32 bytes")
        return v


class AuthConfig(Section):
    """Client authentication (OAuth 2.1 resource server, API keys) and per-backend token propagation."""

    resource: str = Field(
        description="This gateway's canonical resource URI (RFC 8707): the audience every token must carry, and the "
        "`resource` of its protected resource metadata."
    )
    resource_name: str | None = Field(None, description="Human-readable name in the protected resource metadata.")
    authorization_servers: list[str] = Field(
        default_factory=list, description="Published in the protected resource metadata; default: the issuers."
    )
    scopes_supported: list[str] = Field(
        default_factory=list, description="Published in the protected resource metadata."
    )
    required_scopes: list[str] = Field(
        default_factory=list,
        description="Scopes every request needs; a token without them gets 403 insufficient_scope.",
    )
    issuers: list[IssuerConfig] = Field(
        default_factory=list,
        description="Trusted token issuers; a token's key is looked up in its own issuer's keys only.",
    )
    leeway: float = Field(30.0, ge=0, le=300, description="Seconds of clock skew allowed on exp, nbf and iat.")
    require_exp: bool = Field(True, description="Refuse tokens without `exp`.")
    token_types: list[str] = Field(
        default_factory=lambda: ["at+jwt", "application/at+jwt", "jwt"],
        description="Accepted JWT `typ` values (case-insensitive; a token without typ is accepted).",
    )
    max_token_bytes: int = Field(
        16384, ge=256, le=65536, description="Longest accepted Authorization header value; longer gets 431."
    )
    cache_size: int = Field(
        4096, ge=0, description="Verified tokens kept (each until it expires); 0 verifies every request."
    )
    api_keys: list[ApiKey] = Field(default_factory=list, description="Named static keys, sent in `api_key_header`.")
    api_key_header: str = Field("x-api-key", description="Header that carries an API key.")
    backends: dict[str, BackendAuth] = Field(
        default_factory=dict,
        description="Token propagation per backend id (absent: the backend's own `headers`, nothing else).",
    )
    signin: SigninConfig | None = Field(
        None,
        description="hopline's own authorization server for MCP clients, in front of an identity provider "
        "(docs/features/signin.md); its tokens are checked like an issuer's.",
    )
    connect: ConnectConfig | None = Field(
        None, description="Per-user upstream accounts: required by any `mode: user_oauth` backend."
    )

    @field_validator("resource")
    @classmethod
    def _canonical(cls, v: str) -> str:
        return canonical_resource(v)

    @field_validator("api_key_header")
    @classmethod
    def _key_header(cls, v: str) -> str:
        if not _TOKEN.fullmatch(v) or v.lower() in ("authorization", "cookie"):
            raise ValueError("must be an HTTP header name other than Authorization and Cookie")
        return v.lower()

    @model_validator(mode="after")
    def _whole(self) -> AuthConfig:
        problems: list[tuple[Loc, str]] = []
        if not self.issuers and not self.api_keys and self.signin is None:
            problems.append(((), "set `issuers` (bearer tokens), `api_keys` or `signin`"))
        names: dict[str, int] = {}
        keys: dict[str, int] = {}
        for i, key in enumerate(self.api_keys):
            if key.name in names:
                problems.append((("api_keys", i, "name"), f"the same name as api_keys[{names[key.name]}]"))
            if key.key in keys:
                problems.append((("api_keys", i, "key"), f"the same key as api_keys[{keys[key.key]}]"))
            names.setdefault(key.name, i)
            keys.setdefault(key.key, i)
        if self.signin is not None and self.signin.issuer is None:
            try:
                _endpoint(self.signin.issuer_for(self.resource))
            except ValueError as exc:
                problems.append((("signin",), f"the issuer taken from `resource` {exc}; set `signin.issuer`"))
        per_user = sorted(b for b, spec in self.backends.items() if spec.mode == "user_oauth")
        if per_user and not self.issuers and self.signin is None:
            problems.append(
                (
                    ("backends", per_user[0], "mode"),
                    "user_oauth binds each caller's own upstream account to who they are, so it needs callers "
                    "authenticated as persons: set `issuers` or `signin` (an API key names a key, not a user)",
                )
            )
        if per_user and self.connect is None:
            problems.append((("connect",), f"is required by the user_oauth backends ({', '.join(per_user)})"))
        seen: dict[str, int] = {}
        for i, issuer in enumerate(self.issuers):
            if issuer.issuer in seen:
                problems.append((("issuers", i, "issuer"), f"the same issuer as issuers[{seen[issuer.issuer]}]"))
            seen.setdefault(issuer.issuer, i)
        raise_problems(problems)
        return self

    @property
    def metadata_servers(self) -> list[str]:
        if self.authorization_servers:
            return self.authorization_servers
        if self.signin is not None:
            return [self.signin.issuer_for(self.resource)]
        return [i.issuer for i in self.issuers]

    def backend_problems(self, backends: Mapping[str, Any]) -> list[tuple[Loc, str]]:
        """Problems of ``backends`` (id → BackendConfig) against ``auth.backends``, located
        under ``auth.backends``: an unknown id, or propagation for a stdio backend. Call it
        from GatewayConfig's whole-file check (an AuthConfig cannot see its siblings)."""
        problems: list[tuple[Loc, str]] = []
        for backend_id, spec in self.backends.items():
            backend = backends.get(backend_id)
            if backend is None:
                known = ", ".join(sorted(backends)) or "none"
                problems.append((("auth", "backends", backend_id), f"no backend has this id (backends: {known})"))
            elif getattr(backend, "url", None) is None and spec.mode != "none":
                problems.append(
                    (
                        ("auth", "backends", backend_id),
                        "token propagation applies to `url` backends only; give a stdio backend its secrets in `env`",
                    )
                )
        return problems
