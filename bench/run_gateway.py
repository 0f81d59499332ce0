"""Gateway benchmark (issue 3): `hopline serve` vs talking to the server directly vs FastMCP's proxy.

    . .venv/bin/activate
    python bench/run_gateway.py --quick                    # all three parts, a few minutes on 2 cores
    python bench/run_gateway.py                            # longer windows, more lists and rounds
    python bench/run_gateway.py --parts calls --targets direct,hopline -c 1,16 --rounds 4
    python bench/run_gateway.py --parts lists,sessions --no-install
    python bench/run_gateway.py --parts calls --targets direct,hopline,hopline-policy,hopline-policy-audit \
        -c 1,16 --eras legacy,2026 --rounds 2 --duration 3 --no-install   # issue 5: what auth + policy add
    python bench/run_gateway.py --parts calls --targets direct,hopline,hopline-transparent,hopline-transparent-l2 --quick
    ip netns add B && ip netns exec B ip link set lo up && ip netns exec B python bench/run_gateway.py --parts calls \
        --targets direct,hopline-transparent,hopline-transparent-redirected,hopline-transparent-socket --quick  # issue 17
    python bench/run_gateway.py --parts calls --targets direct,hopline,fastmcp,hopline-relay-stdio -c 1,16 --quick --backend-sse   # issue 14

Three parts (``--parts calls,lists,sessions``):

1. **calls**: proxied ``tools/call``, HTTP→HTTP. One backend, the SDK echo server over Streamable
   HTTP (bench/echo_server.py http, stateful, JSON responses). Targets: ``direct`` (that
   backend), ``hopline`` (``hopline serve`` with one ``url`` backend ``e``, so the tool is
   ``e__echo``; a backend session per client session), ``hopline-shared`` (the same backend
   marked ``stateless: true``: one backend session for every client), ``fastmcp`` (FastMCP's
   proxy holding one connected backend session), ``fastmcp-fresh`` (``create_proxy(url)``, its
   default: a new backend session per request; c=1 only), and the reference row ``hopline-stdio``
   (not HTTP→HTTP: the same echo server as one shared stdio child, which isolates what the HTTP
   upstream costs the gateway). Issue 5's targets: ``hopline-policy`` (the ``hopline`` backend plus
   an ``auth:`` section validating a bearer JWT with a static key, HS256 with the secret in the
   environment or ``--jwt-alg RS256`` with a PEM written to the logs folder, and a ``policy:`` of
   ten CEL allow rules over ``jwt.*`` and ``mcp.*``, see POLICY_RULES) and
   ``hopline-policy-audit`` (the same plus ``policy.audit`` to a JSON-lines file in the logs
   folder). The bench mints one token (BENCH_CLAIMS; ``aud`` = the configured resource, ``iss``
   = the configured issuer, ``exp`` a day away) and loadgen sends it as ``Authorization:
   Bearer`` on every request (``--header``). Before measuring, each is checked to refuse a
   request without a token (401) and a caller whose claims no rule allows (the tool is
   unknown to it). Reported: gateway CPU-ms per call added over ``hopline`` per (era, c), from
   the pooled rounds and per round (the rounds are paired: same loadgen window order), vs the
   issue's 0.15 ms, and the ratio. Transparent mode: ``hopline-transparent`` (``mode: transparent``,
   awareness level 1: requests streamed to the echo backend unread) and ``hopline-transparent-l2``
   (level 2: a Reverse-mode gateway for the destination, dual-handshaken, every layer); the one
   destination is hopline's own ``127.0.0.1:port``, since loadgen sends that as ``Host`` (standing
   in for DNS or L7 interception), and the tool keeps its name, ``echo``. A table puts them (and
   ``hopline``) against ``direct`` of the same run. Issue 17, run as root under ``ip netns exec``:
   ``hopline-transparent-socket`` (level 1, ``destination: socket``: loadgen dials an address an
   iptables REDIRECT in the namespace sends to hopline, which reads it back with SO_ORIGINAL_DST) and
   ``hopline-transparent-redirected`` (the same REDIRECT, ``destination: host``: the NAT's share). Interleaved rounds per (era, c); the
   load generator is bench/loadgen.py with ``--tool``. CPU and RSS from /proc, as in
   run_relay.py: the gateway's process tree, and the backend's, separately.
2. **lists**: an aggregated ``tools/list`` of 10 backends × 50 tools (bench/gateway_backend.py,
   stdio). One session; the first (cold) list, then ``--lists`` sequential warm lists; then
   ``b0 grow`` (the backend adds a tool and sends ``notifications/tools/list_changed``) and the
   next list, which must show the new tool; then cold lists on fresh sessions; for hopline also
   the 2026-07-28 era (shared backend sessions). CPU per list from
   ``/proc/<pid>/task/*/schedstat`` (ns), cross-checked with ``/proc/<pid>/stat`` ticks.
3. **sessions**: gateway memory per client session. ``--sessions`` (1,000) handshake-era sessions
   (initialize + initialized, then kept) on a gateway whose one backend is ``stateless: true``;
   VmRSS before and after, then after one ``tools/call`` on every session (proof they are
   alive), then after DELETE. Also the default isolated backends: a stdio one with
   ``--isolated-sessions`` (50) sessions (a backend process each: the gateway's own RSS is
   reported, the backends' separately) and a Streamable HTTP one with ``--sessions`` sessions;
   and FastMCP's proxy with the same sessions, for comparison.

Issue 14: ``--backend-sse`` runs the echo backend with the SDK's default SSE responses (the SDK
answers 2026-07-28 requests with JSON either way); the target ``hopline-relay-stdio`` is
``hopline relay --stdio <backend URL>`` driven over its stdin/stdout by bench/stdio_floor.py
(``--command``; the relay's CPU is the gateway column); verdicts for issue 14's targets follow
the issue 3 ones (CPU as the median of the c=1 and c=16 cells).

FastMCP (PyPI ``fastmcp``, default 4.2.3) is installed on first use into its own venv,
bench/.fastmcp-venv, every other package pinned by bench/fastmcp-constraints.txt: it requires
mcp 2.3.0 like the project, but it must not go into the project venv, and bench/.peers-venv
holds mcp-proxy, which pins mcp<2. ``--no-install`` skips it.
Markdown tables are printed; ``bench/results/gateway-<time>.json`` and ``.md`` are written.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
RESULTS = BENCH / "results"
PY = sys.executable
ECHO = str(BENCH / "echo_server.py")
TOOLS_BACKEND = str(BENCH / "gateway_backend.py")
LOADGEN = str(BENCH / "loadgen.py")
FASTMCP_VENV = BENCH / ".fastmcp-venv"
FASTMCP_VERSION = "4.2.3"
FASTMCP_RUNNER = str(BENCH / "fastmcp_proxy.py")
# Every other package of bench/.fastmcp-venv, pinned (pip freeze of a fastmcp 4.2.3 install,
# less fastmcp and fastmcp-slim, which --fastmcp-version pins): an install is the same each time.
FASTMCP_CONSTRAINTS = BENCH / "fastmcp-constraints.txt"
STDIO_DRIVER = str(BENCH / "stdio_floor.py")
FLOOR = str(BENCH / "floor_relay.py")

sys.path.insert(0, str(BENCH))
import loadgen  # noqa: E402
import run_relay as rr  # noqa: E402  (the /proc accounting, aggregation and helpers)

CLK_TCK = rr.CLK_TCK
log = rr.log
fmt = rr.fmt

# Issue 3's targets
TARGET_CALL_CPU_MS = 0.5
TARGET_ADDED_P50_MS = 0.5
TARGET_FASTMCP_CALL_X = 10.0
TARGET_LIST_CPU_MS = 10.0
TARGET_FASTMCP_LIST_X = 15.0
TARGET_SESSION_KB = 50.0
# Issue 14's targets: gateway CPU per proxied call (the median of c=1 and c=16), added p50,
# FastMCP's shared-session proxy ÷ hopline, and the stdio→HTTP relay's CPU per call.
TARGET14_CALL_CPU_MS = 0.35
TARGET14_ADDED_P50_MS = 0.3
TARGET14_FASTMCP_X = 15.0
TARGET14_RELAY_CPU_MS = 0.2
RELAY_STDIO = "hopline-relay-stdio"
# What the issue measured for FastMCP before hopline existed (CPU-ms)
ISSUE_FASTMCP_CALL_KEEP = (5.3, 5.7)
ISSUE_FASTMCP_CALL_FRESH = (40, 46)
ISSUE_FASTMCP_LIST = (170, 510)
# Issue 5's target: per-request CPU added by a JWT and a ten-rule CEL policy over the plain gateway
TARGET_POLICY_ADDED_CPU_MS = 0.15
POLICY_TARGETS = ("hopline-policy", "hopline-policy-audit")
# Transparent mode (interception stood in for by the Host header): level 1 and level 2
SOCKET_TARGETS = ("hopline-transparent-socket", "hopline-transparent-redirected")
TRANSPARENT_TARGETS = ("hopline-transparent", "hopline-transparent-l2", *SOCKET_TARGETS)
POLICY_ISSUER = "https://login.bench.example"
JWT_SECRET_ENV = "HOPLINE_BENCH_JWT_SECRET"
# Ten allow rules of the kind a deployment has: roles, groups, tenants, backends, tool-name lists.
# The bench identity (BENCH_CLAIMS) is allowed e__echo by the LAST rule only, so a decision that
# is not cached yet runs every rule that applies to tools.
POLICY_RULES = [
    {"name": "admins", "expr": 'has(jwt.roles) && "admin" in jwt.roles'},
    {"name": "sre-ops", "expr": 'mcp.backend in ["ops", "k8s"] && has(jwt.groups) && "sre" in jwt.groups'},
    {"name": "finance-billing", "expr": 'mcp.backend == "billing" && has(jwt.roles) && jwt.roles.exists(r, r in ["finance", "billing-admin"])'},
    {"name": "devs-github", "expr": 'mcp.backend == "github" && has(jwt.groups) && "dev" in jwt.groups && !(mcp.tool.name in ["delete_repo", "transfer_repo"])'},
    {"name": "tenant-backends", "expr": 'has(jwt.tenant) && mcp.backend.startsWith(jwt.tenant + "-")'},
    {"name": "read-only-tools", "expr": 'mcp.tool.name.matches("^(get|list|search)_") && has(jwt.scope) && jwt.scope.contains("tools:read")'},
    {"name": "staff-docs", "expr": 'mcp.backend == "docs" && has(jwt.email) && jwt.email.endsWith("@example.com")'},
    {"name": "shared-prompts", "expr": 'mcp.kind == "prompt" && mcp.prompt.name in ["summarize", "review", "triage"]'},
    {"name": "resources", "expr": 'mcp.kind == "resource" || mcp.kind == "resourceTemplate"'},
    {"name": "eng-echo", "expr": 'mcp.backend == "e" && mcp.method == "tools/call" && mcp.tool.name in ["echo", "ping", "time"] && has(jwt.groups) && jwt.groups.exists(g, g in ["eng", "qa"])'},
]
BENCH_CLAIMS = {
    "sub": "bench-user", "client_id": "hopline-bench", "scope": "mcp tools:call", "roles": ["developer"],
    "groups": ["eng", "bench"], "tenant": "acme", "email": "bench@example.com",
}  # fmt: skip
OUTSIDER_CLAIMS = {"sub": "outsider", "scope": "mcp", "roles": ["viewer"], "groups": ["sales"], "tenant": "globex", "email": "o@example.org"}

BACKEND_SCRIPTS = ("echo_server.py", "gateway_backend.py")


def is_backend_cmd(argv: list[str]) -> bool:
    """A process running one of the benchmark's MCP servers (not a shell that mentions it)."""
    if not argv:
        return False
    return os.path.basename(argv[0]).startswith("python") and any(a.endswith(BACKEND_SCRIPTS) for a in argv[1:3])


