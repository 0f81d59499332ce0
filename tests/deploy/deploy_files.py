"""What the tests under tests/deploy/ read: the Dockerfile's stages, the build context that
.dockerignore admits, the Kubernetes manifests, and examples/replicas.yaml."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import yaml
from dockerfile_parse import DockerfileParser

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
MANIFESTS = ROOT / "deploy" / "kubernetes"
REPLICAS = ROOT / "examples" / "replicas.yaml"
CONTAINER = ROOT / "examples" / "container.yaml"  # the configuration the image ships: it runs alone


# What examples/replicas.yaml needs from the environment: a Redis URL (here one where nothing
# listens: a replica alone needs no Redis to serve its own sessions) and a valid session key.
REPLICAS_ENV = {"REDIS_URL": "redis://127.0.0.1:1/0", "HOPLINE_SESSION_KEY": "A" * 43}


# -- the Dockerfile -------------------------------------------------------------------------------


def stages() -> dict[str, list[dict[str, Any]]]:
    """Each stage's instructions (``instruction``, ``value``), by the name given in ``FROM ... AS name``."""
    out: dict[str, list[dict[str, Any]]] = {}
    current: list[dict[str, Any]] | None = None
    for ins in DockerfileParser(path=str(DOCKERFILE)).structure:
        if ins["instruction"] == "FROM":
            match = re.fullmatch(r"(\S+)\s+AS\s+(\S+)", ins["value"], re.IGNORECASE)
            assert match, f"every stage is named (FROM image AS name): {ins['value']!r}"
            current = out.setdefault(match.group(2), [])
        if current is not None and ins["instruction"] != "COMMENT":
            current.append(ins)
    return out


def values(stage: list[dict[str, Any]], instruction: str) -> list[str]:
    return [ins["value"] for ins in stage if ins["instruction"] == instruction]


def exec_form(value: str) -> list[str]:
    """An instruction's JSON (exec) form, e.g. ``["hopline"]``."""
    parsed = json.loads(value)
    assert isinstance(parsed, list) and all(isinstance(a, str) for a in parsed), value
    return parsed


# -- the build context ----------------------------------------------------------------------------


def _pattern(pattern: str) -> re.Pattern[str]:
    """A .dockerignore pattern as a regular expression over context-relative paths: ``*`` and ``?``
    within one path element, ``**`` across any number of them; a pattern matches a path or any
    of its parents (as Docker's matcher does)."""
    pattern = pattern.strip().strip("/")
    rx = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            rx, i = rx + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            rx, i = rx + ".*", i + 2
        elif pattern[i] == "*":
            rx, i = rx + "[^/]*", i + 1
        elif pattern[i] == "?":
            rx, i = rx + "[^/]", i + 1
        else:
            rx, i = rx + re.escape(pattern[i]), i + 1
    return re.compile(rx + "(?:/.*)?")


def dockerignore() -> list[tuple[bool, re.Pattern[str]]]:
    """(is an exception ``!``, pattern) for each line of .dockerignore, in order."""
    rules = []
    for line in (ROOT / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            assert not any(c in line for c in "[\\"), f"a pattern this matcher does not read: {line!r}"
            keep = line.startswith("!")
            rules.append((keep, _pattern(line.lstrip("!"))))
    return rules


def in_context(relative: str, rules: list[tuple[bool, re.Pattern[str]]]) -> bool:
    """Whether the file at ``relative`` is sent to the builder: the last rule that matches decides."""
    kept = True
    for keep, rx in rules:
        if rx.fullmatch(relative):
            kept = keep
    return kept


def context_files() -> list[str]:
    """The files of the work tree that the build context holds."""
    rules = dockerignore()
    found = []
    for path in ROOT.rglob("*"):
        relative = path.relative_to(ROOT).as_posix()
        if {".git", ".venv", "node_modules"} & set(relative.split("/")):  # large, and left out by "*" anyway
            continue
        if path.is_file() and in_context(relative, rules):
            found.append(relative)
    return sorted(found)


def copy_context(to: Path) -> Path:
    """A copy of the build context (what `docker build .` would send) in ``to``."""
    for relative in context_files():
        target = to / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / relative, target)
    return to


# -- the manifests --------------------------------------------------------------------------------


def manifest_files() -> list[Path]:
    return sorted(p for p in MANIFESTS.glob("*.yaml") if p.name != "kustomization.yaml")


def resources(paths: list[Path] | None = None) -> list[dict[str, Any]]:
    """Every resource of the manifests (a file may hold several, separated by ``---``)."""
    out = []
    for path in paths if paths is not None else manifest_files():
        out.extend(doc for doc in yaml.safe_load_all(path.read_text()) if doc)
    return out


def resource(kind: str, name: str) -> dict[str, Any]:
    found = [r for r in resources() if r["kind"] == kind and r["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} found"
    return found[0]
