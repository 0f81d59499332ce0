"""A small authorization server for auth tests: a JWKS endpoint and a token endpoint.

Usage::

    python oauth_server.py --port P --jwks FILE [--client-id hopline --client-secret S] [--expires-in N]

- ``GET /jwks`` serves FILE (read on every request, so a test can rotate keys) and
  counts the fetch; ``GET /other-jwks`` is the same document under another path (a
  URL an attacker might name in a ``jku`` header), counted separately.
- ``POST /token`` accepts ``client_credentials`` and RFC 8693 token exchange
  (``urn:ietf:params:oauth:grant-type:token-exchange``) from the one client it knows
  (``client_secret_basic`` or ``client_secret_post``) and issues opaque tokens
  ``cc-<n>`` / ``xchg-<n>`` with ``expires_in`` N (default 3600). A subject token
  starting with ``bad`` gets ``invalid_grant``. Every request's form is recorded.
- ``GET /stats`` answers ``{"jwks": n, "other_jwks": n, "token_requests": [form, …]}``.
- ``POST /fail`` makes the next token requests answer 503 (``{"count": n}``).

It prints ``oauth_server: http://127.0.0.1:P`` on stderr once listening.

Imported, it offers :class:`SigningKeys`: the issuer side of the tests (RSA and EC
key pairs, their JWKS, and :meth:`SigningKeys.mint` for access tokens).
"""

from __future__ import annotations

import argparse
import base64
import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ISSUER = "https://issuer.test"
RESOURCE = "https://gateway.test/mcp"


class SigningKeys:
    """An issuer's key pairs (RSA ``rsa-1``, EC P-256 ``ec-1``) and a token minter."""

    def __init__(self, issuer: str = ISSUER, audience: str = RESOURCE) -> None:
        self.issuer, self.audience = issuer, audience
        self.rsa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.ec = ec.generate_private_key(ec.SECP256R1())
        self.kids = {"rsa": "rsa-1", "ec": "ec-1"}

    def public_pem(self, which: str = "rsa") -> str:
        key = self.rsa if which == "rsa" else self.ec
        return key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()

    def jwk(self, which: str = "rsa", **extra: Any) -> dict[str, Any]:
        key = self.rsa if which == "rsa" else self.ec
        algo = jwt.algorithms.RSAAlgorithm if which == "rsa" else jwt.algorithms.ECAlgorithm
        return {**json.loads(algo.to_jwk(key.public_key())), "kid": self.kids[which], "use": "sig", **extra}

    def jwks(self, *extra: dict[str, Any]) -> dict[str, Any]:
        return {"keys": [self.jwk("rsa"), self.jwk("ec"), *extra]}

    def claims(self, **overrides: Any) -> dict[str, Any]:
        now = int(time.time())
        base = {"iss": self.issuer, "aud": self.audience, "sub": "alice", "exp": now + 600, "iat": now, "scope": "mcp tools"}
        base.update(overrides)
        return {k: v for k, v in base.items() if v is not None}

    def mint(self, which: str = "rsa", *, headers: dict[str, Any] | None = None, **claims: Any) -> str:
        """A signed access token; claims override the defaults (None removes one)."""
        key = self.rsa if which == "rsa" else self.ec
        alg = "RS256" if which == "rsa" else "ES256"
        header = {"kid": self.kids[which], "typ": "at+jwt", **(headers or {})}
        if header["kid"] is None:
            del header["kid"]
        payload = json.dumps(self.claims(**claims)).encode()  # any claim values, even invalid ones
        return jwt.api_jws.encode(payload, key, algorithm=alg, headers=header)


def build(jwks: Path, client_id: str, client_secret: str, expires_in: int) -> Starlette:
    state = {"jwks": 0, "other_jwks": 0, "token_requests": [], "issued": 0, "fail": 0}

    async def serve_jwks(request: Request) -> Response:
        state["other_jwks" if request.url.path == "/other-jwks" else "jwks"] += 1
        return Response(jwks.read_bytes(), media_type="application/json")

    def client_ok(request: Request, form: dict[str, str]) -> bool:
        header = request.headers.get("authorization", "")
        if header.lower().startswith("basic "):
            raw = base64.b64decode(header[6:]).decode()
            cid, _, secret = raw.partition(":")
            return unquote(cid) == client_id and unquote(secret) == client_secret
        return form.get("client_id") == client_id and form.get("client_secret") == client_secret

    async def token(request: Request) -> Response:
        form = {k: str(v) for k, v in (await request.form()).items()}
        state["token_requests"].append({**form, "_basic": request.headers.get("authorization", "").lower().startswith("basic ")})
        if state["fail"]:
            state["fail"] -= 1
            return JSONResponse({"error": "temporarily_unavailable", "error_description": "secret-free description"}, status_code=503)
        if not client_ok(request, form):
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        state["issued"] += 1
        grant = form.get("grant_type")
        if grant == "client_credentials":
            value = f"cc-{state['issued']}"
        elif grant == EXCHANGE:
            if not form.get("subject_token") or form["subject_token"].startswith("bad"):
                return JSONResponse({"error": "invalid_grant"}, status_code=400)
            value = f"xchg-{state['issued']}"
        else:
            return JSONResponse({"error": "unsupported_grant_type"}, status_code=400)
        answer = {"access_token": value, "token_type": "Bearer", "expires_in": expires_in}
        if grant == EXCHANGE:
            answer["issued_token_type"] = "urn:ietf:params:oauth:token-type:access_token"
        return JSONResponse(answer)

    async def stats(request: Request) -> Response:
        return JSONResponse({k: state[k] for k in ("jwks", "other_jwks", "token_requests")})

    async def fail(request: Request) -> Response:
        state["fail"] = int(request.query_params.get("count", "1"))
        return JSONResponse({"fail": state["fail"]})

    return Starlette(routes=[
        Route("/jwks", serve_jwks), Route("/other-jwks", serve_jwks), Route("/token", token, methods=["POST"]),
        Route("/stats", stats), Route("/fail", fail, methods=["POST"]),
    ])


def start(jwks: Path, *flags: str):
    """Run this server on a free port: (process, base URL). Stop it with tests.peers.stop."""
    from tests.peers import start_script

    proc, port = start_script(__file__, "--jwks", str(jwks), *flags)
    return proc, f"http://127.0.0.1:{port}"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--jwks", type=Path, required=True)
    parser.add_argument("--client-id", default="hopline")
    parser.add_argument("--client-secret", default="gateway-client-secret")
    parser.add_argument("--expires-in", type=int, default=3600)
    args = parser.parse_args()
    from serving import bind, port_of, serve

    sock = bind(args.port)
    serve(build(args.jwks, args.client_id, args.client_secret, args.expires_in), sock, f"oauth_server: http://127.0.0.1:{port_of(sock)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
