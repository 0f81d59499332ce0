"""From a backend's ``sandbox:`` (config/sandbox.py) to what its launcher needs (issue 35): the
resolved :class:`~hopline.transports.confine.Profile`, and the files a sandbox must never show
(the configuration file, the key files it names)."""

from __future__ import annotations

import os
from typing import Any

from hopline.config.sandbox import SandboxConfig
from hopline.config.schema import GatewayConfig
from hopline.transports.confine import MiB, Profile

_KEY_FIELDS = ("key", "cert")


def profile_for(sandbox: SandboxConfig | None, base_dir: str | None) -> Profile | None:
    """The profile a backend's children get; None when unconfined (no ``sandbox:``, or ``none``)."""
    if sandbox is None or not sandbox.confines():
        return None

    def where(path: str) -> str:
        path = os.path.expanduser(path)
        return os.path.normpath(os.path.join(base_dir or os.getcwd(), path))

    return Profile(
        name=sandbox.profile,
        network=sandbox.network_in_effect(),
        allow=tuple(sandbox.allow),
        read_only=tuple(where(p) for p in sandbox.read_only),
        read_write=tuple(where(p) for p in sandbox.read_write),
        memory=None if sandbox.memory is None else sandbox.memory * MiB,
        processes=sandbox.processes,
        cpu_seconds=sandbox.cpu_seconds,
        open_files=sandbox.open_files,
        tmp_size=sandbox.tmp_size * MiB,
        uid=sandbox.uid,
    )


def hidden_files(config: GatewayConfig) -> list[str]:
    """hopline's configuration file and every key or certificate file it names (``*_file``, ``key``, ``cert``)."""
    out = [config._source_file] if config._source_file else []
    base = config.base_dir or os.getcwd()

    def walk(node: Any, name: str = "") -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, str(key))
        elif isinstance(node, list):
            for value in node:
                walk(value, name)
        elif isinstance(node, str) and (name.endswith("_file") or name in _KEY_FIELDS) and "\n" not in node:
            out.append(os.path.normpath(os.path.join(base, os.path.expanduser(node))))

    walk(config.model_dump(exclude={"backends"}))
    return out


def describe(config: GatewayConfig, backend_id: str) -> str:
    """``hopline check``'s line for a `command` backend: its profile and launcher, or unconfined."""
    spec = config.backends[backend_id]
    profile = profile_for(spec.sandbox, config.base_dir)
    if profile is None:
        return "none (unconfined: hopline's user, filesystem and network)"
    return profile.summary()


def unenforceable(config: GatewayConfig) -> list[tuple[str, str]]:
    """(backend id, why) for each enabled backend whose profile cannot be enforced on this host: the
    tool or kernel feature missing, found as ``serve`` would find it (the launcher's probe)."""
    import asyncio

    from dataclasses import replace

    from hopline.transports.egress import system_python
    from hopline.transports.launcher import SandboxUnavailable, probe, survey

    out = []
    for bid, spec in config.backends.items():
        profile = profile_for(spec.sandbox, config.base_dir) if spec.enabled and spec.command else None
        if profile is None:
            continue
        try:
            host = survey([spec.command or "", *spec.args], path=os.environ.get("PATH"), cwd=spec.cwd)
            if profile.allow and system_python() is None:
                raise SandboxUnavailable("an allow-list needs the system's python3 (/usr/bin/python3)")
            asyncio.run(probe(replace(profile, allow=()), host))  # the namespaces; the proxy starts with serve
        except SandboxUnavailable as exc:
            out.append((bid, str(exc)))
    return out
