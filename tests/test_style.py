"""The style habits CI keeps (issue 14): src/ is ruff-formatted, no line is over 120
characters and pyflakes finds nothing (``[tool.ruff]`` in pyproject.toml)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUFF = str(Path(sys.executable).with_name("ruff"))


def ruff(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([RUFF, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_src_passes_ruff_at_120_characters():
    checked = ruff("check", "src")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    formatted = ruff("format", "--check", "src")
    assert formatted.returncode == 0, formatted.stdout + formatted.stderr


def test_the_check_fails_on_a_long_line(tmp_path):
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "long.py").write_text(f"X = {'1 + ' * 40}1\n")
    checked = ruff("check", "src", cwd=tmp_path)
    assert checked.returncode == 1 and "E501" in checked.stdout