rr.is_backend_cmd = is_backend_cmd  # snapshot_tree looks it up at call time


# --------------------------------------------------------------------------- /proc helpers


def tree_pids(root: int) -> tuple[list[int], list[int]]:
    """(gateway pids, backend pids) in root's process tree."""
    gw, be = [], []
    for p in rr.snapshot_tree(root).values():
        (be if p.role == "backend" else gw).append(p.pid)
    return gw, be


def cpu_ns(pids: list[int]) -> int:
    """Nanoseconds on CPU, summed over every live thread of ``pids`` (schedstat)."""
    total = 0
    for pid in pids:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                pass
    return total


def cpu_ticks(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        st = rr.read_stat(pid)
        if st:
            total += st[1]
    return total


class CpuMeter:
    """CPU of a fixed set of processes between start() and stop(), in ms: schedstat (ns
    resolution, live threads) and /proc/<pid>/stat ticks (10 ms resolution, incl. dead threads)."""

    def __init__(self, pids: list[int]):
        self.pids = list(pids)

    def start(self) -> None:
        self.ns0, self.t0 = cpu_ns(self.pids), cpu_ticks(self.pids)

    def stop(self) -> dict:
        ns, t = cpu_ns(self.pids), cpu_ticks(self.pids)
        return {"cpu_ms": (ns - self.ns0) / 1e6, "cpu_ms_ticks": (t - self.t0) * 1000 / CLK_TCK}


def rss_kb(pid: int) -> int:
    return rr.read_vmrss_kb(pid) or 0


# --------------------------------------------------------------------------- processes


@dataclass
class Server:
    name: str
    cmd: list[str]
    url: str = ""
    port: int = 0
    proc: subprocess.Popen | None = None
    log_path: Path | None = None
    version: str = ""
    note: str = ""
    tool: str = "echo"  # the echo tool's exposed name
    sep: str = "__"  # backend-id separator of composed names (lists part)
    modern: bool = True  # serves the 2026-07-28 era
    slow: bool = False  # a backend session per request: c=1 only, fewer lists
    skip: str | None = None
    env: dict[str, str] = field(default_factory=dict)  # extra environment (--hopline-env)
    headers: list[str] = field(default_factory=list)  # 'Name: value' on every request (loadgen --header)
    stdio: list[str] | None = None  # a stdio server driven by bench/stdio_floor.py (its child), not an HTTP one

    @property
    def pid(self) -> int:
        return self.proc.pid if self.proc else 0


def start(s: Server, logdir: Path) -> None:
    s.log_path = logdir / f"{s.name}.log"
    env = {**os.environ, **s.env} if s.env else None
    with open(s.log_path, "ab") as f:
        s.proc = subprocess.Popen(s.cmd, cwd=REPO, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT, start_new_session=True, env=env)


def stop(s: Server) -> None:
    t = rr.Target(s.name)
    t.proc = s.proc
    rr.stop_target(t)
    s.proc = None


def wait_port(s: Server, timeout: float) -> str | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if s.proc.poll() is not None:
            return f"exited with code {s.proc.returncode} (see {s.log_path})"
        try:
            with socket.create_connection(("127.0.0.1", s.port), timeout=0.5):
                return None
        except OSError:
            time.sleep(0.1)
    return f"port {s.port} not open after {timeout:.0f}s (see {s.log_path})"


async def _probe_call(url: str, tool: str, era: str = "legacy", headers: list[str] | tuple = ()) -> tuple[bool, str]:
    stats = loadgen.Stats()
    cl = loadgen.Client(0, url, era, stats, 32, tool, [loadgen.parse_header(h) for h in headers])
    try:
        await asyncio.wait_for(cl.conn.connect(), 2)
        await asyncio.wait_for(cl.handshake(), 30)
        await asyncio.wait_for(cl.call_once(True), 30)
    except Exception as e:  # noqa: BLE001
        return False, f"{type(e).__name__}: {e}"
    finally:
        await cl.goodbye()
    return stats.ok == 1, (stats.error_samples or ["ok"])[0]


def wait_ready(s: Server, timeout: float, call: bool = True) -> str | None:
    err = wait_port(s, timeout)
    if err or not call:
        return err
    deadline = time.monotonic() + timeout
    last = "?"
    while time.monotonic() < deadline:
        if s.proc.poll() is not None:
            return f"exited with code {s.proc.returncode} (see {s.log_path})"
        ok, last = asyncio.run(_probe_call(s.url, s.tool, headers=s.headers))
        if ok:
            return None
        time.sleep(0.3)
    return f"not ready after {timeout:.0f}s: {last} (see {s.log_path})"


def hopline_base() -> list[str]:
    exe = shutil.which("hopline", path=str(Path(PY).parent)) or shutil.which("hopline")
    return [exe] if exe else [PY, "-m", "hopline"]


def hopline_version() -> str:
    v = "hopline " + rr._pkg_version("hopline")
    try:
        rev = rr.run_quiet(["git", "-C", str(REPO), "describe", "--always", "--dirty"], timeout=10).stdout.strip()
        if rev:
            v += f" ({rev})"
    except Exception:  # noqa: BLE001
        pass
    return v


HOPLINE_ENV: dict[str, str] = {}  # --hopline-env KEY=VALUE, for experiments (e.g. PYTHONPATH)


def hopline_server(name: str, config: dict, port: int, workdir: Path, log_level: str) -> Server:
    path = workdir / f"{name}.json"  # JSON is YAML: hopline reads it as a config file
    path.write_text(json.dumps(config, indent=1))
    cmd = hopline_base() + ["--log-level", log_level, "serve", str(path), "--port", str(port), "--host", "127.0.0.1"]
    return Server(name, cmd, url=f"http://127.0.0.1:{port}/mcp", port=port, version=hopline_version(), env=dict(HOPLINE_ENV))


def header_args(s: Server) -> list[str]:
    return [a for h in s.headers for a in ("--header", h)]


_JWT_KEYS: dict[str, tuple[dict, object, dict[str, str]]] = {}


def jwt_key(alg: str, workdir: Path) -> tuple[dict, object, dict[str, str]]:
    """(the issuer's static key as configured, the signing key, environment for hopline); one per run.
    HS256: a random secret handed to hopline in the environment (``${HOPLINE_BENCH_JWT_SECRET}``);
    RS256: a 2048-bit RSA key whose public half is written to the logs folder (``pem_file``)."""
    if alg not in _JWT_KEYS:
        if alg == "HS256":
            import secrets

            secret = secrets.token_urlsafe(48)
            _JWT_KEYS[alg] = ({"alg": "HS256", "secret": "${" + JWT_SECRET_ENV + "}"}, secret, {JWT_SECRET_ENV: secret})
        elif alg == "RS256":
            from cryptography.hazmat.primitives import serialization
            from cryptography.hazmat.primitives.asymmetric import rsa

            private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            pem = workdir / "bench-jwt-public.pem"
            pem.write_bytes(private.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
            _JWT_KEYS[alg] = ({"alg": "RS256", "kid": "bench-1", "pem_file": str(pem)}, private, {})
        else:
            raise ValueError(f"--jwt-alg {alg}: HS256 or RS256")
    return _JWT_KEYS[alg]


def mint_token(alg: str, workdir: Path, resource: str, claims: dict, lifetime: float = 86400.0) -> str:
    import jwt  # PyJWT (a hopline dependency)

    key_cfg, signing, _ = jwt_key(alg, workdir)
    now = int(time.time())
    body = {**claims, "iss": POLICY_ISSUER, "aud": resource, "iat": now, "nbf": now, "exp": now + int(lifetime), "jti": f"bench-{now}-{claims.get('sub')}"}
    headers = {"typ": "at+jwt"} | ({"kid": key_cfg["kid"]} if "kid" in key_cfg else {})
    return jwt.encode(body, signing, algorithm=alg, headers=headers)


def policy_server(name: str, backend_url: str, port: int, workdir: Path, args) -> Server:
    """``hopline`` plus auth (bearer JWT, static key) and the ten-rule CEL policy (issue 5)."""
    resource = f"http://127.0.0.1:{port}/mcp"
    key_cfg, _, env = jwt_key(args.jwt_alg, workdir)
    policy: dict = {"rules": POLICY_RULES}
    audit = None
    if name == "hopline-policy-audit":
        audit = workdir / f"{name}-audit.jsonl"
        policy["audit"] = {"sink": str(audit)}
    cfg = {
        "version": 1, "name": "bench-gateway", "listen": {"host": "127.0.0.1", "port": port, "max_sessions": 10000},
        "backends": {"e": {"url": backend_url}},
        "auth": {"resource": resource, "issuers": [{"issuer": POLICY_ISSUER, "keys": [key_cfg]}], "required_scopes": ["mcp"]},
        "policy": policy,
    }  # fmt: skip
    s = hopline_server(name, cfg, port, workdir, args.log_level)
    s.env.update(env)
    s.tool = "e__echo"
    s.headers = [f"Authorization: Bearer {mint_token(args.jwt_alg, workdir, resource, BENCH_CLAIMS)}"]
    s.note = (
        f"hopline + auth (bearer JWT, static {args.jwt_alg} key) + {len(POLICY_RULES)} CEL rules"
        + (f", audit log to {audit.name}" if audit else "")
    )
    return s


def _in_own_netns() -> str | None:
    """None if this runs as root inside a network namespace of its own (``ip netns exec``), else why not:
    the socket target adds an iptables rule, which must never touch the machine's own namespace."""
    if os.geteuid() != 0 or shutil.which("iptables") is None or shutil.which("ip") is None:
        return "needs root, ip and iptables (inside a network namespace of its own: `ip netns exec NS`)"
    named = subprocess.run(["ip", "netns", "identify", str(os.getpid())], capture_output=True, text=True, check=False)
    if not named.stdout.strip():
        return "needs a network namespace of its own: run the bench under `ip netns exec NS` (as root)"
    return None


def transparent_socket_server(name: str, backend: Server, port: int, workdir: Path, args) -> Server:
    """``hopline-transparent-socket``: level 1 behind an iptables REDIRECT, the original destination
    recovered from the socket (SO_ORIGINAL_DST). loadgen dials 127.0.0.1:D, an address nothing listens
    on, which the namespace's nat OUTPUT chain sends to hopline; hopline forwards to the echo backend.
    ``hopline-transparent-redirected``: the same path through the REDIRECT, the destination taken from
    ``Host`` (what the kernel's NAT costs, apart from what reading the socket costs)."""
    dialled = port + 1000
    subprocess.run(
        ["iptables", "-t", "nat", "-A", "OUTPUT", "-p", "tcp", "-d", "127.0.0.1", "--dport", str(dialled), "-j", "REDIRECT", "--to-ports", str(port)],
        check=True,
    )  # fmt: skip
    cfg = {
        "version": 1, "name": "bench-gateway", "mode": "transparent",
        "listen": {"host": "127.0.0.1", "port": port, "max_sessions": 10000},
        "transparent": {"level": 1, "destination": "socket" if name == "hopline-transparent-socket" else "host",
                        "destinations": {f"127.0.0.1:{dialled}": f"http://127.0.0.1:{backend.port}"}},
    }  # fmt: skip
    s = hopline_server(name, cfg, port, workdir, args.log_level)
    s.url = f"http://127.0.0.1:{dialled}/mcp"
    s.tool = "echo"
    how = "destination: socket (SO_ORIGINAL_DST)" if name == "hopline-transparent-socket" else "destination: host"
    s.note = f"transparent, level 1, {how}: loadgen dials 127.0.0.1:D, an iptables REDIRECT sends it to hopline"
    return s


def transparent_server(name: str, backend: Server, port: int, workdir: Path, args) -> Server:
    """``hopline serve`` in Transparent mode in front of the echo backend. The destination is
    hopline's own host:port: loadgen connects to hopline and sends that as ``Host``, which stands
    in for DNS or L7 interception. Level 1 streams bodies unread; level 2 runs a Reverse-mode
    gateway for that destination (dual handshake, all layers), so the tool keeps its own name."""
    level = 2 if name == "hopline-transparent-l2" else 1
    cfg = {
        "version": 1, "name": "bench-gateway", "mode": "transparent",
        "listen": {"host": "127.0.0.1", "port": port, "max_sessions": 10000},
        "transparent": {"level": level, "destinations": {f"127.0.0.1:{port}": f"http://127.0.0.1:{backend.port}"}},
    }  # fmt: skip
    s = hopline_server(name, cfg, port, workdir, args.log_level)
    s.tool = "echo"
    s.note = (
        "transparent, level 1: Host 127.0.0.1:P → the echo backend, bodies streamed unread"
        if level == 1
        else "transparent, level 2: Host 127.0.0.1:P → a Reverse-mode gateway for that destination (dual handshake, a backend session per client)"
    )
    return s


def check_policy_in_force(s: Server, workdir: Path, args) -> str | None:
    """None if the gateway refuses a request without a token (401) and refuses e__echo to a
    caller no rule allows; else what went wrong (so the bench never measures a gateway that
    quietly lets everything through)."""
    resource = s.url

    async def run() -> str | None:
        for era in ("legacy", "2026"):
            ok, why = await _probe_call(s.url, s.tool, era)
            if ok or "401" not in why:
                return f"{era}: a request without a token was not refused with 401 ({why[:160]})"
            outsider = mint_token(args.jwt_alg, workdir, resource, OUTSIDER_CLAIMS)
            ok, why = await _probe_call(s.url, s.tool, era, [f"Authorization: Bearer {outsider}"])
            if ok or "nknown tool" not in why:
                return f"{era}: a caller no rule allows was not refused {s.tool} as an unknown tool ({why[:160]})"
        return None

    try:
        return asyncio.run(run())
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {e}"


def ensure_fastmcp(args) -> str | None:
    """Install fastmcp into bench/.fastmcp-venv if needed; returns a reason to skip, or None."""
    py = FASTMCP_VENV / "bin" / "python"
    if py.exists() and rr._venv_pkg_version(FASTMCP_VENV, "fastmcp") == args.fastmcp_version:
        return None
    if args.no_install:
        return f"fastmcp {args.fastmcp_version} not installed in {FASTMCP_VENV} (and --no-install)"
    log(f"installing fastmcp=={args.fastmcp_version} (+ uvloop, orjson; the rest pinned by {FASTMCP_CONSTRAINTS.name}) into {FASTMCP_VENV.relative_to(REPO)}")
    try:
        if not py.exists():
            r = rr.run_quiet([PY, "-m", "venv", str(FASTMCP_VENV)])
            if r.returncode != 0:
                return "venv: " + r.stderr.strip()[-300:]
        pins = ["-c", str(FASTMCP_CONSTRAINTS)] if args.fastmcp_version == FASTMCP_VERSION and FASTMCP_CONSTRAINTS.exists() else []
        r = rr.run_quiet([str(py), "-m", "pip", "install", "-q", *pins, f"fastmcp=={args.fastmcp_version}", "uvloop", "orjson"], timeout=900)
        if r.returncode != 0:
            return "pip install fastmcp failed: " + r.stderr.strip()[-300:]
    except Exception as e:  # noqa: BLE001
        return f"could not install fastmcp: {e}"
    return None


def fastmcp_server(name: str, port: int, *, url: str | None = None, config: Path | None = None, session: str = "keep") -> Server:
    py = str(FASTMCP_VENV / "bin" / "python")
    cmd = [py, FASTMCP_RUNNER, "--port", str(port), "--session", session]
    cmd += ["--url", url] if url else ["--config", str(config)]
    v = f"fastmcp {rr._venv_pkg_version(FASTMCP_VENV, 'fastmcp')} (mcp {rr._venv_pkg_version(FASTMCP_VENV, 'mcp')})"
    note = "connected Client handed to create_proxy: one backend session for all requests" if session == "keep" else "create_proxy(target): a new backend session per request"
    return Server(name, cmd, url=f"http://127.0.0.1:{port}/mcp", port=port, version=v, note=note, sep="_", slow=session == "fresh")


# --------------------------------------------------------------------------- an in-process MCP client


class Mcp:
    """One MCP session over one keep-alive connection (loadgen's raw HTTP client)."""

    def __init__(self, url: str, era: str = "legacy", tool: str = "echo", idx: int = 0, headers: list[str] | tuple = ()):
        self.stats = loadgen.Stats()
        self.cl = loadgen.Client(idx, url, era, self.stats, 32, tool, [loadgen.parse_header(h) for h in headers])
        self.era = era

    async def open(self) -> None:
        await self.cl.conn.connect()
        await self.cl.handshake()

    def _extra(self, method: str, name: str | None = None) -> list[tuple[bytes, bytes]]:
        c = self.cl.conn
        if self.era == "legacy":
            return [(b"MCP-Protocol-Version", (c.protocol_version or loadgen.LEGACY_VERSION).encode())]
        extra = [(b"MCP-Protocol-Version", loadgen.MODERN_VERSION.encode()), (b"Mcp-Method", method.encode())]
        if name:
            extra.append((b"Mcp-Name", name.encode()))
        return extra

    async def request(self, method: str, params: dict | None = None, name: str | None = None) -> dict:
        rid = self.cl._id()
        params = dict(params or {})
        if self.era != "legacy":
            params["_meta"] = {"io.modelcontextprotocol/protocolVersion": loadgen.MODERN_VERSION, "io.modelcontextprotocol/clientCapabilities": {}}
        body = loadgen.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        r = await self.cl.conn.request(b"POST", body, self._extra(method, name), rid)
        if not r.keep_alive:
            await self.cl.conn.close()
        if r.status != 200 or not r.message or "result" not in r.message:
            raise loadgen.ProtocolError(f"{method}: HTTP {r.status} {str(r.message)[:300]}")
        return r.message["result"]

    async def list_tools(self) -> tuple[list[dict], int]:
        """Every tool, across pages; (tools, pages)."""
        tools: list[dict] = []
        cursor = None
        pages = 0
        while True:
            res = await self.request("tools/list", {"cursor": cursor} if cursor else {})
            pages += 1
            tools.extend(res.get("tools") or [])
            cursor = res.get("nextCursor")
            if not cursor or pages > 100:
                return tools, pages

    async def call(self, name: str, arguments: dict) -> dict:
        return await self.request("tools/call", {"name": name, "arguments": arguments}, name)

    async def close(self) -> None:
        await self.cl.goodbye()


# --------------------------------------------------------------------------- part 1: calls


class Window:
    """One loadgen process (c sessions) on one target, kept across rounds; /proc of the gateway
    tree (relay_*) and of the backend tree (backend_*) sampled between its markers."""

    def __init__(self, s: Server, backend_pid: int | None, c: int, era: str, setup_timeout: float):
        self.s, self.backend_pid = s, backend_pid
        self.root = s.pid  # the process tree that is the target (a stdio target: the driver's child)
        if s.stdio is not None:
            cmd = [PY, STDIO_DRIVER, "--command", json.dumps(s.stdio), "--tool", s.tool, "-c", str(c), "--era", era, "--child-log", str(s.log_path)]
        else:
            cmd = [PY, LOADGEN, "--url", s.url, "--tool", s.tool, "-c", str(c), "--era", era] + header_args(s)
        cmd += ["--serve", "--markers", "--json", "--samples", "--setup-timeout", str(setup_timeout)]
        env = {**os.environ, **s.env} if s.stdio is not None and s.env else None
        self.p = subprocess.Popen(cmd, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1, env=env)
        self.fatal: str | None = None
        self.setup_s = None
        line = self.p.stdout.readline().strip()
        if line.startswith("#READY"):
            ready = json.loads(line.split(" ", 1)[1])
            self.setup_s = ready.get("setup_s")
            if s.stdio is not None:
                self.root = ready["child_pid"]
        else:
            err = json.loads(line).get("fatal") if line.startswith("{") else (line or self.p.stderr.read().strip()[-400:])
            self.fatal = f"loadgen setup failed: {err}"
            self.close()

    def run(self, warmup: float, duration: float) -> dict:
        if self.fatal:
            return {"fatal": self.fatal}
        direct = self.s.name == "direct"
        gw = None if direct else rr.TreeSampler(self.root)
        be = rr.TreeSampler(self.backend_pid) if self.backend_pid else None
        self.p.stdin.write(f"RUN {warmup} {duration}\n")
        self.p.stdin.flush()
        sys0 = sys1 = lg0 = lg1 = None
        me0 = me1 = 0.0
        g = b = None
        result = None
        while True:
            line = self.p.stdout.readline()
            if not line:
                break
            line = line.strip()
            if line == "#MEASURE_START":
                me0 = time.process_time()
                sys0 = rr.read_cpu_totals()
                lg0 = rr.read_stat(self.p.pid)
                for smp in (gw, be):
                    if smp:
                        smp.start()
            elif line == "#MEASURE_END":
                sys1 = rr.read_cpu_totals()
                lg1 = rr.read_stat(self.p.pid)
                g = gw.stop() if gw else None
                b = be.stop() if be else None
                me1 = time.process_time()
            elif line.startswith("{"):
                result = json.loads(line)
                break
        if result is None or (be and b is None):
            self.fatal = f"loadgen died (exit {self.p.poll()}): {self.p.stderr.read().strip()[-400:]}"
            return {"fatal": self.fatal}
        n = result["requests"]
        g = g or {"relay_ticks": 0, "backend_ticks": 0, "relay_rss_kb": 0, "relay_pss_kb": 0, "relay_procs": 0, "backend_rss_sum_kb": 0, "backend_pss_kb": 0, "backend_procs": 0}
        b = b or {"backend_ticks": 0, "backend_rss_sum_kb": 0, "backend_pss_kb": 0, "backend_procs": 0}
        be_ticks = b["backend_ticks"] + g["backend_ticks"]
        result["setup_s"] = self.setup_s
        result["relay_cpu_ms"] = g["relay_ticks"] * 1000 / CLK_TCK
        result["backend_cpu_ms"] = be_ticks * 1000 / CLK_TCK
        result["relay_cpu_ms_per_req"] = result["relay_cpu_ms"] / n if n else None
        result["backend_cpu_ms_per_req"] = result["backend_cpu_ms"] / n if n else None
        result["relay_rss_mb"] = g["relay_rss_kb"] / 1024
        result["relay_pss_mb"] = g["relay_pss_kb"] / 1024
        result["relay_procs"] = g["relay_procs"]
        result["backend_rss_mb"] = (b["backend_rss_sum_kb"] + g["backend_rss_sum_kb"]) / 1024
        result["backend_pss_mb"] = (b["backend_pss_kb"] + g["backend_pss_kb"]) / 1024
        result["backend_procs"] = b["backend_procs"] + g["backend_procs"]
        if sys0 and sys1 and sys1[1] > sys0[1]:
            busy, total = sys1[0] - sys0[0], sys1[1] - sys0[1]
            lg_ticks = (lg1[1] - lg0[1]) if lg0 and lg1 else round(result["loadgen_cpu_s"] * CLK_TCK)
            ours = g["relay_ticks"] + be_ticks + lg_ticks + (me1 - me0) * CLK_TCK
            result["box_busy"] = busy / total
            result["other_cores"] = max(0.0, (busy - ours) / total * (os.cpu_count() or 1))
        return result

    def close(self) -> None:
        if self.p.poll() is None:
            try:
                self.p.stdin.write("QUIT\n")
                self.p.stdin.flush()
                self.p.wait(30)
            except (OSError, subprocess.TimeoutExpired):
                self.p.kill()
                self.p.wait()


CALL_COLUMNS = (
    "target", "c", "req/s", "×direct", "p50 ms", "+p50 ms", "p99 ms", "+p99 ms",
    "gateway CPU-ms/req", "backend CPU-ms/req", "gateway RSS MB", "loadgen CPU-ms/req", "other cores", "errors",
)  # fmt: skip


def render_calls(agg: dict, names: list[str], concurrencies: list[int], era: str) -> str:
    lines = ["| " + " | ".join(CALL_COLUMNS) + " |", "|" + "---|" * len(CALL_COLUMNS)]
    for c in concurrencies:
        d = agg.get((era, "direct", c))
        d_ok = d and "fatal" not in d
        for name in names:
            a = agg.get((era, name, c))
            if a is None:
                continue
            if "fatal" in a:
                lines.append(f"| {name} | {c} | FAILED: {a['fatal'][:150]} |" + " |" * (len(CALL_COLUMNS) - 3))
                continue
            is_direct = name == "direct"
            rps_x = add50 = add99 = None
            if d_ok and not is_direct:
                rps_x = a["rps"] / d["rps"] if d["rps"] else None
                add50 = a["p50_ms"] - d["p50_ms"] if a["p50_ms"] is not None and d["p50_ms"] is not None else None
                add99 = a["p99_ms"] - d["p99_ms"] if a["p99_ms"] is not None and d["p99_ms"] is not None else None
            row = [
                name, str(c), fmt(a["rps"], ".0f"), "1" if is_direct else fmt(rps_x),
                fmt(a["p50_ms"], ".3f"), "" if is_direct else fmt(add50, "+.3f"),
                fmt(a["p99_ms"], ".2f"), "" if is_direct else fmt(add99, "+.2f"),
                "(none)" if is_direct else fmt(a["relay_cpu_ms_per_req"], ".3f"),
                fmt(a["backend_cpu_ms_per_req"], ".3f"),
                fmt(a["backend_rss_mb"], ".1f") + " (backend)" if is_direct else fmt(a["relay_rss_mb"], ".1f"),
                fmt(a["loadgen_cpu_ms_per_req"], ".3f"), fmt(a["other_cores"], ".2f"), str(a["errors"]),
            ]  # fmt: skip
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def part_calls(args, logdir: Path, workdir: Path, out: dict) -> list[str]:
    md: list[str] = []
    backend = Server("echo-backend", [], port=rr.free_port())
    backend.cmd = [PY, ECHO, "http", "--port", str(backend.port)] + (["--sse"] if args.backend_sse else [])
    backend.url = f"http://127.0.0.1:{backend.port}/mcp"
    backend.version = "mcp " + rr._pkg_version("mcp")
    start(backend, logdir)
    servers: list[Server] = []
    skipped: dict[str, str] = {}
    try:
        err = wait_ready(backend, args.ready_timeout)
        if err:
            md.append(f"calls: the echo backend did not start: {err}")
            out["calls"] = {"fatal": err}
            return md
        names = [n for n in args.targets.split(",") if n]
        for n in names:
            port = rr.free_port()
            if n == "direct":
                s = Server("direct", [], url=backend.url, port=backend.port, version=backend.version, note="the SDK echo server's own Streamable HTTP")
                s.proc = backend.proc
            elif n in ("hopline", "hopline-shared"):
                spec = {"url": backend.url}
                if n == "hopline-shared":
                    spec["stateless"] = True
                cfg = {"version": 1, "name": "bench-gateway", "listen": {"host": "127.0.0.1", "port": port, "max_sessions": 10000}, "backends": {"e": spec}}
                s = hopline_server(n, cfg, port, workdir, args.log_level)
                s.tool = "e__echo"
                s.note = "one url backend, stateless: true (one shared backend session)" if n == "hopline-shared" else "one url backend, a backend session per client session (default)"
            elif n in ("fastmcp", "fastmcp-fresh"):
                why = ensure_fastmcp(args)
                if why:
                    skipped[n] = why
                    continue
                s = fastmcp_server(n, port, url=backend.url, session="fresh" if n == "fastmcp-fresh" else "keep")
            elif n == "floor":
                s = Server(n, [PY, FLOOR, "--backend", backend.url, "--port", str(port)], url=f"http://127.0.0.1:{port}/mcp", port=port, version="bench/floor_relay.py",
                           note="the least a Python relay does per call (uvloop, httptools, orjson; no layers, no sessions of its own): a yardstick")  # fmt: skip
            elif n in POLICY_TARGETS:
                s = policy_server(n, backend.url, port, workdir, args)
            elif n in SOCKET_TARGETS:
                why = _in_own_netns()
                if why:
                    skipped[n] = why
                    continue
                s = transparent_socket_server(n, backend, port, workdir, args)
            elif n in TRANSPARENT_TARGETS:
                s = transparent_server(n, backend, port, workdir, args)
            elif n == RELAY_STDIO:
                s = Server(n, [], version=hopline_version(), env=dict(HOPLINE_ENV), tool="echo")
                s.stdio = hopline_base() + ["--log-level", args.log_level, "relay", "--stdio", backend.url]
                s.cmd = [PY, STDIO_DRIVER, "--command", json.dumps(s.stdio)]
                s.log_path = logdir / f"{n}.log"
                s.note = "hopline relay --stdio URL: one stdio client (bench/stdio_floor.py, c requests in flight) relayed to the echo backend"
            elif n == "hopline-stdio":
                cfg = {"version": 1, "name": "bench-gateway", "listen": {"host": "127.0.0.1", "port": port, "max_sessions": 10000},
                       "backends": {"e": {"command": PY, "args": [ECHO, "stdio"], "stateless": True}}}  # fmt: skip
                s = hopline_server(n, cfg, port, workdir, args.log_level)
                s.tool = "e__echo"
                s.note = "reference, not HTTP→HTTP: the same echo server as ONE shared stdio child (its CPU is the backend column)"
            else:
                skipped[n] = "unknown target"
                continue
            if s.stdio is not None:
                err = probe_stdio(s, args)
                if err:
                    skipped[n] = err
                    log(f"SKIP {n}: {err}")
                    continue
            elif s.proc is None:
                log(f"start {n}: {' '.join(s.cmd)}")
                start(s, logdir)
                err = wait_ready(s, args.ready_timeout)
                if not err and n in POLICY_TARGETS:
                    err = check_policy_in_force(s, workdir, args)
                    err = f"policy not in force: {err}" if err else None
                if err:
                    skipped[n] = err
                    log(f"SKIP {n}: {err}")
                    stop(s)
                    continue
            servers.append(s)
        for s in servers:  # warm every target up with unmeasured load
            c = 1 if s.slow else 16
            if s.stdio is not None:  # a process of its own per run: nothing to warm but the backend (warmed by the others)
                continue
            cmd = [PY, LOADGEN, "--url", s.url, "--tool", s.tool, "-c", str(c), "--duration", str(args.target_warmup), "--warmup", "0", "--json"] + header_args(s)
            r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=args.target_warmup + 300)
            w = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
            log(f"warmed {s.name}: {fmt(json.loads(w[-1]).get('rps') if w else None, '.0f')} req/s")

        cells: list[dict] = []
        for era in args.eras:
            for c in args.concurrency:
                ts = [s for s in servers if not (s.slow and c > 1) and not (era == "2026" and not s.modern)]
                wins: dict[str, Window] = {}
                try:
                    for r in range(args.rounds):
                        order = ts if (args.order == "abab" or r % 2 == 0) else list(reversed(ts))
                        for s in order:
                            if s.name not in wins:
                                t0 = time.monotonic()
                                wins[s.name] = Window(s, backend.pid, c, era, args.setup_timeout)
                                log(f"{s.name}: {c} session(s) ({era}) set up in {time.monotonic() - t0:.1f}s")
                            if args.quiet_wait:
                                rr.wait_quiet(args.quiet_wait)
                            dur = min(args.duration, args.slow_duration) if s.slow else args.duration
                            res = wins[s.name].run(args.warmup, dur)
                            res.update({"round": r, "era": era, "concurrency": c, "target": s.name})
                            cells.append(res)
                            if "fatal" in res:
                                log(f"calls r{r} {era} c={c} {s.name}: FAILED {res['fatal'][:200]}")
                            else:
                                log(
                                    f"calls r{r} {era} c={c:<3} {s.name:<14} {res['rps']:7.0f} req/s p50 {res['p50_ms']:.3f} p99 {res['p99_ms']:.2f} "
                                    f"gateway {fmt(res['relay_cpu_ms_per_req'], '.3f')} backend {fmt(res['backend_cpu_ms_per_req'], '.3f')} CPU-ms/req, "
                                    f"other {fmt(res.get('other_cores'), '.2f')} cores, err {res['errors']}"
                                )
                finally:
                    for w in wins.values():
                        w.close()
        agg = {}
        for era in args.eras:
            for c in args.concurrency:
                for s in servers:
                    sel = [x for x in cells if x["era"] == era and x["concurrency"] == c and x["target"] == s.name]
                    if sel:
                        agg[(era, s.name, c)] = rr.aggregate(sel)
        shown = [s.name for s in servers]
        md.append("## 1. Proxied tools/call, HTTP→HTTP\n")
        md.append(
            f"Backend: the SDK echo server over Streamable HTTP (stateful, {'SSE responses, the SDK default' if args.backend_sse else 'JSON responses'}; "
            f"the SDK answers 2026-07-28 requests with JSON either way). {args.rounds} interleaved rounds × {args.duration:g}s per cell ({args.slow_duration:g}s for fastmcp-fresh)."
        )
        for era in args.eras:
            md.append(f"\n### era {era}\n")
            md.append(render_calls(agg, shown, args.concurrency, era))
        verdicts = call_verdicts(agg, args)
        if verdicts:
            md.append("\nvs issue 3 targets:\n" + "\n".join(f"- {v}" for v in verdicts))
        verdicts14 = issue14_verdicts(agg, args)
        if verdicts14:
            md.append("\nvs issue 14 targets (CPU: the median of c=1 and c=16):\n" + "\n".join(f"- {v}" for v in verdicts14))
        policy_rows = policy_overhead(agg, cells, args)
        policy_verdicts: list[str] = []
        if policy_rows:
            policy_md, policy_verdicts = render_policy(policy_rows, args)
            md.append(policy_md)
        transparent_rows = transparent_vs_direct(agg, args)
        if transparent_rows:
            md.append(render_transparent(transparent_rows))
        if skipped:
            md.append("\nskipped:\n" + "\n".join(f"- {k}: {v}" for k, v in skipped.items()))
        noisy = [f"{k[1]} c={k[2]} ({k[0]}): up to {a['other_cores_max']:.2f} cores" for k, a in agg.items() if "fatal" not in a and a["other_cores_max"] > 0.15]
        if noisy:
            md.append("\nWARNING, other processes were busy during some windows:\n" + "\n".join(f"- {w}" for w in noisy))
        for x in cells:
            x.pop("latencies_us", None)
        out["calls"] = {
            "targets": {s.name: {"cmd": s.cmd, "version": s.version, "note": s.note, "tool": s.tool} for s in servers},
            "backend": {"cmd": backend.cmd, "version": backend.version},
            "skipped": skipped,
            "summary": [{"era": k[0], "target": k[1], "concurrency": k[2], **v} for k, v in agg.items()],
            "cells": cells,
            "verdicts": verdicts,
            "verdicts_issue14": verdicts14,
            "backend_responses": "sse" if args.backend_sse else "json",
            "transparent": transparent_rows,
            "policy": {"rules": POLICY_RULES, "claims": BENCH_CLAIMS, "jwt_alg": args.jwt_alg, "overhead": policy_rows, "verdicts": policy_verdicts},
        }
    finally:
        for s in servers:
            if s.name != "direct":
                stop(s)
        stop(backend)
    return md


def probe_stdio(s: Server, args) -> str | None:
    """None if the stdio target answers calls (a short run of its driver), else why not."""
    cmd = [PY, STDIO_DRIVER, "--command", json.dumps(s.stdio), "--tool", s.tool, "-c", "1", "--duration", "0.5", "--warmup", "0.2", "--json", "--child-log", str(s.log_path)]
    env = {**os.environ, **s.env} if s.env else None
    log(f"probe {s.name}: {' '.join(s.stdio)}")
    try:
        r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=args.ready_timeout, env=env)
    except subprocess.TimeoutExpired:
        return f"no answer within {args.ready_timeout:g}s (see {s.log_path})"
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    res = json.loads(lines[-1]) if lines else {}
    if not res.get("requests") or res.get("errors"):
        return f"calls failed: {res.get('error_samples') or r.stderr.strip()[-300:]} (see {s.log_path})"
    return None


