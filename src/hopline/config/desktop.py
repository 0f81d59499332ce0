"""Import the ``mcpServers`` section that desktop MCP clients use (DESIGN §3.8).

In: the value of a top-level ``mcpServers`` key (Claude Desktop, Cursor, Cline,
Windsurf, VS Code entry shapes), the routing delimiter, the longest id routing allows
and the ids already taken by ``backends``. Out: :class:`Imported` — backend dicts keyed by id, ready for
``BackendConfig``; where each came from (so validation errors point back into
``mcpServers``); notes for ``hopline check``; problems as ``(loc, message)``.

Per entry: ``command``/``args``/``env``/``cwd``/``url``/``headers``/``timeout`` and
every other ``BackendConfig`` key pass through unchanged (unknown ones then fail
validation at their ``mcpServers`` path). Desktop-only keys are mapped:
``type``/``transportType`` (stdio, sse, http, streamable-http) → ``transport``,
``disabled`` → ``enabled``, ``serverUrl``/``httpUrl`` → ``url``. Client-side keys
hopline has no use for (auto-approval lists and the like) are dropped with a note.
A name that is not a valid backend id gets a derived id (:func:`ids.derive_id`),
recorded in the notes; it never silently shadows another backend.

VS Code's ``.vscode/mcp.json`` is read the same way from its top-level ``servers``
section (:data:`VSCODE_SECTION`; entries with ``type`` stdio/http/sse); its ``inputs``
list is VS Code's prompt definitions and is dropped (``${input:ID}`` references are
read from environment variables, see ``interpolate``). ``envFile`` is refused (hopline
does not read env files: put the variables under ``env``); ``dev`` is dropped with a note.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hopline.config.errors import format_path
from hopline.config.ids import MAX_ID_LENGTH, derive_id

Loc = tuple[str | int, ...]
SECTION = "mcpServers"
VSCODE_SECTION = "servers"
SECTIONS = (SECTION, VSCODE_SECTION)
REFUSED = {"envFile": "hopline does not read env files; put the variables under `env`"}
TRANSPORTS = {
    "stdio": None,
    "sse": "sse",
    "http": "streamable-http",
    "streamable-http": "streamable-http",
    "streamableHttp": "streamable-http",
}
TYPE_KEYS = ("type", "transportType")
URL_KEYS = ("serverUrl", "httpUrl")
# Settings that desktop clients keep per server for their own UI; they mean nothing here.
IGNORED = frozenset(
    {"autoApprove", "alwaysAllow", "disabledTools", "trust", "gallery", "version", "icon", "networkTimeout", "dev"}
)


@dataclass
class Origin:
    """Where an imported backend came from: its name and the source key of each field."""

    name: str
    keys: dict[str, str] = field(default_factory=dict)  # backend field -> desktop key
    section: str = SECTION


@dataclass
class Imported:
    backends: dict[str, dict[str, Any]] = field(default_factory=dict)
    origins: dict[str, Origin] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    problems: list[tuple[Loc, str]] = field(default_factory=list)
    hoisted: set[str] = field(default_factory=set)  # top-level keys that came from the `hopline` key


def import_servers(
    servers: Any, *, delimiter: str, taken: set[str], max_length: int = MAX_ID_LENGTH, section: str = SECTION
) -> Imported:
    out = Imported()
    if not isinstance(servers, dict):
        out.problems.append(((section,), "must be a mapping of server name to server entry"))
        return out
    derived_from: dict[str, str] = {}
    for name, entry in servers.items():
        loc: Loc = (section, name)
        if not isinstance(name, str):
            out.problems.append((loc, "server names must be strings"))
            continue
        bid = derive_id(name, delimiter, max_length)
        if bid in taken:
            out.problems.append((loc, f"backend id {bid!r} is also defined under `backends`"))
            continue
        if bid in derived_from:
            other = format_path((section, derived_from[bid]))
            out.problems.append((loc, f"its backend id {bid!r} is also the id of {other}; rename one of them"))
            continue
        derived_from[bid] = name
        if bid != name:
            out.notes.append(f"{format_path(loc)} is backend id {bid!r} (ids use [a-zA-Z0-9_-] without {delimiter!r})")
        if not isinstance(entry, dict):
            out.problems.append((loc, "must be a mapping (command/args/env or url/headers)"))
            continue
        converted = _convert(entry, loc, out)
        if converted is not None:
            out.backends[bid], out.origins[bid] = converted
    return out


def _convert(entry: dict[str, Any], loc: Loc, out: Imported) -> tuple[dict[str, Any], Origin] | None:
    backend: dict[str, Any] = {}
    origin = Origin(name=str(loc[1]), section=str(loc[0]))
    problems: list[tuple[Loc, str]] = []
    ignored: list[str] = []
    for key, value in entry.items():
        if key in IGNORED:
            ignored.append(key)
        elif key in REFUSED:
            problems.append(((*loc, key), REFUSED[key]))
        elif key in TYPE_KEYS:
            if not isinstance(value, str) or value not in TRANSPORTS:
                problems.append(((*loc, key), f"must be one of {', '.join(TRANSPORTS)}"))
            elif value == "stdio" and any(k in entry for k in ("url", *URL_KEYS)):
                problems.append(((*loc, key), "a stdio entry takes `command`, not a URL"))
            elif TRANSPORTS[value] is not None:
                _put(backend, origin, "transport", TRANSPORTS[value], key, loc, problems)
        elif key == "disabled":
            if not isinstance(value, bool):
                problems.append(((*loc, key), "must be true or false"))
            else:
                _put(backend, origin, "enabled", not value, key, loc, problems)
        elif key in URL_KEYS:
            _put(backend, origin, "url", value, key, loc, problems)
            if key == "httpUrl" and not any(k in entry for k in (*TYPE_KEYS, "transport")):
                _put(backend, origin, "transport", "streamable-http", key, loc, problems)
        else:
            _put(backend, origin, key, value, key, loc, problems)
    if ignored:
        out.notes.append(
            f"{format_path(loc)}: ignored {', '.join(ignored)} (desktop-client settings hopline does not use)"
        )
    out.problems += problems
    return None if problems else (backend, origin)


def _put(
    backend: dict[str, Any],
    origin: Origin,
    field_name: str,
    value: Any,
    key: str,
    loc: Loc,
    problems: list[tuple[Loc, str]],
) -> None:
    if field_name in backend:
        problems.append(
            ((*loc, key), f"sets `{field_name}` again (already set by `{origin.keys.get(field_name, field_name)}`)")
        )
        return
    backend[field_name] = value
    if key != field_name:
        origin.keys[field_name] = key


def disabled(data: dict[str, Any], loc: Loc) -> bool:
    """Whether ``loc`` lies in a server entry turned off (``disabled: true`` in a
    desktop section, ``enabled: false`` under ``backends``), whose settings are not used."""
    if len(loc) < 3 or loc[0] not in (*SECTIONS, "backends"):
        return False
    section = data.get(loc[0])
    entry = section.get(loc[1]) if isinstance(section, dict) else None
    if not isinstance(entry, dict):
        return False
    return entry.get("enabled") is False if loc[0] == "backends" else entry.get("disabled") is True
