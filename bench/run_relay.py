"""Relay benchmark (issue 2): direct vs `hopline relay` vs mcp-proxy vs Supergateway.

    . .venv/bin/activate
    python bench/run_relay.py --quick                  # short run (about 3 min on 2 cores)
    python bench/run_relay.py                          # 2 rounds x c=1,16,64 x 5 s per cell
    python bench/run_relay.py --targets direct,hopline-shared -c 1,16 --duration 10 --rounds 4
    python bench/run_relay.py --eras legacy,2026       # also the stateless 2026-07-28 era

Targets: direct (the SDK backend's own Streamable HTTP), stdio-floor (no HTTP, no relay: the
stdio backend driven over its pipe; the ceiling for a one-backend relay), hopline (`hopline
relay`, a backend per session), hopline-shared (`hopline relay --shared`), mcp-proxy, supergateway.
Every target serves the same SDK backend (bench/echo_server.py): "direct" is its Streamable HTTP
variant, the others its stdio variant.

Cells are interleaved: for each concurrency, round after round, every target in turn
(A B C A B C, or A B C C B A with --order abba), so slow drift of the machine spreads over all
targets instead of biasing one. One load generator per (target, concurrency) keeps its sessions
open across the rounds, so relays that spawn a backend per session pay that once.

For each window the load generator (bench/loadgen.py, its own process) prints markers at its
edges; at each marker this script snapshots /proc for the target's process tree (sampling it
every 200 ms in between, so processes that exit mid-window still count up to their last sample).
Processes running bench/echo_server.py are the *backend*; every other process in the tree is the
*relay*.

Peers are installed on first use: mcp-proxy==0.13.0 into its own venv bench/.peers-venv (it
pins mcp<2, so installing it into the project venv would downgrade mcp 2.3.0), Supergateway
4.0.0 with `npm install --prefix bench/.node`. A target that cannot be started is skipped with a
message; `hopline relay` is skipped until `hopline relay --help` works.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
RESULTS = BENCH / "results"
PY = sys.executable
ECHO = str(BENCH / "echo_server.py")
LOADGEN = str(BENCH / "loadgen.py")
PEERS_VENV = BENCH / ".peers-venv"
NODE_PREFIX = BENCH / ".node"
MCP_PROXY_VERSION = "0.13.0"
SUPERGATEWAY_VERSION = "4.0.0"
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024

sys.path.insert(0, str(BENCH))
import loadgen  # noqa: E402  (shared client code for readiness probes)

# Targets from the issue; numbers are the acceptance targets for hopline relay.
TARGET_CPU_MS = 0.35
TARGET_ADDED_P50_MS = 0.3
TARGET_RPS_RATIO_C16 = 0.9
TARGET_RSS_MB = 60


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- /proc


def read_stat(pid: int):
    """(ppid, utime+stime ticks, starttime, rss_pages) or None if the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            s = f.read()
    except OSError:
        return None
    rest = s[s.rfind(b")") + 2 :].split()
    # rest[0]=state, [1]=ppid, [11]=utime, [12]=stime, [19]=starttime, [21]=rss
    return int(rest[1]), int(rest[11]) + int(rest[12]), int(rest[19]), int(rest[21])


