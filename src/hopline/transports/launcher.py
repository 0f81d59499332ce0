"""Starting a stdio child under its permission profile: what the host has, a probe, then the spawn (issue 35).

:func:`survey` looks at this machine (the tools, which system paths exist, the command's runtime:
its path on PATH and real path, a script's interpreter, script arguments) into a
:class:`~hopline.transports.confine.Host`; :class:`Launcher` probes the profile's namespaces
once (``true`` run the same way) and spawns every child through
:func:`hopline.transports.confine.command_line`. When a profile was asked for and cannot be
enforced (not Linux, bwrap or util-linux missing, namespaces refused by the kernel), starting
the child fails with :class:`ChannelClosed` naming what is missing: never an unconfined start.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import shutil
import signal
import sys
import time
from dataclasses import replace
from typing import Any, Sequence

from hopline.allowlist import parse

from hopline.layers.transport.channel import ChannelClosed
from hopline.transports.confine import ETC, SYSTEM, Host, Profile, command_line, probe_line, runtime_roots
from hopline.transports.egress import EgressProxy, system_python

PROBE_TIMEOUT = 10.0
MAX_DENIALS = 10  # the latest kept per backend for /status

log = logging.getLogger("hopline.sandbox")


class SandboxUnavailable(Exception):
    """The profile cannot be enforced here; the message names the missing tool or kernel feature."""


def survey(argv: Sequence[str], *, path: str | None, cwd: str | None = None, hidden: Sequence[str] = ()) -> Host:
    """What :func:`~hopline.transports.confine.command_line` needs to know of this host for ``argv``.
    Raises :class:`SandboxUnavailable` when a tool is missing."""
    if not sys.platform.startswith("linux"):
        raise SandboxUnavailable(f"a sandbox profile needs Linux (bubblewrap); this is {sys.platform}")
    tools = {}
    for tool, package in (("bwrap", "bubblewrap"), ("prlimit", "util-linux"), ("setpriv", "util-linux")):
        found = shutil.which(tool, path=os.environ.get("PATH", os.defpath))  # hopline's PATH, as for its commands
        if found is None:
            raise SandboxUnavailable(f"{tool} not found (install the {package} package)")
        tools[tool] = found
    present = frozenset(p for p in (*SYSTEM, *ETC) if os.path.lexists(p))
    links = {p: os.readlink(p) for p in SYSTEM if os.path.islink(p)}
    return Host(
        bwrap=tools["bwrap"],
        prlimit=tools["prlimit"],
        setpriv=tools["setpriv"],
        root=os.geteuid() == 0,
        present=present,
        links=links,
        runtime=tuple(runtime_roots(_own_files(argv, path, cwd))),
        hidden=tuple(os.path.abspath(h) for h in hidden),
    )


def _own_files(argv: Sequence[str], path: str | None, cwd: str | None) -> list[str]:
    """The command as found on ``path`` and its real path, the interpreter its ``#!`` line
    names, and each argument that names an existing file (a script)."""
    base = cwd or os.getcwd()
    out: list[str] = []
    command = argv[0] if os.sep in argv[0] else shutil.which(argv[0], path=path)
    if command is not None:
        command = os.path.join(base, command)
        out += [os.path.abspath(command), os.path.realpath(command)]
        interpreter = _shebang(os.path.realpath(command))
        if interpreter:
            found = shutil.which(interpreter, path=path) if os.sep not in interpreter else interpreter
            if found:
                out += [os.path.abspath(found), os.path.realpath(found)]
    for arg in argv[1:]:
        if arg.startswith("-") or "\0" in arg:
            continue
        candidate = os.path.join(base, arg)
        if os.path.isfile(candidate):
            out += [os.path.abspath(candidate), os.path.realpath(candidate)]
    return out


def absolute_args(argv: Sequence[str], cwd: str | None) -> list[str]:
    """``argv`` with each argument that names an existing file by a relative path made absolute: inside
    the sandbox the child starts in ``cwd`` if one is set, else in its private home."""
    base = cwd or os.getcwd()
    out = list(argv)
    for i, arg in enumerate(out):
        if i and not os.path.isabs(arg) and not arg.startswith("-") and "\0" not in arg:
            candidate = os.path.join(base, arg)
            if os.path.isfile(candidate):
                out[i] = os.path.abspath(candidate)
    if os.sep in out[0] and not os.path.isabs(out[0]):
        out[0] = os.path.abspath(os.path.join(base, out[0]))
    return out


def _shebang(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            head = f.read(256)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
    if not words:
        return None
    if os.path.basename(words[0]) == "env":
        rest = [w for w in words[1:] if not w.startswith("-")]
        return rest[0] if rest else None
    return words[0]


class Launcher:
    """Spawns one backend's children under ``profile`` (the probe runs before the first)."""

    def __init__(
        self,
        profile: Profile,
        argv: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        hidden: Sequence[str] = (),
        name: str | None = None,
    ) -> None:
        self.profile = profile
        self.cwd = os.path.abspath(cwd) if cwd else None
        self.argv = absolute_args(argv, self.cwd)
        self.env, self.hidden, self.name = env, tuple(hidden), name
        self._line: list[str] | None = None
        self._lock = asyncio.Lock()
        self.problem: str | None = None  # why the profile cannot be enforced, once known
        self.egress: EgressProxy | None = None  # the allow-list's proxy (started with the first child)
        self.denials: collections.deque[dict[str, Any]] = collections.deque(maxlen=MAX_DENIALS)  # the latest
        self.denied = 0  # children that ended on a limit or a refusal of the profile, since start
        self._watching: set[asyncio.Task[None]] = set()  # one per live child: its exit, read for a denial
        if profile.allow and profile.network == "none":
            self.egress = EgressProxy(parse(profile.allow), name=name or self.argv[0])

    def describe(self) -> dict[str, Any]:
        out = self.profile.describe()
        if self.egress is not None:
            out["egress"] = self.egress.describe()
        out["denied"], out["denials"] = self.denied, list(self.denials)
        if self.problem:
            out["problem"] = self.problem
        return out

    async def aclose(self) -> None:
        for task in list(self._watching):
            task.cancel()
        if self._watching:
            await asyncio.gather(*self._watching, return_exceptions=True)
        if self.egress is not None:
            await self.egress.aclose()

    async def command_line(self) -> list[str]:
        if self._line is not None:
            return self._line
        async with self._lock:
            if self._line is None:
                try:
                    host = survey(
                        self.argv,
                        path=(self.env or {}).get("PATH", os.environ.get("PATH")),
                        cwd=self.cwd,
                        hidden=self.hidden,
                    )
                    if self.egress is not None:
                        python = system_python()
                        if python is None:
                            raise SandboxUnavailable("an allow-list needs the system's python3 (/usr/bin/python3)")
                        host = replace(host, egress=await self.egress.start(), python=python)
                    await probe(self.profile, host)
                except SandboxUnavailable as exc:
                    self.problem = str(exc)
                    raise ChannelClosed(
                        f"{self.name or self.argv[0]}: sandbox profile {self.profile.name!r} cannot be enforced, "
                        f"the backend is not started: {exc}"
                    ) from None
                self.problem = None
                self._line = command_line(self.profile, self.argv, host, cwd=self.cwd)
        return self._line

    async def spawn(self, **kw: Any) -> Any:
        from hopline.transports.stdio import StdioChild

        line = await self.command_line()
        child = await StdioChild.spawn(line, env=self.env, cwd=None, name=self.name, **kw)
        task = asyncio.create_task(self._watch(child), name=f"sandbox-exit-{child.process.pid}")
        self._watching.add(task)
        task.add_done_callback(self._watching.discard)
        return child

    async def _watch(self, child: Any) -> None:
        """Read a child's exit for a denial: a limit it hit, or what the profile refused it (its stderr's tail)."""
        code = await child.process.wait()
        if child._stderr_task is not None:  # the rest of what it said
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(child._stderr_task), 1.0)
        said = list(child.stderr_tail)
        what = denial(code, said)
        if what is None:
            return
        self.denied += 1
        entry = {"at": round(time.time(), 3), "pid": child.process.pid, "status": code, "denial": what}
        if said:
            entry["said"] = said[-1]  # quoted and redacted as the child's stderr always is
        self.denials.append(entry)
        log.warning("backend %s: child %s ended: %s (status %s)", self.name, child.process.pid, what, code)


