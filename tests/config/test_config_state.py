"""The ``state:`` section (replicas): keys checked without ever being quoted, and what
``hopline check`` says of it (never the key, nor the Redis password)."""

from __future__ import annotations

import base64
import secrets
import subprocess
import sys

import pytest

from hopline.config.load import ConfigError, parse_config

KEY = base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()
BASE = "backends: {demo: {command: python, args: [-m, hopline.demo]}}\n"


def test_a_valid_state_section_gives_the_sealing_key_first():
    old = base64.b64encode(secrets.token_bytes(32)).decode()  # standard base64 is accepted too
    config = parse_config(BASE + f"state: {{session_key: '{KEY}', previous_session_keys: ['{old}']}}\n")
    assert config.state.keys() == [base64.urlsafe_b64decode(KEY), base64.b64decode(old)]
    assert config.state.redis_url is None and config.state.on_store_down == "refuse"


@pytest.mark.parametrize(
    "key, said",
    [("c2hvcnQ", "must decode to 32 bytes, not 5"), ("not a key!", "is not base64url"), (KEY.rstrip("=") + "AAAA", "not 35")],
    ids=["short", "not-base64url", "too-long"],  # the key is random: ids of its own keep collection the same in every xdist worker
)
def test_a_bad_key_is_refused_at_its_key_path_without_being_quoted(key, said):
    with pytest.raises(ConfigError) as caught:
        parse_config(BASE + f"state: {{session_key: '{key}'}}\n")
    text = str(caught.value)
    assert "state.session_key" in text and said in text and key not in text


def test_check_names_what_replicas_share_and_no_secret(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text(BASE + "state: {session_key: '${K}', redis_url: 'redis://:hunter2pw@127.0.0.1:1/0'}\n")
    import os

    proc = subprocess.run(
        [sys.executable, "-m", "hopline", "check", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "K": KEY},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "replicas: session ids sealed (1 key" in proc.stdout and "redis://127.0.0.1:1/0" in proc.stdout
    assert KEY not in proc.stdout + proc.stderr and "hunter2pw" not in proc.stdout + proc.stderr
