"""Issue 18: the official MCP conformance suite (``@modelcontextprotocol/conformance``, pinned in
tests/node) against a backend directly and through hopline's relay, reverse and forward modes.

scripts/conformance_table.py does the work (the README table comes from it): the backend is
tests/servers/conformance_server.py; each path runs the 2025-11-25 and 2026-07-28 requirement sets,
each with what the set runs unscored (pending scenarios, the tasks extension). Everything is on
127.0.0.1; one module-scoped run (about 40 s on 2 cores) serves every test here.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.interop.conformance_script import ct

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def data() -> dict[str, Any]:
    return ct.measure()


def test_the_suite_is_the_pinned_one(data):
    assert data["suite"] == "0.2.0-alpha.12"
    assert set(data["sets"]) == {"2025-11-25", "2026-07-28"}
    assert len(data["sets"]["2026-07-28"][ct.TASKS]) == 10


def test_direct_passes_every_required_and_pending_scenario(data):
    """The baseline is not vacuous: the backend passes what each requirement set requires, and what
    it lists as pending, at that set's wire."""
    for revision in ct.SETS:
        for group in ("required", "not_scored"):
            names = data["sets"][revision][group]
            assert names
            assert ct.passed(data, "direct", revision, group) == set(names), (revision, group)


@pytest.mark.parametrize("path", ct.PATHS[1:])
def test_each_path_agrees_with_direct_check_by_check_except_documented(data, path):
    """Every check of every scenario has direct's verdict, except where EXCEPTIONS says why; an
    exception that no longer applies fails too (the table must not hide a fix)."""
    assert [w for w in ct.differences(data) if w.startswith(path + " ")] == []


@pytest.mark.parametrize("path", ct.PATHS)
@pytest.mark.parametrize("scenario", ["http-header-validation", "http-custom-header-server-validation"])
def test_2026_header_rules_pass_on_every_path(data, path, scenario):
    """SEP-2243 through an intermediary: whitespace around a mirrored value is accepted, Mcp-Param-*
    headers reach the backend and mismatches are still refused (issue 18 item 4)."""
    assert data["results"][path]["2026-07-28"][scenario] == {"passed": True, "failed": []}


def test_the_table_lists_every_group_and_explains_each_difference(data):
    text = ct.table(data)
    assert "| 2025-11-25 required | 30/30 | 30/30 | 30/30 |" in text
    assert "tasks extension" in text
    assert "NOT DOCUMENTED" not in text
    for _, _, scenario, _, why in ct.EXCEPTIONS:
        assert f"`{scenario}`" in text and why in text
