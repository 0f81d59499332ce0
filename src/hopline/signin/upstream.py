"""hopline as the OpenID Connect relying party of the upstream identity provider.

:meth:`Upstream.login_url` sends the browser there (authorization code flow, PKCE S256, ``state``, ``nonce``);
:meth:`Upstream.finish` exchanges the code (Authlib's httpx OAuth 2 client: client authentication, PKCE
verifier) and validates the ID token with joserfc: signature with a key of the provider's JWKS (fetched, cached,
fetched again at most once per :data:`JWKS_MIN_INTERVAL` for an unknown ``kid``), ``iss`` exactly the
provider's, ``aud`` holding hopline's client id, ``exp``/``iat``, the ``nonce`` of this sign-in. The identity's
claims are then mapped (``auth.signin.claims``) into the claims of hopline's own tokens.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
from authlib.common.security import generate_token
from authlib.integrations.httpx_client import AsyncOAuth2Client
from authlib.oauth2.rfc7636 import create_s256_code_challenge
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

JWKS_MIN_INTERVAL = 30.0
MAX_DOCUMENT_BYTES = 512 * 1024
ID_TOKEN_ALGS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"]
LEEWAY = 60


class UpstreamError(Exception):
    """The identity provider refused or answered something unusable (the message is safe to show)."""


class Upstream:
    def __init__(self, config: Any, mapping: Any, redirect_uri: str) -> None:
        self.config = config
        self.mapping = mapping
        self.redirect_uri = redirect_uri
        self._meta: dict[str, Any] | None = None
        self._keys: KeySet | None = None
        self._keys_at = 0.0
        self._http = httpx.AsyncClient(timeout=config.timeout, follow_redirects=False, trust_env=False)

    async def _json(self, url: str) -> dict[str, Any]:
        try:
            r = await self._http.get(url, headers={"accept": "application/json"})
        except httpx.HTTPError as exc:
            raise UpstreamError(f"the identity provider cannot be reached ({type(exc).__name__})") from None
        if r.status_code != 200 or len(r.content) > MAX_DOCUMENT_BYTES:
            raise UpstreamError(f"the identity provider answered HTTP {r.status_code} for {httpx.URL(url).path}")
        try:
            doc = r.json()
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            raise UpstreamError("the identity provider sent a document that is not a JSON object")
        return doc

    async def metadata(self) -> dict[str, Any]:
        if self._meta is None:
            c = self.config
            if c.issuer is not None:
                doc = await self._json(c.issuer.rstrip("/") + "/.well-known/openid-configuration")
                if doc.get("issuer") != c.issuer:
                    raise UpstreamError("the identity provider's discovery document names another issuer")
            else:
                doc = {}
            for key in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
                if getattr(c, key) is not None:
                    doc[key] = getattr(c, key)
                if not isinstance(doc.get(key), str):
                    raise UpstreamError(f"the identity provider's discovery document has no {key}")
            self._meta = doc
        return self._meta

    async def login_url(self) -> tuple[str, dict[str, str]]:
        """The identity provider's authorization URL, and what :meth:`finish` needs of this sign-in."""
        meta = await self.metadata()
        secrets = {"state": generate_token(32), "nonce": generate_token(32), "verifier": generate_token(64)}
        params = httpx.QueryParams(
            response_type="code",
            client_id=self.config.client_id,
            redirect_uri=self.redirect_uri,
            scope=" ".join(self.config.scopes),
            state=secrets["state"],
            nonce=secrets["nonce"],
            code_challenge=create_s256_code_challenge(secrets["verifier"]),
            code_challenge_method="S256",
        )
        sep = "&" if "?" in meta["authorization_endpoint"] else "?"
        return f"{meta['authorization_endpoint']}{sep}{params}", secrets

    async def finish(self, code: str, secrets: dict[str, str]) -> dict[str, Any]:
        """Exchange the code, validate the ID token, and return the mapped claims (``sub`` at least)."""
        meta = await self.metadata()
        c = self.config
        method = "client_secret_basic" if c.client_secret else "none"
        client = AsyncOAuth2Client(
            client_id=c.client_id,
            client_secret=c.client_secret,
            token_endpoint_auth_method=method,
            timeout=c.timeout,
            trust_env=False,
        )
        try:
            async with client:
                token = await client.fetch_token(
                    meta["token_endpoint"],
                    grant_type="authorization_code",
                    code=code,
                    redirect_uri=self.redirect_uri,
                    code_verifier=secrets["verifier"],
                )
        except httpx.HTTPError as exc:
            raise UpstreamError(f"the identity provider cannot be reached ({type(exc).__name__})") from None
        except Exception as exc:  # Authlib's OAuthError: the provider refused the code
            raise UpstreamError(
                f"the identity provider refused the sign-in ({getattr(exc, 'error', 'error')})"
            ) from None
        id_token = token.get("id_token")
        if not isinstance(id_token, str):
            raise UpstreamError("the identity provider sent no ID token")
        claims = await self._validate(id_token, secrets["nonce"], meta)
        return self.map(claims)

    async def _keyset(self, meta: dict[str, Any], refresh: bool) -> KeySet:
        now = time.monotonic()
        if self._keys is None or (refresh and now - self._keys_at >= JWKS_MIN_INTERVAL):
            doc = await self._json(meta["jwks_uri"])
            try:
                self._keys = KeySet.import_key_set(doc)  # type: ignore[arg-type]
            except (JoseError, ValueError, TypeError, KeyError):
                raise UpstreamError("the identity provider's key set cannot be read") from None
            self._keys_at = now
        return self._keys

    async def _validate(self, id_token: str, nonce: str, meta: dict[str, Any]) -> dict[str, Any]:
        keys = await self._keyset(meta, refresh=False)
        try:
            try:
                decoded = jwt.decode(id_token, keys, algorithms=ID_TOKEN_ALGS)
            except (ValueError, JoseError):  # an unknown kid: the provider may have rotated
                decoded = jwt.decode(id_token, await self._keyset(meta, refresh=True), algorithms=ID_TOKEN_ALGS)
            issuer = self.config.issuer or meta.get("issuer")
            registry = jwt.JWTClaimsRegistry(
                leeway=LEEWAY,
                iss={"essential": issuer is not None, "value": issuer},
                aud={"essential": True, "value": self.config.client_id},
                nonce={"essential": True, "value": nonce},
                exp={"essential": True},
            )
            registry.validate(decoded.claims)
        except (JoseError, ValueError) as exc:
            raise UpstreamError(f"the identity provider's ID token is not valid ({type(exc).__name__})") from None
        return dict(decoded.claims)

    def map(self, upstream: dict[str, Any]) -> dict[str, Any]:
        """The claims hopline's tokens carry for this identity (``auth.signin.claims``)."""
        m = self.mapping
        sub = upstream.get(m.subject)
        if not isinstance(sub, str) or not sub:
            raise UpstreamError(f"the identity provider's ID token has no {m.subject!r} claim")
        out: dict[str, Any] = {"sub": sub}
        for name in ("email", "groups", "roles"):
            source = getattr(m, name)
            value = upstream.get(source) if source else None
            if name == "email" and isinstance(value, str):
                out[name] = value
            elif name != "email" and isinstance(value, list):
                out[name] = [v for v in value if isinstance(v, str)][:256]
            elif name != "email" and isinstance(value, str):
                out[name] = value.split()
        return out

    async def aclose(self) -> None:
        await self._http.aclose()
