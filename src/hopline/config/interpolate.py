"""``${VAR}`` interpolation of every string value in a parsed configuration tree.

Syntax, applied to string values only (never to keys):

- ``${NAME}`` — the variable's value; an unset variable is an error.
- ``${NAME:-default}`` — the value, or ``default`` when unset or empty (as in sh).
- ``$${`` — a literal ``${`` (so ``$${NAME}`` yields the text ``${NAME}``). In general
  a run of ``$`` before ``{`` is halved, and an odd one ends in a reference:
  ``$$${NAME}`` is ``$`` followed by the value. ``$`` anywhere else is plain text.
- any other ``${`` is an error, so a typo never passes through as literal text.

NAME is ``[A-Za-z_][A-Za-z0-9_]*``; a default is literal text up to the first ``}``.

VS Code's references are read too (``.vscode/mcp.json``): ``${env:NAME}`` is
``${NAME}``, and ``${input:ID}`` — an input VS Code would prompt for — is read from
the environment variable :func:`input_variable` names (``HOPLINE_INPUT_`` + ID in upper
case, other characters as ``_``: ``${input:github-token}`` is
``HOPLINE_INPUT_GITHUB_TOKEN``); an input not given is an error naming the input and
that variable, never an empty string.
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
_BODY = re.compile(
    r"(?:(?P<input>input:)(?P<id>[^}\s]+)|(?:env:)?(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^}]*))?)\}"
)
INPUT_PREFIX = "HOPLINE_INPUT_"
# VS Code's predefined variables that may appear in .vscode/mcp.json; hopline reads them, like
# any other ${NAME}, from the environment, and says so when one is not set.
VSCODE_VARIABLES = frozenset({"workspaceFolder", "workspaceFolderBasename", "userHome", "cwd", "pathSeparator"})


def input_variable(input_id: str) -> str:
    """The environment variable that gives VS Code input ``input_id`` to hopline."""
    return INPUT_PREFIX + re.sub(r"[^A-Z0-9]", "_", input_id.upper())


HINT = "use ${NAME} or ${NAME:-default}, and $${ for a literal '${'"


class InterpolationError(ValueError):
    """The problems in one string: unset variables and malformed references."""

    def __init__(self, unset: list[str], malformed: int, inputs: list[str] | None = None) -> None:
        self.unset, self.malformed, self.inputs = unset, malformed, inputs or []
        parts = [
            f"input {i!r} is not given (VS Code prompts for it; hopline reads it from the environment "
            f"variable {input_variable(i)})"
            for i in self.inputs
        ]
        if unset:
            names = ", ".join(unset)
            vscode = [n for n in unset if n in VSCODE_VARIABLES]
            hint = (
                (
                    f"; {', '.join(vscode)} {'is a VS Code variable' if len(vscode) == 1 else 'are VS Code variables'}"
                    " that hopline does not define: set it in the environment"
                )
                if vscode
                else ""
            )
            parts.append(
                f"environment variable{'s' if len(unset) > 1 else ''} {names} "
                f"{'are' if len(unset) > 1 else 'is'} not set (give a default with ${{NAME:-default}}{hint})"
            )
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
    inputs: list[str] = []
    malformed = pos = 0
    while (run := _RUN.search(text, pos)) is not None:
        dollars = len(run.group(1))
        out += [text[pos : run.start()], "$" * (dollars // 2)]
        pos = run.end()
        if dollars % 2 == 0:
            out.append("{")
            continue
        ref = _BODY.match(text, pos)
        if ref is None:
            malformed += 1
            continue
        pos = ref.end()
        if ref.group("input"):
            value = env.get(input_variable(ref.group("id")))
            if value is None and ref.group("id") not in inputs:
                inputs.append(ref.group("id"))
            out.append(value or "")
            continue
        name, default = ref.group("name"), ref.group("default")
        value = env.get(name)
        if default is not None and not value:
            value = default
        elif value is None and name not in unset:
            unset.append(name)
        out.append(value or "")
    if unset or malformed or inputs:
        raise InterpolationError(unset, malformed, inputs)
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
