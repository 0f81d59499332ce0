"""scripts/conformance_table.py, imported once for both conformance tests (server and client
scenarios), and the check that scripts/test installed the pinned suite and Node 22."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "conformance_table.py"

if "conformance_table" in sys.modules:
    ct = sys.modules["conformance_table"]
else:
    _spec = importlib.util.spec_from_file_location("conformance_table", SCRIPT)
    assert _spec is not None and _spec.loader is not None
    ct = importlib.util.module_from_spec(_spec)
    sys.modules["conformance_table"] = ct
    _spec.loader.exec_module(ct)

if not (ct.SUITE.exists() and ct.NODE22.exists()):  # pragma: no cover - scripts/test installs them
    pytest.fail(f"the conformance suite is missing under {ct.SUITE_DIR}; run npm ci --prefix tests/node", pytrace=False)
