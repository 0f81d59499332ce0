"""hopline's signing keys: RS256 (RSA 2048) keys made with joserfc, kept sealed in the store.

RS256 rather than ES256: a resource server verifies each token (once, then caches it), and an RSA signature
verifies in well under half the CPU time of a P-256 one (bench/run_signin_tokens.py); signing, once per token
issued, is the dearer side and the rarer one.

The newest key signs; every stored key is published in the JWKS (``/oauth/jwks``) and trusted by the
resource server, so rotating (:meth:`SigningKeys.rotate`, then a restart of the replicas) lets tokens signed
with the older key live out their few minutes. A private key is stored only sealed: AES-256-GCM under a key
derived (HMAC-SHA256) from the configured ``secret_key``, the key id as associated data.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from typing import Any

import orjson
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from joserfc import jwt
from joserfc.jwk import RSAKey

from hopline.signin.store import SigninStore

ALG = "RS256"


class SigningKeys:
    def __init__(self, store: SigninStore, secret: bytes) -> None:
        self._store = store
        self._aead = AESGCM(hmac.new(secret, b"hopline-signin-seal", hashlib.sha256).digest())
        self._keys: list[RSAKey] = [self._unseal(kid, sealed) for kid, sealed in store.keys()]
        if not self._keys:  # the first key: replicas starting at once on a shared store agree on one
            key, kid, sealed = self._make()
            if store.add_key(kid, sealed, first=True):
                self._keys.append(key)
            else:
                self._keys = [self._unseal(kid, sealed) for kid, sealed in store.keys()]

    def _unseal(self, kid: str, sealed: bytes) -> RSAKey:
        try:
            raw = self._aead.decrypt(sealed[:12], sealed[12:], kid.encode())
        except Exception:
            raise ValueError(
                "the signing key in the store cannot be opened with this secret_key (was the key changed?)"
            ) from None
        return RSAKey.import_key(orjson.loads(raw))

    def rotate(self) -> str:
        """Make a new signing key (it signs from now on; older ones stay published)."""
        key, kid, sealed = self._make()
        self._store.add_key(kid, sealed)
        self._keys.append(key)
        return kid

    def _make(self) -> tuple[RSAKey, str, bytes]:
        key = RSAKey.generate_key(2048, parameters={"alg": ALG, "use": "sig"}, private=True)
        kid = key.thumbprint()
        nonce = os.urandom(12)
        sealed = nonce + self._aead.encrypt(nonce, orjson.dumps(key.as_dict(private=True)), kid.encode())
        return RSAKey.import_key(key.as_dict(private=True), {"kid": kid, "alg": ALG, "use": "sig"}), kid, sealed

    @property
    def current(self) -> RSAKey:
        return self._keys[-1]

    def jwks(self) -> dict[str, Any]:
        """The public keys, newest last (what ``/oauth/jwks`` serves)."""
        out = []
        for key in self._keys:
            doc = key.as_dict(private=False)
            doc.update(kid=key.thumbprint(), alg=ALG, use="sig")
            out.append(doc)
        return {"keys": out}

    def sign(self, claims: dict[str, Any], typ: str = "at+jwt") -> str:
        key = self.current
        return jwt.encode({"alg": ALG, "typ": typ, "kid": key.thumbprint()}, claims, key, algorithms=[ALG])
