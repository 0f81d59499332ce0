"""hopline/context.py: the per-exchange context, and the authenticator a listener calls."""

from __future__ import annotations

import dataclasses

import pytest

from hopline.binding import Era
from hopline.config.auth import AuthConfig
from hopline.context import ANONYMOUS, Authenticator, Context, Principal, Refusal
from hopline.layers.policy.auth import AuthError
from hopline.layers.policy.auth import Authenticator as PolicyAuthenticator
from hopline.transports.http_util import Headers

KEY = "k" * 24


def test_remaining_counts_down_to_the_one_deadline_and_never_below_zero():
    ctx = Context(deadline=100.0)
    assert ctx.remaining(97.5) == 2.5
    assert ctx.remaining(100.0) == 0.0
    assert ctx.remaining(250.0) == 0.0
    assert Context().remaining(1e9) is None


def test_a_context_is_a_plain_slotted_dataclass_with_its_own_hops():
    ctx = Context(principal=Principal("alice"), session="s1", era=Era.MODERN, trace="00-" + "a" * 32 + "-" + "b" * 16 + "-01")
    assert [f.name for f in dataclasses.fields(Context)] == ["principal", "session", "era", "deadline", "hops", "trace", "request_id", "protocol_version"]
    assert not hasattr(ctx, "__dict__")
    with pytest.raises(AttributeError):
        ctx.elsewhere = 1  # type: ignore[attr-defined]
    ctx.hops.append({"name": "hopline"})
    assert Context().hops == [] and Context().principal is ANONYMOUS


def members(protocol: type) -> set[str]:
    return {name for name in vars(protocol) if not name.startswith("_")} | set(getattr(protocol, "__annotations__", {}))


async def test_the_policy_authenticator_is_what_a_listener_calls():
    auth = PolicyAuthenticator(AuthConfig.model_validate({"resource": "https://gw.test/mcp", "api_keys": [{"name": "ci-bot", "key": KEY}]}))
    assert all(hasattr(auth, name) for name in members(Authenticator)), members(Authenticator)
    assert "/.well-known/oauth-protected-resource/mcp" in auth.metadata_paths("/mcp")
    caller = await auth.check(Headers([(b"x-api-key", KEY.encode())]))
    assert isinstance(caller, Principal) and caller.subject == "ci-bot"
    refusal = await auth.check(Headers([]))
    assert isinstance(refusal, AuthError) and all(hasattr(refusal, name) for name in members(Refusal))
    assert refusal.status == 401 and "www-authenticate" in refusal.headers(auth.metadata_url) and refusal.body()