def issue14_verdicts(agg: dict, args) -> list[str]:
    """Issue 14: gateway CPU per proxied call ≤ 0.35 ms (median of the c=1 and c=16 cells), added
    p50 at c=1 ≤ 0.3 ms, FastMCP's shared-session proxy (``fastmcp``) ≥ 15× hopline's CPU, and
    the stdio→HTTP relay (``hopline-relay-stdio``) ≤ 0.2 CPU-ms per call."""
    out: list[str] = []

    def get(era, name, c):
        a = agg.get((era, name, c))
        return a if a and "fatal" not in a else None

    def median_cpu(era, name):
        vals = [get(era, name, c)["relay_cpu_ms_per_req"] for c in (1, 16) if get(era, name, c)]
        return statistics.median(vals) if len(vals) == 2 else None

    def backend_cpu(era):  # the direct backend's own CPU per call: how fast this host ran in this run
        vals = [get(era, "direct", c)["backend_cpu_ms_per_req"] for c in (1, 16) if get(era, "direct", c)]
        return statistics.median(vals) if len(vals) == 2 and all(vals) else None

    for era in args.eras:
        host = backend_cpu(era)
        if host is not None:
            out.append(f"{era} host speed: the direct backend's own CPU was {host:.3f} ms per call (median of c=1 and c=16); "
                       "the absolute CPU cells below move with it (the same backend ran at 0.52-0.97 on a quiet host, 3x that on a busy one)")  # fmt: skip
        for h in ("hopline", "hopline-shared"):
            cpu = median_cpu(era, h)
            if cpu is None:
                continue
            each = ", ".join(f"c={c} {get(era, h, c)['relay_cpu_ms_per_req']:.3f}" for c in (1, 16))
            out.append(f"{era} {h}: {'PASS' if cpu <= TARGET14_CALL_CPU_MS else 'FAIL'} gateway CPU ≤ {TARGET14_CALL_CPU_MS} ms per call: {cpu:.3f} ({each})")
            if host:  # host-independent: the gateway's CPU against the direct backend's in the same run
                out.append(f"{era} {h}: (in-run ratio) gateway CPU per call {cpu / host:.2f}× the direct backend's own")
            h1, d1 = get(era, h, 1), get(era, "direct", 1)
            if h1 and d1:
                add = round(h1["p50_ms"] - d1["p50_ms"], 3)  # as printed (0.300 is no FAIL)
                out.append(f"{era} {h}: {'PASS' if add <= TARGET14_ADDED_P50_MS else 'FAIL'} added p50 at c=1 ≤ {TARGET14_ADDED_P50_MS} ms: {add:+.3f}")
            f = median_cpu(era, "fastmcp")
            if f is not None and cpu:
                out.append(f"{era} {h}: {'PASS' if f / cpu >= TARGET14_FASTMCP_X else 'FAIL'} ≥ {TARGET14_FASTMCP_X:g}× leaner than fastmcp (one shared backend session): {f / cpu:.1f}× (fastmcp {f:.3f} CPU-ms)")
            floor = median_cpu(era, "floor")
            if floor and cpu:  # a yardstick, not a target: what a bare Python relay pays (bench/floor_relay.py)
                peer = f"; fastmcp {f / floor:.1f}× the floor" if f else ""
                out.append(f"{era} {h}: (yardstick) {cpu / floor:.2f}× the floor's CPU ({floor:.3f} CPU-ms, bench/floor_relay.py){peer}")
        cpu = median_cpu(era, RELAY_STDIO)
        if cpu is not None:
            each = ", ".join(f"c={c} {get(era, RELAY_STDIO, c)['relay_cpu_ms_per_req']:.3f}" for c in (1, 16))
            out.append(f"{era} {RELAY_STDIO}: {'PASS' if cpu <= TARGET14_RELAY_CPU_MS else 'FAIL'} relay CPU ≤ {TARGET14_RELAY_CPU_MS} ms per call: {cpu:.3f} ({each})")
    return out


