"""Load a configuration file: read → YAML/JSON → ``${VAR}`` → ``hopline`` → ``mcpServers``/``servers`` → schema.

In: a path, bytes or text (JSON is YAML, so one parser reads both) and an environment
(``os.environ`` by default). Out: a validated :class:`GatewayConfig`, or a
:class:`ConfigError` listing every problem found as ``key.path: message`` under a
header naming the source (a feature whose optional extra is not installed is one:
config/extras.py). Never a traceback for a bad file, and never a value from
the file in a message: values may be secrets from the environment. Duplicate keys,
which YAML would silently resolve to the last one, are an error.

A desktop client's file (``mcpServers``; VS Code's ``servers`` + ``inputs``) is
shared with that client, so hopline's own settings may sit in one top-level
``hopline`` key there: ``{"hopline": {"routing": {"startup_timeout": 60}}, "mcpServers":
{...}}``. Its keys are read as top-level keys (setting one in both places is an
error) and problems inside it are reported at ``hopline.…``. A variable that is not
set inside a server turned off (``disabled: true``, ``enabled: false``) is a note for
``hopline check``, not an error: nothing reads it until the server is turned on.
"""

from __future__ import annotations

import difflib
import json
import os
from pathlib import Path
from typing import Any, Mapping

import yaml
from pydantic import ValidationError

from hopline.config.desktop import SECTION, SECTIONS, VSCODE_SECTION, Imported, disabled, import_servers
from hopline.config.errors import ConfigError, format_path
from hopline.config.extras import problems as missing_extras
from hopline.config.interpolate import interpolate
from hopline.config.schema import PROBLEMS, GatewayConfig, RoutingConfig, model_for

__all__ = ["ConfigError", "parse_config", "parse_config_bytes", "load_config"]

Loc = tuple[str | int, ...]
OWN = "hopline"  # the key holding hopline's settings in a desktop client's file


class _Loader(yaml.SafeLoader):
    """yaml.SafeLoader that rejects a key repeated in one mapping."""

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            first: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue  # `<<: *anchor` may be overridden by explicit keys
                key = self.construct_object(key_node, deep=True)
                try:
                    seen = key in first
                except TypeError:
                    continue  # unhashable key: the base class reports it
                if seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key!r} (first at line {first[key]})", key_node.start_mark
                    )
                first[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep)


def load_config(path: str | os.PathLike[str], *, env: Mapping[str, str] | None = None) -> GatewayConfig:
    source = os.fspath(path)
    try:
        raw = Path(source).expanduser().read_bytes()
    except OSError as exc:
        raise ConfigError(source, [("", f"cannot read the file: {exc.strerror or exc}")]) from None
    return parse_config_bytes(raw, source=source, env=env)


def parse_config_bytes(raw: bytes, *, source: str = "<config>", env: Mapping[str, str] | None = None) -> GatewayConfig:
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(source, [("", f"not UTF-8 text (invalid byte at offset {exc.start})")]) from None
    return parse_config(text, source=source, env=env)


def parse_config(text: str, *, source: str = "<config>", env: Mapping[str, str] | None = None) -> GatewayConfig:
    data = _parse_yaml(text, source)
    if isinstance(data, dict) and SECTION in data and VSCODE_SECTION not in data and text.lstrip().startswith("{"):
        _strict_json(text, source)  # a desktop client's file: read as strictly as the client reads it
    if not isinstance(data, dict):
        what = "empty" if data is None else f"a {type(data).__name__}"
        raise ConfigError(source, [("", f"the file is {what}; expected a mapping with `backends` or `{SECTION}`")])
    data, found, templates = interpolate(data, os.environ if env is None else env)
    problems = [(loc, msg) for loc, msg in found if not disabled(data, loc)]
    unused = [
        f"{format_path(loc)}: {msg}; not needed while its server is disabled"
        for loc, msg in found
        if disabled(data, loc)
    ]
    hoisted = _hoist(data, problems)
    imported = _import_desktop(data)
    imported.notes[:0] = unused
    imported.hoisted = hoisted
    problems += imported.problems
    config: GatewayConfig | None = None
    try:
        config = GatewayConfig.model_validate(data)
    except ValidationError as exc:
        reported = [loc for loc, _ in problems]
        if imported.problems:
            reported.append(("backends",))  # counting backends is moot while an entry is broken
        for loc, msg in _schema_problems(exc):
            loc = _to_file_loc(loc, imported)
            if loc not in reported:  # one problem per spot
                problems.append((loc, msg))
    # A feature whose optional extra is not installed, in the same pass as the other problems
    # (read from the data when the configuration did not validate).
    reported = {loc for loc, _ in problems}
    problems += [p for p in missing_extras(config if config is not None else data) if p[0] not in reported]
    if problems or config is None:
        raise ConfigError(source, [(format_path(loc), msg) for loc, msg in problems])
    config._import_notes = imported.notes
    config._templates = {_to_config_loc(loc, imported): t for loc, t in templates.items()}
    where = os.path.expanduser(source)
    if os.path.isfile(where):  # relative `openapi` paths start at the file's directory
        config._base_dir = os.path.dirname(os.path.abspath(where))
        config._source_file = os.path.abspath(where)
    return config


def _parse_yaml(text: str, source: str) -> Any:
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - _Loader is a SafeLoader
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise ConfigError(source, [("", f"not valid YAML or JSON: {where}{exc.problem or exc.context}")]) from None
    except yaml.YAMLError as exc:
        raise ConfigError(source, [("", f"not valid YAML or JSON: {exc}")]) from None