def denial(code: int | None, said: Sequence[str]) -> str | None:
    """What a sandboxed child's exit says it was denied, or None: a signal a limit sends (CPU time, file
    size), or, for a failed exit, what its last stderr lines name (memory, processes, files, network)."""
    if code is None:
        return None
    sig = -code if code < 0 else code - 128 if code > 128 else None
    if sig == signal.SIGXCPU:
        return "CPU time limit reached (cpu_seconds)"
    if sig == signal.SIGXFSZ:
        return "file size limit reached"
    if code == 0:
        return None
    text = " ".join(said).lower()
    for what, marks in _DENIALS:
        if any(mark in text for mark in marks):
            return what
    return None


_DENIALS = (
    ("memory limit reached (memory)", ("memoryerror", "cannot allocate memory", "out of memory", "enomem")),
    (
        "process limit reached (processes)",
        ("resource temporarily unavailable", "eagain", "can't start new thread", "uv_thread_create", "cannot fork"),
    ),
    ("a file the profile does not allow", ("read-only file system", "erofs", "permission denied", "eacces")),
    (
        "network the profile does not allow",
        ("network is unreachable", "enetunreach", "temporary failure in name resolution", "eai_again"),
    ),
)


async def probe(profile: Profile, host: Host) -> None:
    """Run ``true`` in the profile's namespaces; :class:`SandboxUnavailable` with bwrap's reason if it fails."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *probe_line(profile, host),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            env={"PATH": "/usr/bin:/bin"},
        )
    except OSError as exc:
        raise SandboxUnavailable(f"cannot run {host.bwrap}: {exc.strerror}") from None
    try:
        _, err = await asyncio.wait_for(proc.communicate(), PROBE_TIMEOUT)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        raise SandboxUnavailable(f"bwrap did not finish a probe in {PROBE_TIMEOUT:g}s") from None
    if proc.returncode != 0:
        reason = err.decode("utf-8", "replace").strip().splitlines()
        raise SandboxUnavailable(
            (reason[-1] if reason else f"bwrap exited with status {proc.returncode}")
            + " (bubblewrap needs user namespaces, or hopline running as root)"
        )