def call_verdicts(agg: dict, args) -> list[str]:
    out = []

    def get(era, name, c):
        a = agg.get((era, name, c))
        return a if a and "fatal" not in a else None

    for era in args.eras:
        for h in ("hopline", "hopline-shared"):
            cells = [(c, get(era, h, c)) for c in args.concurrency if get(era, h, c)]
            if not cells:
                continue
            worst = max(a["relay_cpu_ms_per_req"] for _, a in cells)
            each = ", ".join(f"c={c} {a['relay_cpu_ms_per_req']:.3f}" for c, a in cells)
            out.append(f"{era} {h}: {'PASS' if worst <= TARGET_CALL_CPU_MS else 'FAIL'} gateway CPU ≤ {TARGET_CALL_CPU_MS} ms per proxied call: worst {worst:.3f} ({each})")
            h1, d1 = get(era, h, 1), get(era, "direct", 1)
            if h1 and d1:
                add = h1["p50_ms"] - d1["p50_ms"]
                out.append(f"{era} {h}: {'PASS' if add <= TARGET_ADDED_P50_MS else 'FAIL'} added p50 at c=1 ≤ {TARGET_ADDED_P50_MS} ms: {add:+.3f}")
            for peer in ("fastmcp", "fastmcp-fresh"):
                ratios = []
                for c, a in cells:
                    f = get(era, peer, c)
                    if f and a["relay_cpu_ms_per_req"]:
                        ratios.append((c, f["relay_cpu_ms_per_req"] / a["relay_cpu_ms_per_req"], f["relay_cpu_ms_per_req"]))
                if ratios:
                    low = min(r for _, r, _ in ratios)
                    out.append(
                        f"{era} {h}: {'PASS' if low >= TARGET_FASTMCP_CALL_X else 'FAIL'} ≥ {TARGET_FASTMCP_CALL_X:g}× leaner than {peer}: "
                        + ", ".join(f"c={c} {r:.1f}× ({peer} {v:.2f} CPU-ms)" for c, r, v in ratios)
                    )
    return out


