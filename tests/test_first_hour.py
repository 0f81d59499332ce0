"""The first hour with hopline (issue 16, item 4): ``check`` and ``serve`` agree, startup
problems are one clean message and exit 1, broken backends are reported at start, and
the CLI does what its help says. Real processes throughout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SRC = str(ROOT / "src")
PY = sys.executable


def hopline(*args: str, env: dict[str, str] | None = None, cwd: Path = ROOT, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run ``python -m hopline …`` to its end (only for what exits by itself)."""
    return subprocess.run([PY, "-m", "hopline", *args], capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          env={**os.environ, "PYTHONPATH": SRC, **(env or {})})


def no_traceback(proc: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr


# -- 1. check and serve agree; no traceback at startup -------------------------------------------------

INTERCEPTOR_PROBLEM = (
    "policy.interceptors[0].class: module 'interceptor_example' cannot be imported: ModuleNotFoundError: "
    "No module named 'interceptor_example' (is its directory on PYTHONPATH, or its package installed?)"
)


@pytest.mark.parametrize("command", ["check", "serve"])
def test_an_interceptor_that_cannot_be_imported_fails_check_and_serve_alike(command):
    extra = ["--port", "0"] if command == "serve" else []
    proc = hopline(command, "examples/policy.yaml", *extra)
    no_traceback(proc)
    assert proc.returncode == 1
    prefix = "hopline serve: " if command == "serve" else ""
    assert proc.stderr == f"{prefix}examples/policy.yaml: cannot use this configuration (1 problem)\n  {INTERCEPTOR_PROBLEM}\n"


def test_check_passes_when_the_interceptor_imports():
    proc = hopline("check", "examples/policy.yaml", env={"PYTHONPATH": os.pathsep.join([SRC, str(ROOT / "examples")])})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("examples/policy.yaml: valid\n")


BROKEN = {
    "audit": ("policy:\n  audit: {sink: /nonexistent/dir/audit.log}\n",
              "policy.audit.sink: cannot be opened: directory /nonexistent/dir does not exist or is not writable"),
    "lockfile": ("policy:\n  pinning: {lockfile: ./lock.json}\n", "policy.pinning.lockfile: lockfile ./lock.json cannot be read: JSONDecodeError"),
    "key file": ("auth:\n  resource: http://127.0.0.1:8000/mcp\n  issuers:\n    - issuer: https://idp.example\n"
                 "      keys: [{alg: RS256, pem_file: /nonexistent.pem}]\n",
                 "auth.issuers[0].keys[0]: cannot read the key file: No such file or directory"),
    "bad key": ("auth:\n  resource: http://127.0.0.1:8000/mcp\n  issuers:\n    - issuer: https://idp.example\n"
                "      keys: [{alg: RS256, pem: not-a-key}]\n",
                "auth.issuers[0].keys[0]: not a usable RS256 public key (InvalidKeyError)"),
    "openapi file": ("", "backends.api.openapi: cannot read the spec file /nonexistent.yaml: No such file or directory"),
    "openapi spec": ("", "backends.api.openapi: the spec has no operations to convert"),
}


@pytest.mark.parametrize("case", list(BROKEN))
@pytest.mark.parametrize("command", ["check", "serve"])
def test_startup_problems_are_one_clean_message(tmp_path, case, command):
    extra, problem = BROKEN[case]
    backend = {"openapi file": "{openapi: /nonexistent.yaml}", "openapi spec": "{openapi: ./empty.yaml}"}.get(case)
    backends = f"backends:\n  api: {backend}\n" if backend else "backends:\n  demo: {command: python, args: [-m, hopline.demo]}\n"
    (tmp_path / "gw.yaml").write_text(backends + extra)
    (tmp_path / "lock.json").write_text("{bad")
    (tmp_path / "empty.yaml").write_text("openapi: 3.0.0\n")
    proc = hopline(command, "gw.yaml", *(["--port", "0"] if command == "serve" else []), cwd=tmp_path)
    no_traceback(proc)
    assert proc.returncode == 1
    prefix = "hopline serve: " if command == "serve" else ""
    assert proc.stderr == f"{prefix}gw.yaml: cannot use this configuration (1 problem)\n  {problem}\n"
