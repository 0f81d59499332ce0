"""examples/replicas.yaml: a forward gateway that needs REDIS_URL and HOPLINE_SESSION_KEY from
the environment and nothing else, listens on every interface, has the admin listener on and
serves the built-in demo server as backend ``demo``. (It is served for real, from the wheel,
by tests/deploy/test_deploy_dockerfile.py.)"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import yaml

from hopline.config.load import parse_config
from tests.deploy.deploy_files import REPLICAS, REPLICAS_ENV, ROOT

ENV = REPLICAS_ENV


def test_it_needs_only_redis_url_and_the_session_key_from_the_environment():
    text = REPLICAS.read_text()
    body = "\n".join(line.split("#", 1)[0] for line in text.splitlines())  # the values, not the comments
    required = set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", body))
    defaulted = set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*):-[^}]*\}", body))
    assert required == {"REDIS_URL", "HOPLINE_SESSION_KEY"} and defaulted == {"HOPLINE_PORT", "HOPLINE_ADMIN_PORT"}
    assert yaml.safe_load(text)["state"] == {"redis_url": "${REDIS_URL}", "session_key": "${HOPLINE_SESSION_KEY}"}


def test_it_listens_on_every_interface_with_the_admin_listener_and_the_demo_backend():
    config = parse_config(REPLICAS.read_text(), source=str(REPLICAS), env=ENV)
    assert config.mode == "forward"
    assert (config.listen.host, config.listen.port, config.listen.path) == ("0.0.0.0", 8000, "/mcp")
    metrics = config.observability.metrics
    assert (metrics.host, metrics.port) == ("0.0.0.0", 9100)
    (demo,) = config.backends.values()
    assert list(config.backends) == ["demo"] and demo.kind() == "stdio"
    assert (demo.command, demo.args) == ("python", ["-m", "hopline.demo"])
    assert config.routing.delimiter == "__"  # so its echo tool is demo__echo
    moved = parse_config(REPLICAS.read_text(), env={**ENV, "HOPLINE_PORT": "8001", "HOPLINE_ADMIN_PORT": "9101"})
    assert (moved.listen.port, moved.observability.metrics.port) == (8001, 9101)


def test_hopline_check_accepts_it(tmp_path):
    path = tmp_path / "replicas.yaml"
    path.write_text(REPLICAS.read_text())
    env = {**os.environ, **ENV}
    proc = subprocess.run(
        [sys.executable, "-m", "hopline", "check", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{path}: valid" in proc.stdout and "demo (stdio): python -m hopline.demo" in proc.stdout
