"""A stdio backend's permission profile as a command line: bubblewrap, rlimits, an unprivileged uid (issue 35).

Pure: :func:`command_line` turns a :class:`Profile`, the backend's argv and a :class:`Host` (what
``transports/launcher.py`` found on this machine: which system paths exist, the command's
runtime, the files to hide, whether hopline is root) into the argv to execute. Nothing here
reads the filesystem or starts a process, so every translation is tested as data.

The command line, outermost first:

- ``prlimit --as --nproc --cpu --nofile --``: the rlimits (no cgroup v2 controller is assumed;
  rlimits are inherited by everything the child starts);
- ``bwrap``: its own PID, IPC and UTS namespaces (and network, for ``network: none``), a new
  session (no TIOCSTI into hopline's terminal), killed when hopline dies, no new privileges
  (bwrap always sets it); the filesystem is a read-only view of the system and of the command's
  runtime, the operator's ``read_only`` / ``read_write`` paths, and a private tmpfs at /tmp that is
  also HOME and TMPDIR; hopline's configuration and key files are masked where a bound path
  would show them; everything else (hopline's home, its working directory, /root, /etc/shadow)
  does not exist inside;
- the uid: hopline running as root runs bwrap without a user namespace (mounts need no
  mapping), keeps CAP_SETUID/CAP_SETGID for ``setpriv`` only, which drops to ``uid`` with no
  capabilities left: a real unprivileged uid on the host, so RLIMIT_NPROC holds (root is exempt
  from it) and files hopline's user owns stay closed. Unprivileged hopline: a user namespace
  mapping ``uid`` to hopline's own user, further user namespaces disabled.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Any, Sequence

from hopline.transports.egress import SOCKET_DIR, proxy_env, shim_line

MiB = 1024 * 1024
HOME = "/tmp"  # the private temporary home: a tmpfs, also TMPDIR

#: The system, visible read-only (on merged-/usr systems /bin, /lib... are symlinks, recreated as such).
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: What programs read in /etc (dynamic linker, TLS roots, name resolution, users, time zone). Never
#: /etc/shadow, /etc/gshadow, /etc/sudoers, ssh host keys.
ETC = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/ca-certificates.conf",
    "/etc/pki",
    "/etc/crypto-policies",
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/nsswitch.conf",
    "/etc/gai.conf",
    "/etc/protocols",
    "/etc/services",
    "/etc/passwd",
    "/etc/group",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/mime.types",
    "/etc/os-release",
)
#: Variables that point into the operator's home: the child gets its private one instead.
UNSET = ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR", "OLDPWD")


@dataclass(frozen=True)
class Profile:
    """A resolved permission profile (``config/sandbox.py`` is where it is written)."""

    name: str = "network-off"  # the preset it started from
    network: str = "none"  # "none" | "host"
    allow: tuple[str, ...] = ()  # with network "none": what its egress proxy lets through (allowlist.py)
    read_only: tuple[str, ...] = ()  # absolute paths
    read_write: tuple[str, ...] = ()
    memory: int | None = 2048 * MiB  # bytes of address space (RLIMIT_AS)
    processes: int | None = 512  # RLIMIT_NPROC
    cpu_seconds: int | None = None  # RLIMIT_CPU
    open_files: int | None = 1024  # RLIMIT_NOFILE
    tmp_size: int = 256 * MiB
    uid: int = 65534
    launcher: str = "bubblewrap"

    def describe(self) -> dict[str, Any]:
        """What /status, the admin page and ``hopline declare`` show (paths are the operator's: no secrets)."""
        return {
            "profile": self.name,
            "launcher": self.launcher,
            "network": self.network,
            "allow": list(self.allow),
            "read_only": list(self.read_only),
            "read_write": list(self.read_write),
            "memory_mib": None if self.memory is None else self.memory // MiB,
            "processes": self.processes,
            "cpu_seconds": self.cpu_seconds,
            "open_files": self.open_files,
            "uid": self.uid,
            "pid_namespace": True,
            "no_new_privileges": True,
            "home": f"private tmpfs {self.tmp_size // MiB} MiB",
        }

    def summary(self) -> str:
        """One line: ``hopline check`` and logs."""
        limits = [
            f"memory {self.memory // MiB} MiB" if self.memory else "memory unlimited",
            f"{self.processes} processes" if self.processes else "processes unlimited",
        ]
        if self.cpu_seconds:
            limits.append(f"{self.cpu_seconds} CPU s")
        fs = f"read-only system + runtime, {len(self.read_only)} read-only path(s), {len(self.read_write)} writable"
        net = "host network" if self.network == "host" else "no network"
        if self.allow:
            net = f"no network but an egress proxy to {len(self.allow)} allowed destination(s)"
        return f"{self.name} via {self.launcher} (uid {self.uid}; {net}; {fs}; {', '.join(limits)})"


@dataclass(frozen=True)
class Host:
    """What the launcher found on this machine (``transports/launcher.py`` :func:`survey`)."""

    bwrap: str = "/usr/bin/bwrap"
    prlimit: str = "/usr/bin/prlimit"
    setpriv: str = "/usr/bin/setpriv"
    root: bool = True  # hopline's effective uid is 0
    present: frozenset[str] = frozenset()  # entries of SYSTEM and ETC that exist
    links: dict[str, str] = field(default_factory=dict)  # entries of SYSTEM that are symlinks -> their target
    runtime: tuple[str, ...] = ()  # what the command needs besides the system (see :func:`runtime_roots`)
    hidden: tuple[str, ...] = ()  # hopline's configuration and key files
    egress: str | None = None  # the directory of the backend's egress proxy socket (``transports/egress.py``)
    python: str | None = None  # the system interpreter that runs the egress shim inside


def runtime_roots(paths: Sequence[str]) -> list[str]:
    """The directories (or files) to make visible for the command's own files ``paths`` (the command
    as found on PATH and its real path, its interpreter, script arguments): the outermost
    ``node_modules`` tree holding one; the prefix of an executable in a ``bin`` directory (a
    virtualenv, a pyenv or node install); else the file itself. Paths under the system are skipped."""
    out: list[str] = []
    for path in paths:
        path = posixpath.normpath(path)
        if _under(path, SYSTEM):
            continue
        parts = path.split("/")
        if "node_modules" in parts:
            root = "/".join(parts[: parts.index("node_modules") + 1])
        elif len(parts) > 2 and parts[-2] == "bin":
            root = "/".join(parts[:-2]) or "/"
        else:
            root = path
        if root != "/" and root not in out:
            out.append(root)
    return out


def command_line(profile: Profile, argv: Sequence[str], host: Host, *, cwd: str | None = None) -> list[str]:
    """The argv that runs ``argv`` confined by ``profile`` (see the module's docstring)."""
    out = [host.prlimit, *_rlimits(profile), "--", host.bwrap, *bwrap_options(profile, host, cwd=cwd), "--"]
    if host.root:
        out += [host.setpriv, f"--reuid={profile.uid}", f"--regid={profile.uid}", "--clear-groups"]
        out += ["--inh-caps=-all", "--bounding-set=-all", "--"]
    if profile.allow and profile.network == "none":
        if host.egress is None or host.python is None:
            raise ValueError("an allow-list needs the egress proxy's socket directory and a system python")
        return out + shim_line(host.python, argv)
    return out + list(argv)


def probe_line(profile: Profile, host: Host) -> list[str]:
    """The same namespaces and uid switch around ``true``: run once before the first child, so a
    missing kernel feature is reported by name instead of as a backend that exits at once."""
    return command_line(profile, ["true"], Host(**{**host.__dict__, "runtime": (), "hidden": ()}))


def _rlimits(profile: Profile) -> list[str]:
    out = []
    for flag, value in (
        ("--as", profile.memory),
        ("--nproc", profile.processes),
        # CPU: SIGXCPU at the limit (a denial /status can name), SIGKILL a second later if it is ignored
        ("--cpu", None if profile.cpu_seconds is None else f"{profile.cpu_seconds}:{profile.cpu_seconds + 1}"),
        ("--nofile", profile.open_files),
    ):
        if value is not None:
            out.append(f"{flag}={value}")
    return out


def bwrap_options(profile: Profile, host: Host, *, cwd: str | None = None) -> list[str]:
    opts = ["--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    opts += ["--unshare-cgroup-try", "--hostname", "sandbox"]
    if profile.network == "none":
        opts.append("--unshare-net")
    if host.root:
        # No user namespace: bwrap (root) mounts, setpriv drops to the uid with these two only.
        opts += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        opts += ["--unshare-user", "--uid", str(profile.uid), "--gid", str(profile.uid), "--disable-userns"]
    for path in SYSTEM:
        if path in host.links:
            opts += ["--symlink", host.links[path], path]
        elif path in host.present:
            opts += ["--ro-bind", path, path]
    opts += ["--proc", "/proc", "--dev", "/dev"]
    opts += ["--perms", "1777", "--size", str(profile.tmp_size), "--tmpfs", HOME]
    etc = [p for p in ETC if p in host.present]
    visible = [*etc, *host.runtime, *profile.read_only, *([cwd] if cwd else []), *profile.read_write]
    # The directories leading to each path, searchable by the uid (bwrap would create them 0700 as root).
    for parent in sorted({a for p in visible if not _under(p, SYSTEM) for a in _ancestors(p)}):
        if not _under(parent, SYSTEM) and parent != HOME:
            opts += ["--perms", "0755", "--dir", parent]
    for path in etc:
        opts += ["--ro-bind", path, path]
    shown: list[str] = []
    writable = set(profile.read_write)
    for path in [*host.runtime, *profile.read_only, *([cwd] if cwd else [])]:
        if path not in shown and path not in writable and not _under(path, SYSTEM):
            opts += ["--ro-bind", path, path]
            shown.append(path)
    for path in profile.read_write:
        opts += ["--bind", path, path]
        shown.append(path)
    # Masks last: a bound tree that holds hopline's configuration or a key file shows an empty file there.
    for secret in host.hidden:
        if any(secret == p or secret.startswith(p.rstrip("/") + "/") for p in shown):
            opts += ["--ro-bind", "/dev/null", secret]
    if profile.allow and profile.network == "none" and host.egress is not None:
        opts += ["--perms", "0755", "--dir", posixpath.dirname(SOCKET_DIR), "--ro-bind", host.egress, SOCKET_DIR]
        for name, value in proxy_env().items():
            opts += ["--setenv", name, value]
    opts += ["--setenv", "HOME", HOME, "--setenv", "TMPDIR", HOME]
    for name in UNSET:
        opts += ["--unsetenv", name]
    opts += ["--chdir", cwd or HOME]
    return opts


def _ancestors(path: str) -> list[str]:
    parts = path.rstrip("/").split("/")
    return ["/".join(parts[:i]) for i in range(2, len(parts))]


def _under(path: str, roots: Sequence[str]) -> bool:
    return any(path == r or path.startswith(r + "/") for r in roots)
