"""The layer contract (DESIGN §2), enforced by import-linter: the contracts are in
pyproject.toml (``[tool.importlinter]``) and ``lint-imports`` checks them here, so a
red contract is a red suite. Every import statement counts, including those under
``TYPE_CHECKING`` and inside functions (grimp reads them all).

- the layers (``hopline.layers``) import no transport, no mode, no configuration;
- ``hopline.transports`` implements Layer 1: of the layers it imports only the L1
  contract (``hopline.layers.transport``);
- ``binding``, ``jsonrpc``, ``context``, ``header_codec`` and ``layers.transport`` sit
  at the bottom;
- configuration builds no mode; observability is handed its settings;
- no import cycles between siblings, but for the edges listed (the list only shrinks).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import hopline

ROOT = Path(__file__).resolve().parent.parent
SRC = Path(hopline.__file__).parent
LINT = [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"]


def lint(src: Path, config: Path = ROOT / "pyproject.toml") -> subprocess.CompletedProcess[str]:
    return subprocess.run([*LINT, "--config", str(config), "--no-cache"], cwd=ROOT, env={"PYTHONPATH": str(src), "PATH": ""},
                          capture_output=True, text=True, timeout=120, check=False)


def test_the_layer_contract_holds():
    done = lint(SRC.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout, done.stdout


def test_a_layer_importing_a_mode_breaks_the_contract(tmp_path):
    """The check can fail: the same tree with one forbidden import in a layer."""
    tree = tmp_path / "src"
    shutil.copytree(SRC, tree / "hopline", ignore=shutil.ignore_patterns("__pycache__"))
    namespace = tree / "hopline" / "layers" / "routing" / "namespace.py"
    namespace.write_text(namespace.read_text() + "\n\ndef _late():\n    from hopline.modes import relay  # noqa: F401\n")
    done = lint(tree)
    assert done.returncode != 0, done.stdout
    assert "Layers are sans-io and know neither modes nor configuration BROKEN" in done.stdout, done.stdout
    assert "hopline.layers.routing.namespace -> hopline.modes.relay" in done.stdout, done.stdout