def read_cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def read_vmrss_kb(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def is_backend_cmd(argv: list[str]) -> bool:
    """A process *running* echo_server.py (not a shell that merely mentions it)."""
    if not argv:
        return False
    exe = os.path.basename(argv[0])
    return exe.startswith("python") and any(a.endswith("echo_server.py") for a in argv[1:3])


@dataclass
class Proc:
    pid: int
    ticks: int
    role: str  # "relay" | "backend"
    rss_pages: int


_cmd_cache: dict[tuple[int, int], list[str]] = {}


def snapshot_tree(root: int) -> dict[tuple[int, int], Proc]:
    """All processes in root's tree, keyed by (pid, starttime) so pid reuse cannot confuse us."""
    stats = {}
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        st = read_stat(pid)
        if st is None:
            continue
        stats[pid] = st
        children.setdefault(st[0], []).append(pid)
    out: dict[tuple[int, int], Proc] = {}
    stack = [(root, False)]
    while stack:
        pid, parent_is_backend = stack.pop()
        st = stats.get(pid)
        if st is None:
            continue
        key = (pid, st[2])
        argv = _cmd_cache.get(key)
        if argv is None:
            argv = _cmd_cache[key] = read_cmdline(pid)
        backend = parent_is_backend or is_backend_cmd(argv)
        out[key] = Proc(pid, st[1], "backend" if backend else "relay", st[3])
        stack.extend((c, backend) for c in children.get(pid, ()))
    return out


def read_cpu_totals() -> tuple[int, int]:
    """(busy, total) jiffies over all CPUs from /proc/stat."""
    with open("/proc/stat") as f:
        parts = f.readline().split()[1:]
    vals = [int(x) for x in parts[:8]]
    idle = vals[3] + vals[4]
    return sum(vals) - idle, sum(vals)


class TreeSampler:
    """Samples a process tree between two explicit snapshots; keeps each process's last value."""

    def __init__(self, root: int, interval: float = 0.2):
        self.root, self.interval = root, interval
        self.first: dict = {}
        self.last: dict = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self.first = snapshot_tree(self.root)
        self.last = dict(self.first)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.last.update(snapshot_tree(self.root))

    def stop(self) -> dict:
        self._stop.set()
        if self._thread:
            self._thread.join()
        final = snapshot_tree(self.root)
        self.last.update(final)
        res = {"relay_ticks": 0, "backend_ticks": 0, "relay_procs": 0, "backend_procs": 0}
        res |= {"relay_rss_kb": 0, "relay_rss_sum_kb": 0, "relay_pss_kb": 0, "backend_rss_sum_kb": 0, "backend_pss_kb": 0}
        for key, p in self.last.items():
            before = self.first.get(key)
            res[p.role + "_ticks"] += p.ticks - (before.ticks if before else 0)
        for key, p in final.items():
            rss = read_vmrss_kb(p.pid)
            rss = rss if rss is not None else p.rss_pages * PAGE_KB
            res[p.role + "_rss_sum_kb"] += rss
            res[p.role + "_pss_kb"] += read_pss_kb(p.pid) or 0
            res[p.role + "_procs"] += 1
            if p.role == "relay":  # the serving process = the largest relay process (node, python)
                res["relay_rss_kb"] = max(res["relay_rss_kb"], rss)
        res["relay_pids"] = sorted(p.pid for p in final.values() if p.role == "relay")
        return res


def read_pss_kb(pid: int) -> int | None:
    """Proportional set size: shared pages split between their users, so sums over many
    processes (a backend per session, a shell per backend) are not inflated."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def count_backends(root: int) -> int:
    return sum(1 for p in snapshot_tree(root).values() if p.role == "backend")


# --------------------------------------------------------------------------- targets


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_quiet(cmd: list[str], timeout: float = 600, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)


@dataclass
class Target:
    name: str
    modern: str = "yes"  # "yes" | "no" (legacy-only: skipped for the 2026 era) | "slow"
    note: str = ""
    version: str = ""
    skip: str | None = None
    cmd: list[str] = field(default_factory=list)
    proc: subprocess.Popen | None = None
    port: int = 0
    log_path: Path | None = None
    floor: bool = False  # the stdio floor: no server, bench/stdio_floor.py drives the backend itself

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"


def prepare_direct(t: Target, args) -> None:
    t.version = "mcp " + _pkg_version("mcp")
    t.cmd = [PY, ECHO, "http", "--port", str(t.port)]
    t.note = "SDK Streamable HTTP (uvicorn), stateful sessions, JSON responses"


def _pkg_version(name: str) -> str:
    try:
        from importlib.metadata import version

        return version(name)
    except Exception:  # noqa: BLE001
        return "?"


def prepare_hopline(t: Target, args, shared: bool = False) -> None:
    exe = shutil.which("hopline", path=str(Path(PY).parent)) or shutil.which("hopline")
    base = [exe] if exe else [PY, "-m", "hopline"]
    try:
        r = run_quiet(base + ["relay", "--help"], timeout=30, cwd=REPO)
    except Exception as e:  # noqa: BLE001
        t.skip = f"`hopline relay --help` failed to run: {e}"
        return
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["?"])[-1]
        t.skip = f"`hopline relay` is not usable yet (`hopline relay --help` exit {r.returncode}: {last})"
        return
    if shared and "--shared" not in r.stdout:
        t.skip = "`hopline relay` has no --shared flag"
        return
    t.version = "hopline " + _pkg_version("hopline")
    try:
        rev = run_quiet(["git", "-C", str(REPO), "describe", "--always", "--dirty"], timeout=10).stdout.strip()
        if rev:
            t.version += f" ({rev})"
    except Exception:  # noqa: BLE001
        pass
    t.cmd = base + ["--log-level", args.peer_log_level, "relay", "--port", str(t.port), "--host", "127.0.0.1"]
    t.cmd += ["--shared"] if shared else []
    t.cmd += ["--", PY, ECHO, "stdio"]
    t.note = "hopline relay --shared: one backend for all sessions" if shared else "hopline relay: one backend per legacy session"


def prepare_mcp_proxy(t: Target, args) -> None:
    exe = PEERS_VENV / "bin" / "mcp-proxy"
    if not exe.exists() or _venv_pkg_version(PEERS_VENV, "mcp-proxy") != MCP_PROXY_VERSION:
        if args.no_install:
            t.skip = f"mcp-proxy not installed in {PEERS_VENV} (and --no-install)"
            return
        log(f"installing mcp-proxy=={MCP_PROXY_VERSION} into {PEERS_VENV.relative_to(REPO)} (own venv: it pins mcp<2)")
        try:
            if not (PEERS_VENV / "bin" / "python").exists():
                r = run_quiet([PY, "-m", "venv", str(PEERS_VENV)])
                if r.returncode != 0:
                    raise RuntimeError(r.stderr.strip()[-300:])
            r = run_quiet([str(PEERS_VENV / "bin" / "python"), "-m", "pip", "install", "-q", f"mcp-proxy=={MCP_PROXY_VERSION}"])
            if r.returncode != 0:
                raise RuntimeError(r.stderr.strip()[-300:])
        except Exception as e:  # noqa: BLE001
            t.skip = f"could not install mcp-proxy: {e}"
            return
    t.version = f"mcp-proxy {_venv_pkg_version(PEERS_VENV, 'mcp-proxy')} (mcp {_venv_pkg_version(PEERS_VENV, 'mcp')})"
    # Stdio server exposed on --port: SSE at /sse and Streamable HTTP at /mcp (JSON responses, stateful).
    t.cmd = [str(exe), "--host", "127.0.0.1", "--port", str(t.port), "--log-level", args.peer_log_level.upper(), "--", PY, ECHO, "stdio"]
    t.modern = "no"
    t.note = "one shared stdio backend; MCP SDK 1.x server: legacy era only"


def _venv_pkg_version(venv: Path, name: str) -> str | None:
    py = venv / "bin" / "python"
    if not py.exists():
        return None
    r = run_quiet([str(py), "-c", f"from importlib.metadata import version; print(version({name!r}))"], timeout=60)
    return r.stdout.strip() if r.returncode == 0 else None


def prepare_supergateway(t: Target, args) -> None:
    node = shutil.which("node")
    if not node:
        t.skip = "node is not installed"
        return
    entry = NODE_PREFIX / "node_modules" / "supergateway" / "dist" / "index.js"
    pkg = NODE_PREFIX / "node_modules" / "supergateway" / "package.json"
    have = json.loads(pkg.read_text()).get("version") if pkg.exists() else None
    if have != SUPERGATEWAY_VERSION:
        if args.no_install:
            t.skip = f"supergateway not installed under {NODE_PREFIX} (and --no-install)"
            return
        npm = shutil.which("npm")
        if not npm:
            t.skip = "npm is not installed"
            return
        log(f"installing supergateway@{SUPERGATEWAY_VERSION} into {NODE_PREFIX.relative_to(REPO)}")
        r = run_quiet([npm, "install", "--no-audit", "--no-fund", "--prefix", str(NODE_PREFIX), f"supergateway@{SUPERGATEWAY_VERSION}"])
        if r.returncode != 0 or not entry.exists():
            t.skip = f"npm install supergateway failed: {r.stderr.strip()[-300:]}"
            return
    node_v = run_quiet([node, "--version"], timeout=30).stdout.strip()
    t.version = f"supergateway {json.loads(pkg.read_text()).get('version')} (node {node_v})"
    # --stateful: the only stdio→Streamable HTTP mode that keeps a backend across requests;
    # it spawns one backend process per MCP session. --logLevel none: at the default "info" it
    # logs every message in both directions, which would be an unfair CPU tax.
    t.cmd = [
        node, str(entry),
        "--stdio", f"{PY} {ECHO} stdio",
        "--outputTransport", "streamableHttp", "--stateful",
        "--port", str(t.port), "--logLevel", args.supergateway_log_level,
    ]  # fmt: skip
    t.modern = "slow"
    t.note = "one stdio backend per session (--stateful); 2026 era spawns a backend per request"


def prepare_floor(t: Target, args) -> None:
    t.floor = True
    t.version = "mcp " + _pkg_version("mcp")
    t.cmd = [PY, str(BENCH / "stdio_floor.py")]
    t.note = "no HTTP, no relay: c requests in flight on ONE stdio backend's pipe (ceiling for a shared-backend relay)"


PREPARE = {
    "direct": prepare_direct,
    "stdio-floor": prepare_floor,
    "hopline": prepare_hopline,
    "hopline-shared": lambda t, args: prepare_hopline(t, args, shared=True),
    "mcp-proxy": prepare_mcp_proxy,
    "supergateway": prepare_supergateway,
}


def start_target(t: Target, logdir: Path) -> None:
    t.log_path = logdir / f"{t.name}.log"
    f = open(t.log_path, "wb")
    t.proc = subprocess.Popen(t.cmd, cwd=REPO, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    f.close()


def stop_target(t: Target) -> None:
    p = t.proc
    if p is None:
        return
    t.proc = None
    if p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGTERM)  # the group we created with start_new_session
        except ProcessLookupError:
            pass
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(5)
    else:
        try:  # leftovers of a dead leader
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


async def _probe(url: str) -> tuple[bool, str]:
    stats = loadgen.Stats()
    cl = loadgen.Client(0, url, "legacy", stats, 32)
    try:
        await asyncio.wait_for(cl.conn.connect(), 2)
        await asyncio.wait_for(cl.handshake(), 20)
        await asyncio.wait_for(cl.call_once(True), 20)
    except Exception as e:  # noqa: BLE001
        return False, f"{type(e).__name__}: {e}"
    finally:
        await cl.goodbye()
    return stats.ok == 1, (stats.error_samples or ["ok"])[0]


def wait_ready(t: Target, timeout: float) -> str | None:
    """Poll with a real handshake + tools/call until it answers correctly. Returns an error or None."""
    deadline = time.monotonic() + timeout
    last = "no answer"
    while time.monotonic() < deadline:
        if t.proc.poll() is not None:
            return f"exited with code {t.proc.returncode} (see {t.log_path})"
        try:
            with socket.create_connection(("127.0.0.1", t.port), timeout=0.5):
                pass
        except OSError as e:
            last = str(e)
            time.sleep(0.1)
            continue
        ok, last = asyncio.run(_probe(t.url))
        if ok:
            return None
        time.sleep(0.2)
    return f"not ready after {timeout:.0f}s: {last} (see {t.log_path})"


# --------------------------------------------------------------------------- cells


class LoadgenSession:
    """One loadgen process holding ``c`` open MCP sessions on a target across several windows."""

    def __init__(self, t: Target, c: int, era: str, setup_timeout: float):
        self.t, self.c, self.era = t, c, era
        cmd = t.cmd if t.floor else [PY, LOADGEN, "--url", t.url]
        cmd = cmd + ["-c", str(c), "--era", era, "--serve", "--markers", "--json", "--samples", "--setup-timeout", str(setup_timeout)]
        self.p = subprocess.Popen(cmd, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
        self.fatal: str | None = None
        self.setup_s = None
        line = self.p.stdout.readline().strip()
        if line.startswith("#READY"):
            self.setup_s = json.loads(line.split(" ", 1)[1]).get("setup_s")
        else:
            err = json.loads(line).get("fatal") if line.startswith("{") else (line or self.p.stderr.read().strip()[-400:])
            self.fatal = f"loadgen setup failed: {err}"
            self.close()

    def window(self, warmup: float, duration: float) -> dict:
        if self.fatal:
            return {"fatal": self.fatal}
        floor = self.t.floor
        sampler = TreeSampler(self.p.pid if floor else self.t.proc.pid)
        lg_pid = self.p.pid
        self.p.stdin.write(f"RUN {warmup} {duration}\n")
        self.p.stdin.flush()
        tree = sys0 = sys1 = lg0 = lg1 = None
        me0 = me1 = 0.0
        result = None
        while True:
            line = self.p.stdout.readline()
            if not line:
                break
            line = line.strip()
            if line == "#MEASURE_START":
                me0 = time.process_time()  # this orchestrator (its /proc sampling) is ours too
                sys0 = read_cpu_totals()
                lg0 = read_stat(lg_pid)
                sampler.start()
            elif line == "#MEASURE_END":
                sys1 = read_cpu_totals()
                lg1 = read_stat(lg_pid)
                tree = sampler.stop()
                me1 = time.process_time()
            elif line.startswith("{"):
                result = json.loads(line)
                break
        if sampler._thread is not None and tree is None:
            tree = sampler.stop()
        if result is None or tree is None:
            self.fatal = f"loadgen died (exit {self.p.poll()}): {self.p.stderr.read().strip()[-400:]}"
            return {"fatal": self.fatal}
        n = result["requests"]
        result["setup_s"] = self.setup_s
        if floor:  # the sampled tree is driver (= the load generator) + backend; no relay
            lg0 = lg1 = None
            tree["relay_ticks"] = 0
            tree["relay_rss_kb"] = tree["relay_rss_sum_kb"] = tree["relay_pss_kb"] = 0
            tree["relay_procs"] = 0
        result["relay_cpu_ms"] = tree["relay_ticks"] * 1000 / CLK_TCK
        result["backend_cpu_ms"] = tree["backend_ticks"] * 1000 / CLK_TCK
        result["relay_cpu_ms_per_req"] = result["relay_cpu_ms"] / n if n else None
        result["backend_cpu_ms_per_req"] = result["backend_cpu_ms"] / n if n else None
        result["relay_rss_mb"] = tree["relay_rss_kb"] / 1024  # VmRSS of the serving process
        result["relay_rss_sum_mb"] = tree["relay_rss_sum_kb"] / 1024  # VmRSS summed over relay processes
        result["relay_pss_mb"] = tree["relay_pss_kb"] / 1024  # PSS summed over relay processes
        result["backend_rss_mb"] = tree["backend_rss_sum_kb"] / 1024
        result["backend_pss_mb"] = tree["backend_pss_kb"] / 1024
        result["relay_procs"] = tree["relay_procs"]  # incl. helpers such as `sh -c` wrappers
        result["backend_procs"] = tree["backend_procs"]
        if sys0 and sys1 and sys1[1] > sys0[1]:
            busy = sys1[0] - sys0[0]
            total = sys1[1] - sys0[1]
            ncpu = os.cpu_count() or 1
            lg_ticks = (lg1[1] - lg0[1]) if lg0 and lg1 else round(result["loadgen_cpu_s"] * CLK_TCK)
            ours = tree["relay_ticks"] + tree["backend_ticks"] + lg_ticks + (me1 - me0) * CLK_TCK
            result["orchestrator_cpu_s"] = me1 - me0
            result["box_busy"] = busy / total  # fraction of all CPUs
            # CPU used by anything outside this benchmark (other jobs on the box), in cores
            result["other_cores"] = max(0.0, (busy - ours) / total * ncpu)
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


def run_oneshot(t: Target, c: int, duration: float) -> dict:
    """Unmeasured load, used to warm a target up."""
    cmd = [PY, LOADGEN, "--url", t.url, "-c", str(c), "--duration", str(duration), "--warmup", "0", "--json"]
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=duration + 300)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    return json.loads(lines[-1]) if lines else {"fatal": r.stderr.strip()[-300:]}


def wait_quiet(max_wait: float, threshold_cores: float = 0.15) -> float:
    """Wait (up to max_wait s) until the box is nearly idle; returns the last busy level in cores.
    The box is shared (other jobs may run tests); this keeps their bursts out of our windows."""
    ncpu = os.cpu_count() or 1
    deadline = time.monotonic() + max_wait
    while True:
        a = read_cpu_totals()
        time.sleep(0.25)
        b = read_cpu_totals()
        cores = (b[0] - a[0]) / max(1, b[1] - a[1]) * ncpu
        if cores <= threshold_cores or time.monotonic() >= deadline:
            return cores


# --------------------------------------------------------------------------- aggregation


def aggregate(cells: list[dict]) -> dict:
    ok = [x for x in cells if "fatal" not in x]
    if not ok:
        return {"fatal": cells[0].get("fatal", "?") if cells else "no cells"}
    lat = sorted(v for x in ok for v in x.get("latencies_us", []))
    req = sum(x["requests"] for x in ok)
    win = sum(x["window_s"] for x in ok)

    def per_req(key: str):
        return sum(x[key] for x in ok) / req if req else None

    per_round = [x["rps"] for x in ok]
    mean_rps = sum(per_round) / len(per_round)
    return {
        "rounds": len(ok),
        "requests": req,
        "rps": req / win if win else 0.0,
        "rps_per_round": per_round,
        "rps_spread": (max(per_round) - min(per_round)) / mean_rps if mean_rps else None,
        "p50_ms": loadgen.percentile(lat, 0.50) / 1000 if lat else None,
        "p99_ms": loadgen.percentile(lat, 0.99) / 1000 if lat else None,
        "errors": sum(x["errors"] for x in ok),
        "error_samples": [s for x in ok for s in x["error_samples"]][:5],
        "relay_cpu_ms_per_req": per_req("relay_cpu_ms"),
        "backend_cpu_ms_per_req": per_req("backend_cpu_ms"),
        "loadgen_cpu_ms_per_req": sum(x["loadgen_cpu_s"] for x in ok) * 1000 / req if req else None,
        "loadgen_cpu_util_max": max(x["loadgen_cpu_util"] or 0 for x in ok),
        "box_busy": sum(x.get("box_busy", 0) for x in ok) / len(ok),
        "other_cores": sum(x.get("other_cores", 0) for x in ok) / len(ok),
        "other_cores_max": max(x.get("other_cores", 0) for x in ok),
        "relay_rss_mb": max(x["relay_rss_mb"] for x in ok),
        "relay_pss_mb": max(x["relay_pss_mb"] for x in ok),
        "relay_procs": max(x["relay_procs"] for x in ok),
        "backend_pss_mb": max(x["backend_pss_mb"] for x in ok),
        "backend_rss_mb": max(x["backend_rss_mb"] for x in ok),
        "backend_procs": max(x["backend_procs"] for x in ok),
        "sse_share": sum(x["sse_responses"] for x in ok) / max(1, sum(x["sse_responses"] + x["json_responses"] for x in ok)),
        "setup_s": max(x["setup_s"] for x in ok),
    }


def fmt(v, spec=".2f", dash="–") -> str:
    if v is None or (isinstance(v, float) and v != v):
        return dash
    return format(v, spec)


COLUMNS = (
    "target", "c", "req/s", "req/s ×direct", "p50 ms", "+p50 ms", "p99 ms", "+p99 ms",
    "relay CPU-ms/req", "relay CPU ÷ direct", "backend CPU-ms/req", "total CPU ×direct",
    "RSS MB", "RSS ×direct", "loadgen CPU-ms/req", "box busy / other cores", "errors",
)  # fmt: skip


def render_table(agg: dict, targets: list[str], concurrencies: list[int], era: str) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for c in concurrencies:
        d = agg.get((era, "direct", c))
        d_ok = d and "fatal" not in d
        for name in targets:
            a = agg.get((era, name, c))
            if a is None:
                continue
            if "fatal" in a:
                lines.append(f"| {name} | {c} | FAILED: {a['fatal'][:150]} |" + " |" * (len(COLUMNS) - 3))
                continue
            is_direct = name == "direct"
            no_relay = name in ("direct", "stdio-floor")
            relay_cpu = None if no_relay else a["relay_cpu_ms_per_req"]
            rss = a["backend_rss_mb"] if no_relay else a["relay_rss_mb"]
            total = (relay_cpu or 0) + (a["backend_cpu_ms_per_req"] or 0)
            rps_x = add50 = add99 = cpu_x = tot_x = rss_x = None
            if d_ok and not is_direct:
                rps_x = a["rps"] / d["rps"] if d["rps"] else None
                add50 = a["p50_ms"] - d["p50_ms"] if a["p50_ms"] is not None and d["p50_ms"] is not None else None
                add99 = a["p99_ms"] - d["p99_ms"] if a["p99_ms"] is not None and d["p99_ms"] is not None else None
                dcpu = d["backend_cpu_ms_per_req"]
                cpu_x = relay_cpu / dcpu if (relay_cpu is not None and dcpu) else None
                tot_x = total / dcpu if dcpu else None
                rss_x = rss / d["backend_rss_mb"] if (d["backend_rss_mb"] and not no_relay) else None
            procs = "" if a["backend_procs"] <= 1 else f" ({a['backend_procs']} procs)"
            helpers = "" if a.get("relay_procs", 1) <= 1 else f" (+{a['relay_procs'] - 1} helper procs, PSS Σ {a['relay_pss_mb']:.0f})"
            row = [
                name, str(c), fmt(a["rps"], ".0f"), "1" if is_direct else fmt(rps_x),
                fmt(a["p50_ms"], ".3f"), "" if is_direct else fmt(add50, "+.3f"),
                fmt(a["p99_ms"], ".2f"), "" if is_direct else fmt(add99, "+.2f"),
                "(none)" if no_relay else fmt(relay_cpu, ".3f"), "" if no_relay else fmt(cpu_x),
                fmt(a["backend_cpu_ms_per_req"], ".3f") + procs, "1" if is_direct else fmt(tot_x),
                fmt(rss, ".1f") + (" (backend)" if no_relay else helpers), "" if no_relay else fmt(rss_x),
                fmt(a["loadgen_cpu_ms_per_req"], ".3f"),
                f"{fmt(a['box_busy'] * 100, '.0f')}% / {fmt(a['other_cores'], '.2f')}", str(a["errors"]),
            ]  # fmt: skip
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def verdict(agg: dict, targets: list[str], concurrencies: list[int], era: str) -> list[str]:
    """Issue 2's acceptance targets, for each hopline variant measured."""
    out = []

    def get(name, c):
        a = agg.get((era, name, c))
        return a if a and "fatal" not in a else None

    for h in [n for n in targets if n.startswith("hopline")]:
        cpus = [get(h, c)["relay_cpu_ms_per_req"] for c in concurrencies if get(h, c)]
        if cpus:
            worst = max(cpus)
            out.append(f"{h}: {'PASS' if worst <= TARGET_CPU_MS else 'FAIL'} relay CPU ≤ {TARGET_CPU_MS} ms/req: worst {worst:.3f}")
        h1, d1 = get(h, 1), get("direct", 1)
        if h1 and d1:
            add = h1["p50_ms"] - d1["p50_ms"]
            out.append(f"{h}: {'PASS' if add <= TARGET_ADDED_P50_MS else 'FAIL'} added p50 at c=1 ≤ {TARGET_ADDED_P50_MS} ms: {add:+.3f}")
        h16, d16 = get(h, 16), get("direct", 16)
        if h16 and d16:
            r = h16["rps"] / d16["rps"]
            peers = {n: get(n, 16)["rps"] for n in ("mcp-proxy", "supergateway") if n in targets and get(n, 16)}
            above = all(h16["rps"] > v for v in peers.values())
            out.append(
                f"{h}: {'PASS' if r >= TARGET_RPS_RATIO_C16 and above else 'FAIL'} c=16 throughput ≥ {TARGET_RPS_RATIO_C16}× direct "
                f"and above every peer: {r:.2f}× direct, {h16['rps']:.0f} req/s vs "
                + (", ".join(f"{n} {v:.0f}" for n, v in peers.items()) or "no peer measured")
            )
        rss = [get(h, c)["relay_rss_mb"] for c in concurrencies if get(h, c)]
        if rss:
            out.append(f"{h}: {'PASS' if max(rss) <= TARGET_RSS_MB else 'FAIL'} RSS ≤ {TARGET_RSS_MB} MB: max {max(rss):.1f}")
    return out


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--targets",
        default="direct,stdio-floor,hopline,hopline-shared,mcp-proxy,supergateway",
        help=f"comma list from {', '.join(PREPARE)} (default: all)",
    )
    p.add_argument("-c", "--concurrency", default="1,16,64", help="comma list of virtual clients (default 1,16,64)")
    p.add_argument("--eras", default="legacy", help="comma list of legacy,2026 (default legacy)")
    p.add_argument("--duration", type=float, default=None, help="measured seconds per cell (default 5; --quick 1.5)")
    p.add_argument("--warmup", type=float, default=None, help="unmeasured seconds before each window (default 1; --quick 0.5)")
    p.add_argument("--rounds", type=int, default=None, help="interleaved rounds over all targets (default 2: A B A B)")
    p.add_argument("--order", choices=["abab", "abba"], default="abab", help="abba reverses the target order on odd rounds")
    p.add_argument("--target-warmup", type=float, default=None, help="seconds of c=16 load per target before the first cell (default 3; --quick 1.5)")
    p.add_argument("--quick", action="store_true", help="short run: defaults become --duration 1.5 --warmup 0.5 --target-warmup 1.5 --quiet-wait 1")
    p.add_argument("--ready-timeout", type=float, default=60.0)
    p.add_argument(
        "--slow-max-c", type=int, default=1,
        help="2026 era: highest concurrency for targets that spawn a backend per request (supergateway); default 1",
    )  # fmt: skip
    p.add_argument("--setup-timeout", type=float, default=300.0, help="max seconds for a loadgen to open all its sessions")
    p.add_argument("--quiet-wait", type=float, default=None, help="before each window wait up to this many seconds for the box to be idle (default 5; --quick 1; 0: never)")
    p.add_argument("--no-install", action="store_true", help="never install peers; skip what is missing")
    p.add_argument("--peer-log-level", default="warning", help="log level for hopline and mcp-proxy (default warning)")
    p.add_argument("--supergateway-log-level", default="none", help="supergateway --logLevel (default none)")
    p.add_argument("--out", default=None, help="JSON output path (default bench/results/relay-<time>.json)")
    args = p.parse_args(argv)
    defaults = {"duration": (5.0, 1.5), "warmup": (1.0, 0.5), "rounds": (2, 2), "target_warmup": (3.0, 1.5), "quiet_wait": (5.0, 1.0)}
    for k, (full, quick) in defaults.items():
        if getattr(args, k) is None:
            setattr(args, k, quick if args.quick else full)

    names = [n.strip() for n in args.targets.split(",") if n.strip()]
    bad = [n for n in names if n not in PREPARE]
    if bad:
        p.error(f"unknown target(s) {bad}; choose from {list(PREPARE)}")
    concurrencies = [int(x) for x in args.concurrency.split(",")]
    eras = [e.strip() for e in args.eras.split(",")]
    for e in eras:
        if e not in ("legacy", "2026"):
            p.error(f"unknown era {e!r}")
    try:
        import mcp.server.mcpserver  # noqa: F401
    except ImportError:
        p.error(f"{PY} lacks mcp 2.x (mcp.server.mcpserver): run with the project venv")

    stamp = time.strftime("%Y%m%d-%H%M%S")
    RESULTS.mkdir(parents=True, exist_ok=True)
    logdir = RESULTS / f"relay-{stamp}-logs"
    logdir.mkdir()

    targets: list[Target] = []
    skipped: dict[str, str] = {}
    for n in names:
        t = Target(n, port=free_port())
        PREPARE[n](t, args)
        if t.skip:
            log(f"SKIP {n}: {t.skip}")
            skipped[n] = t.skip
        else:
            targets.append(t)
    if not targets:
        log("nothing to run")
        return 1

    running: list[Target] = []

    def cleanup(*_):
        for t in running:
            stop_target(t)

    signal.signal(signal.SIGTERM, lambda *_: (cleanup(), sys.exit(143)))
    cells: list[dict] = []
    leaks: list[str] = []
    try:
        for t in targets:
            if t.floor:
                continue
            log(f"start {t.name}: {' '.join(t.cmd)}")
            start_target(t, logdir)
            running.append(t)
            err = wait_ready(t, args.ready_timeout)
            if err:
                log(f"SKIP {t.name}: {err}")
                skipped[t.name] = err
                stop_target(t)
                running.remove(t)
        live = [t for t in targets if t.proc is not None or t.floor]
        for t in live:
            if t.floor:
                continue
            w = run_oneshot(t, 16, args.target_warmup)
            log(f"warmed {t.name}: {fmt(w.get('rps'), '.0f')} req/s {w.get('fatal', '')}")

        # Concurrency-major so that one loadgen (c open sessions) per target serves all rounds at
        # that concurrency: relays that spawn a backend per session pay that start-up once.
        # Within a concurrency the targets are interleaved round by round (A B A B, or A B B A).
        blocks = []
        for era in eras:
            for c in concurrencies:
                ts = [
                    t for t in live
                    if not (era == "2026" and (t.modern == "no" or (t.modern == "slow" and c > args.slow_max_c)))
                ]  # fmt: skip
                blocks.append((era, c, ts))
                for t in live:
                    if t not in ts:
                        skipped.setdefault(
                            f"{t.name} in the 2026 era",
                            "legacy-only (MCP SDK 1.x server)" if t.modern == "no"
                            else f"spawns a backend per request; only c ≤ {args.slow_max_c} (--slow-max-c)",
                        )  # fmt: skip
        n_cells = sum(len(ts) for *_, ts in blocks) * args.rounds
        per_cell = args.duration + args.warmup + 0.5
        log(f"{n_cells} cells, ≥ {n_cells * per_cell:.0f}s of load (+ session set-up)")
        i = 0
        for era, c, ts in blocks:
            sessions: dict[str, LoadgenSession] = {}
            try:
                for r in range(args.rounds):
                    order = ts if (args.order == "abab" or r % 2 == 0) else list(reversed(ts))
                    for t in order:
                        i += 1
                        if not t.floor and t.proc.poll() is not None:
                            res = {"fatal": f"{t.name} died (exit {t.proc.returncode}, see {t.log_path})"}
                        else:
                            if t.name not in sessions:
                                t0 = time.monotonic()
                                sessions[t.name] = LoadgenSession(t, c, era, args.setup_timeout)
                                log(f"{t.name}: {c} session(s) ({era}) set up in {time.monotonic() - t0:.1f}s")
                            if args.quiet_wait:
                                wait_quiet(args.quiet_wait)
                            res = sessions[t.name].window(args.warmup, args.duration)
                        res.update({"round": r, "era": era, "concurrency": c, "target": t.name})
                        cells.append(res)
                        if "fatal" in res:
                            log(f"[{i}/{n_cells}] r{r} {era} c={c} {t.name}: FAILED {res['fatal'][:200]}")
                        else:
                            log(
                                f"[{i}/{n_cells}] r{r} {era} c={c:<3} {t.name:<12} {res['rps']:7.0f} req/s p50 {res['p50_ms']:.3f} "
                                f"p99 {res['p99_ms']:.2f} relay {fmt(res['relay_cpu_ms_per_req'], '.3f')} backend "
                                f"{fmt(res['backend_cpu_ms_per_req'], '.3f')} CPU-ms/req, loadgen {res['loadgen_cpu_util'] * 100:.0f}% "
                                f"other {fmt(res.get('other_cores'), '.2f')} cores, err {res['errors']}"
                            )
            finally:
                for sess in sessions.values():
                    sess.close()
            if era == "legacy":
                time.sleep(1.0)
                for t in ts:
                    if t.floor or t.proc is None or t.proc.poll() is not None:
                        continue
                    n = count_backends(t.proc.pid)
                    if n > 1 or (n == 1 and t.name in ("hopline", "supergateway")):
                        msg = f"{t.name}: {n} backend process(es) still running 1 s after all c={c} sessions were DELETEd"
                        log("WARNING " + msg)
                        leaks.append(msg)
    finally:
        cleanup()

    agg: dict = {}
    for era in eras:
        for c in concurrencies:
            for t in targets:
                sel = [x for x in cells if x["era"] == era and x["concurrency"] == c and x["target"] == t.name]
                if sel:
                    agg[(era, t.name, c)] = aggregate(sel)

    shown = [t.name for t in targets if t.name not in skipped]
    out_md = []
    for era in eras:
        out_md.append(f"\n### era {era}: {args.rounds} interleaved rounds × {args.duration:g}s per cell\n")
        out_md.append(render_table(agg, shown, concurrencies, era))
        v = verdict(agg, shown, concurrencies, era)
        if v:
            out_md.append("\nhopline relay vs issue 2 targets:\n" + "\n".join(f"- {x}" for x in v))
    if leaks:
        out_md.append("\nWARNING, sessions that were DELETEd kept their backends:\n" + "\n".join(f"- {x}" for x in leaks))
    if skipped:
        out_md.append("\nskipped:\n" + "\n".join(f"- {k}: {v}" for k, v in skipped.items()))
    warn = [
        f"{k[1]} c={k[2]} ({k[0]}): loadgen used {a['loadgen_cpu_util_max'] * 100:.0f}% of a core"
        for k, a in agg.items()
        if "fatal" not in a and a["loadgen_cpu_util_max"] > 0.7
    ]
    if warn:
        out_md.append("\nWARNING, the load generator may be a bottleneck:\n" + "\n".join(f"- {w}" for w in warn))
    noisy = [
        f"{k[1]} c={k[2]} ({k[0]}): up to {a['other_cores_max']:.2f} cores used by other processes"
        for k, a in agg.items()
        if "fatal" not in a and a["other_cores_max"] > 0.15
    ]
    if noisy:
        out_md.append("\nWARNING, other processes were busy during some windows (numbers are noisier):\n" + "\n".join(f"- {w}" for w in noisy))
    out_md.append(
        "\nversions: " + "; ".join(f"{t.name}: {t.version}" for t in targets if t.version) + f"; python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs"
    )
    text = "\n".join(out_md)
    print(text)

    out = Path(args.out) if args.out else RESULTS / f"relay-{stamp}.json"
    for x in cells:
        x.pop("latencies_us", None)
    doc = {
        "issue": 2,
        "started": stamp,
        "config": vars(args) | {"targets": names, "concurrency": concurrencies, "eras": eras},
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "cpu_model": _cpu_model()},
        "targets": {t.name: {"cmd": t.cmd, "version": t.version, "note": t.note, "modern": t.modern} for t in targets},
        "skipped": skipped,
        "leaks": leaks,
        "summary": [{"era": k[0], "target": k[1], "concurrency": k[2], **v} for k, v in agg.items()],
        "cells": cells,
        "table_md": text,
    }
    out.write_text(json.dumps(doc, indent=1, default=str))
    (out.with_suffix(".md")).write_text(text + "\n")
    log(f"wrote {out} and {out.with_suffix('.md')} (target logs in {logdir})")
    return 0


def _cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


if __name__ == "__main__":
    sys.exit(main())
