"""Rate limiting: token buckets in memory and in Redis shared by two replicas."""

from __future__ import annotations

import logging

import pytest
import redis.asyncio

from hopline.compose.policy import build
from hopline.config.load import parse_config
from hopline.context import Principal
from hopline.jsonrpc import UnavailableError, result
from hopline.layers.policy.chain import Entry, InterceptorChain
from hopline.layers.policy.ratelimit import Limit, MemoryStore, RateLimited, RateLimiter, RedisStore
from hopline.pipeline import Call, Pipeline

from tests import peers

ALICE = Principal("alice", issuer="https://idp")
BOB = Principal("bob", issuer="https://idp")


def call(tool="echo", backend="gh", principal=ALICE, method="tools/call", direction="to_backend") -> Call:
    return Call(method, backend, {"name": tool}, principal, direction=direction, target=tool)


async def ok(c: Call):
    return result(1, {})


def chain(limits, store) -> InterceptorChain:
    return InterceptorChain([Entry(RateLimiter(limits, store))])


async def outcomes(ch, calls) -> list:
    out = []
    for c in calls:
        try:
            await ch(c, ok)
            out.append("ok")
        except RateLimited as exc:
            out.append(exc.data["retryAfter"])
    return out


# -- in memory ---------------------------------------------------------------------------------------
async def test_a_bucket_allows_its_burst_then_says_when_to_retry(clock):
    ch = chain([Limit("per-caller", ("principal",), rate=2.0, burst=3)], MemoryStore(clock=clock))
    assert await outcomes(ch, [call()] * 4) == ["ok", "ok", "ok", 0.5]
    clock.advance(0.25)
    assert await outcomes(ch, [call()]) == [0.25]
    clock.advance(0.25)
    assert await outcomes(ch, [call(), call()]) == ["ok", 0.5]
    clock.advance(100)
    assert await outcomes(ch, [call()] * 4) == ["ok", "ok", "ok", 0.5]  # refills up to the burst only


async def test_the_error_is_clear_and_carries_the_retry_hint(clock):
    ch = chain([Limit("tight", (), rate=0.1, burst=1)], MemoryStore(clock=clock))
    await ch(call(), ok)
    with pytest.raises(RateLimited) as err:
        await ch(call(), ok)
    assert err.value.to_error_object() == {
        "code": -31004, "message": "Rate limit exceeded (tight); retry after 10 s",
        "data": {"reason": "rate_limited", "limit": "tight", "retryAfter": 10.0}}
    assert err.value.to_response(4).body["id"] == 4


async def test_buckets_are_keyed_by_the_chosen_dimensions(clock):
    ch = chain([Limit("l", ("principal", "backend", "tool"), rate=1.0, burst=1)], MemoryStore(clock=clock))
    calls = [call(), call(principal=BOB), call(backend="jira"), call(tool="add"), call()]
    assert await outcomes(ch, calls) == ["ok", "ok", "ok", "ok", 1.0]
    same_subject_other_issuer = Principal("alice", issuer="https://other-idp")
    assert await outcomes(ch, [call(principal=same_subject_other_issuer)]) == ["ok"]
    glob = chain([Limit("g", (), rate=1.0, burst=2)], MemoryStore(clock=clock))
    assert await outcomes(glob, [call(), call(principal=BOB, tool="x", backend="y"), call()]) == ["ok", "ok", 1.0]


async def test_filters_and_all_or_nothing_across_limits(clock):
    limits = [
        Limit("countdown", ("principal", "tool"), rate=0.1, burst=1, tools=frozenset({"countdown"})),
        Limit("caller", ("principal",), rate=1.0, burst=3, backends=frozenset({"gh"}), methods=frozenset({"tools/call"})),
    ]
    store = MemoryStore(clock=clock)
    ch = chain(limits, store)
    assert await outcomes(ch, [call("countdown"), call("countdown")]) == ["ok", 10.0]
    # The refused countdown took nothing from "caller": two more calls pass, then it is full.
    assert await outcomes(ch, [call(), call(), call()]) == ["ok", "ok", 1.0]
    assert await outcomes(ch, [call(backend="jira"), call(method="prompts/get")]) == ["ok", "ok"]  # filtered out


