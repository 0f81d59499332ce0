"""Layer 5 (authorization half) from configuration: ``surface, calls = build(config)``.

``surface`` (filter every list with them; refuse an invoke of what they hide as an
unknown name): the CEL policy (``policy.rules``), then tool pinning
(``policy.pinning``). ``calls``: at most one :class:`InterceptorChain` holding, in
this order, DLP, the visibility guard (the same surface layers, re-asked at
post-route: defence in depth, and the audit record of a refused invoke), rate
limiting, then the operator's interceptors, then the SEP-2624 interceptor servers
(``policy.interceptor_servers``, compose/interceptor_servers.py); it also writes the audit log. An empty
``policy`` section gives ``([], [])``: no layer, no cost.

:func:`surface_key` is what the surface decisions depend on for one caller; a gateway
that caches filtered lists should key them by it (with the list's version): the
principal's ``key`` alone misses a new token for the same subject with other claims,
and a lockfile approval that changes no backend list.

:func:`refused` writes the audit record of an invoke the gateway refused itself
(its visibility check runs before the backend is reached, so the chain never saw it).
:func:`aclose` releases what a replaced set of layers holds (Redis connections) after
a reload; audit files are opened once per path for the process's life.

Raises :class:`~hopline.config.errors.ConfigError` for what only shows when the parts
are built: an interceptor class that cannot be imported or instantiated, a malformed
lockfile.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Sequence

from hopline.config.errors import ConfigError
from hopline.config.policy import RedisConfig
from hopline.config.schema import GatewayConfig
from hopline.layers.policy.audit import AuditLog
from hopline.layers.policy.chain import Entry, InterceptorChain, SurfaceGuard, instantiate, load_class
from hopline.layers.policy.dlp import Redactor, compile_patterns
from hopline.layers.policy.pinning import ToolPinning
from hopline.layers.policy.remote import RemoteChain
from hopline.layers.policy.ratelimit import Limit, MemoryStore, RateLimiter, RedisStore
from hopline.pipeline import CallLayer, SurfaceLayer

log = logging.getLogger("hopline.policy")
SOURCE = "configuration"


def build(
    config: GatewayConfig,
    *,
    audit: AuditLog | None = None,
    clock: Callable[[], float] = time.monotonic,
    wall_clock: Callable[[], float] = time.time,
    redis_client: Any = None,
    tap: Callable[[dict[str, Any]], Any] | None = None,
) -> tuple[list[SurfaceLayer], list[CallLayer]]:
    """The policy layers for ``config`` (``audit``/``clock``/``redis_client``: for tests).
    ``tap``: also handed every audit record (the admin page's recent requests), with or
    without a configured sink."""
    p = config.policy
    if p.is_empty():
        return [], []
    if audit is None and p.audit is not None:
        try:
            audit = AuditLog.open(p.audit.sink, clock=wall_clock)
        except OSError as exc:
            raise ConfigError(SOURCE, [("policy.audit.sink", f"cannot be opened: {exc.strerror or exc}")]) from None
    if tap is not None:
        if audit is None:
            audit = AuditLog(None, clock=wall_clock, name="admin page", tap=tap)
        else:
            audit.tap = tap
    surface: list[SurfaceLayer] = []
    if p.rules:
        from hopline.layers.policy.cel import CelPolicy, compile_rules  # the cel extra, only for rules

        rules = compile_rules(p.named_rules())  # checked at load already
        surface.append(CelPolicy(rules, cache_size=p.cache_size, audit=audit if p.audit and p.audit.lists else None))
    if p.pinning is not None:
        pin = p.pinning
        try:
            surface.append(
                ToolPinning(
                    backends=config.backends,
                    delimiter=config.routing.delimiter,
                    on_change=pin.on_change,
                    on_new=pin.on_new,
                    allowlist=pin.allowlist,
                    refuse_shadowing=pin.refuse_shadowing,
                    lockfile=pin.lockfile,
                    write=pin.write,
                    check_interval=pin.check_interval,
                    audit=audit,
                    clock=clock,
                    shared=_shared_pins(config),
                )
            )
        except ValueError as exc:
            raise ConfigError(SOURCE, [("policy.pinning.lockfile", str(exc))]) from None

    entries: list[Entry] = []
    if p.dlp is not None:
        entries.append(
            Entry(
                Redactor(
                    compile_patterns(p.dlp.builtin_names(), p.dlp.patterns),
                    arguments=p.dlp.arguments,
                    results=p.dlp.results,
                )
            )
        )
    if surface:
        entries.append(Entry(SurfaceGuard(surface)))
    if p.rate_limits is not None:
        entries.append(Entry(_rate_limiter(config, clock=clock, wall_clock=wall_clock, redis_client=redis_client)))
    for i, spec in enumerate(p.interceptors):
        where = f"policy.interceptors[{i}]"
        try:
            cls = load_class(spec.class_, spec.entry_point)
            entries.append(
                Entry(instantiate(cls, spec.options), name=spec.name or "", mode=spec.mode, fail_open=spec.fail_open)
            )
        except (ValueError, TypeError) as exc:
            raise ConfigError(SOURCE, [(f"{where}.{'class' if spec.class_ else 'entry_point'}", str(exc))]) from None
    if p.interceptor_servers or p.webhooks:
        from hopline.compose import interceptor_servers
        from hopline.compose.webhooks import Webhook

        remote = RemoteChain([*interceptor_servers.links(p.interceptor_servers), *map(Webhook, p.webhooks)])
        entries.append(Entry(remote))
    calls: list[CallLayer] = [InterceptorChain(entries, audit=audit)] if entries or audit is not None else []
    return surface, calls


def _shared_pins(config: GatewayConfig) -> Any:
    """Pins shared by replicas when they share a Redis (``state.redis_url``)."""
    state = config.state
    if state is None or state.redis_url is None:
        return None
    from hopline.layers.policy.pinning import RedisPins

    return RedisPins.from_url(state.redis_url, prefix=state.prefix, timeout=state.timeout)


def _rate_limiter(
    config: GatewayConfig, *, clock: Callable[[], float], wall_clock: Callable[[], float], redis_client: Any
) -> RateLimiter:
    rl = config.policy.rate_limits
    assert rl is not None
    limits = []
    for i, spec in enumerate(rl.limits):
        unknown = sorted(set(spec.backends or ()) - set(config.backends))
        if unknown:
            log.warning(
                "rate limit %s names backends that are not configured: %s", spec.name or f"limit{i}", ", ".join(unknown)
            )
        limits.append(
            Limit(
                name=spec.name or f"limit{i}",
                per=tuple(spec.per),
                rate=spec.requests / spec.every,
                burst=float(spec.burst or spec.requests),
                backends=frozenset(spec.backends) if spec.backends is not None else None,
                tools=frozenset(spec.tools) if spec.tools is not None else None,
                methods=frozenset(spec.methods) if spec.methods is not None else None,
            )
        )
    if rl.store == "memory":
        return RateLimiter(limits, MemoryStore(clock=clock, max_keys=rl.max_keys))
    r = rl.redis or RedisConfig()
    options = dict(
        prefix=r.prefix,
        timeout=r.timeout,
        on_unavailable=r.on_unavailable,
        retry_interval=r.retry_interval,
        clock=wall_clock,
        monotonic=clock,
    )
    store = RedisStore(redis_client, **options) if redis_client is not None else RedisStore.from_url(r.url, **options)
    return RateLimiter(limits, store)


async def aclose(calls: Sequence[CallLayer]) -> None:
    """Release what the layers hold (Redis connections); call it when a reload replaces them."""
    for layer in calls:
        for entry in getattr(layer, "entries", ()):
            store = getattr(entry.interceptor, "store", None)
            if hasattr(store, "aclose"):
                await store.aclose()
            if isinstance(entry.interceptor, RemoteChain):  # the interceptor servers' connections (children)
                from hopline.compose import interceptor_servers

                await interceptor_servers.aclose(entry.interceptor)