def transparent_vs_direct(agg: dict, args) -> list[dict]:
    """Per (era, c), each transparent target (and ``hopline``, for reference) against ``direct``
    in the same run: gateway CPU per call ÷ the direct backend's CPU per call, added p50 and p50 ratio."""
    rows = []
    for era in args.eras:
        for c in args.concurrency:
            d = agg.get((era, "direct", c))
            if not d or "fatal" in d or not any(agg.get((era, n, c)) for n in TRANSPARENT_TARGETS):
                continue
            for name in ("hopline",) + TRANSPARENT_TARGETS:
                a = agg.get((era, name, c))
                if not a or "fatal" in a:
                    continue
                dcpu, gcpu = d["backend_cpu_ms_per_req"], a["relay_cpu_ms_per_req"]
                rows.append({
                    "era": era, "concurrency": c, "target": name, "gateway_cpu_ms": gcpu, "direct_cpu_ms": dcpu,
                    "cpu_x_direct": gcpu / dcpu if gcpu is not None and dcpu else None,
                    "added_p50_ms": a["p50_ms"] - d["p50_ms"], "p50_x_direct": a["p50_ms"] / d["p50_ms"] if d["p50_ms"] else None,
                    "rps_x_direct": a["rps"] / d["rps"] if d["rps"] else None, "errors": a["errors"],
                })  # fmt: skip
    return rows


def render_transparent(rows: list[dict]) -> str:
    cols = ("target", "era", "c", "gateway CPU-ms/call", "direct CPU-ms/call", "gateway CPU ÷ direct", "+p50 ms", "p50 ×direct", "req/s ×direct", "errors")
    lines = [
        "\n### Transparent mode vs direct (same run)\n",
        "`direct CPU-ms/call` is what the echo backend itself costs per call when talked to directly; `hopline` is the Reverse-mode row, for reference.\n",
        "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols),
    ]  # fmt: skip
    for r in rows:
        row = [r["target"], r["era"], str(r["concurrency"]), fmt(r["gateway_cpu_ms"], ".3f"), fmt(r["direct_cpu_ms"], ".3f"), fmt(r["cpu_x_direct"], ".2f"),
               fmt(r["added_p50_ms"], "+.3f"), fmt(r["p50_x_direct"], ".2f"), fmt(r["rps_x_direct"], ".2f"), str(r["errors"])]  # fmt: skip
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def policy_overhead(agg: dict, cells: list[dict], args) -> list[dict]:
    """Gateway CPU-ms per call of each policy target minus ``hopline``'s, per (era, c): from the
    pooled rounds (total CPU ÷ total calls, as in the table) and per round (each round runs both
    targets back to back, so a round's difference is a paired sample of the noise)."""
    rows = []

    def pick(era: str, c: int, target: str, r: int) -> dict | None:
        return next((x for x in cells if x["era"] == era and x["concurrency"] == c and x["target"] == target and x["round"] == r and "fatal" not in x), None)

    for era in args.eras:
        for c in args.concurrency:
            base = agg.get((era, "hopline", c))
            if not base or "fatal" in base:
                continue
            for name in POLICY_TARGETS:
                a = agg.get((era, name, c))
                if not a or "fatal" in a:
                    continue
                per_round = []
                for r in range(args.rounds):
                    h, p = pick(era, c, "hopline", r), pick(era, c, name, r)
                    if h and p and h["relay_cpu_ms_per_req"] is not None and p["relay_cpu_ms_per_req"] is not None:
                        per_round.append(p["relay_cpu_ms_per_req"] - h["relay_cpu_ms_per_req"])
                hb, pb = base["relay_cpu_ms_per_req"], a["relay_cpu_ms_per_req"]
                rows.append({
                    "era": era, "concurrency": c, "target": name, "hopline_cpu_ms": hb, "policy_cpu_ms": pb,
                    "added_cpu_ms": pb - hb, "ratio": pb / hb if hb else None, "added_per_round": per_round,
                    "added_p50_ms": a["p50_ms"] - base["p50_ms"], "rps_ratio": a["rps"] / base["rps"] if base["rps"] else None,
                    "other_cores_max": max(a["other_cores_max"], base["other_cores_max"]), "errors": a["errors"],
                })  # fmt: skip
    return rows


