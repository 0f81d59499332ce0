"""The requirement manifest: every claimed draft requirement has a test that names it.

Tests name requirements with ``@pytest.mark.req("ID")``. This file reads the test
sources (not the collected session, so it holds when run alone) and fails on a
claimed requirement without a test, and on a test naming an unknown id.
"""

from __future__ import annotations

import re
import tomllib
from importlib import resources
from pathlib import Path

TESTS = Path(__file__).resolve().parent
MARK = re.compile(r"""pytest\.mark\.req\(\s*["']([^"']+)["']\s*\)""")


def manifest() -> dict[str, dict]:
    data = tomllib.loads(resources.files("hopline").joinpath("requirements.toml").read_text())
    return {r["id"]: r for r in data["req"]}


def marked() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in TESTS.rglob("test_*.py"):
        if path.name == Path(__file__).name:
            continue
        for req_id in MARK.findall(path.read_text()):
            found.setdefault(req_id, []).append(path.name)
    return found


def test_every_claimed_requirement_has_a_test():
    missing = sorted(set(manifest()) - set(marked()))
    assert not missing, f"claimed in requirements.toml but proven by no test: {missing}"


def test_every_marked_requirement_is_in_the_manifest():
    unknown = sorted(set(marked()) - set(manifest()))
    assert not unknown, f"tests name requirement ids that requirements.toml does not define: {unknown}"


def test_manifest_entries_are_complete_and_unique():
    data = tomllib.loads(resources.files("hopline").joinpath("requirements.toml").read_text())
    ids = [r["id"] for r in data["req"]]
    assert len(ids) == len(set(ids))
    for r in data["req"]:
        assert r["section"] and r["text"] and re.fullmatch(r"[A-Z0-9-]+", r["id"])
