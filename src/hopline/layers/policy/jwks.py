"""The verification keys of one token issuer, each pinned to one algorithm.

In: the issuer's configuration (static PEM/JWK/HMAC keys and/or a JWKS URL). Out:
:meth:`KeySet.find` gives the :class:`Key` for a token's ``kid`` or None.

Rules (test-battery AUTH-03, AUTH-06, AUTH-07):

- A key verifies with exactly one algorithm, fixed here: a static key's configured
  ``alg``; a JWKS key's own ``alg`` if the issuer allows it, else one derived from its
  type and curve. A token's ``alg`` header only ever has to *match* it.
- Symmetric keys never come from a URL (a JWKS ``oct`` key is ignored), and an HMAC
  key is only ever a configured secret, so an RSA public key can never become an HMAC
  secret.
- Keys belong to their issuer; a ``kid`` is never looked up across issuers.
- The JWKS is fetched when first needed, again after ``jwks_max_age``, and on an
  unknown ``kid`` — but never more often than once per ``jwks_min_interval``, and
  concurrent callers share one fetch. A flood of random ``kid`` values therefore costs
  at most one fetch per interval and nothing else. Only the configured URL is ever
  fetched: ``jku``/``x5u``/``jwk`` token headers are not read.

The fetch itself is an injected ``fetch(url) -> bytes`` (:class:`HttpFetcher` in
production), so everything else here is plain logic.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from functools import cache
from typing import TYPE_CHECKING, Any, Awaitable, Callable

import orjson

from hopline.layers.policy.settings import IssuerSettings, KeySettings

if TYPE_CHECKING:
    from jwt.algorithms import Algorithm

log = logging.getLogger("hopline.auth")

Fetch = Callable[[str], Awaitable[bytes]]


@cache
def algorithms() -> dict[str, Algorithm]:
    """PyJWT's algorithms but ``none`` (the ``auth`` extra: only issuers' keys need it, so
    a gateway with API keys alone imports no PyJWT and no cryptography)."""
    from jwt.algorithms import get_default_algorithms

    return {k: v for k, v in get_default_algorithms().items() if k != "none"}


MAX_JWKS_BYTES = 1024 * 1024
CURVES = {"ES256": "P-256", "ES384": "P-384", "ES512": "P-521"}
FAMILY = {"RS": "RSA", "PS": "RSA", "ES": "EC", "Ed": "OKP", "HS": "oct"}


class KeyProblem(ValueError):
    """A configured key cannot be used (the message names the problem, never the key)."""


@dataclass(frozen=True, slots=True)
class Key:
    kid: str | None
    alg: str
    key: Any  # the prepared key object (cryptography public key, or HMAC bytes)

    def verify(self, signing_input: bytes, signature: bytes) -> bool:
        try:
            return bool(algorithms()[self.alg].verify(signing_input, self.key, signature))
        except Exception:  # a malformed signature for this key type is simply a bad signature
            return False

    def __repr__(self) -> str:
        return f"<Key kid={self.kid!r} alg={self.alg}>"


def load_static(spec: KeySettings, where: str) -> Key:
    """One configured key, prepared and checked; raises :class:`KeyProblem` naming ``where``."""
    from jwt import PyJWK

    algorithm = algorithms()[spec.alg]
    try:
        if spec.secret is not None:
            return Key(spec.kid, spec.alg, algorithm.prepare_key(spec.secret))
        if spec.pem is not None or spec.pem_file is not None:
            pem = spec.pem if spec.pem is not None else Path(spec.pem_file or "").expanduser().read_text()
            prepared = algorithm.prepare_key(pem)
        else:
            jwk = spec.jwk if spec.jwk is not None else json.loads(Path(spec.jwk_file or "").expanduser().read_text())
            if not isinstance(jwk, dict):
                raise KeyProblem("a JWK must be a JSON object")
            if jwk.get("alg") not in (None, spec.alg):
                raise KeyProblem(
                    f"the JWK says alg {str(jwk.get('alg'))[:20]!r} but the key is configured for {spec.alg}"
                )
            _check_jwk(jwk, spec.alg)
            prepared = PyJWK(jwk, spec.alg).key
    except KeyProblem as exc:
        raise KeyProblem(f"{where}: {exc}") from None
    except OSError as exc:
        raise KeyProblem(f"{where}: cannot read the key file: {exc.strerror or type(exc).__name__}") from None
    except Exception as exc:  # PyJWT / cryptography refuse the material
        raise KeyProblem(f"{where}: not a usable {spec.alg} public key ({type(exc).__name__})") from None
    if not hasattr(prepared, "verify"):
        raise KeyProblem(f"{where}: this is a private key; configure the public key only")
    return Key(spec.kid, spec.alg, prepared)


def _check_jwk(jwk: dict[str, Any], alg: str) -> None:
    kty = jwk.get("kty")
    if kty != FAMILY[alg[:2]]:
        raise KeyProblem(f"a {kty!s:.10} key cannot verify {alg}")
    if alg in CURVES and jwk.get("crv") != CURVES[alg]:
        raise KeyProblem(f"{alg} needs curve {CURVES[alg]}")
    if kty == "OKP" and jwk.get("crv") != "Ed25519":
        raise KeyProblem("EdDSA keys must be Ed25519")
    if jwk.get("use", "sig") != "sig" or ("key_ops" in jwk and "verify" not in (jwk.get("key_ops") or ())):
        raise KeyProblem("the key is not for signature verification")
    if "d" in jwk:
        raise KeyProblem("a private key where a public key is needed")


def parse_jwks(data: bytes, allowed: list[str]) -> list[Key]:
    """The usable keys of a JWKS document; unusable entries are skipped (and logged)."""
    from jwt import PyJWK

    doc = orjson.loads(data)
    entries = doc.get("keys") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        raise ValueError("not a JWKS document (no `keys` array)")
    keys: list[Key] = []
    for i, jwk in enumerate(entries):
        if not isinstance(jwk, dict):
            continue
        kid = jwk.get("kid")
        alg = _pin(jwk, allowed)
        if alg is None or not (kid is None or isinstance(kid, str) and 0 < len(kid) <= 256):
            log.debug("jwks: key %d skipped (no usable algorithm or kid)", i)
            continue
        try:
            _check_jwk(jwk, alg)
            prepared = PyJWK(jwk, alg).key
        except Exception as exc:
            log.debug("jwks: key %d skipped (%s)", i, type(exc).__name__)
            continue
        keys.append(Key(kid, alg, prepared))
    return keys


def _pin(jwk: dict[str, Any], allowed: list[str]) -> str | None:
    """The one algorithm a JWKS key may verify: its own ``alg``, else derived; never HMAC."""
    kty, alg = jwk.get("kty"), jwk.get("alg")
    if kty not in ("RSA", "EC", "OKP"):
        return None
    if alg is not None:
        return alg if alg in allowed else None
    if kty == "RSA":
        return next((a for a in allowed if a[:2] in ("RS", "PS")), None)
    if kty == "EC":
        return next((a for a, crv in CURVES.items() if crv == jwk.get("crv") and a in allowed), None)
    return "EdDSA" if "EdDSA" in allowed and jwk.get("crv") == "Ed25519" else None


class KeySet:
    """One issuer's keys: static ones, plus a JWKS fetched at a bounded rate."""

    def __init__(
        self, config: IssuerSettings, *, where: str, fetch: Fetch, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.issuer = config.issuer
        self.url = config.jwks_url
        self.allowed = list(config.algorithms)
        self.max_age = config.jwks_max_age
        self.min_interval = config.jwks_min_interval
        self.static = [load_static(k, f"{where}.keys[{i}]") for i, k in enumerate(config.keys)]
        self._fetch = fetch
        self._clock = clock
        self._fetched: list[Key] = []
        self._by_kid: dict[str | None, Key] = self._index()
        self._fetched_at: float | None = None  # last successful fetch
        self._attempt_at: float | None = None  # last attempt, successful or not
        self._inflight: asyncio.Future[None] | None = None
        self.fetches = 0

    def _index(self) -> dict[str | None, Key]:
        keys = self.static + self._fetched
        index: dict[str | None, Key] = {}
        for key in keys:
            index.setdefault(key.kid, key)
        if len(keys) == 1:  # a token without kid may use the only key there is
            index.setdefault(None, keys[0])
        return index

    async def find(self, kid: str | None) -> Key | None:
        key = self._by_kid.get(kid)
        if self.url is None:
            return key
        now = self._clock()
        stale = self._fetched_at is None or now - self._fetched_at >= self.max_age
        if (key is None or stale) and self._may_fetch(now):
            await self._refresh()  # joins a fetch under way, if any
            key = self._by_kid.get(kid)
        return key

    def _may_fetch(self, now: float) -> bool:
        if self._inflight is not None:
            return True  # joining a fetch under way costs nothing
        if self._attempt_at is None:
            return True
        # Until a first fetch succeeds, retry sooner (tokens are refused meanwhile).
        interval = self.min_interval if self._fetched_at is not None else min(self.min_interval, 5.0)
        return now - self._attempt_at >= interval

    async def _refresh(self) -> None:
        if self._inflight is None:
            self._inflight = asyncio.ensure_future(self._fetch_once())
        future = self._inflight
        await asyncio.shield(future)

    async def _fetch_once(self) -> None:
        self._attempt_at = self._clock()
        self.fetches += 1
        try:
            keys = parse_jwks(await self._fetch(self.url or ""), self.allowed)
            self._fetched, self._fetched_at = keys, self._clock()
            self._by_kid = self._index()
            log.info("jwks: %d keys for issuer %s", len(keys), self.issuer)
        except Exception as exc:  # keep the keys we have; the next attempt is rate limited
            log.warning("jwks: fetching keys for issuer %s failed: %s", self.issuer, _describe(exc))
        finally:
            self._inflight = None

    def __repr__(self) -> str:
        return f"<KeySet {self.issuer} keys={len(self.static) + len(self._fetched)} fetches={self.fetches}>"


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:200]


class HttpFetcher:
    """GET a JWKS over HTTP(S): no redirects, a timeout, and a size cap."""

    def __init__(self, timeout: float = 5.0) -> None:
        self.timeout = timeout
        self._client: Any = None

    async def __call__(self, url: str) -> bytes:
        import httpx

        if self._client is None:
            self._client = httpx.AsyncClient(follow_redirects=False, timeout=self.timeout)
        async with self._client.stream("GET", url, headers={"accept": "application/json"}) as resp:
            if resp.status_code != 200:
                raise ValueError(f"HTTP {resp.status_code}")
            chunks, size = [], 0
            async for chunk in resp.aiter_bytes():
                size += len(chunk)
                if size > MAX_JWKS_BYTES:
                    raise ValueError(f"JWKS larger than {MAX_JWKS_BYTES} bytes")
                chunks.append(chunk)
            return b"".join(chunks)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None
