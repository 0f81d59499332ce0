"""Issue 18: the official conformance suite's client scenarios against hopline's upstream side.

scripts/conformance_table.py (``--client``) does the work and makes the README table: the suite runs
scripts/conformance_client.py as its client under test, which puts ``hopline serve`` (Reverse mode) in
front of the suite's server and drives it from the front in the scenario's era, so every check judges
what hopline sent upstream. Each applicable scenario runs at each wire it is listed for. Everything is
on 127.0.0.1; one module-scoped run (about 45 s on 2 cores) serves every test here.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.interop.conformance_script import ct

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def data() -> dict[str, Any]:
    return ct.measure_client()


def test_every_client_scenario_of_both_sets_is_run_or_said_not_to_apply(data):
    """The table is complete: each client scenario either set names (required or not scored) runs at
    that wire, or has a reason not to; nothing is both."""
    runs = set(ct.CLIENT_RUNS)
    for revision, groups in data["sets"].items():
        for name in (n for names in groups.values() for n in names):
            why = ct.client_not_applicable(name)
            assert ((name, revision) in runs) != (why is not None), (name, revision)
    assert all(ct.client_not_applicable(s) is None for s, _ in ct.CLIENT_RUNS)
    assert set(ct.CLIENT_NOT_APPLICABLE) <= set(data["scenarios"])  # no stale entry


@pytest.mark.parametrize(("scenario", "wire"), ct.CLIENT_RUNS, ids=[f"{s}@{w}" for s, w in ct.CLIENT_RUNS])
def test_each_scenario_fails_exactly_its_documented_checks(data, scenario, wire):
    """Pass, or fail exactly the checks CLIENT_EXCEPTIONS names with a reason (a fixed one is stale)."""
    got = data["results"][wire][scenario]
    want, _ = ct.client_documented(scenario, wire)
    assert set(got["failed"]) == want, got


def test_a_backend_refusing_the_first_version_gets_a_retry_not_a_handshake(data):
    """request-metadata answers the first request with -32022 listing 2026-07-28: hopline repeats its
    server/discover (header and _meta as before) instead of falling back to initialize."""
    got = data["results"]["2026-07-28"]["request-metadata"]
    assert (got["passed"], got["failed"]) == (True, [])


def test_the_table_shows_every_run_and_every_reason(data):
    text = ct.client_table(data)
    assert "NOT DOCUMENTED" not in text
    assert "| `tools_call` | pass (required) | pass (required) |" in text
    assert "| `http-invalid-tool-headers` | — | pass (required) |" in text  # the catalogue leaves such tools out
    for _, _, _, why in ct.CLIENT_EXCEPTIONS:
        assert why in text
    for why in {*ct.CLIENT_NOT_APPLICABLE.values(), ct._AUTH_CODE}:
        assert why in text
