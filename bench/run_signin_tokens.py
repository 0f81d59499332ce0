"""What checking hopline's own access token costs (auth.signin), against an outside issuer's JWT (issue 31).

In one run, in one process: an Authenticator trusting an outside issuer (RS256 and ES256 static keys) and
hopline's own issuer (composed as compose/preflight.py does: the published RS256 key as a static key), and
``authenticate`` timed in CPU time per call for each kind of token, first with the verified-token cache off
(every call verifies the signature), then on (the usual case: a token is verified once). Prints a table and
the in-run ratios own/outside. No network, no server.

    python bench/run_signin_tokens.py [--calls 2000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/servers/oauth_server.py: the outside issuer

from hopline.config.auth import AuthConfig
from hopline.layers.policy.auth import Authenticator
from hopline.signin import LocalIssuer, LocalKey
from hopline.signin.keys import SigningKeys
from hopline.signin.store import SqliteStore
from tests.servers.oauth_server import ISSUER, RESOURCE, SigningKeys as Outside


class Headers(dict):
    def get(self, name, default=None):
        return super().get(name, default)


def authenticator(outside: Outside, own: SigningKeys, cache: int) -> Authenticator:
    pem = {w: outside.public_pem(w) for w in ("rsa", "ec")}
    config = AuthConfig(
        resource=RESOURCE,
        issuers=[{"issuer": ISSUER, "keys": [{"alg": "RS256", "kid": "rsa-1", "pem": pem["rsa"]},
                                             {"alg": "ES256", "kid": "ec-1", "pem": pem["ec"]}]}],
        cache_size=cache,
    )  # fmt: skip
    local = LocalIssuer("https://gateway.test", [LocalKey(k["alg"], k["kid"], k) for k in own.jwks()["keys"]])
    return Authenticator(config.model_copy(update={"issuers": [*config.issuers, local]}))


async def per_call(auth: Authenticator, token: str, calls: int) -> float:
    headers = Headers({b"authorization": f"Bearer {token}"})
    await auth.authenticate(headers)
    start = time.process_time()
    for _ in range(calls):
        await auth.authenticate(headers)
    return (time.process_time() - start) / calls * 1e6


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    outside = Outside()
    with tempfile.TemporaryDirectory() as tmp:
        secret = base64.urlsafe_b64decode(base64.urlsafe_b64encode(b"b" * 32))
        own = SigningKeys(SqliteStore(tmp + "/s.sqlite3", secret), secret)
        now = int(time.time())
        claims = {"sub": "alice", "aud": RESOURCE, "iat": now, "exp": now + 3600, "scope": "mcp", "groups": ["eng"]}
        tokens = {
            "outside RS256": outside.mint("rsa", sub="alice"),
            "outside ES256": outside.mint("ec", sub="alice"),
            "hopline RS256": own.sign({**claims, "iss": "https://gateway.test", "client_id": "c"}),
        }
        print("| token | cache | µs CPU per call (best of rounds) |\n|---|---|---|")
        results = {}
        for cache in (0, 4096):
            auth = authenticator(outside, own, cache)
            for name, token in tokens.items():
                best = min([await per_call(auth, token, args.calls) for _ in range(args.rounds)])
                results[(name, cache)] = best
                print(f"| {name} | {'on' if cache else 'off'} | {best:.1f} |")
            await auth.aclose()
        for cache in (0, 4096):
            for other in ("outside RS256", "outside ES256"):
                ratio = results[("hopline RS256", cache)] / results[(other, cache)]
                print(f"hopline RS256 / {other}, cache {'on' if cache else 'off'}: {ratio:.2f}")


if __name__ == "__main__":
    asyncio.run(main())
