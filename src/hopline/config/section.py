"""The base every configuration section derives from, and located multi-field errors.

Kept apart from ``schema.py`` so each layer's own section (``config/auth.py``,
``config/policy.py``, ``config/resilience.py``, ``config/observability.py``,
``config/tools.py``, ``config/acp.py``) can be written next to nothing else and
imported by the schema without a cycle.
"""

from __future__ import annotations

from urllib.parse import SplitResult, urlsplit

from pydantic import BaseModel, ConfigDict
from pydantic_core import PydanticCustomError

PROBLEMS = "hopline_problems"  # error type carrying several located problems
Loc = tuple[str | int, ...]


class Section(BaseModel):
    """A configuration section: unknown keys are errors, never silently ignored."""

    model_config = ConfigDict(extra="forbid")


def raise_problems(problems: list[tuple[Loc, str]]) -> None:
    """Raise one pydantic error that carries each problem with its own relative loc."""
    if problems:
        summary = "; ".join(f"{'.'.join(map(str, loc)) or '(here)'}: {msg}" for loc, msg in problems)
        raise PydanticCustomError(PROBLEMS, "{summary}", {"summary": summary, "problems": problems})


def http_parts(url: str) -> SplitResult:
    """``url`` split, if it is an http:// or https:// URL with a host and a valid port (if
    any); ValueError saying so otherwise (a field validator's message)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError when out of range
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an http:// or https:// URL with a host (and a valid port, if any)")
    return parts