def render_policy(rows: list[dict], args) -> tuple[str, list[str]]:
    cols = ("target", "era", "c", "hopline CPU-ms/call", "with policy CPU-ms/call", "added CPU-ms/call", "added, per round",
            f"vs {TARGET_POLICY_ADDED_CPU_MS:g} ms", "ratio", "added p50 ms", "req/s ×hopline", "other cores (max)", "errors")  # fmt: skip
    lines = [
        f"\n### issue 5: what a JWT and a {len(POLICY_RULES)}-rule CEL policy add over `hopline`\n",
        (
            f"Same backend and load as `hopline`; every request carries `Authorization: Bearer` (one {args.jwt_alg} token, cached by the gateway "
            "after its first verification). \"added\" = gateway CPU-ms per call of the target minus `hopline`'s, pooled over the rounds; "
            "\"per round\" = the same difference in each interleaved round (its spread is the noise).\n"
        ),
        "| " + " | ".join(cols) + " |",
        "|" + "---|" * len(cols),
    ]
    for r in rows:
        ok = r["added_cpu_ms"] <= TARGET_POLICY_ADDED_CPU_MS
        lines.append("| " + " | ".join([
            r["target"], r["era"], str(r["concurrency"]), f"{r['hopline_cpu_ms']:.3f}", f"{r['policy_cpu_ms']:.3f}", f"{r['added_cpu_ms']:+.3f}",
            ", ".join(f"{x:+.3f}" for x in r["added_per_round"]) or "–", "PASS" if ok else "FAIL", fmt(r["ratio"], ".2f") + "×",
            f"{r['added_p50_ms']:+.3f}", fmt(r["rps_ratio"], ".2f"), f"{r['other_cores_max']:.2f}", str(r["errors"]),
        ]) + " |")  # fmt: skip
    verdicts = []
    for name in POLICY_TARGETS:
        mine = [r for r in rows if r["target"] == name]
        if not mine:
            continue
        worst = max(mine, key=lambda r: r["added_cpu_ms"])
        each = ", ".join(f"{r['era']} c={r['concurrency']} {r['added_cpu_ms']:+.3f} ms ({fmt(r['ratio'], '.2f')}×)" for r in mine)
        verdicts.append(
            f"{name}: {'PASS' if worst['added_cpu_ms'] <= TARGET_POLICY_ADDED_CPU_MS else 'FAIL'} gateway CPU added per call ≤ "
            f"{TARGET_POLICY_ADDED_CPU_MS:g} ms over hopline: worst {worst['added_cpu_ms']:+.3f} ms ({worst['era']} c={worst['concurrency']}); {each}"
        )
        spread = [max(r["added_per_round"]) - min(r["added_per_round"]) for r in mine if len(r["added_per_round"]) > 1]
        if spread:
            verdicts.append(f"{name}: per-round differences spread by up to {max(spread):.3f} ms across rounds (noise)")
    lines.append("\nvs issue 5 target:\n" + "\n".join(f"- {v}" for v in verdicts))
    return "\n".join(lines), verdicts


# --------------------------------------------------------------------------- part 2: lists


def tools_config_hopline(n_backends: int, n_tools: int, port: int) -> dict:
    backends = {f"b{i}": {"command": PY, "args": [TOOLS_BACKEND, "stdio", "--tools", str(n_tools), "--label", f"b{i}"]} for i in range(n_backends)}
    return {"version": 1, "name": "bench-gateway", "listen": {"host": "127.0.0.1", "port": port, "max_sessions": 10000}, "backends": backends}


def tools_config_mcpservers(n_backends: int, n_tools: int) -> dict:
    return {"mcpServers": {f"b{i}": {"command": PY, "args": [TOOLS_BACKEND, "stdio", "--tools", str(n_tools), "--label", f"b{i}"]} for i in range(n_backends)}}


async def measure_lists(s: Server, args, expect: int) -> dict:
    """The list sequence on one gateway (see the module docstring). CPU of the gateway's own
    processes (the backends, its children, are measured apart)."""
    res: dict = {"target": s.name, "expect_tools": expect, "errors": []}
    n_warm = 3 if s.slow else args.lists
    n_cold = 0 if s.slow else args.cold_sessions  # a slow target's every list is cold anyway
    budget = args.list_budget  # seconds: a slow peer stops its warm lists early (at least 10)
    sep = s.sep

    def meter() -> tuple[CpuMeter, CpuMeter]:
        gw, be = tree_pids(s.pid)
        return CpuMeter(gw), CpuMeter(be)

    async def timed(coro_fn, gm: CpuMeter, bm: CpuMeter):
        gm.start()
        bm.start()
        t0 = time.perf_counter()
        out = await coro_fn()
        dt = (time.perf_counter() - t0) * 1000
        g, b = gm.stop(), bm.stop()
        return out, {"wall_ms": dt, "cpu_ms": g["cpu_ms"], "cpu_ms_ticks": g["cpu_ms_ticks"], "backend_cpu_ms": b["cpu_ms"]}

    def check(tools: list[dict], want: int, what: str) -> None:
        if len(tools) != want:
            res["errors"].append(f"{what}: {len(tools)} tools, expected {want}")

    # session 1: handshake (hopline starts the 10 backends here), cold list, warm lists
    m = Mcp(s.url)
    gm, bm = meter()
    _, res["handshake"] = await timed(m.open, gm, bm)
    gm, bm = meter()  # the backends exist now
    res["backend_procs"] = len(bm.pids)
    (tools, pages), res["cold_first"] = await timed(m.list_tools, gm, bm)
    check(tools, expect, "cold list")
    res["pages"] = pages
    res["sample_name"] = tools[0]["name"] if tools else None
    lat = []
    gm.start()
    bm.start()
    t0 = time.perf_counter()
    for i in range(n_warm):
        t1 = time.perf_counter()
        tools, _ = await m.list_tools()
        lat.append((time.perf_counter() - t1) * 1000)
        if i == 0:
            check(tools, expect, "warm list")
        if i >= 9 and t1 - t0 > budget:
            break
    n_warm = len(lat)
    wall = time.perf_counter() - t0
    g, b = gm.stop(), bm.stop()
    lat.sort()
    res["warm"] = {
        "lists": n_warm,
        "cpu_ms_per_list": g["cpu_ms"] / n_warm,
        "cpu_ms_per_list_ticks": g["cpu_ms_ticks"] / n_warm,
        "backend_cpu_ms_per_list": b["cpu_ms"] / n_warm,
        "p50_ms": lat[len(lat) // 2],
        "p99_ms": lat[min(len(lat) - 1, int(len(lat) * 0.99))],
        "lists_per_s": n_warm / wall,
        "gateway_rss_mb": rss_kb(s.pid) / 1024,
    }
    # list_changed: b0 grows by one tool; the very next list must show it
    changed = []
    want = expect
    res["per_request_backends"] = s.slow
    for k in range(1 if s.slow else args.grow_rounds):
        await m.call(f"b0{sep}grow", {})
        want += 1
        (tools, _), t = await timed(m.list_tools, gm, bm)
        t["tools"] = len(tools)
        if len(tools) != want and not s.slow:  # (per-request backends forget the growth: not a cache matter)
            await asyncio.sleep(0.2)
            again, _ = await m.list_tools()
            t["tools_after_200ms"] = len(again)
            res["errors"].append(f"after grow #{k + 1}: the next list had {len(tools)} tools, expected {want} ({len(again)} 200 ms later)")
        changed.append(t)
        want = max(want, len(tools))
    res["after_list_changed"] = changed
    # the next warm list after the change (cache refilled)
    (tools, _), res["warm_after_change"] = await timed(m.list_tools, gm, bm)
    await m.close()
    # cold lists on fresh sessions
    colds = []
    for k in range(n_cold):
        m2 = Mcp(s.url, idx=k + 1)
        gm2, bm2 = meter()
        _, hs = await timed(m2.open, gm2, bm2)
        gm2, bm2 = meter()
        (tools, _), t = await timed(m2.list_tools, gm2, bm2)
        t["handshake_cpu_ms"] = hs["cpu_ms"]
        t["handshake_wall_ms"] = hs["wall_ms"]
        t["tools"] = len(tools)
        colds.append(t)
        await m2.close()
        await asyncio.sleep(0.3)
    res["cold_sessions"] = colds
    # the 2026-07-28 era: no session; shared backend sessions
    if args.list_modern and s.modern:
        try:
            mm = Mcp(s.url, era="2026")
            await mm.open()
            gm, bm = meter()
            (tools, _), first = await timed(mm.list_tools, gm, bm)
            first["tools"] = len(tools)
            gm, bm = meter()
            n = 0
            gm.start()
            bm.start()
            t0 = time.perf_counter()
            while n < n_warm and not (n >= 10 and time.perf_counter() - t0 > budget):
                tools, _ = await mm.list_tools()
                n += 1
            g, b = gm.stop(), bm.stop()
            res["modern"] = {"first": first, "lists": n, "cpu_ms_per_list": g["cpu_ms"] / n, "backend_cpu_ms_per_list": b["cpu_ms"] / n, "tools": len(tools)}
            await mm.close()
        except Exception as e:  # noqa: BLE001
            res["modern"] = {"fatal": f"{type(e).__name__}: {e}"}
    res["gateway_rss_mb"] = rss_kb(s.pid) / 1024
    return res


def part_lists(args, logdir: Path, workdir: Path, out: dict) -> list[str]:
    md: list[str] = ["## 2. Aggregated tools/list\n"]
    nb, nt = args.list_backends, args.list_tools
    expect = nb * nt
    results: list[dict] = []
    skipped: dict[str, str] = {}
    for name in [n for n in args.list_targets.split(",") if n]:
        port = rr.free_port()
        if name == "hopline":
            s = hopline_server("hopline-lists", tools_config_hopline(nb, nt, port), port, workdir, args.log_level)
            s.name = "hopline"
            s.note = f"{nb} stdio backends, a backend session (process) per client session"
        elif name in ("fastmcp", "fastmcp-fresh"):
            why = ensure_fastmcp(args)
            if why:
                skipped[name] = why
                continue
            cfg = workdir / "mcpservers.json"
            cfg.write_text(json.dumps(tools_config_mcpservers(nb, nt), indent=1))
            s = fastmcp_server(name, port, config=cfg, session="fresh" if name == "fastmcp-fresh" else "keep")
        else:
            skipped[name] = "unknown target"
            continue
        log(f"lists: start {name}: {' '.join(s.cmd)}")
        start(s, logdir)
        try:
            err = wait_port(s, args.ready_timeout)
            if err:
                skipped[name] = err
                continue
            if args.quiet_wait:
                rr.wait_quiet(args.quiet_wait)
            try:
                r = asyncio.run(measure_lists(s, args, expect))
            except Exception as e:  # noqa: BLE001
                r = {"target": name, "fatal": f"{type(e).__name__}: {e}"}
            r["version"], r["note"], r["cmd"] = s.version, s.note, s.cmd
            results.append(r)
            if "fatal" in r:
                log(f"lists {name}: FAILED {r['fatal'][:300]}")
            else:
                log(
                    f"lists {name}: cold {r['cold_first']['cpu_ms']:.1f} CPU-ms, warm {r['warm']['cpu_ms_per_list']:.2f} CPU-ms/list "
                    f"(p50 {r['warm']['p50_ms']:.2f} ms), after list_changed {statistics.median(x['cpu_ms'] for x in r['after_list_changed']) if r['after_list_changed'] else float('nan'):.1f}, errors {r['errors']}"
                )
        finally:
            stop(s)
            time.sleep(0.5)
    md.append(
        f"{nb} backends × {nt} tools = {expect} tools (bench/gateway_backend.py over stdio; 48 dummies + echo + grow each). "
        f"Gateway CPU only (its backends are its children and are counted apart), from schedstat."
    )
    md.append("")
    cols = ("target", "cold: 1st list of a session CPU-ms (wall ms)", "cold, fresh sessions: median CPU-ms", "warm CPU-ms/list", "warm p50 / p99 ms",
            "backend CPU-ms/list (warm)", "after list_changed CPU-ms", "sees the new tool", "2026 era warm CPU-ms/list", "gateway RSS MB", "errors")  # fmt: skip
    md.append("| " + " | ".join(cols) + " |")
    md.append("|" + "---|" * len(cols))
    for r in results:
        if "fatal" in r:
            md.append(f"| {r['target']} | FAILED: {r['fatal'][:200]} |" + " |" * (len(cols) - 2))
            continue
        cold_med = statistics.median(x["cpu_ms"] for x in r["cold_sessions"]) if r["cold_sessions"] else None
        ch = r["after_list_changed"]
        ch_med = statistics.median(x["cpu_ms"] for x in ch) if ch else None
        sees = "yes" if ch and not any("after grow" in e for e in r["errors"]) else ("no" if ch else "–")
        if r.get("per_request_backends"):
            sees = "n/a (new backends per request)"
        mod = r.get("modern") or {}
        md.append(
            "| "
            + " | ".join(
                [
                    r["target"],
                    f"{r['cold_first']['cpu_ms']:.1f} ({r['cold_first']['wall_ms']:.0f})",
                    f"{fmt(cold_med, '.1f')} (n={len(r['cold_sessions'])})",
                    f"{r['warm']['cpu_ms_per_list']:.2f} (ticks {r['warm']['cpu_ms_per_list_ticks']:.2f}, n={r['warm']['lists']})",
                    f"{r['warm']['p50_ms']:.2f} / {r['warm']['p99_ms']:.2f}",
                    "–" if r.get("per_request_backends") else f"{r['warm']['backend_cpu_ms_per_list']:.2f}",
                    f"{fmt(ch_med, '.1f')} (n={len(ch)})",
                    sees,
                    ("FAILED" if "fatal" in mod else fmt(mod.get("cpu_ms_per_list"), ".2f")) if mod else "–",
                    f"{r['gateway_rss_mb']:.1f}",
                    str(len(r["errors"])),
                ]
            )
            + " |"
        )
    verdicts = list_verdicts(results)
    if verdicts:
        md.append("\nvs issue 3 targets:\n" + "\n".join(f"- {v}" for v in verdicts))
    errs = [f"{r['target']}: {e}" for r in results for e in r.get("errors", [])]
    mods = [f"{r['target']} 2026 era: {r['modern']['fatal']}" for r in results if isinstance(r.get("modern"), dict) and "fatal" in r["modern"]]
    if errs or mods:
        md.append("\nerrors:\n" + "\n".join(f"- {e}" for e in errs + mods))
    if skipped:
        md.append("\nskipped:\n" + "\n".join(f"- {k}: {v}" for k, v in skipped.items()))
    out["lists"] = {"backends": nb, "tools_per_backend": nt, "results": results, "skipped": skipped, "verdicts": verdicts}
    return md


def list_verdicts(results: list[dict]) -> list[str]:
    by = {r["target"]: r for r in results if "fatal" not in r}
    h = by.get("hopline")
    if not h:
        return []
    out = []
    warm = h["warm"]["cpu_ms_per_list"]
    cold = h["cold_first"]["cpu_ms"]
    out.append(f"hopline: {'PASS' if warm <= TARGET_LIST_CPU_MS else 'FAIL'} warm aggregated tools/list ≤ {TARGET_LIST_CPU_MS:g} CPU-ms: {warm:.2f}")
    out.append(f"hopline: {'PASS' if cold <= TARGET_LIST_CPU_MS else 'FAIL'} (stricter) cold first list ≤ {TARGET_LIST_CPU_MS:g} CPU-ms: {cold:.1f}")
    ok = not any("after grow" in e for e in h["errors"])
    out.append(f"hopline: {'PASS' if ok else 'FAIL'} cached lists invalidated on list_changed (the list right after b0's change shows the new tool)")
    for peer in ("fastmcp", "fastmcp-fresh"):
        f = by.get(peer)
        if f:
            x = f["warm"]["cpu_ms_per_list"] / warm if warm else float("inf")
            out.append(f"hopline: {'PASS' if x >= TARGET_FASTMCP_LIST_X else 'FAIL'} ≥ {TARGET_FASTMCP_LIST_X:g}× leaner than {peer} (warm lists): {x:.1f}× ({peer} {f['warm']['cpu_ms_per_list']:.1f} CPU-ms/list)")
    return out


# --------------------------------------------------------------------------- part 3: sessions


async def open_sessions(url: str, n: int, tool: str, parallel: int) -> tuple[list[Mcp], list[str], float]:
    """n handshake-era sessions; each connection is closed after its handshake (the session
    lives on in the gateway, as with a client that is idle between calls)."""
    sessions: list[Mcp] = []
    errors: list[str] = []
    sem = asyncio.Semaphore(parallel)

    async def one(i: int) -> None:
        m = Mcp(url, tool=tool, idx=i)
        async with sem:
            try:
                await asyncio.wait_for(m.open(), 45)
                sessions.append(m)
            except Exception as e:  # noqa: BLE001
                errors.append(f"{type(e).__name__}: {e}")
            finally:
                await m.cl.conn.close()

    t0 = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n)))
    return sessions, errors, time.perf_counter() - t0


