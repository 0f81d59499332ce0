"""Data-loss prevention: redaction patterns on arguments and results (Layer 5).

An interceptor (interceptor.py, run by chain.py) with two hooks:

- **pre-route**: every string in the request's params is searched (tool and prompt
  arguments; for a server→client request such as ``sampling/createMessage``, the
  messages bound for the client's model). Routing fields (``name``, ``uri``,
  ``ref``, ``taskId``, ``cursor``) and ``_meta`` are left alone.
- **pre-response**: every string in the answer's ``result`` (text content,
  ``structuredContent``, resource text) or ``error`` is searched. Base64 payloads
  (``blob``, and ``data`` of image/audio content) are skipped: a regex over them finds
  nothing meaningful and costs the most.

Each match becomes ``[REDACTED:<pattern name>]``. A request or answer with no match is
passed on as the very same object (its original bytes stay valid). The decision's
audit details say which patterns matched how often, never what they matched.

Built-in patterns (``dlp.builtins``; all by default): AWS access key ids and
``aws_secret_access_key = …`` assignments, ``Bearer …`` credentials, PEM private
keys (to the end of the text if the END line is missing), GitHub tokens and JWTs.
Operators add their own in ``dlp.patterns`` (name → Python regex). Patterns run one
after the other, in that order; Python's ``re`` backtracks, so an operator pattern
should avoid nested quantifiers.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from hopline.layers.policy.interceptor import Decision, PreResponse, PreRoute, mutate

BUILTINS: dict[str, str] = {
    "aws_access_key": r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|AROA|APKA)[A-Z0-9]{16}\b",
    "aws_secret_key": (
        r"(?i:aws_?secret_?access_?key|aws_?secret_?key)"
        r"[\"']?\s*[:=]\s*[\"']?[A-Za-z0-9/+=]{40}(?![A-Za-z0-9/+=])"
    ),
    "bearer_token": r"\b(?i:bearer)\s+[A-Za-z0-9\-._~+/]{8,}=*",
    "private_key": (
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----"
        r"(?:[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|[\s\S]*)"
    ),
    "github_token": r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b",
    "jwt": r"\beyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{8,}",
}
ROUTING_KEYS = frozenset({"_meta", "name", "uri", "ref", "taskId", "cursor"})
BINARY_KEYS = frozenset({"blob"})
BINARY_TYPES = frozenset({"image", "audio"})

Patterns = list[tuple[str, "re.Pattern[str]"]]


def compile_patterns(builtins: Iterable[str], custom: dict[str, str]) -> Patterns:
    """Built-ins by name, then the operator's (each compiled; raises ``re.error``)."""
    return [(name, re.compile(BUILTINS[name])) for name in builtins] + [
        (name, re.compile(rx)) for name, rx in custom.items()
    ]


def redact_text(text: str, patterns: Iterable[tuple[str, re.Pattern[str]]]) -> tuple[str, dict[str, int] | None]:
    counts: dict[str, int] | None = None
    for name, rx in patterns:
        text, n = rx.subn(f"[REDACTED:{name}]", text)
        if n:
            counts = counts or {}
            counts[name] = counts.get(name, 0) + n
    return text, counts


class Redactor:
    """The DLP interceptor (``name = "dlp"``)."""

    name = "dlp"

    def __init__(self, patterns: Patterns, *, arguments: bool = True, results: bool = True) -> None:
        self.patterns = patterns
        self.arguments = arguments
        self.results = results
        # One scan finds most strings clean; the patterns one by one run only on a hit.
        try:
            self._any: re.Pattern[str] | None = (
                re.compile("|".join(f"(?:{rx.pattern})" for _, rx in patterns)) if patterns else None
            )
        except re.error:  # e.g. two patterns with the same group name
            self._any = None

    def redact(self, value: Any, counts: dict[str, int], *, skip: frozenset[str] = frozenset()) -> Any:
        """``value`` with every string redacted; the same object when nothing matched."""
        if isinstance(value, str):
            if self._any is not None and self._any.search(value) is None:
                return value
            new, found = redact_text(value, self.patterns)
            if found:
                for k, n in found.items():
                    counts[k] = counts.get(k, 0) + n
                return new
            return value
        if isinstance(value, dict):
            binary = value.get("type") in BINARY_TYPES
            changed: dict[str, Any] | None = None
            for k, v in value.items():
                if k in skip or k in BINARY_KEYS or (binary and k == "data"):
                    continue
                new = self.redact(v, counts)
                if new is not v:
                    changed = changed or {}
                    changed[k] = new
            return value if changed is None else {**value, **changed}
        if isinstance(value, list):
            out = [self.redact(v, counts) for v in value]
            return value if all(a is b for a, b in zip(out, value)) else out
        return value

    def pre_route(self, view: PreRoute) -> Decision | None:
        if not self.arguments:
            return None
        counts: dict[str, int] = {}
        params = self.redact(view.params, counts, skip=ROUTING_KEYS)
        return None if params is view.params else mutate(params, reason=_reason(counts), redacted=counts)

    def pre_response(self, view: PreResponse) -> Decision | None:
        if not self.results:
            return None
        body = view.answer.body
        key = (
            "result"
            if isinstance(body.get("result"), dict)
            else "error"
            if isinstance(body.get("error"), dict)
            else None
        )
        if key is None:
            return None
        counts: dict[str, int] = {}
        value = self.redact(body[key], counts, skip=frozenset({"_meta"}))
        return None if value is body[key] else mutate(value, reason=_reason(counts), redacted=counts)

    def __repr__(self) -> str:
        return f"<Redactor {[n for n, _ in self.patterns]} arguments={self.arguments} results={self.results}>"


def _reason(counts: dict[str, int]) -> str:
    return "redacted " + ", ".join(f"{name}×{n}" for name, n in sorted(counts.items()))