def _strict_json(text: str, source: str) -> None:
    """An ``mcpServers`` JSON file is shared with a desktop client, which reads it as strict
    JSON: a trailing comma or a comment that YAML lets through would make the client refuse
    the file (Claude Desktop does), so hopline refuses it too, where the client would.
    (VS Code's ``servers`` file is JSON with comments: not checked.)"""
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        before = text[: exc.pos].rstrip()
        if before.endswith(",") and text[exc.pos : exc.pos + 1] in ("}", "]"):
            line = before.count("\n") + 1
            column = len(before) - (before.rfind("\n") + 1)
            what = f"a trailing comma at line {line}, column {column}"
        else:
            what = f"line {exc.lineno}, column {exc.colno}: {exc.msg}"
        why = "desktop clients read an mcpServers file as strict JSON and refuse it (no trailing comma, no comment)"
        raise ConfigError(source, [("", f"not valid JSON: {what}; {why}")]) from None


def _hoist(data: dict[str, Any], problems: list[tuple[Loc, str]]) -> set[str]:
    """Move the keys of a top-level ``hopline`` mapping to the top level; the keys moved."""
    if OWN not in data:
        return set()
    own = data.pop(OWN)
    if not isinstance(own, dict):
        problems.append(((OWN,), "must be a mapping of hopline settings (routing, listen, ...)"))
        return set()
    moved: set[str] = set()
    for key, value in own.items():
        if key in (*SECTIONS, OWN, "inputs"):
            problems.append(((OWN, key), f"`{key}` belongs at the top level of the file"))
        elif key in data:
            problems.append(((OWN, key), f"`{key}` is also set at the top level; set it in one place"))
        else:
            data[key] = value
            moved.add(key)
    return moved


def _import_desktop(data: dict[str, Any]) -> Imported:
    if not any(s in data for s in SECTIONS):
        return Imported()
    imported = Imported()
    if VSCODE_SECTION in data and not isinstance(data.pop("inputs", []), list):
        imported.problems.append((("inputs",), "must be a list of VS Code input definitions"))
    try:  # ids are derived for the file's own routing settings
        routing = RoutingConfig.model_validate(data.get("routing") or {})
        namespace = routing.namespace()
    except (ValidationError, ValueError):  # reported by the schema; derive for the defaults
        namespace = RoutingConfig().namespace()
    backends = data.get("backends")
    taken = {k for k in backends if isinstance(k, str)} if isinstance(backends, dict) else set()
    for section in SECTIONS:
        if section in data:
            part = import_servers(
                data.pop(section),
                delimiter=namespace.delimiter,
                section=section,
                max_length=namespace.max_backend_length,
                taken=taken | set(imported.backends),
            )
            imported.backends.update(part.backends)
            imported.origins.update(part.origins)
            imported.notes += part.notes
            imported.problems += part.problems
    if backends is None:
        data["backends"] = imported.backends
    elif isinstance(backends, dict):
        data["backends"] = {**backends, **imported.backends}
    return imported


def _schema_problems(exc: ValidationError) -> list[tuple[Loc, str]]:
    out: list[tuple[Loc, str]] = []
    for err in exc.errors(include_url=False, include_input=False):
        loc: Loc = tuple(err["loc"])
        if loc and loc[-1] == "[key]":
            loc = loc[:-1]
        ctx = err.get("ctx") or {}
        if err["type"] == PROBLEMS:
            out += [((*loc, *rel), msg) for rel, msg in ctx["problems"]]
        elif err["type"] == "value_error":
            out.append((loc, str(ctx.get("error", err["msg"]))))
        elif err["type"] == "extra_forbidden":
            out.append((loc, _unknown_key(loc)))
        elif err["type"] == "missing":
            out.append((loc, "is required"))
        else:
            out.append((loc, err["msg"]))
    return out


def _unknown_key(loc: Loc) -> str:
    model = model_for(loc)
    if model is None or not isinstance(loc[-1], str):
        return "unknown key"
    allowed = list(model.model_fields) + ([*SECTIONS, OWN] if model is GatewayConfig else [])
    close = difflib.get_close_matches(loc[-1], allowed, n=1)
    return f"unknown key (did you mean {close[0]!r}?)" if close else f"unknown key (allowed: {', '.join(allowed)})"


def _to_file_loc(loc: Loc, imported: Imported) -> Loc:
    """A schema loc inside an imported backend, as the path in the file's mcpServers."""
    if len(loc) >= 2 and loc[0] == "backends" and loc[1] in imported.origins:
        origin = imported.origins[str(loc[1])]
        rest = (origin.keys.get(str(loc[2]), loc[2]), *loc[3:]) if len(loc) > 2 else ()
        return (origin.section, origin.name, *rest)
    if loc and loc[0] in imported.hoisted:
        return (OWN, *loc)
    return loc


def _to_config_loc(loc: Loc, imported: Imported) -> Loc:
    """The inverse of :func:`_to_file_loc`, for locs of values as written."""
    if loc and loc[0] == OWN:
        return loc[1:]
    if len(loc) >= 3 and loc[0] in SECTIONS:
        for bid, origin in imported.origins.items():
            if origin.name == loc[1] and origin.section == loc[0]:
                field = next((f for f, k in origin.keys.items() if k == loc[2]), loc[2])
                return ("backends", bid, field, *loc[3:])
    return loc
