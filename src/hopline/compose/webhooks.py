"""HTTP policy webhooks from configuration (``policy.webhooks``).

A webhook is a policy endpoint that is not an MCP server. Each becomes one member of the
:class:`~hopline.layers.policy.remote.RemoteChain`, so the SEP-2624 rules apply to it as to an
interceptor server's members (order, audit mode, all-or-none mutations, fail open/closed,
the timeout cut to the call's deadline); :class:`Webhook` translates between HTTP and the
SEP's result shapes.

The request: ``POST`` with a JSON body ``{"name", "event", "phase", "payload"}`` and, when a
``secret`` is configured, ``X-Hopline-Timestamp: <unix seconds>`` and
``X-Hopline-Signature: sha256=<hex HMAC-SHA256(secret, timestamp + "." + body)>``.
The answer (status 2xx, JSON): a validating webhook says ``{"allowed": bool, "reason": str}``;
a mutating one ``{"patch": [RFC 6902 operations]}`` (absent or empty: unchanged). Anything
else — another status, a body that is not JSON or not that shape, a patch that does not
apply — is a failure, handled by ``fail_open``. A redirect is not followed.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import time
from typing import Any, Callable, Sequence

import orjson

from hopline.config.policy import WebhookConfig
from hopline.layers.policy.jsonpatch import PatchError, apply
from hopline.layers.policy.remote import Hook, InterceptorFailure, Member

MAX_ANSWER = 4 * 1024 * 1024  # bytes of a webhook's answer read at most
SIGNATURE = "X-Hopline-Signature"
TIMESTAMP = "X-Hopline-Timestamp"


def sign(secret: str, timestamp: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()


class Webhook:
    """One webhook as a :class:`~hopline.layers.policy.remote.Server` with one member."""

    def __init__(self, spec: WebhookConfig, *, clock: Callable[[], float] = time.time) -> None:
        self.spec = spec
        self.name = spec.name
        self.fail_open = spec.fail_open
        phases = frozenset(("request", "response")) if spec.phase == "both" else frozenset((spec.phase,))
        self._member = Member(
            self,
            spec.name,
            "validation" if spec.type == "validating" else "mutation",
            (Hook(frozenset(spec.events), phases),),
            spec.mode,
            spec.fail_open,
            spec.timeout,
            (spec.priority, spec.priority),
        )
        self._sem = asyncio.Semaphore(spec.max_concurrency)
        self._client: Any = None
        self._clock = clock

    async def members(self, timeout: float | None) -> Sequence[Member]:
        return (self._member,)

    async def invoke(self, params: dict[str, Any], timeout: float | None) -> Any:
        import httpx

        body = orjson.dumps(params)
        headers = {"content-type": "application/json", "accept": "application/json"}
        if self.spec.secret is not None:
            stamp = str(int(self._clock()))
            headers[TIMESTAMP] = stamp
            headers[SIGNATURE] = sign(self.spec.secret, stamp, body)
        if self._client is None:
            self._client = httpx.AsyncClient(follow_redirects=False, trust_env=False)
        async with self._sem:
            try:
                async with self._client.stream(
                    "POST", self.spec.url, content=body, headers=headers, timeout=timeout
                ) as response:
                    raw = b""
                    async for chunk in response.aiter_bytes():
                        raw += chunk
                        if len(raw) > MAX_ANSWER:
                            raise InterceptorFailure(f"answer larger than {MAX_ANSWER} bytes")
                    status = response.status_code
            except httpx.TimeoutException:
                raise TimeoutError from None
            except httpx.HTTPError as exc:
                raise InterceptorFailure(f"webhook unreachable ({type(exc).__name__})") from None
        if not 200 <= status < 300:
            raise InterceptorFailure(f"webhook answered HTTP {status}")
        try:
            answer = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise InterceptorFailure("webhook answer is not JSON") from None
        if not isinstance(answer, dict):
            raise InterceptorFailure("webhook answer is not an object")
        base = {"interceptor": self.name, "type": self._member.type, "phase": params["phase"]}
        if self._member.type == "validation":
            allowed = answer.get("allowed")
            if not isinstance(allowed, bool):
                raise InterceptorFailure("webhook answer has no boolean 'allowed'")
            if allowed:
                return {**base, "valid": True}
            reason = answer.get("reason")
            message = reason if isinstance(reason, str) and reason else "denied (no reason given)"
            return {
                **base,
                "valid": False,
                "severity": "error",
                "messages": [{"message": message, "severity": "error"}],
            }
        patch = answer.get("patch") or []
        try:
            new = apply(params["payload"], patch)
        except PatchError as exc:
            raise InterceptorFailure(f"webhook patch does not apply: {exc}") from None
        return {**base, "modified": new != params["payload"], "payload": new}

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()

    def __repr__(self) -> str:
        return f"<Webhook {self.name}>"