async def touch_sessions(sessions: list[Mcp], parallel: int) -> int:
    """One tools/call on every session (each on a new connection, closed afterwards)."""
    sem = asyncio.Semaphore(parallel)
    ok = 0

    async def one(m: Mcp) -> None:
        nonlocal ok
        async with sem:
            try:
                if await asyncio.wait_for(m.cl.call_once(True), 20):
                    ok += 1
            except Exception:  # noqa: BLE001
                pass
            finally:
                await m.cl.conn.close()

    await asyncio.gather(*(one(m) for m in sessions))
    return ok


async def close_sessions(sessions: list[Mcp], parallel: int) -> None:
    sem = asyncio.Semaphore(parallel)

    async def one(m: Mcp) -> None:
        async with sem:
            try:
                await asyncio.wait_for(m.close(), 20)
            except Exception:  # noqa: BLE001
                pass

    await asyncio.gather(*(one(m) for m in sessions))


def mem(pid: int) -> dict:
    gw, be = tree_pids(pid)
    main_rss = rss_kb(pid)
    return {
        "gateway_rss_kb": main_rss,
        "gateway_pss_kb": rr.read_pss_kb(pid) or 0,
        "gateway_procs": len(gw),
        "backend_procs": len(be),
        "backend_rss_sum_kb": sum(rss_kb(p) for p in be),
        "backend_pss_sum_kb": sum(rr.read_pss_kb(p) or 0 for p in be),
    }


def measure_sessions(s: Server, n: int, args, backend_pid: int | None = None) -> dict:
    res: dict = {"target": s.name, "sessions": n, "note": s.note, "version": s.version}
    # warm the gateway: one full session (imports, the shared backend), closed again
    ok, why = asyncio.run(_probe_call(s.url, s.tool))
    if not ok:
        return res | {"fatal": f"probe failed: {why}"}
    time.sleep(1.0)
    res["before"] = mem(s.pid)
    res["backend_server_rss_before_kb"] = rss_kb(backend_pid) if backend_pid else None

    async def run() -> None:
        sessions, errors, dt = await open_sessions(s.url, n, s.tool, args.session_parallel)
        res["opened"] = len(sessions)
        res["open_errors"] = errors[:5]
        res["open_s"] = dt
        await asyncio.sleep(1.0)
        res["after_open"] = mem(s.pid)
        res["backend_server_rss_after_kb"] = rss_kb(backend_pid) if backend_pid else None
        res["touched_ok"] = await touch_sessions(sessions, args.session_parallel)
        await asyncio.sleep(1.0)
        res["after_call"] = mem(s.pid)
        await close_sessions(sessions, args.session_parallel)
        await asyncio.sleep(1.5)
        res["after_delete"] = mem(s.pid)

    asyncio.run(run())
    k = max(1, res["opened"])
    res["kb_per_session"] = (res["after_open"]["gateway_rss_kb"] - res["before"]["gateway_rss_kb"]) / k
    res["kb_per_session_after_call"] = (res["after_call"]["gateway_rss_kb"] - res["before"]["gateway_rss_kb"]) / k
    res["backend_kb_per_session"] = (res["after_open"]["backend_pss_sum_kb"] - res["before"]["backend_pss_sum_kb"]) / k
    if backend_pid:
        res["backend_server_kb_per_session"] = ((res["backend_server_rss_after_kb"] or 0) - (res["backend_server_rss_before_kb"] or 0)) / k
    return res


