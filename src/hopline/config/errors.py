"""``ConfigError``: every problem found in a configuration file, each at its key path.

A problem is ``(path, message)`` where path is a rendered key path such as
``backends.github.url``, ``backends.github.args[2]`` or ``mcpServers["my.server"]``
(keys outside ``[A-Za-z0-9_-]`` are quoted so the path stays unambiguous). An empty
path means the problem concerns the file itself (unreadable, not YAML). Messages name
keys, never values: a value may be a secret interpolated from the environment.
"""

from __future__ import annotations

import json
import re
from typing import Iterable

_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+")
TOP_LEVEL = "(top level)"


def format_path(loc: Iterable[str | int]) -> str:
    """Render a pydantic-style ``loc`` tuple as ``a.b[0]["c.d"]``."""
    out = ""
    for seg in loc:
        if isinstance(seg, int):
            out += f"[{seg}]"
        elif _PLAIN_KEY.fullmatch(seg):
            out += f".{seg}" if out else seg
        else:
            out += f"[{json.dumps(seg, ensure_ascii=False)}]"
    return out or TOP_LEVEL


class ConfigError(Exception):
    """A configuration file that cannot be used, with every problem found in it."""

    def __init__(self, source: str, problems: list[tuple[str, str]]) -> None:
        self.source = source
        self.problems = list(problems)
        super().__init__(str(self))

    def __str__(self) -> str:
        n = len(self.problems)
        lines = [f"{self.source}: cannot use this configuration ({n} problem{'s' if n != 1 else ''})"]
        lines += [f"  {path}: {msg}" if path else f"  {msg}" for path, msg in self.problems]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"ConfigError({self.source!r}, {len(self.problems)} problems)"
