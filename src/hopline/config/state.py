"""``state:``: what replicas share, so that a handshake-era session lives on any of them.

Without this section a session lives in the process that made it (a 2026-07-28
client needs nothing: its era has no session). With ``session_key``, the session ids
hopline mints are sealed (AES-256-GCM): any replica with the key resumes a session
another made, replaying its ``initialize`` (transports/session_table.py). With
``redis_url`` too, replicas share the rest: ended sessions, standing requests
(subscriptions, log level), and notifications for a GET stream held by another replica.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from typing import Literal

from pydantic import Field, field_validator

from hopline.config.section import Section


class StateConfig(Section):
    """Session state shared by replicas behind a load balancer."""

    session_key: str = Field(
        description="The key that seals session ids: 32 random bytes in base64url (use ${VAR}); make one with "
        '`python -c "import secrets,base64;print(base64.urlsafe_b64encode(secrets.token_bytes(32)).decode())"`. '
        "Every replica needs the same key.",
    )
    previous_session_keys: list[str] = Field(
        default_factory=list,
        max_length=8,
        description="Older keys still accepted (not used to seal): rotate by moving session_key here.",
    )
    redis_url: str | None = Field(
        None,
        pattern=r"^(redis|rediss|unix)://",
        description="Redis shared by the replicas (redis://, rediss:// or unix://; use ${VAR} for a password). "
        "Without it a DELETE, subscriptions and notifications for a GET stream stay on the replica that saw them.",
    )
    prefix: str = Field("hopline:", min_length=1, description="Prefix of every Redis key and channel.")
    timeout: float = Field(0.25, gt=0, le=10, description="Seconds to wait for Redis per operation.")
    max_age: float = Field(
        86_400.0, gt=0, description="Seconds a sealed session id stays resumable after its initialize."
    )
    on_store_down: Literal["refuse", "resume"] = Field(
        "refuse",
        description="When Redis does not answer and a replica must resume a session it does not hold: refuse "
        "(503 with Retry-After; sessions a replica holds keep working) or resume without the shared part "
        "(an ended session could come back until max_age).",
    )

    @field_validator("session_key", "previous_session_keys")
    @classmethod
    def _keys(cls, value: str | list[str]) -> str | list[str]:
        for key in [value] if isinstance(value, str) else value:
            problem = key_problem(key)
            if problem is not None:
                raise ValueError(problem)
        return value

    def cursor_secret(self) -> bytes:
        """The list cursors' key, derived from the sealing key: the same on every replica."""
        return hashlib.sha256(b"hopline cursors\0" + self.keys()[0]).digest()

    def keys(self) -> list[bytes]:
        """The keys, the sealing one first, as bytes."""
        return [_decode(k) for k in [self.session_key, *self.previous_session_keys]]


def _decode(text: str) -> bytes:
    """base64url (or standard base64), padding optional; anything else is an error."""
    raw = text.strip().replace("+", "-").replace("/", "_").rstrip("=")
    return base64.b64decode(raw + "=" * (-len(raw) % 4), altchars=b"-_", validate=True)


def key_problem(text: str) -> str | None:
    """Why ``text`` is not a session key (never quoting it), or None."""
    try:
        key = _decode(text)
    except (binascii.Error, ValueError):
        return "is not base64url (32 random bytes encoded)"
    if len(key) != 32:
        return f"must decode to 32 bytes, not {len(key)}"
    return None