def part_sessions(args, logdir: Path, workdir: Path, out: dict) -> list[str]:
    md: list[str] = ["## 3. Memory per client session\n"]
    results: list[dict] = []
    skipped: dict[str, str] = {}
    echo_http = Server("echo-backend-sessions", [], port=rr.free_port())
    echo_http.cmd = [PY, ECHO, "http", "--port", str(echo_http.port)]
    echo_http.url = f"http://127.0.0.1:{echo_http.port}/mcp"
    cases = [c for c in args.session_cases.split(",") if c]
    need_http = any(c in ("hopline-url", "fastmcp-url") for c in cases)
    if need_http:
        start(echo_http, logdir)
        err = wait_ready(echo_http, args.ready_timeout)
        if err:
            md.append(f"the HTTP echo backend did not start: {err}")
            stop(echo_http)
            need_http = False
    try:
        for case in cases:
            port = rr.free_port()
            listen = {"host": "127.0.0.1", "port": port, "max_sessions": max(1000, args.sessions + 100)}
            n = args.sessions
            backend_pid = None
            if case == "hopline-shared":
                cfg = {"version": 1, "listen": listen, "backends": {"e": {"command": PY, "args": [ECHO, "stdio"], "stateless": True}}}
                s = hopline_server(case, cfg, port, workdir, args.log_level)
                s.note = "one stdio backend, stateless: true (shared by every session)"
            elif case == "hopline-isolated":
                cfg = {"version": 1, "listen": listen, "backends": {"e": {"command": PY, "args": [ECHO, "stdio"]}}}
                s = hopline_server(case, cfg, port, workdir, args.log_level)
                s.note = "one stdio backend, isolated (default): a backend process per session"
                n = args.isolated_sessions
            elif case == "hopline-url":
                if not need_http:
                    skipped[case] = "no HTTP echo backend"
                    continue
                cfg = {"version": 1, "listen": listen, "backends": {"e": {"url": echo_http.url}}}
                s = hopline_server(case, cfg, port, workdir, args.log_level)
                s.note = "one url backend, isolated (default): a backend HTTP session per session"
                backend_pid = echo_http.pid
                n = args.url_sessions
            elif case == "fastmcp-url":
                why = ensure_fastmcp(args) if need_http else "no HTTP echo backend"
                if why:
                    skipped[case] = why
                    continue
                s = fastmcp_server(case, port, url=echo_http.url, session="keep")
                s.note = "FastMCP proxy, one url backend, one backend session for all (keep)"
                backend_pid = echo_http.pid
            else:
                skipped[case] = "unknown case"
                continue
            if case.startswith("hopline"):
                s.tool = "e__echo"
            log(f"sessions: start {case}: {' '.join(s.cmd)}")
            start(s, logdir)
            try:
                err = wait_ready(s, args.ready_timeout)
                if err:
                    skipped[case] = err
                    continue
                r = measure_sessions(s, n, args, backend_pid)
                results.append(r)
                if "fatal" in r:
                    log(f"sessions {case}: FAILED {r['fatal']}")
                else:
                    log(
                        f"sessions {case}: {r['opened']}/{n} opened in {r['open_s']:.1f}s, gateway RSS {r['before']['gateway_rss_kb'] / 1024:.1f} → "
                        f"{r['after_open']['gateway_rss_kb'] / 1024:.1f} MB = {r['kb_per_session']:.1f} KB/session; after a call each "
                        f"{r['kb_per_session_after_call']:.1f} KB/session ({r['touched_ok']} ok); after DELETE {r['after_delete']['gateway_rss_kb'] / 1024:.1f} MB, "
                        f"backends {r['after_open']['backend_procs']}"
                    )
            finally:
                stop(s)
                time.sleep(0.5)
    finally:
        if echo_http.proc:
            stop(echo_http)
    cols = ("case", "sessions (opened / called ok)", "gateway RSS MB: before → after open → after 1 call each → after DELETE",
            "gateway KB/session (open)", "KB/session (after a call)", "backend procs (at peak)", "backends' PSS KB/session", "open time s")  # fmt: skip
    md.append("| " + " | ".join(cols) + " |")
    md.append("|" + "---|" * len(cols))
    for r in results:
        if "fatal" in r:
            md.append(f"| {r['target']} | FAILED: {r['fatal'][:200]} |" + " |" * (len(cols) - 2))
            continue
        mb = lambda d: d["gateway_rss_kb"] / 1024  # noqa: E731
        be_kb = r["backend_kb_per_session"] if r["after_open"]["backend_procs"] > 1 else None
        if r.get("backend_server_kb_per_session") is not None:
            be_txt = f"{r['backend_server_kb_per_session']:.1f} (the HTTP echo server's RSS growth)"
        else:
            be_txt = fmt(be_kb, ".0f")
        md.append(
            "| "
            + " | ".join(
                [
                    f"{r['target']}: {r['note']}",
                    f"{r['opened']}/{r['sessions']} / {r['touched_ok']}",
                    f"{mb(r['before']):.1f} → {mb(r['after_open']):.1f} → {mb(r['after_call']):.1f} → {mb(r['after_delete']):.1f}",
                    f"{r['kb_per_session']:.1f}",
                    f"{r['kb_per_session_after_call']:.1f}",
                    str(r["after_open"]["backend_procs"]),
                    be_txt,
                    f"{r['open_s']:.1f}",
                ]
            )
            + " |"
        )
    broken = [f"{r['target']}: only {r['touched_ok']} of {r['opened']} sessions answered a tools/call" for r in results if "fatal" not in r and r["touched_ok"] < r["opened"]]
    if broken:
        md.append("\nWARNING, sessions that were opened but could not call:\n" + "\n".join(f"- {b}" for b in broken))
    verdicts = []
    for r in results:
        if r["target"] == "hopline-shared" and "fatal" not in r:
            ok = r["kb_per_session"] <= TARGET_SESSION_KB and r["opened"] >= args.sessions
            verdicts.append(
                f"hopline: {'PASS' if ok else 'FAIL'} {args.sessions} concurrent sessions with ≤ {TARGET_SESSION_KB:g} KB of gateway memory each: "
                f"{r['opened']} opened, {r['kb_per_session']:.1f} KB/session ({r['kb_per_session_after_call']:.1f} after one call each)"
            )
    if verdicts:
        md.append("\nvs issue 3 targets:\n" + "\n".join(f"- {v}" for v in verdicts))
    errs = [f"{r['target']}: {e}" for r in results for e in r.get("open_errors", [])]
    if errs:
        md.append("\nsession errors (first few):\n" + "\n".join(f"- {e}" for e in errs))
    if skipped:
        md.append("\nskipped:\n" + "\n".join(f"- {k}: {v}" for k, v in skipped.items()))
    out["sessions"] = {"results": results, "skipped": skipped, "verdicts": verdicts}
    return md


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--parts", default="calls,lists,sessions", help="comma list of calls, lists, sessions")
    p.add_argument("--quick", action="store_true", help="short run (a few minutes): 1.5 s windows, 200 warm lists, 1 cold session")
    g = p.add_argument_group("calls")
    g.add_argument(
        "--targets", default="direct,hopline,hopline-shared,fastmcp,fastmcp-fresh,hopline-stdio",
        help="calls targets (default as shown; also floor (bench/floor_relay.py, a bare relay as a yardstick), hopline-policy, hopline-policy-audit, hopline-transparent, hopline-transparent-l2, "
        "hopline-transparent-socket, hopline-transparent-redirected (these two under `ip netns exec`, as root), "
        f"{RELAY_STDIO} (hopline relay --stdio to the echo backend, driven over its stdin/stdout by bench/stdio_floor.py); "
        "hopline-stdio is a reference row: the echo server as a stdio child)",
    )  # fmt: skip
    g.add_argument("-c", "--concurrency", default="1,16", help="comma list (default 1,16)")
    g.add_argument("--backend-sse", action="store_true", help="the echo backend answers with SSE (the SDK's default) instead of JSON")
    g.add_argument("--eras", default="legacy,2026", help="comma list of legacy,2026 (default both, legacy first)")
    g.add_argument("--duration", type=float, default=None, help="measured seconds per cell (default 5; --quick 1.5)")
    g.add_argument("--slow-duration", type=float, default=None, help="cap for fastmcp-fresh cells (default 5; --quick 1.5)")
    g.add_argument("--warmup", type=float, default=None, help="unmeasured seconds before each window (default 1; --quick 0.5)")
    g.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 3; --quick 2)")
    g.add_argument("--order", choices=["abab", "abba"], default="abba")
    g.add_argument("--jwt-alg", choices=["HS256", "RS256"], default="HS256", help="hopline-policy*: the static key (HS256 secret in the environment, or an RS256 PEM file)")
    g.add_argument("--target-warmup", type=float, default=None, help="seconds of load per target before the first cell (default 3; --quick 1.5)")
    g = p.add_argument_group("lists")
    g.add_argument("--list-targets", default=None, help="default hopline,fastmcp,fastmcp-fresh (--quick: without fastmcp-fresh, 6 s per list)")
    g.add_argument("--list-budget", type=float, default=None, help="seconds after which a slow target stops its warm lists, once it did 10 (default 30; --quick 10)")
    g.add_argument("--list-backends", type=int, default=10)
    g.add_argument("--list-tools", type=int, default=50, help="tools per backend")
    g.add_argument("--lists", type=int, default=None, help="warm lists on one session (default 1000; --quick 200)")
    g.add_argument("--cold-sessions", type=int, default=None, help="fresh sessions for cold lists (default 5; --quick 2)")
    g.add_argument("--grow-rounds", type=int, default=3, help="list_changed rounds (default 3)")
    g.add_argument("--no-list-modern", dest="list_modern", action="store_false", help="skip the 2026-era lists")
    g = p.add_argument_group("sessions")
    g.add_argument("--session-cases", default="hopline-shared,hopline-isolated,hopline-url,fastmcp-url")
    g.add_argument("--sessions", type=int, default=1000)
    g.add_argument("--isolated-sessions", type=int, default=50, help="sessions for hopline-isolated (a stdio process each)")
    g.add_argument(
        "--url-sessions", type=int, default=400,
        help="sessions for hopline-url (default 400: hopline's shared httpx pool has 512 connections and each isolated "
        "backend session holds one for its GET stream, so past ~510 sessions every backend request starves)",
    )  # fmt: skip
    g.add_argument("--session-parallel", type=int, default=16, help="handshakes in flight at once")
    g = p.add_argument_group("common")
    g.add_argument("--fastmcp-version", default=FASTMCP_VERSION)
    g.add_argument("--no-install", action="store_true")
    g.add_argument("--log-level", default="warning", help="hopline --log-level (default warning)")
    g.add_argument("--hopline-env", action="append", default=[], metavar="KEY=VALUE", help="extra environment for hopline processes (repeatable)")
    g.add_argument("--ready-timeout", type=float, default=90.0)
    g.add_argument("--setup-timeout", type=float, default=300.0)
    g.add_argument("--quiet-wait", type=float, default=None, help="wait up to this many s for an idle box before each window (default 5; --quick 1)")
    g.add_argument("--out", default=None)
    args = p.parse_args(argv)
    defaults = {
        "duration": (5.0, 1.5), "slow_duration": (5.0, 1.5), "warmup": (1.0, 0.5), "rounds": (3, 2), "target_warmup": (3.0, 1.5),
        "lists": (1000, 200), "cold_sessions": (5, 2), "quiet_wait": (5.0, 1.0), "list_budget": (30.0, 10.0),
        "list_targets": ("hopline,fastmcp,fastmcp-fresh", "hopline,fastmcp"),
    }  # fmt: skip
    for k, (full, quick) in defaults.items():
        if getattr(args, k) is None:
            setattr(args, k, quick if args.quick else full)
    args.concurrency = [int(x) for x in args.concurrency.split(",")]
    args.eras = [e.strip() for e in args.eras.split(",") if e.strip()]
    parts = [x.strip() for x in args.parts.split(",") if x.strip()]
    for kv in args.hopline_env:
        k, _, v = kv.partition("=")
        HOPLINE_ENV[k] = v
    try:
        import mcp.server.mcpserver  # noqa: F401
    except ImportError:
        p.error(f"{PY} lacks mcp 2.x (mcp.server.mcpserver): run with the project venv")

    stamp = time.strftime("%Y%m%d-%H%M%S")
    RESULTS.mkdir(parents=True, exist_ok=True)
    logdir = RESULTS / f"gateway-{stamp}-logs"
    logdir.mkdir()
    workdir = logdir  # configs go next to the logs
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    out: dict = {
        "issue": 3,
        "started": stamp,
        "config": vars(args) | {"parts": parts},
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "cpu_model": rr._cpu_model()},
        "versions": {"hopline": hopline_version().removeprefix("hopline "), "mcp": rr._pkg_version("mcp"), "python": platform.python_version()},
    }
    md: list[str] = []
    t0 = time.monotonic()
    for part in parts:
        fn = {"calls": part_calls, "lists": part_lists, "sessions": part_sessions}.get(part)
        if fn is None:
            p.error(f"unknown part {part!r}")
        log(f"=== part {part}")
        gc.collect()
        md += fn(args, logdir, workdir, out)
        md.append("")
    if (FASTMCP_VENV / "bin" / "python").exists():
        out["versions"]["fastmcp"] = rr._venv_pkg_version(FASTMCP_VENV, "fastmcp")
    md.append(
        "versions: "
        + "; ".join(f"{k} {v}" for k, v in out["versions"].items())
        + f"; {os.cpu_count()} CPUs ({rr._cpu_model()}); run took {time.monotonic() - t0:.0f}s"
    )
    text = "\n".join(md)
    print(text)
    path = Path(args.out) if args.out else RESULTS / f"gateway-{stamp}.json"
    out["table_md"] = text
    path.write_text(json.dumps(out, indent=1, default=str))
    path.with_suffix(".md").write_text(text + "\n")
    log(f"wrote {path} and {path.with_suffix('.md')} (logs and configs in {logdir})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