async def test_server_to_client_requests_are_not_limited(clock):
    ch = chain([Limit("l", (), rate=1.0, burst=1)], MemoryStore(clock=clock))
    assert await outcomes(ch, [call(method="sampling/createMessage", direction="to_client")] * 3) == ["ok"] * 3


def test_memory_buckets_are_bounded(clock):
    store = MemoryStore(clock=clock, max_keys=10)
    for i in range(100):
        store.take_now([(f"k{i}", 1.0, 1.0)])
    assert len(store._buckets) == 10


async def test_build_wires_limits_from_configuration(clock):
    cfg = parse_config("""backends:
  gh: {command: python}
policy:
  rate_limits:
    limits:
      - {name: slow, per: [principal, tool], requests: 6, every: 60, burst: 2, tools: [countdown]}
      - {per: [], requests: 100}
""")
    _, calls = build(cfg, clock=clock)
    limiter = calls[0].entries[0].interceptor
    assert [(lim.name, lim.per, lim.rate, lim.burst, lim.tools) for lim in limiter.limits] == [
        ("slow", ("principal", "tool"), 0.1, 2.0, frozenset({"countdown"})), ("limit1", (), 100.0, 100.0, None)]
    pipeline = Pipeline(calls=calls)
    for _ in range(2):
        await pipeline.run(call("countdown"), ok)
    with pytest.raises(RateLimited, match=r"\(slow\); retry after 10 s"):
        await pipeline.run(call("countdown"), ok)


def test_rate_limit_configuration_errors():
    from hopline.config.load import ConfigError

    with pytest.raises(ConfigError) as err:
        parse_config("backends:\n  gh: {command: python}\npolicy:\n  rate_limits:\n    store: memory\n    redis: {}\n    limits:\n"
                     "      - {requests: 0, per: [tool, tool]}\n      - {name: a, requests: 1}\n      - {name: a, requests: 1}\n")
    paths = {p for p, _ in err.value.problems}
    assert {"policy.rate_limits.limits[0].requests", "policy.rate_limits.limits[0].per"} <= paths
    with pytest.raises(ConfigError) as err:
        parse_config("backends:\n  gh: {command: python}\npolicy:\n  rate_limits:\n    redis: {}\n    limits: [{name: a, requests: 1}, {name: a, requests: 1}]\n")
    assert {p for p, _ in err.value.problems} == {"policy.rate_limits.redis", "policy.rate_limits.limits[1].name"}


# -- in Redis, shared by replicas ------------------------------------------------------------------------
def replica(url: str, clock, **kw) -> tuple[InterceptorChain, RedisStore]:
    store = RedisStore(redis.asyncio.Redis.from_url(url), clock=clock, monotonic=clock, timeout=2.0, **kw)
    return chain([Limit("shared", ("principal", "tool"), rate=1.0, burst=3)], store), store


async def test_two_replicas_share_one_bucket(redis_url, clock, free_port):
    prefix = f"t{free_port()}:"
    (one, s1), (two, s2) = replica(redis_url, clock, prefix=prefix), replica(redis_url, clock, prefix=prefix)
    try:
        assert await outcomes(one, [call()]) + await outcomes(two, [call(), call()]) + await outcomes(one, [call()]) == ["ok", "ok", "ok", 1.0]
        assert await outcomes(two, [call(principal=BOB), call(tool="add")]) == ["ok", "ok"]
        clock.advance(0.5)
        assert await outcomes(two, [call()]) == [0.5]
        clock.advance(0.5)
        assert await outcomes(one, [call()]) + await outcomes(two, [call()]) == ["ok", 1.0]
        ttl = await s1.client.pttl(prefix + Limit("shared", ("principal", "tool"), 1.0, 3).key(_view(call())))
        assert 0 < ttl <= 4000  # a key lives one full refill (+1 s), then Redis forgets it
    finally:
        await s1.aclose()
        await s2.aclose()


