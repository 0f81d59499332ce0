"""Hot reload: notice when the configuration file changes, and what changed in it.

:class:`ConfigWatcher` polls the file's ``(mtime_ns, size, sha256)`` every ``interval``
seconds (no third-party watcher, so it behaves the same on every platform and
filesystem, including editors that save by rename). ``changes()`` yields each newly
validated configuration that differs from the current one. An invalid new file is
logged once with its ``ConfigError`` text and skipped: the gateway keeps running on
the last good configuration. A file that vanishes for a moment (an atomic save) is
waited for. Reading a small local file is fast enough to do on the event loop.

:func:`diff_backends` is pure: which backend ids a reload adds, removes or changes,
so the gateway restarts only those and emits CHANGE-SIGNAL (DESIGN §3.8).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import AsyncIterator, Mapping

from hopline.config.load import ConfigError, parse_config_bytes
from hopline.config.schema import GatewayConfig

log = logging.getLogger("hopline.config")
Fingerprint = tuple[int, int, str]  # (mtime_ns, size, sha256 hex)


@dataclass(frozen=True)
class BackendDiff:
    """Backend ids added, removed, and present in both with different settings."""

    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.changed)


def diff_backends(old: GatewayConfig, new: GatewayConfig) -> BackendDiff:
    """Compare two configurations' backends (enabling or disabling one is a change)."""
    return BackendDiff(
        added=[b for b in new.backends if b not in old.backends],
        removed=[b for b in old.backends if b not in new.backends],
        changed=[b for b in new.backends if b in old.backends and new.backends[b] != old.backends[b]],
    )


class ConfigWatcher:
    """Polls one configuration file; ``current`` is the last valid configuration seen."""

    def __init__(
        self, path: str | os.PathLike[str], *, interval: float = 1.0, env: Mapping[str, str] | None = None
    ) -> None:
        self.path = Path(path)
        self.interval = interval
        self.current: GatewayConfig | None = None
        self._env = env
        self._seen: Fingerprint | None = None  # the file as last examined
        self._loaded: str | None = None  # digest of the content ``current`` came from
        self._unreadable = False

    def __repr__(self) -> str:
        return f"<ConfigWatcher {str(self.path)!r} every {self.interval}s, {'loaded' if self.current else 'no config'}>"

    def load(self) -> GatewayConfig:
        """Read and validate the file now (raises ConfigError); changes() starts from it."""
        fp, raw = self._read()
        config = parse_config_bytes(raw, source=str(self.path), env=self._env)
        self._seen, self._loaded, self.current = fp, fp[2], config
        return config

    async def changes(self) -> AsyncIterator[GatewayConfig]:
        """Yield each new valid configuration, forever (cancel or break to stop)."""
        if self._seen is None:  # the file as it is now is the baseline, not a change
            try:
                self.load()
            except ConfigError as exc:
                log.error("configuration not loaded, waiting for a valid one:\n%s", exc)
        while True:
            await asyncio.sleep(self.interval)
            config = self.poll()
            if config is not None:
                yield config

    def poll(self) -> GatewayConfig | None:
        """Check once: the new configuration if the file now holds a different valid one."""
        try:
            fp, raw = self._read()
        except ConfigError as exc:
            if not self._unreadable:
                log.warning("configuration file unreadable, keeping the current configuration:\n%s", exc)
            self._unreadable = True
            return None
        self._unreadable = False
        if fp == self._seen:
            return None
        previous, self._seen = self._seen, fp
        if fp[2] == self._loaded or (previous is not None and fp[2] == previous[2]):
            return None  # touched, or saved back to content already handled
        try:
            config = parse_config_bytes(raw, source=str(self.path), env=self._env)
        except ConfigError as exc:
            log.error("configuration not reloaded, keeping the current one:\n%s", exc)
            return None
        self._loaded = fp[2]
        if config == self.current:
            return None  # comments or layout only
        self.current = config
        return config

    def _read(self) -> tuple[Fingerprint, bytes]:
        try:
            with open(self.path, "rb") as f:
                st = os.fstat(f.fileno())
                raw = f.read()
        except OSError as exc:
            raise ConfigError(str(self.path), [("", f"cannot read the file: {exc.strerror or exc}")]) from None
        return (st.st_mtime_ns, st.st_size, hashlib.sha256(raw).hexdigest()), raw
