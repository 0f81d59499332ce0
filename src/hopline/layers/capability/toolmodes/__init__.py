"""Layer 7 progressive disclosure: the Standard, Search and Code tool modes.

A tool mode decides what ``tools/list`` shows a caller and runs its own tools
(:class:`~hopline.pipeline.ToolMode`); everything it reaches goes through a
:class:`~hopline.pipeline.ToolHost`, so policy and the rest of the pipeline
apply unchanged. Standard mode is the absence of a mode. Each endpoint has a
:class:`~hopline.pipeline.ToolPlan`: a mode per backend (groups), one default.

- ``search.py`` — ``get_tool`` + ``invoke_tool`` (agentgateway-compatible wire shape)
- ``code.py`` — ``run_code`` over ``sandbox.py`` (Monty in a worker process from a bounded pool)
- ``index.py`` — the BM25 index, one per catalogue version, shared by sessions
- ``embed.py`` — optional MiniLM embeddings for a hybrid ranking (NumPy only)

Configuration → a :class:`~hopline.pipeline.ToolPlan` per endpoint is
:mod:`hopline.compose.toolmodes` (``build``, ``plans``, ``aclose``).
"""

from hopline.layers.capability.toolmodes.code import RUN_CODE, CodeMode
from hopline.layers.capability.toolmodes.index import IndexCache, ToolIndex
from hopline.layers.capability.toolmodes.sandbox import Limits, Outcome
from hopline.layers.capability.toolmodes.search import GET_TOOL, INVOKE_TOOL, SearchMode

__all__ = [
    "GET_TOOL",
    "INVOKE_TOOL",
    "RUN_CODE",
    "CodeMode",
    "IndexCache",
    "Limits",
    "Outcome",
    "SearchMode",
    "ToolIndex",
]