async def test_redis_all_or_nothing_across_buckets(redis_url, clock, free_port):
    prefix = f"t{free_port()}:"
    store = RedisStore(redis.asyncio.Redis.from_url(redis_url), clock=clock, monotonic=clock, prefix=prefix, timeout=2.0)
    try:
        assert await store.take([("a", 1.0, 1.0), ("b", 1.0, 2.0)]) == (0.0, -1)
        assert await store.take([("a", 1.0, 1.0), ("b", 1.0, 2.0)]) == (1.0, 0)  # "a" refuses: "b" keeps its token
        assert await store.take([("b", 1.0, 2.0)]) == (0.0, -1)
        assert await store.take([("b", 1.0, 2.0)]) == (1.0, 0)
    finally:
        await store.aclose()


@pytest.mark.parametrize("mode", ["open", "closed"])
async def test_an_unreachable_redis_fails_open_or_closed_and_logs_once(mode, clock, caplog, free_port):
    port = free_port()  # nothing listens there
    ch, store = replica(f"redis://127.0.0.1:{port}/0", clock, on_unavailable=mode, retry_interval=5.0)
    attempts = 0
    real = store._script

    async def counting(*args, **kwargs):
        nonlocal attempts
        attempts += 1
        return await real(*args, **kwargs)

    store._script = counting
    try:
        with caplog.at_level(logging.WARNING, "hopline.policy"):
            for _ in range(5):
                if mode == "open":
                    await ch(call(), ok)
                else:
                    with pytest.raises(UnavailableError) as err:
                        await ch(call(), ok)
                    assert err.value.data == {"backend": "gh", "reason": "rate_limit_unavailable"}
        assert attempts == 1  # within retry_interval Redis is not tried again
        assert [r.getMessage() for r in caplog.records] == [f"rate limit store unreachable (ConnectionError); failing {mode} until it answers"]
    finally:
        await store.aclose()


async def test_redis_coming_back_is_used_again(clock, caplog, start_redis, tmp_path):
    path = peers.redis_socket(tmp_path)  # nothing listens there yet
    ch, store = replica(peers.redis_url(path), clock, on_unavailable="closed", retry_interval=5.0, prefix="back:")
    try:
        with caplog.at_level(logging.WARNING, "hopline.policy"):
            with pytest.raises(UnavailableError):
                await ch(call(), ok)
            start_redis(path)
            with pytest.raises(UnavailableError):  # still inside retry_interval
                await ch(call(), ok)
            clock.advance(5.0)
            assert await outcomes(ch, [call()] * 4) == ["ok", "ok", "ok", 1.0]
        assert caplog.records[-1].getMessage() == "rate limit store reachable again"
    finally:
        await store.aclose()


async def test_build_makes_a_redis_store(redis_url, clock, free_port):
    cfg = parse_config(f"""backends:
  gh: {{command: python}}
policy:
  rate_limits:
    store: redis
    redis: {{url: '{redis_url}', prefix: 'b{free_port()}:', on_unavailable: closed}}
    limits: [{{requests: 1, every: 10}}]
""")
    _, calls = build(cfg, clock=clock, wall_clock=clock)
    store = calls[0].entries[0].interceptor.store
    assert isinstance(store, RedisStore) and store.on_unavailable == "closed"
    try:
        assert await outcomes(calls[0], [call(), call()]) == ["ok", 10.0]
    finally:
        await store.aclose()


def _view(c: Call):
    return InterceptorChain([])._request_view("post_route", c)


async def test_aclose_releases_the_redis_connections(redis_url, free_port):
    from hopline.compose.policy import aclose

    cfg = parse_config(f"backends:\n  gh: {{command: python}}\npolicy:\n  rate_limits:\n    store: redis\n    redis: {{url: '{redis_url}', prefix: 'c{free_port()}:'}}\n    limits: [{{requests: 5}}]\n")
    _, calls = build(cfg)
    await Pipeline(calls=calls).run(call(), ok)
    pool = calls[0].entries[0].interceptor.store.client.connection_pool
    assert [c.is_connected for c in pool._available_connections] == [True]
    await aclose(calls)
    assert not any(c.is_connected for c in pool._available_connections)
