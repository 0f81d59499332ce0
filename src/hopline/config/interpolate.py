"""``${VAR}`` interpolation of every string value in a parsed configuration tree.

Syntax, applied to string values only (never to keys):

- ``${NAME}`` — the variable's value; an unset variable is an error.
- ``${NAME:-default}`` — the value, or ``default`` when unset or empty (as in sh).
- ``$${`` — a literal ``${`` (so ``$${NAME}`` yields the text ``${NAME}``). In general
  a run of ``$`` before ``{`` is halved, and an odd one ends in a reference:
  ``$$${NAME}`` is ``$`` followed by the value. ``$`` anywhere else is plain text.
- any other ``${`` is an error, so a typo never passes through as literal text.

NAME is ``[A-Za-z_][A-Za-z0-9_]*``; a default is literal text up to the first ``}``.
A value is inserted verbatim, never expanded again. :func:`interpolate` returns the
new tree, the problems found (loc, message) and, for every string that held a
reference, its text as written, so callers can display values without echoing
secrets. Problems name the variable and never its value.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

Loc = tuple[str | int, ...]

_RUN = re.compile(r"(\$+)\{")  # a run of '$' before '{'
_BODY = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^}]*))?\}")
HINT = "use ${NAME} or ${NAME:-default}, and $${ for a literal '${'"


class InterpolationError(ValueError):
    """The problems in one string: unset variables and malformed references."""

    def __init__(self, unset: list[str], malformed: int) -> None:
        self.unset, self.malformed = unset, malformed
        parts = []
        if unset:
            names = ", ".join(unset)
            parts.append(f"environment variable{'s' if len(unset) > 1 else ''} {names} "
                         f"{'are' if len(unset) > 1 else 'is'} not set (give a default with ${{NAME:-default}})")
        if malformed:
            parts.append(f"malformed '${{' reference ({HINT})")
        super().__init__("; ".join(parts))


def escape(text: str) -> str:
    """The text that :func:`expand` turns back into ``text`` exactly."""
    return _RUN.sub(lambda m: m.group(1) * 2 + "{", text)


def expand(text: str, env: Mapping[str, str]) -> str:
    """``text`` with every reference replaced; raises :class:`InterpolationError`."""
    if "${" not in text:
        return text
    out: list[str] = []
    unset: list[str] = []
    malformed = pos = 0
    while (run := _RUN.search(text, pos)) is not None:
        dollars = len(run.group(1))
        out += [text[pos:run.start()], "$" * (dollars // 2)]
        pos = run.end()
        if dollars % 2 == 0:
            out.append("{")
            continue
        ref = _BODY.match(text, pos)
        if ref is None:
            malformed += 1
            continue
        pos = ref.end()
        name, default = ref.group("name"), ref.group("default")
        value = env.get(name)
        if default is not None and not value:
            value = default
        elif value is None and name not in unset:
            unset.append(name)
        out.append(value or "")
    if unset or malformed:
        raise InterpolationError(unset, malformed)
    return "".join(out) + text[pos:]


def interpolate(tree: Any, env: Mapping[str, str]) -> tuple[Any, list[tuple[Loc, str]], dict[Loc, str]]:
    """Expand every string value in ``tree`` (dicts and lists walked, keys untouched).

    A string that fails keeps its original text in the returned tree.
    """
    problems: list[tuple[Loc, str]] = []
    templates: dict[Loc, str] = {}

    def walk(node: Any, loc: Loc) -> Any:
        if isinstance(node, dict):
            return {k: walk(v, (*loc, k)) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v, (*loc, i)) for i, v in enumerate(node)]
        if isinstance(node, str) and "${" in node:
            templates[loc] = node
            try:
                return expand(node, env)
            except InterpolationError as exc:
                problems.append((loc, str(exc)))
        return node

    return walk(tree, ()), problems, templates
