"""An upstream MCP server on the official SDK (mcp 2.3.0) that accepts only one authorization server's tokens for
its own resource: JWT access tokens signed with a key of that server's JWKS, ``iss`` exactly it, ``aud`` this
server's URL. Without a valid token it answers 401 with the SDK's ``WWW-Authenticate`` (``resource_metadata``).

Usage: ``python protected_server.py`` binds a free loopback port, prints ``protected_server: http://127.0.0.1:P/mcp``
on stderr, then reads the authorization server's issuer URL as one line on stdin (the authorization server needs
this server's URL, its resource, to start) and serves.

Tool ``whoami()``: the ``sub`` of the token the call came with (each user's upstream identity).
"""

from __future__ import annotations

import argparse
import socket
import sys
import time
from typing import Any

import httpx
import jwt
import uvicorn
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer


class JwtVerifier:
    def __init__(self, issuer: str, resource: str) -> None:
        self.issuer, self.resource = issuer, resource
        self.keys = jwt.PyJWKClient(httpx.get(f"{issuer}/.well-known/openid-configuration").json()["jwks_uri"])

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            key = self.keys.get_signing_key_from_jwt(token)
            claims: dict[str, Any] = jwt.decode(
                token, key.key, algorithms=["RS256", "PS256", "ES256"], audience=self.resource, issuer=self.issuer
            )
        except Exception:
            return None
        return AccessToken(
            token=token,
            client_id=str(claims.get("client_id", "")),
            scopes=str(claims.get("scope", "")).split(),
            expires_at=int(claims.get("exp", time.time() + 60)),
            resource=self.resource,
            subject=claims.get("sub"),
        )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.parse_args()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)  # connections wait in the backlog until the server runs
    port = sock.getsockname()[1]
    resource = f"http://127.0.0.1:{port}/mcp"
    print(f"protected_server: {resource}", file=sys.stderr, flush=True)
    issuer = sys.stdin.readline().strip()
    mcp = MCPServer(
        "protected",
        token_verifier=JwtVerifier(issuer, resource),
        auth=AuthSettings(
            issuer_url=issuer,
            resource_server_url=resource,
            required_scopes=["tools:read"],
            validate_token_resource=True,
        ),
    )

    @mcp.tool()
    def whoami() -> str:
        """The subject of the caller's upstream token."""
        token = get_access_token()
        return token.subject if token and token.subject else "nobody"

    app = mcp.streamable_http_app()
    config = uvicorn.Config(app, log_level="warning")
    uvicorn.Server(config).run(sockets=[sock])
    return 0


if __name__ == "__main__":
    sys.exit(main())
