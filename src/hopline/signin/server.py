"""The OAuth 2.1 authorization server: Authlib's grants, hopline's rules.

Authlib (``authlib.oauth2``) does the protocol: parsing and validating the authorization request (client,
redirect URI, response type, scope; repeated parameters refused), client authentication at the token and
revocation endpoints (``client_secret_basic``, ``client_secret_post``, ``none`` for public clients), the
authorization code and refresh token grants, PKCE (RFC 7636), RFC 7009 revocation. hopline adds, as
subclasses and hooks:

- PKCE is required of every client and only ``S256`` is accepted (``plain`` and a missing method refused);
- the redirect URI is required and matched exactly (loopback any port, :mod:`.clients`);
- the RFC 8707 ``resource`` must be a resource hopline serves (absent: ``auth.resource``); it becomes the
  access token's ``aud``, and a token request naming another resource than its code's is refused;
- codes are single use; a replayed code revokes the grant it produced (RFC 6749 §4.1.2);
- refresh tokens rotate on every use; presenting a spent one revokes the whole grant (OAuth 2.1 §4.3.1);
- access tokens are JWTs (RFC 9068 shape) signed by :mod:`.keys` with joserfc.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from authlib.oauth2 import AuthorizationServer as _AuthlibServer
from authlib.oauth2.rfc6749 import (
    AuthorizationCodeGrant,
    InvalidRequestError,
    OAuth2Error,
    OAuth2Request,
    RefreshTokenGrant,
)
from authlib.oauth2.rfc7009 import RevocationEndpoint
from authlib.oauth2.rfc7636 import CodeChallenge

from hopline.signin.clients import Clients
from hopline.signin.keys import SigningKeys
from hopline.signin.store import SigninStore

log = logging.getLogger("hopline.signin")


class InvalidTargetError(OAuth2Error):
    """RFC 8707 §2: the resource is not one this server issues tokens for."""

    error = "invalid_target"


CODE_TTL = 60
AUTH_METHODS = ["client_secret_basic", "client_secret_post", "none"]


class Payload:
    """Authlib's view of a request's parameters (the query for GET, the form for POST)."""

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        self.datalist: dict[str, list[str]] = defaultdict(list)
        for k, v in pairs:
            self.datalist[k].append(v)
        self.data = {k: v[0] for k, v in self.datalist.items()}

    client_id = property(lambda self: self.data.get("client_id"))
    response_type = property(lambda self: self.data.get("response_type"))
    grant_type = property(lambda self: self.data.get("grant_type"))
    redirect_uri = property(lambda self: self.data.get("redirect_uri"))
    scope = property(lambda self: self.data.get("scope"))
    state = property(lambda self: self.data.get("state"))


class Request(OAuth2Request):
    def __init__(self, method: str, uri: str, pairs: list[tuple[str, str]], headers: Any) -> None:
        super().__init__(method, uri, headers=headers)
        self.payload = Payload(pairs)
        self._pairs = pairs

    @property
    def args(self) -> dict[str, str]:
        return self.payload.data if self.method == "GET" else {}

    @property
    def form(self) -> dict[str, str]:
        return self.payload.data if self.method == "POST" else {}


@dataclass
class User:
    claims: dict[str, Any]

    def get_user_id(self) -> str:
        return self.claims["sub"]


@dataclass
class AuthCode:
    doc: dict[str, Any]

    def get_redirect_uri(self) -> str:
        return self.doc["redirect_uri"]

    def get_scope(self) -> str:
        return self.doc["scope"]

    def get_code_challenge(self) -> str:
        return self.doc["code_challenge"]

    def get_code_challenge_method(self) -> str:
        return self.doc["code_challenge_method"]

    def get_nonce(self) -> None:
        return None

    def get_auth_time(self) -> None:
        return None


@dataclass
class GrantRef:
    """A grant a refresh token belongs to (what the refresh and revocation endpoints work on)."""

    grant_id: str
    doc: dict[str, Any]

    def check_client(self, client: Any) -> bool:
        return client is not None and client.client_id == self.doc["client_id"]

    def get_scope(self) -> str:
        return self.doc["scope"]

    def get_expires_in(self) -> int:
        return 0

    def is_expired(self) -> bool:
        return False

    def is_revoked(self) -> bool:
        return False

    def get_user(self) -> User:
        return User(self.doc["claims"])


class S256Only(CodeChallenge):
    SUPPORTED_CODE_CHALLENGE_METHOD = ["S256"]
    DEFAULT_CODE_CHALLENGE_METHOD = "S256"

    def get_authorization_code_challenge(self, authorization_code: AuthCode) -> str:
        return authorization_code.get_code_challenge()

    def get_authorization_code_challenge_method(self, authorization_code: AuthCode) -> str:
        return authorization_code.get_code_challenge_method()


class CodeGrant(AuthorizationCodeGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = AUTH_METHODS
    server: AuthServer

    def validate_authorization_request(self) -> str:
        redirect_uri = super().validate_authorization_request()  # client and redirect URI first: then errors redirect
        data, lists = self.request.payload.data, self.request.payload.datalist
        try:
            if not self.request.payload.redirect_uri:
                raise InvalidRequestError("'redirect_uri' is required")
            if not data.get("code_challenge"):
                raise InvalidRequestError("PKCE is required: send code_challenge with code_challenge_method=S256")
            if data.get("code_challenge_method") != "S256":
                raise InvalidRequestError("only code_challenge_method=S256 is accepted ('plain' is refused)")
            if len(lists.get("resource", [])) > 1:
                raise InvalidTargetError("one 'resource' at most")
            self.server.resource_of(data.get("resource"))
        except (InvalidRequestError, InvalidTargetError) as error:
            error.redirect_uri = redirect_uri
            raise
        return redirect_uri

    def save_authorization_code(self, code: str, request: Request) -> None:
        data = request.payload.data
        doc = {
            "client_id": request.client.client_id,
            "redirect_uri": data["redirect_uri"],
            "scope": request.scope or "",
            "code_challenge": data["code_challenge"],
            "code_challenge_method": data["code_challenge_method"],
            "resource": self.server.resource_of(data.get("resource")),
            "claims": request.user.claims,
        }
        self.server.store.put_code(code, doc, CODE_TTL)

    def query_authorization_code(self, code: str, client: Any) -> AuthCode | None:
        status, doc = self.server.store.use_code(code)
        if status == "replayed" and doc is not None:
            if doc.get("grant_id"):
                self.server.store.revoke_grant(doc["grant_id"])
            log.warning("an authorization code was used twice: the grant it produced is revoked")
            return None
        if status != "ok" or doc is None or doc["client_id"] != client.client_id:
            return None
        return AuthCode(doc)

    def validate_token_request(self) -> None:
        super().validate_token_request()
        code: AuthCode = self.request.authorization_code
        resources = self.request.payload.datalist.get("resource", [])
        if resources and resources != [code.doc["resource"]]:
            raise InvalidTargetError("'resource' is not the one this code was issued for")

    def delete_authorization_code(self, authorization_code: AuthCode) -> None:
        pass  # spent when it was looked up (use_code), so a concurrent second use fails too

    def authenticate_user(self, authorization_code: AuthCode) -> User:
        return User(authorization_code.doc["claims"])

    def generate_token(self, user=None, scope=None, grant_type=None, expires_in=None, include_refresh_token=True):
        code: AuthCode = self.request.authorization_code
        grant_id = secrets.token_urlsafe(16)
        doc = {
            "client_id": code.doc["client_id"],
            "scope": code.doc["scope"],
            "resource": code.doc["resource"],
            "claims": code.doc["claims"],
        }
        store = self.server.store
        store.add_grant(grant_id, doc["client_id"], doc, self.server.config.refresh_token_ttl)
        store.code_grant(self.request.payload.data["code"], grant_id)
        return self.server.tokens(grant_id, doc, scope or doc["scope"])


class RefreshGrant(RefreshTokenGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = AUTH_METHODS
    INCLUDE_NEW_REFRESH_TOKEN = True
    server: AuthServer

    def authenticate_refresh_token(self, refresh_token: str) -> GrantRef | None:
        store = self.server.store
        status, grant_id = store.use_refresh(refresh_token)
        if status == "replayed" and grant_id is not None:
            store.revoke_grant(grant_id)
            log.warning("a spent refresh token was presented again: its grant is revoked")
            return None
        if status != "ok" or grant_id is None:
            return None
        doc = store.grant(grant_id)
        return None if doc is None else GrantRef(grant_id, doc)

    def authenticate_user(self, credential: GrantRef) -> User:
        return credential.get_user()

    def revoke_old_credential(self, credential: GrantRef) -> None:
        pass  # spent already (use_refresh)

    def validate_token_request(self) -> None:
        super().validate_token_request()
        ref: GrantRef = self.request.refresh_token
        resources = self.request.payload.datalist.get("resource", [])
        if resources and resources != [ref.doc["resource"]]:
            raise InvalidTargetError("'resource' is not the one this grant was issued for")

    def generate_token(self, user=None, scope=None, grant_type=None, expires_in=None, include_refresh_token=True):
        ref: GrantRef = self.request.refresh_token
        return self.server.tokens(ref.grant_id, ref.doc, scope or ref.doc["scope"])


class Revocation(RevocationEndpoint):
    CLIENT_AUTH_METHODS = AUTH_METHODS
    server: AuthServer

    def query_token(self, token_string: str, token_type_hint: str | None) -> GrantRef | None:
        grant_id = self.server.store.refresh_grant(token_string)
        doc = self.server.store.grant(grant_id) if grant_id else None
        return None if doc is None else GrantRef(grant_id, doc)  # type: ignore[arg-type]

    def revoke_token(self, token: GrantRef, request: Request) -> None:
        self.server.store.revoke_grant(token.grant_id)


class AuthServer(_AuthlibServer):
    """Authlib's server with hopline's store, clients, keys and token format."""

    def __init__(
        self, config: Any, issuer: str, resources: list[str], store: SigninStore, clients: Clients, keys: SigningKeys
    ) -> None:
        super().__init__(scopes_supported=list(config.scopes))
        self.config = config
        self.issuer = issuer
        self.resources = resources
        self.store = store
        self.clients = clients
        self.keys = keys
        self.register_grant(CodeGrant, [S256Only(required=True)])
        self.register_grant(RefreshGrant)
        self.register_endpoint(Revocation)

    # Authlib's hooks ------------------------------------------------------------------------------
    def query_client(self, client_id: str) -> Any:
        return self.clients.get(client_id)

    def save_token(self, token: dict[str, Any], request: Any) -> None:
        pass  # tokens() stored the refresh token already

    def create_oauth2_request(self, request: Any) -> Any:
        return request

    def handle_response(self, status: int, body: Any, headers: Any) -> tuple[int, Any, list[tuple[str, str]]]:
        return status, body, list(headers)

    def send_signal(self, name: str, *args: Any, **kwargs: Any) -> None:
        pass

    # hopline's rules -------------------------------------------------------------------------------
    def resource_of(self, requested: str | None) -> str:
        if requested is None:
            return self.resources[0]
        if requested not in self.resources:
            raise InvalidTargetError("'resource' is not served by this authorization server")
        return requested

    def tokens(self, grant_id: str, grant: dict[str, Any], scope: str) -> dict[str, Any]:
        now = int(time.time())
        ttl = self.config.access_token_ttl
        claims = {
            **grant["claims"],
            "iss": self.issuer,
            "aud": grant["resource"],
            "client_id": grant["client_id"],
            "scope": scope,
            "iat": now,
            "exp": now + ttl,
            "jti": secrets.token_urlsafe(16),
        }
        refresh = secrets.token_urlsafe(32)
        self.store.put_refresh(refresh, grant_id, self.config.refresh_token_ttl)
        return {
            "access_token": self.keys.sign(claims),
            "token_type": "Bearer",
            "expires_in": ttl,
            "refresh_token": refresh,
            "scope": scope,
        }
