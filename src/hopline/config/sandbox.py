"""``sandbox:`` on a stdio backend: the permission profile its children run under (issue 35).

Data only: ``compose/gateway.py`` turns a :class:`SandboxConfig` into a
:class:`hopline.transports.confine.Profile`, which ``transports/confine.py`` translates into a
bubblewrap command line. A preset name alone is a shorthand (``sandbox: network-off``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from hopline.config.section import Loc, Section, raise_problems

MiB = 1024 * 1024
PRESETS = ("none", "network-off", "read-only")


def allow_problem(entry: str) -> str | None:
    """Why an ``allow`` entry is malformed (the rule itself: ``allowlist.py``), or None."""
    from hopline.allowlist import Rule

    try:
        Rule.parse(entry)
    except ValueError as exc:
        return str(exc)
    return None


class SandboxConfig(Section):
    """A permission profile for a `command` backend's children, enforced with bubblewrap (Linux)."""

    profile: Literal["none", "network-off", "read-only"] = Field(
        "network-off",
        description="Preset: `none` runs the child unconfined (as without `sandbox:`); `network-off`: a read-only view "
        "of the system and the command's runtime, the `read_write` paths writable, no network; `read-only`: the same "
        "view with nothing writable but the private temporary home, and the host's network.",
    )
    network: Literal["none", "host"] | None = Field(
        None,
        description="`none`: the child has its own network namespace with no interface but loopback (its own); "
        "`host`: hopline's network. Default: none for `network-off`, host for `read-only`.",
    )
    allow: list[str] = Field(
        default_factory=list,
        description="What the child may reach, with `network: none` (the default of `network-off`): `host` (ports 443 "
        "and 80), `host:port`, `*.domain[:port]` or an IP address (`[v6]` in brackets). The child's only way out is "
        "an HTTP CONNECT proxy hopline runs for it (HTTPS_PROXY is set inside): each tunnel's host and port must be "
        "listed, a name must resolve to public addresses only (loopback, private, link-local and cloud-metadata "
        "addresses are reachable only when listed as an address), and plain-http requests through the proxy are "
        "refused. Refusals are logged and counted in /status.",
    )
    read_only: list[str] = Field(
        default_factory=list,
        description="More paths visible read-only (files or directories; `~` is expanded, relative paths start at "
        "this file's directory). The system (/usr, the libraries, the parts of /etc programs need: certificates, "
        "resolver, passwd) and the command's runtime (the prefix of its interpreter, the `node_modules` tree of a "
        "script it runs) are visible without being named.",
    )
    read_write: list[str] = Field(
        default_factory=list,
        description="Paths visible and writable (they must exist). Not with profile `read-only`.",
    )
    memory: int | None = Field(
        2048,
        ge=64,
        description="Address space of each process in MiB (RLIMIT_AS); null: no limit. Allocations past it fail.",
    )
    processes: int | None = Field(
        512,
        ge=8,
        description="Processes and threads of the sandbox's user at once (RLIMIT_NPROC, counted per uid on the host: "
        "children of every backend with the same `uid` share it); null: no limit.",
    )
    cpu_seconds: int | None = Field(
        None, ge=1, description="CPU seconds per process (RLIMIT_CPU; the process is killed past it); null: no limit."
    )
    open_files: int | None = Field(1024, ge=16, description="Open files per process (RLIMIT_NOFILE); null: inherited.")
    tmp_size: int = Field(
        256, ge=1, description="Size in MiB of the private temporary home (a tmpfs at /tmp, also HOME and TMPDIR)."
    )
    uid: int = Field(
        65534,
        ge=1,
        le=2**31 - 2,
        description="User (and group) id the child runs as. hopline running as root: a real unprivileged id on the "
        "host (default: nobody); otherwise the id seen inside a user namespace mapped to hopline's own user.",
    )
    launcher: Literal["auto", "bubblewrap", "docker", "podman"] = Field(
        "auto",
        description="What enforces the profile: `auto` and `bubblewrap` use bwrap (Linux); `docker` and `podman` are "
        "not built yet (refused).",
    )

    def confines(self) -> bool:
        return self.profile != "none"

    def network_in_effect(self) -> Literal["none", "host"]:
        if self.network is not None:
            return self.network
        return "host" if self.profile == "read-only" else "none"

    @model_validator(mode="after")
    def _coherent(self) -> SandboxConfig:
        problems: list[tuple[Loc, str]] = []
        for i, entry in enumerate(self.allow):
            why = allow_problem(entry)
            if why:
                problems.append((("allow", i), why))
        if self.allow and self.network_in_effect() == "host":
            problems.append((("allow",), "an allow-list filters nothing on hopline's network: use `network: none`"))
        if self.launcher in ("docker", "podman"):
            problems.append(
                (("launcher",), f"the {self.launcher} launcher is not built yet; use `auto` (bubblewrap on Linux)")
            )
        if self.profile == "read-only" and self.read_write:
            problems.append((("read_write",), "profile `read-only` writes nowhere but its private home"))
        if self.profile == "network-off" and self.network == "host":
            problems.append((("network",), "profile `network-off` has no network; use profile `read-only`"))
        if self.profile == "none":
            set_here = sorted(k for k in self.model_fields_set if k != "profile")
            problems += [((k,), "profile `none` confines nothing: this setting would not apply") for k in set_here]
        raise_problems(problems)
        return self
