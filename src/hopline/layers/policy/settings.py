"""What authentication (auth.py, jwks.py) and token propagation (propagation.py) read
from their settings: structural types, so these layers depend on the shape of their
settings and not on the configuration package. The ``auth`` sections of the
configuration file (``config/auth.py``: ``AuthConfig``, ``IssuerConfig``, ``StaticKey``,
``ApiKey``, ``BackendAuth``) have this shape and are handed over as they are; their
validators guarantee what is documented here (one key source, a canonical resource…).
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence, runtime_checkable


@runtime_checkable
class KeySettings(Protocol):
    """One static verification key: exactly one of pem, pem_file, jwk, jwk_file, secret."""

    alg: str
    kid: str | None
    pem: str | None
    pem_file: str | None
    jwk: dict[str, Any] | None
    jwk_file: str | None
    secret: str | None


@runtime_checkable
class IssuerSettings(Protocol):
    """One trusted issuer: its exact ``iss`` and where its keys come from."""

    issuer: str
    jwks_url: str | None
    algorithms: Sequence[str]
    keys: Sequence[KeySettings]
    jwks_max_age: float
    jwks_min_interval: float


@runtime_checkable
class ApiKeySettings(Protocol):
    name: str
    key: str
    scopes: Sequence[str]


@runtime_checkable
class AuthSettings(Protocol):
    """Client authentication at the gateway's front (``resource`` is canonical already)."""

    resource: str
    resource_name: str | None
    scopes_supported: Sequence[str]
    required_scopes: Sequence[str]
    issuers: Sequence[IssuerSettings]
    leeway: float
    require_exp: bool
    token_types: Sequence[str]
    max_token_bytes: int
    cache_size: int
    api_keys: Sequence[ApiKeySettings]
    api_key_header: str  # lower-case

    @property
    def metadata_servers(self) -> Sequence[str]:
        """The authorization servers published in the protected resource metadata."""
        ...


@runtime_checkable
class BackendAuthSettings(Protocol):
    """How the gateway authenticates to one backend; ``mode`` is one of none, inject,
    client_credentials, exchange, passthrough (and the fields that mode needs are set)."""

    mode: str
    header: str  # lower-case
    scheme: str | None
    secret: str | None
    token_endpoint: str | None
    client_id: str | None
    client_secret: str | None
    client_auth: str  # basic | post
    scope: str | None
    resource: str | None  # canonical
    audience: str | None
    requested_token_type: str
    timeout: float
