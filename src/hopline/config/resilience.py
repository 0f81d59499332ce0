"""Resilience (Layer 4): timeouts, retries, circuit breakers, partial failure.

Defaults: breakers on; retries only for calls that are safe to repeat (reads, tools
annotated read-only/idempotent, tools the operator lists) and for requests that
never left; fan-out lists fail open. Backend ids named here must exist under
``backends`` (:meth:`ResilienceConfig.backend_problems`, checked at start like ``auth``'s).
"""

from __future__ import annotations

from typing import Annotated, Iterable, Literal

from pydantic import Field, model_validator

from hopline.config.section import Loc, Section, raise_problems

Seconds = Annotated[float, Field(gt=0)]


class BreakerConfig(Section):
    """A circuit breaker per backend (draft §11.1): OPEN withdraws its capabilities."""

    enabled: bool = Field(
        True,
        description="Open a backend's circuit after repeated failures, withdrawing its tools, prompts and resources "
        "(with a change signal).",
    )
    failures: int = Field(5, ge=1, description="Consecutive failures that open the circuit.")
    failure_rate: float = Field(0.5, gt=0, le=1, description="Or: this share of calls failing within `window`...")
    min_calls: int = Field(20, ge=1, description="...once `window` holds at least this many calls.")
    window: Seconds = Field(30.0, description="Seconds over which the failure rate is measured.")
    cool_down: Seconds = Field(5.0, description="Seconds a circuit stays open before one trial request (HALF-OPEN).")
    max_cool_down: Seconds = Field(60.0, description="Each failed trial doubles the cool-down, up to this.")
    probe_timeout: Seconds = Field(5.0, description="Seconds the trial request may take.")

    @model_validator(mode="after")
    def _ordered(self) -> BreakerConfig:
        if self.max_cool_down < self.cool_down:
            raise_problems([(("max_cool_down",), "must not be less than `cool_down`")])
        return self


class RetryConfig(Section):
    """Retries where safe (draft §11.2), with backoff, jitter and a budget."""

    enabled: bool = Field(True, description="false: never retry.")
    max_attempts: int = Field(3, ge=1, description="Attempts per request, the first included.")
    backoff: Seconds = Field(
        0.05, description="Upper bound of the first retry's delay (full jitter); doubles per retry."
    )
    max_backoff: Seconds = Field(2.0, description="Upper bound of any retry's delay.")
    budget: float = Field(
        0.2, ge=0, le=1, description="Retries may not exceed this share of a backend's requests over `budget_window`."
    )
    budget_window: Seconds = Field(10.0, description="Seconds over which the retry budget is measured.")
    min_retries: int = Field(
        3,
        ge=0,
        description="Retries allowed per `budget_window` whatever the share (so a quiet backend can retry at all).",
    )
    trust_annotations: bool = Field(
        True, description="Treat tools annotated readOnlyHint or idempotentHint as safe to retry."
    )
    on_timeout: bool = Field(
        False, description="Also retry safe calls that timed out (each attempt gets the full deadline)."
    )
    tools: dict[str, list[str]] = Field(
        default_factory=dict, description="Backend id -> its own tool names that are safe to retry."
    )


class TimeoutsConfig(Section):
    """Deadlines per method and per tool; with `backends.<id>.timeout` the tightest wins."""

    methods: dict[str, Seconds] = Field(
        default_factory=dict, description="Method (e.g. tools/call, resources/read) -> seconds, for every backend."
    )
    tools: dict[str, dict[str, Seconds]] = Field(
        default_factory=dict, description="Backend id -> its own tool name -> seconds."
    )


class ResilienceConfig(Section):
    """Resilience (Layer 4): timeouts, retries, circuit breakers, partial failure."""

    breaker: BreakerConfig = Field(default_factory=BreakerConfig)
    retry: RetryConfig = Field(default_factory=RetryConfig)
    timeouts: TimeoutsConfig = Field(default_factory=TimeoutsConfig)
    partial_failure: Literal["fail-open", "fail-closed"] = Field(
        "fail-open",
        description="fail-open: a fan-out list answers with the healthy backends and names the missing ones in _meta; "
        "fail-closed: it fails as a whole.",
    )

    def backend_problems(self, backend_ids: Iterable[str]) -> list[tuple[Loc, str]]:
        """Backend ids this section names that are not configured, located from the file's
        root (``resilience.retry.tools.<id>``); call it where ``auth.backend_problems`` is."""
        known = set(backend_ids)
        out: list[tuple[Loc, str]] = []
        for where, mapping in (
            (("resilience", "retry", "tools"), self.retry.tools),
            (("resilience", "timeouts", "tools"), self.timeouts.tools),
        ):
            out.extend(
                ((*where, b), f"no backend has this id (backends: {', '.join(sorted(known)) or 'none'})")
                for b in mapping
                if b not in known
            )
        return out
