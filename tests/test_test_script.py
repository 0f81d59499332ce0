"""``scripts/test``, the README's test command, before it installs anything: it says what it
installs (the apt-get line, and apt's output when that fails) and stops with one message
listing every missing prerequisite it cannot install (no apt-get, not root and no sudo, no
Node.js or one older than 20, another architecture), never silently.

The script runs with a PATH of stubs (``id``, ``uname``, ``apt-get``, ``sudo``, ``node``...) and
``HOPLINE_TEST_PREREQUISITES_ONLY=1``, so it stops once the prerequisites are in place; the stub
apt-get and sudo only record their arguments."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "test"
BASICS = ("cat", "rm", "mktemp", "dirname", "env")  # what the script runs besides the stubs


def stub(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)


def sandbox(tmp_path: Path, *, uid: int = 0, machine: str = "x86_64", node: str | None = "20.19.0",
            apt: str | None = "exit 0", sudo: bool = False) -> Path:
    """A bin directory holding only what a test machine has: no redis-server, no strace."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in BASICS:
        os.symlink(shutil.which(name), bin_dir / name)
    os.symlink(sys.executable, bin_dir / "python3")
    calls = tmp_path / "calls"
    stub(bin_dir, "id", f'[ "$1" = -u ] && echo {uid}')
    stub(bin_dir, "uname", f'case "$1" in -m) echo {machine};; -s) echo Linux;; *) echo Linux;; esac')
    if node is not None:
        major = node.split(".")[0]
        stub(bin_dir, "node", f'case "$1" in -p) echo {major};; --version) echo v{node};; esac')
        stub(bin_dir, "npm", "exit 0")
    if apt is not None:
        stub(bin_dir, "apt-get", f'echo "apt-get $*" >> {calls}\n{apt}')
    if sudo:
        stub(bin_dir, "sudo", f'echo "sudo $*" >> {calls}\nexec "$@"')
    return bin_dir


def run(bin_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": str(bin_dir), "HOME": str(bin_dir.parent), "HOPLINE_TEST_PREREQUISITES_ONLY": "1",
           "HOPLINE_CHROMIUM": str(bin_dir.parent / "no-chromium")}
    return subprocess.run(["/bin/bash", str(SCRIPT)], capture_output=True, text=True, env=env, timeout=60, cwd=ROOT)


def calls(tmp_path: Path) -> list[str]:
    path = tmp_path / "calls"
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.parametrize("node, said", [
    (None, "Node.js >= 20 with npm is missing (the tests run real npm MCP peers)"),
    ("18.19.0", "node is v18.19.0; the npm peers need Node.js >= 20"),
])
def test_every_missing_prerequisite_is_named_at_once_and_nothing_is_installed(tmp_path, node, said):
    done = run(sandbox(tmp_path, uid=1000, machine="aarch64", node=node, sudo=False))
    assert done.returncode == 1 and calls(tmp_path) == []
    lines = done.stderr.splitlines()
    assert lines[0] == "scripts/test: cannot run the tests; missing prerequisites:"
    assert any("this is Linux on aarch64; the suite runs on Linux x86_64" in line for line in lines)
    assert any(said in line for line in lines)
    no_root = next(line for line in lines if "not root and there is no sudo" in line)
    assert all(name in no_root for name in ("redis-server", "chromium", "strace")) and "apt-get install" in no_root


def test_without_apt_get_the_missing_packages_are_named(tmp_path):
    done = run(sandbox(tmp_path, apt=None))
    assert done.returncode == 1
    line = next(line for line in done.stderr.splitlines() if "no apt-get" in line)
    assert all(name in line for name in ("redis-server", "chromium", "strace")) and "install them with your package manager" in line


def test_the_apt_line_is_printed_and_a_failure_shows_apts_output(tmp_path):
    done = run(sandbox(tmp_path, apt='echo "E: Unable to locate package chromium"; exit 100'))
    assert done.returncode == 1
    err = done.stderr
    assert "scripts/test: installing Debian packages: apt-get install -y -q " in err and "redis-server" in err
    assert "E: Unable to locate package chromium" in err and "scripts/test: apt-get could not install" in err
    assert calls(tmp_path)[0].startswith("apt-get install -y -q ") and "apt-get update -q" in calls(tmp_path)


def test_not_root_installs_through_sudo_and_says_so(tmp_path):
    done = run(sandbox(tmp_path, uid=1000, sudo=True))
    assert done.returncode == 0, done.stderr
    installing = next(line for line in done.stderr.splitlines() if "installing Debian packages" in line)
    assert installing.startswith("scripts/test: installing Debian packages: sudo apt-get install -y -q ")
    assert calls(tmp_path)[0].startswith("sudo apt-get install -y -q ") and "redis-server" in calls(tmp_path)[0]
    assert "transparent-mode interception tests" in done.stderr and "need root" in done.stderr
