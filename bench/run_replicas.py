"""Replicas benchmark (issue 15): what shared state costs a proxied call, and what replicas buy.

    . .venv/bin/activate
    python bench/run_replicas.py --quick                 # every part, about 4 min on 2 cores
    python bench/run_replicas.py                         # 3 rounds x 5 s cells, 100 resumes (about 10 min)
    python bench/run_replicas.py --parts state --eras legacy -c 1,16 --rounds 4
    python bench/run_replicas.py --parts lb,resume --replicas 2

Every hopline process is ``hopline serve`` with one ``url`` backend ``e`` (the tool is
``e__echo``): the SDK echo server over Streamable HTTP (bench/echo_server.py http, stateful,
JSON responses), one process for every gateway, as in bench/run_gateway.py. The script starts
Redis (Debian's ``redis-server``, no persistence) and HAProxy on loopback, and stops them.

Parts (``--parts state,lb,resume``):

1. **state**: the same single replica without ``state:`` (``one``) and with it (``state``:
   ``session_key`` + ``redis_url`` to that Redis), each talked to directly, handshake era and
   2026-07-28 era, c=1 and c=16: gateway CPU-ms per call and p50 of each, and the difference
   (issue 15's targets: ≤ 0.1 CPU-ms and ≤ 0.3 ms p50 added).
2. **lb**: HAProxy ``balance roundrobin``, no stickiness, in front of ``--replicas`` replicas
   sharing Redis (``lb-N``), vs one replica behind the same HAProxy (``lb-1``), c=1, 16 and 64:
   calls/s, p50, CPU-ms per call summed over the replicas (and each replica's), HAProxy's,
   Redis's and the backend's CPU per call, calls served per replica and sessions resumed (from
   each replica's ``/metrics``). In the handshake era every session moves: HAProxy sends each
   request to the next replica. The largest c is the **throughput** table: 3 replicas vs 1 on
   this machine, each replica's cores used, and the ratio expected on N cores derived from the
   CPU per call (see the README).
3. **resume**: the one-time cost of a resume. ``--resume-sessions`` sessions, one after the
   other: initialize + initialized and two calls on replica 0, then two calls on replica 1
   (directly, no HAProxy). The first call on replica 1 resumes the session (Redis read, a new
   backend session, the replayed initialize); the second is an ordinary call. Wall time and
   CPU (schedstat, ns) of the replica that served it, the backend and Redis, per step.

Method as in bench/run_gateway.py (whose Window, Server and /proc helpers this imports):
interleaved rounds (``abba``), one load generator (bench/loadgen.py) per (target, era, c) that
keeps its sessions across rounds, ``--warmup`` then ``--duration`` per cell, CPU from
/proc/<pid>/stat of each process tree between the load generator's markers, "other cores" =
CPU used by anything outside the benchmark during the window. Ratios are computed in the same
run; nothing here is a test assertion.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import gc
import json
import os
import platform
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
RESULTS = BENCH / "results"
PY = sys.executable
ECHO = str(BENCH / "echo_server.py")
REDIS = shutil.which("redis-server") or "/usr/bin/redis-server"
HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"
KEY_ENV = "HOPLINE_BENCH_SESSION_KEY"  # the session key reaches the replicas in their environment
TOOL = "e__echo"

sys.path.insert(0, str(BENCH))
import loadgen  # noqa: E402
import run_gateway as rg  # noqa: E402  (Server, Window, hopline_server, CpuMeter, Mcp, ...)
import run_relay as rr  # noqa: E402  (TreeSampler, aggregate, wait_quiet, fmt, ...)

CLK_TCK = rr.CLK_TCK
log = rr.log
fmt = rr.fmt

# Issue 15's targets: what shared state may add per proxied call over one process
TARGET_ADDED_CPU_MS = 0.1
TARGET_ADDED_P50_MS = 0.3


# --------------------------------------------------------------------------- processes


def hopline_replica(
    name: str, backend_url: str, workdir: Path, args, key: str | None, redis_url: str | None
) -> rg.Server:
    port = rr.free_port()
    cfg: dict = {
        "version": 1, "name": "bench-gateway", "listen": {"host": "127.0.0.1", "port": port, "max_sessions": 10000},
        "backends": {"e": {"url": backend_url}},
    }  # fmt: skip
    if key:
        cfg["state"] = {"session_key": "${" + KEY_ENV + "}"} | ({"redis_url": redis_url} if redis_url else {})
    s = rg.hopline_server(name, cfg, port, workdir, args.log_level)
    if key:
        s.env[KEY_ENV] = key
    s.admin_port = 0  # type: ignore[attr-defined]
    if args.metrics:
        s.admin_port = rr.free_port()  # type: ignore[attr-defined]
        s.cmd += ["--admin-port", str(s.admin_port)]  # type: ignore[attr-defined]
    s.tool = TOOL
    s.note = (
        ("state: session_key + redis_url" if redis_url else "state: session_key")
        if key
        else "no state: section (one process)"
    )
    return s


def haproxy_config(frontends: dict[str, tuple[int, list[rg.Server]]], mode: str) -> str:
    """HAProxy 2.6, http mode, keep-alive on both sides (its default), ``balance roundrobin``
    with no stickiness: each request of a keep-alive client connection is balanced anew
    (``option prefer-last-server`` would be needed to keep it on one server). ``mode`` =
    ``keep-alive`` (the default) or ``server-close`` (``option http-server-close``)."""
    out = [
        "global", "  maxconn 4096", "defaults", "  mode http", "  timeout connect 2s", "  timeout client 120s",
        "  timeout server 120s", "  timeout http-keep-alive 120s",
    ]  # fmt: skip
    if mode == "server-close":
        out.append("  option http-server-close")
    for name, (port, servers) in frontends.items():
        out += [
            f"frontend {name}",
            f"  bind 127.0.0.1:{port}",
            f"  default_backend {name}-replicas",
            f"backend {name}-replicas",
            "  balance roundrobin",
        ]
        out += [f"  server {s.name} 127.0.0.1:{s.port}" for s in servers]
    return "\n".join(out) + "\n"


def scrape(s: rg.Server) -> dict:
    """This replica's tools/call count and sessions resumed, from its /metrics (empty without)."""
    port = getattr(s, "admin_port", 0)
    if not port:
        return {}
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    except OSError:
        return {}
    calls = resumed = 0.0
    for line in text.splitlines():
        if line.startswith("hopline_requests_total{") and 'method="tools/call"' in line:
            calls += float(line.rsplit(" ", 1)[1])
        elif line.startswith("hopline_sessions_resumed_total"):
            resumed += float(line.rsplit(" ", 1)[1])
    return {"calls": calls, "resumed": resumed}


def scrape_all(servers: list[rg.Server]) -> dict[str, dict]:
    return {s.name: scrape(s) for s in servers}


def delta(after: dict[str, dict], before: dict[str, dict], key: str) -> dict[str, float]:
    return {n: after[n].get(key, 0) - before.get(n, {}).get(key, 0) for n in after if after[n]}


# --------------------------------------------------------------------------- one window, several trees


class MultiWindow(rg.Window):
    """run_gateway's Window (one loadgen process, c sessions, kept across rounds) aimed at
    ``entry`` (a replica or HAProxy), with /proc sampled for each replica's tree (the gateway
    columns, summed and each) and for the other processes of the benchmark (backend, Redis,
    HAProxy), each on its own."""

    def __init__(
        self,
        entry: rg.Server,
        replicas: list[rg.Server],
        others: dict[str, int],
        c: int,
        era: str,
        setup_timeout: float,
    ):
        self.replicas, self.others = replicas, others
        super().__init__(entry, None, c, era, setup_timeout)

    def run(self, warmup: float, duration: float) -> dict:
        if self.fatal:
            return {"fatal": self.fatal}
        roots = {s.name: s.pid for s in self.replicas} | self.others
        samplers = {k: rr.TreeSampler(pid, interval=1.0) for k, pid in roots.items()}
        self.p.stdin.write(f"RUN {warmup} {duration}\n")
        self.p.stdin.flush()
        sys0 = sys1 = lg0 = lg1 = None
        me0 = me1 = 0.0
        trees: dict[str, dict] = {}
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
                for smp in samplers.values():
                    smp.start()
            elif line == "#MEASURE_END":
                sys1 = rr.read_cpu_totals()
                lg1 = rr.read_stat(self.p.pid)
                trees = {k: smp.stop() for k, smp in samplers.items()}
                me1 = time.process_time()
            elif line.startswith("{"):
                result = json.loads(line)
                break
        if result is None or not trees:
            self.fatal = f"loadgen died (exit {self.p.poll()}): {self.p.stderr.read().strip()[-400:]}"
            return {"fatal": self.fatal}
        n = result["requests"]
        ticks = {k: t["relay_ticks"] + t["backend_ticks"] for k, t in trees.items()}
        reps = [s.name for s in self.replicas]
        result["setup_s"] = self.setup_s
        result["replica_cpu_ms"] = {k: ticks[k] * 1000 / CLK_TCK for k in reps}
        for k in self.others:
            result[f"{k}_cpu_ms"] = ticks[k] * 1000 / CLK_TCK
        result["relay_cpu_ms"] = sum(result["replica_cpu_ms"].values())
        result["backend_cpu_ms"] = result.get("backend_cpu_ms", 0.0)
        result["relay_cpu_ms_per_req"] = result["relay_cpu_ms"] / n if n else None
        result["backend_cpu_ms_per_req"] = result["backend_cpu_ms"] / n if n else None
        result["relay_rss_mb"] = max(trees[k]["relay_rss_kb"] for k in reps) / 1024
        result["relay_pss_mb"] = sum(trees[k]["relay_pss_kb"] for k in reps) / 1024
        result["relay_procs"] = sum(trees[k]["relay_procs"] for k in reps)
        be = trees.get("backend") or {}
        result["backend_rss_mb"] = be.get("backend_rss_sum_kb", 0) / 1024
        result["backend_pss_mb"] = be.get("backend_pss_kb", 0) / 1024
        result["backend_procs"] = be.get("backend_procs", 0)
        if sys0 and sys1 and sys1[1] > sys0[1]:
            busy, total = sys1[0] - sys0[0], sys1[1] - sys0[1]
            lg_ticks = (lg1[1] - lg0[1]) if lg0 and lg1 else round(result["loadgen_cpu_s"] * CLK_TCK)
            ours = sum(ticks.values()) + lg_ticks + (me1 - me0) * CLK_TCK
            result["box_busy"] = busy / total
            result["other_cores"] = max(0.0, (busy - ours) / total * (os.cpu_count() or 1))
        return result


def aggregate(cells: list[dict]) -> dict:
    """run_relay's aggregate (pooled latencies, CPU = total ÷ calls), plus each replica's and
    each other process's CPU per call and cores used, and the calls served per replica."""
    a = rr.aggregate(cells)
    ok = [x for x in cells if "fatal" not in x]
    if "fatal" in a:
        return a
    req = a["requests"] or 1
    win = sum(x["window_s"] for x in ok) or 1
    names = list(ok[0]["replica_cpu_ms"])
    a["replica_cpu_ms_per_req"] = {k: sum(x["replica_cpu_ms"][k] for x in ok) / req for k in names}
    a["replica_cores"] = {k: sum(x["replica_cpu_ms"][k] for x in ok) / 1000 / win for k in names}
    for k in ("haproxy", "redis", "backend"):
        if f"{k}_cpu_ms" in ok[0]:
            a[f"{k}_cpu_ms_per_req"] = sum(x[f"{k}_cpu_ms"] for x in ok) / req
            a[f"{k}_cores"] = sum(x[f"{k}_cpu_ms"] for x in ok) / 1000 / win
    a["loadgen_cores"] = sum(x["loadgen_cpu_s"] for x in ok) / win
    served: dict[str, float] = {}
    for x in ok:
        for k, v in (x.get("served") or {}).items():
            served[k] = served.get(k, 0) + v
    tot = sum(served.values())
    a["served_share"] = {k: v / tot for k, v in served.items()} if tot else {}
    a["resumed_in_windows"] = sum(sum((x.get("resumed") or {}).values()) for x in ok)
    return a


def run_cells(
    targets: list[tuple[str, rg.Server, list[rg.Server]]],
    others: dict[str, int],
    eras: list[str],
    concurrencies: list[int],
    args,
    part: str,
) -> tuple[list[dict], dict]:
    """Interleaved rounds per (era, c) over ``targets`` = (name, entry, replicas behind it).
    Returns the cells and, per (era, name, c), what happened at the load generator's set-up
    (sessions resumed while c sessions were opened, calls per replica)."""
    cells: list[dict] = []
    setups: dict = {}
    for era in eras:
        for c in concurrencies:
            wins: dict[str, MultiWindow] = {}
            try:
                for r in range(args.rounds):
                    order = targets if (args.order == "abab" or r % 2 == 0) else list(reversed(targets))
                    for name, entry, replicas in order:
                        if name not in wins:
                            t0 = time.monotonic()
                            before = scrape_all(replicas)
                            wins[name] = MultiWindow(entry, replicas, others, c, era, args.setup_timeout)
                            setup_s = time.monotonic() - t0
                            # priming, unmeasured: every session visits every replica (and is
                            # resumed there) before the first window, not inside it. In the
                            # handshake era, with /metrics, until all c·(N−1) resumes are seen
                            # (at most --prime-max runs); else one run.
                            expected = c * (len(replicas) - 1) if era == "legacy" and args.metrics else 0
                            for _ in range(max(1, args.prime_max if expected else 1)):
                                wins[name].run(0.0, args.prime)
                                after = scrape_all(replicas)
                                resumed = delta(after, before, "resumed")
                                if sum(resumed.values()) >= expected:
                                    break
                            setups[(era, name, c)] = {"setup_s": setup_s, "resumed": resumed}
                            log(
                                f"{part}: {name}: {c} session(s) ({era}) set up in {setup_s:.1f}s, resumed at set-up + priming {sum(resumed.values()):.0f}"
                            )
                        if args.quiet_wait:
                            rr.wait_quiet(args.quiet_wait)
                        before = scrape_all(replicas)
                        res = wins[name].run(args.warmup, args.duration)
                        after = scrape_all(replicas)
                        res.update({"round": r, "era": era, "concurrency": c, "target": name, "part": part})
                        if "fatal" not in res:
                            res["served"] = delta(after, before, "calls")  # warm-up included
                            res["resumed"] = delta(after, before, "resumed")
                        cells.append(res)
                        if "fatal" in res:
                            log(f"{part} r{r} {era} c={c} {name}: FAILED {res['fatal'][:200]}")
                        else:
                            each = (
                                " ".join(f"{k} {v / res['requests']:.3f}" for k, v in res["replica_cpu_ms"].items())
                                if res["requests"]
                                else ""
                            )
                            log(
                                f"{part} r{r} {era} c={c:<3} {name:<6} {res['rps']:7.0f} calls/s p50 {res['p50_ms']:.3f} p99 {res['p99_ms']:.2f} "
                                f"gateway {fmt(res['relay_cpu_ms_per_req'], '.3f')} ({each}) CPU-ms/call, other {fmt(res.get('other_cores'), '.2f')} cores, err {res['errors']}"
                            )
            finally:
                for w in wins.values():
                    w.close()
    return cells, setups


def aggregate_all(cells: list[dict], targets: list[str], eras: list[str], concurrencies: list[int]) -> dict:
    agg = {}
    for era in eras:
        for c in concurrencies:
            for name in targets:
                sel = [x for x in cells if x["era"] == era and x["concurrency"] == c and x["target"] == name]
                if sel:
                    agg[(era, name, c)] = aggregate(sel)
    return agg


def warm(entry: rg.Server, args) -> None:
    cmd = [
        PY,
        rg.LOADGEN,
        "--url",
        entry.url,
        "--tool",
        TOOL,
        "-c",
        "16",
        "--duration",
        str(args.target_warmup),
        "--warmup",
        "0",
        "--json",
    ]
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=args.target_warmup + 300)
    w = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    log(f"warmed {entry.name}: {fmt(json.loads(w[-1]).get('rps') if w else None, '.0f')} calls/s")


def ok(a: dict | None) -> bool:
    return bool(a) and "fatal" not in a


def noisy(agg: dict) -> list[str]:
    return [
        f"{k[1]} c={k[2]} ({k[0]}): up to {a['other_cores_max']:.2f} cores"
        for k, a in agg.items()
        if ok(a) and a["other_cores_max"] > 0.15
    ]


# --------------------------------------------------------------------------- part 1: state vs one process


def part_state(args, env: dict, out: dict) -> list[str]:
    one, rep = env["one"], env["replicas"][0]
    entry_state = rg.Server("state", [], url=rep.url, port=rep.port)
    entry_state.proc, entry_state.tool = rep.proc, TOOL
    targets = [("one", one, [one]), ("state", entry_state, [rep])]
    # the replica measured as "state" carries its own name in the cells; rename it for the table
    cells, setups = run_cells(
        targets,
        {"backend": env["backend"].pid, "redis": env["redis"].pid},
        args.eras,
        args.state_concurrency,
        args,
        "state",
    )
    for x in cells:
        if "replica_cpu_ms" in x:
            x["replica_cpu_ms"] = {x["target"]: sum(x["replica_cpu_ms"].values())}
    agg = aggregate_all(cells, ["one", "state"], args.eras, args.state_concurrency)
    rows, verdicts = [], []
    for era in args.eras:
        for c in args.state_concurrency:
            a, b = agg.get((era, "one", c)), agg.get((era, "state", c))
            if not (ok(a) and ok(b)):
                rows.append(
                    {
                        "era": era,
                        "concurrency": c,
                        "fatal": (a or {}).get("fatal") or (b or {}).get("fatal") or "missing",
                    }
                )
                continue
            per_round = []
            for r in range(args.rounds):
                pa = next(
                    (
                        x
                        for x in cells
                        if x["era"] == era
                        and x["concurrency"] == c
                        and x["target"] == "one"
                        and x["round"] == r
                        and "fatal" not in x
                    ),
                    None,
                )
                pb = next(
                    (
                        x
                        for x in cells
                        if x["era"] == era
                        and x["concurrency"] == c
                        and x["target"] == "state"
                        and x["round"] == r
                        and "fatal" not in x
                    ),
                    None,
                )
                if pa and pb and pa["relay_cpu_ms_per_req"] is not None and pb["relay_cpu_ms_per_req"] is not None:
                    per_round.append(pb["relay_cpu_ms_per_req"] - pa["relay_cpu_ms_per_req"])
            rows.append({
                "era": era, "concurrency": c, "one_cpu_ms": a["relay_cpu_ms_per_req"], "state_cpu_ms": b["relay_cpu_ms_per_req"],
                "added_cpu_ms": b["relay_cpu_ms_per_req"] - a["relay_cpu_ms_per_req"], "added_cpu_per_round": per_round,
                "one_p50_ms": a["p50_ms"], "state_p50_ms": b["p50_ms"], "added_p50_ms": b["p50_ms"] - a["p50_ms"],
                "one_rps": a["rps"], "state_rps": b["rps"], "redis_cpu_ms_state": b.get("redis_cpu_ms_per_req"),
                "redis_cpu_ms_one": a.get("redis_cpu_ms_per_req"), "backend_cpu_ms": b["backend_cpu_ms_per_req"],
                "other_cores_max": max(a["other_cores_max"], b["other_cores_max"]), "errors": a["errors"] + b["errors"],
            })  # fmt: skip
    cols = ("era", "c", "one: CPU-ms/call", "state: CPU-ms/call", "added CPU-ms/call", "added, per round", f"≤ {TARGET_ADDED_CPU_MS:g}",
            "one: p50 ms", "state: p50 ms", "added p50 ms", f"≤ {TARGET_ADDED_P50_MS:g}", "calls/s one / state",
            "Redis CPU-ms/call (state)", "other cores (max)", "errors")  # fmt: skip
    md = [
        "## 1. Shared state vs one process (one replica, no load balancer)\n",
        f"`one` = `hopline serve` without `state:`; `state` = the same with `state: {{session_key, redis_url}}` (Redis on loopback). "
        f"Each talked to directly; {args.rounds} interleaved rounds × {args.duration:g} s per cell. \"added\" = state − one, pooled over the rounds; "
        "\"per round\" = the same difference in each round (its spread is the noise).\n",
        "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols),
    ]  # fmt: skip
    for r in rows:
        if "fatal" in r:
            md.append(f"| {r['era']} | {r['concurrency']} | FAILED: {r['fatal'][:150]} |" + " |" * (len(cols) - 3))
            continue
        md.append("| " + " | ".join([
            r["era"], str(r["concurrency"]), f"{r['one_cpu_ms']:.3f}", f"{r['state_cpu_ms']:.3f}", f"{r['added_cpu_ms']:+.3f}",
            ", ".join(f"{v:+.3f}" for v in r["added_cpu_per_round"]) or "–", "PASS" if r["added_cpu_ms"] <= TARGET_ADDED_CPU_MS else "FAIL",
            f"{r['one_p50_ms']:.3f}", f"{r['state_p50_ms']:.3f}", f"{r['added_p50_ms']:+.3f}", "PASS" if r["added_p50_ms"] <= TARGET_ADDED_P50_MS else "FAIL",
            f"{r['one_rps']:.0f} / {r['state_rps']:.0f}", fmt(r["redis_cpu_ms_state"], ".4f"), f"{r['other_cores_max']:.2f}", str(r["errors"]),
        ]) + " |")  # fmt: skip
    good = [r for r in rows if "fatal" not in r]
    if good:
        worst_cpu = max(good, key=lambda r: r["added_cpu_ms"])
        worst_p50 = max(good, key=lambda r: r["added_p50_ms"])
        verdicts.append(
            f"{'PASS' if worst_cpu['added_cpu_ms'] <= TARGET_ADDED_CPU_MS else 'FAIL'} shared state adds ≤ {TARGET_ADDED_CPU_MS:g} CPU-ms per proxied call: "
            f"worst {worst_cpu['added_cpu_ms']:+.3f} ({worst_cpu['era']} c={worst_cpu['concurrency']})"
        )
        verdicts.append(
            f"{'PASS' if worst_p50['added_p50_ms'] <= TARGET_ADDED_P50_MS else 'FAIL'} shared state adds ≤ {TARGET_ADDED_P50_MS:g} ms p50: "
            f"worst {worst_p50['added_p50_ms']:+.3f} ({worst_p50['era']} c={worst_p50['concurrency']})"
        )
        spread = [
            max(r["added_cpu_per_round"]) - min(r["added_cpu_per_round"])
            for r in good
            if len(r["added_cpu_per_round"]) > 1
        ]
        if spread:
            verdicts.append(f"per-round differences spread by up to {max(spread):.3f} CPU-ms (the noise of this run)")
    md.append("\nvs issue 15 targets:\n" + "\n".join(f"- {v}" for v in verdicts))
    if noisy(agg):
        md.append(
            "\nWARNING, other processes were busy during some windows:\n" + "\n".join(f"- {w}" for w in noisy(agg))
        )
    for x in cells:
        x.pop("latencies_us", None)
    out["state"] = {"rows": rows, "verdicts": verdicts, "summary": [{"era": k[0], "target": k[1], "concurrency": k[2], **v} for k, v in agg.items()],
                    "cells": cells, "setups": [{"era": k[0], "target": k[1], "concurrency": k[2], **v} for k, v in setups.items()]}  # fmt: skip
    return md


# --------------------------------------------------------------------------- part 2/3: through HAProxy


def part_lb(args, env: dict, out: dict) -> list[str]:
    reps = env["replicas"]
    n = len(reps)
    one_name, many_name = "lb-1", f"lb-{n}"
    lb1 = rg.Server(one_name, [], url=f"http://127.0.0.1:{env['lb_ports'][0]}/mcp", port=env["lb_ports"][0], tool=TOOL)
    lbn = rg.Server(many_name, [], url=f"http://127.0.0.1:{env['lb_ports'][1]}/mcp", port=env["lb_ports"][1], tool=TOOL)
    for s in (lb1, lbn):
        warm(s, args)
    targets = [(one_name, lb1, [reps[0]]), (many_name, lbn, reps)]
    others = {"backend": env["backend"].pid, "redis": env["redis"].pid, "haproxy": env["haproxy"].pid}
    cells, setups = run_cells(targets, others, args.eras, args.lb_concurrency, args, "lb")
    agg = aggregate_all(cells, [one_name, many_name], args.eras, args.lb_concurrency)
    md = [
        f"## 2. A session moving between replicas: HAProxy round-robin over {n} replicas vs 1\n",
        f"HAProxy {env['haproxy_version']} (http mode, keep-alive on both sides, `balance roundrobin`, no stickiness{', `option http-server-close`' if args.haproxy_mode == 'server-close' else ''}) "
        f"in front of `{many_name}` = {n} replicas with `state:` sharing one Redis, or `{one_name}` = replica r0 alone behind the same HAProxy. "
        "In the handshake era each request goes to the next replica, so every session is resumed once on each replica that did not make it "
        '(at set-up and in an unmeasured priming run: "resumed before"; "in the windows" counts warm-ups too), then served by all of them in turn. "calls served per replica": from each replica\'s `/metrics`. CPU-ms per call: each process\'s CPU in the window ÷ the calls answered. '
        f"{args.rounds} interleaved rounds × {args.duration:g} s per cell.\n",
    ]
    cols = ("era", "c", "target", "calls/s", f"×{one_name}", "p50 ms", f"+p50 vs {one_name}", "p99 ms", "replicas CPU-ms/call (sum)",
            "each replica", "HAProxy CPU-ms/call", "Redis CPU-ms/call", "backend CPU-ms/call", "calls served per replica",
            "resumed before / in the windows", "other cores (max)", "errors")  # fmt: skip
    md += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    summary = []
    for era in args.eras:
        for c in args.lb_concurrency:
            base = agg.get((era, one_name, c))
            for name in (one_name, many_name):
                a = agg.get((era, name, c))
                if a is None:
                    continue
                if "fatal" in a:
                    md.append(f"| {era} | {c} | {name} | FAILED: {a['fatal'][:150]} |" + " |" * (len(cols) - 4))
                    continue
                is_base = name == one_name
                su = setups.get((era, name, c), {})
                share = a["served_share"]
                md.append("| " + " | ".join([
                    era, str(c), name, f"{a['rps']:.0f}", "1" if is_base else fmt(a["rps"] / base["rps"] if ok(base) and base["rps"] else None),
                    f"{a['p50_ms']:.3f}", "" if is_base else (fmt(a["p50_ms"] - base["p50_ms"], "+.3f") if ok(base) else "–"), f"{a['p99_ms']:.2f}",
                    f"{a['relay_cpu_ms_per_req']:.3f}", " / ".join(f"{v:.3f}" for v in a["replica_cpu_ms_per_req"].values()),
                    fmt(a.get("haproxy_cpu_ms_per_req"), ".3f"), fmt(a.get("redis_cpu_ms_per_req"), ".4f"), fmt(a.get("backend_cpu_ms_per_req"), ".3f"),
                    " / ".join(f"{v:.0%}" for v in share.values()) if share else "–",
                    f"{sum(su.get('resumed', {}).values()):.0f} / {a['resumed_in_windows']:.0f}" if args.metrics else "–",
                    f"{a['other_cores_max']:.2f}", str(a["errors"]),
                ]) + " |")  # fmt: skip
                summary.append({"era": era, "target": name, "concurrency": c, **a, "setup": su})
    cmax = max(args.lb_concurrency)
    derived: list[dict] = []
    md += throughput(agg, args, one_name, many_name, n, cmax, derived)
    if noisy(agg):
        md.append(
            "\nWARNING, other processes were busy during some windows:\n" + "\n".join(f"- {w}" for w in noisy(agg))
        )
    for x in cells:
        x.pop("latencies_us", None)
    out["lb"] = {"replicas": n, "haproxy": env["haproxy_cfg"], "summary": summary, "cells": cells, "derived": derived}
    return md


def throughput(agg: dict, args, one_name: str, many_name: str, n: int, cmax: int, derived: list[dict]) -> list[str]:
    """Part 3: the saturating concurrency, each process's cores, and what N cores would give.

    Per call, the replicas (summed) need g CPU-ms, HAProxy h, the backend b, Redis d, the load
    generator l. A replica is one Python process (one event loop): it serves at most 1000/g1
    calls/s on one core, and R replicas at most R·1000/gR. Everything on a box with K cores
    shares them: at most K·1000/(g+h+b+d+l) calls/s. The expected ratio of R replicas to 1 is
    the ratio of those bounds; for the gateway tier alone (LB, backend and clients on other
    machines, a core per replica) it is R·g1/gR."""
    md = [f"\n## 3. Throughput at c={cmax}: {n} replicas vs 1 on this {os.cpu_count()}-core machine\n"]
    cols = ("era", "target", "calls/s", f"×{one_name}", "replica cores used (each)", "HAProxy / backend / Redis / loadgen cores",
            "box busy", "other cores", "replicas CPU-ms/call", "all processes CPU-ms/call")  # fmt: skip
    md += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for era in args.eras:
        a1, an = agg.get((era, one_name, cmax)), agg.get((era, many_name, cmax))
        for name, a in ((one_name, a1), (many_name, an)):
            if not ok(a):
                continue
            tot = (
                a["relay_cpu_ms_per_req"]
                + (a.get("haproxy_cpu_ms_per_req") or 0)
                + (a.get("backend_cpu_ms_per_req") or 0)
                + (a.get("redis_cpu_ms_per_req") or 0)
                + (a["loadgen_cpu_ms_per_req"] or 0)
            )
            a["all_cpu_ms_per_req"] = tot
            md.append("| " + " | ".join([
                era, name, f"{a['rps']:.0f}", "1" if name == one_name else fmt(a["rps"] / a1["rps"] if ok(a1) and a1["rps"] else None),
                f"{sum(a['replica_cores'].values()):.2f} (" + " / ".join(f"{v:.2f}" for v in a["replica_cores"].values()) + ")",
                " / ".join(fmt(a.get(k), ".2f") for k in ("haproxy_cores", "backend_cores", "redis_cores", "loadgen_cores")),
                f"{a['box_busy']:.0%}", f"{a['other_cores']:.2f}", f"{a['relay_cpu_ms_per_req']:.3f}", f"{tot:.3f}",
            ]) + " |")  # fmt: skip
        if not (ok(a1) and ok(an)):
            continue
        g1, gn = a1["relay_cpu_ms_per_req"], an["relay_cpu_ms_per_req"]
        rest1, restn = a1["all_cpu_ms_per_req"] - g1, an["all_cpu_ms_per_req"] - gn
        b = an.get("backend_cpu_ms_per_req") or 0
        row = {"era": era, "g1": g1, "gN": gn, "rest1": rest1, "restN": restn, "backend": b, "replicas": n,
               "measured_ratio": an["rps"] / a1["rps"] if a1["rps"] else None, "tier_ratio": n * g1 / gn if gn else None, "cores": {}}  # fmt: skip
        for k in sorted({2, 4, 8, os.cpu_count() or 2}):
            one_cap = min(1000 / g1, k * 1000 / (g1 + rest1))
            many_cap = min(n * 1000 / gn, k * 1000 / (gn + restn))
            row["cores"][k] = {"one": one_cap, "many": many_cap, "ratio": many_cap / one_cap}
        derived.append(row)
    if derived:
        md.append(
            f"\nDerived from the CPU per call above (see the README): a replica is one event loop, so 1 replica serves at most 1000/g₁ calls/s "
            f"and {n} at most {n}·1000/g_{n}; on K shared cores everything together at most K·1000/(all CPU-ms per call). "
            '"gateway tier" = a core per replica, with HAProxy, the backend and the clients on other cores: N replicas give N·g₁/g_N times one '
            f'(g_N measured here with {n} replicas; the efficiency g₁/g_N is what spreading the calls costs per call). "everything on K cores": '
            f"the min of both bounds for 1 and for {n} replicas, with HAProxy, the backend, Redis and the load generator on the same K cores as here.\n"
        )
        ks = sorted(derived[0]["cores"])
        tiers = (2, 3, 4, 8, 16)
        cols = (
            "era",
            f"g₁ / g_{n} replica CPU-ms/call",
            "efficiency g₁/g_N",
            "measured ratio here",
            "gateway tier, N replicas on N cores: ratio for N = " + " / ".join(map(str, tiers)),
        )
        cols += tuple(f"everything on {k} cores: 1 → {n} replicas, calls/s (ratio)" for k in ks)  # fmt: skip
        md += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        for r in derived:
            eff = r["g1"] / r["gN"] if r["gN"] else None
            r["tier_ratios"] = {t: t * eff for t in tiers} if eff else {}
            md.append("| " + " | ".join([
                r["era"], f"{r['g1']:.3f} / {r['gN']:.3f}", fmt(eff), fmt(r["measured_ratio"]),
                " / ".join(f"{v:.1f}×" for v in r["tier_ratios"].values()) or "–",
                *(f"{r['cores'][k]['one']:.0f} → {r['cores'][k]['many']:.0f} ({r['cores'][k]['ratio']:.2f}×)" for k in ks),
            ]) + " |")  # fmt: skip
        md.append(
            f"\nThe bench backend is ONE Python process (~{derived[0]['backend']:.2f} CPU-ms/call): a real deployment scales its backends too; "
            "the K-core columns count it as one of the processes sharing the cores, not as a one-core ceiling."
        )
    return md


# --------------------------------------------------------------------------- part 2b: the one-time cost of a resume


async def resume_steps(r0: rg.Server, r1: rg.Server, backend_pid: int, redis_pid: int, k: int) -> list[dict]:
    def meters(s: rg.Server) -> dict[str, rg.CpuMeter]:
        return {
            "gateway": rg.CpuMeter(rg.tree_pids(s.pid)[0]),
            "backend": rg.CpuMeter([backend_pid]),
            "redis": rg.CpuMeter([redis_pid]),
        }

    m0, m1 = meters(r0), meters(r1)
    rows = []

    async def step(ms: dict, coro) -> dict:
        for m in ms.values():
            m.start()
        t0 = time.perf_counter()
        good = await coro
        wall = (time.perf_counter() - t0) * 1000
        res = {f"{name}_cpu_ms": m.stop()["cpu_ms"] for name, m in ms.items()}
        return res | {"wall_ms": wall, "ok": good is not False}

    for i in range(k):
        m = rg.Mcp(r0.url, tool=TOOL, idx=i)
        row = {"handshake": await step(m0, m.open())}
        row["r0_first_call"] = await step(m0, m.cl.call_once(True))
        row["r0_second_call"] = await step(m0, m.cl.call_once(True))
        old = m.cl.conn
        conn = loadgen.Conn("127.0.0.1", r1.port, "/mcp", "legacy", m.stats)
        conn.session_id, conn.protocol_version = old.session_id, old.protocol_version
        await old.close()
        m.cl.conn = conn
        await conn.connect()
        row["r1_first_call"] = await step(m1, m.cl.call_once(True))  # the resume
        row["r1_second_call"] = await step(m1, m.cl.call_once(True))
        await m.close()  # DELETE on r1: ended on every replica
        rows.append(row)
        if m.stats.errors:
            row["errors"] = list(m.stats.error_samples)
        await asyncio.sleep(0.05)
    return rows


def part_resume(args, env: dict, out: dict) -> list[str]:
    reps = env["replicas"]
    r0, r1 = reps[0], reps[1]
    rr.wait_quiet(args.quiet_wait)
    before = scrape_all([r0, r1])
    rows = asyncio.run(resume_steps(r0, r1, env["backend"].pid, env["redis"].pid, args.resume_sessions))
    after = scrape_all([r0, r1])
    resumed = delta(after, before, "resumed")
    steps = ("handshake", "r0_first_call", "r0_second_call", "r1_first_call", "r1_second_call")
    names = {"handshake": "initialize + initialized on r0 (a new session)", "r0_first_call": "1st call on r0", "r0_second_call": "2nd call on r0",
             "r1_first_call": "1st call on r1: **the resume**", "r1_second_call": "2nd call on r1"}  # fmt: skip
    med = {
        s: {
            k: statistics.median(r[s][k] for r in rows)
            for k in ("wall_ms", "gateway_cpu_ms", "backend_cpu_ms", "redis_cpu_ms")
        }
        for s in steps
    }
    p90 = {s: sorted(r[s]["wall_ms"] for r in rows)[int(0.9 * (len(rows) - 1))] for s in steps}
    errors = sum(len(r.get("errors", [])) for r in rows)
    md = [
        "\n## 2b. The one-time cost of a resume (handshake era)\n",
        f"{len(rows)} sessions, one at a time, talked to directly (no HAProxy): made on r0, then moved to r1. CPU from schedstat (ns) of the replica "
        "that answered, of the backend and of Redis; medians over the sessions.\n",
        "| step | wall ms (median) | wall ms (p90) | replica CPU-ms | backend CPU-ms | Redis CPU-ms |", "|---|---|---|---|---|---|",
    ]  # fmt: skip
    for s in steps:
        d = med[s]
        md.append(
            f"| {names[s]} | {d['wall_ms']:.2f} | {p90[s]:.2f} | {d['gateway_cpu_ms']:.3f} | {d['backend_cpu_ms']:.3f} | {d['redis_cpu_ms']:.4f} |"
        )
    extra = {
        k: med["r1_first_call"][k] - med["r1_second_call"][k]
        for k in ("wall_ms", "gateway_cpu_ms", "backend_cpu_ms", "redis_cpu_ms")
    }
    md.append(
        f"\nA resume costs once: +{extra['wall_ms']:.2f} ms of wall time, +{extra['gateway_cpu_ms']:.3f} CPU-ms on the replica, "
        f"+{extra['backend_cpu_ms']:.3f} on the backend (its new session) and +{extra['redis_cpu_ms']:.4f} on Redis "
        f"(1st − 2nd call on r1). A new session on r0 costs {med['handshake']['gateway_cpu_ms'] + med['r0_first_call']['gateway_cpu_ms'] - med['r0_second_call']['gateway_cpu_ms']:.3f} "
        "replica CPU-ms (handshake + 1st call − 2nd call)."
    )
    if args.metrics:
        md.append(
            f"Sessions resumed per `/metrics` (hopline_sessions_resumed): r0 +{resumed.get(r0.name, 0):.0f}, r1 +{resumed.get(r1.name, 0):.0f} (expected {len(rows)} on r1)."
        )
    if errors:
        md.append(
            f"\nWARNING: {errors} wrong answers: " + "; ".join(e for r in rows for e in r.get("errors", []))[:400]
        )
    out["resume"] = {
        "sessions": len(rows),
        "median": med,
        "p90_wall_ms": p90,
        "once": extra,
        "resumed_metric": resumed,
        "rows": rows,
        "errors": errors,
    }
    return md


# --------------------------------------------------------------------------- main


def session_key() -> str:
    return base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()


def start_all(args, logdir: Path, parts: list[str]) -> dict:
    env: dict = {"servers": []}

    def up(s: rg.Server, probe: bool) -> rg.Server:
        log(f"start {s.name}: {' '.join(s.cmd)}")
        rg.start(s, logdir)
        env["servers"].append(s)
        err = rg.wait_ready(s, args.ready_timeout, call=probe)
        if err:
            raise RuntimeError(f"{s.name}: {err}")
        return s

    backend = rg.Server("echo-backend", [], port=rr.free_port())
    backend.cmd = [PY, ECHO, "http", "--port", str(backend.port)]
    backend.url = f"http://127.0.0.1:{backend.port}/mcp"
    env["backend"] = up(backend, True)
    redis = rg.Server("redis", [], port=rr.free_port())
    redis.cmd = [
        REDIS,
        "--port",
        str(redis.port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--daemonize",
        "no",
    ]
    env["redis"] = up(redis, False)
    redis_url = f"redis://127.0.0.1:{redis.port}/0"
    key = session_key()
    n = args.replicas if "lb" in parts else 2
    if "state" in parts:
        env["one"] = up(hopline_replica("one", backend.url, logdir, args, None, None), True)
    env["replicas"] = [
        up(hopline_replica(f"r{i}", backend.url, logdir, args, key, redis_url), True) for i in range(max(1, n))
    ]
    if "lb" in parts:
        ports = [rr.free_port(), rr.free_port()]
        cfg = haproxy_config(
            {"one": (ports[0], env["replicas"][:1]), "many": (ports[1], env["replicas"])}, args.haproxy_mode
        )
        path = logdir / "haproxy.cfg"
        path.write_text(cfg)
        hp = rg.Server("haproxy", [HAPROXY, "-f", str(path), "-db"], port=ports[0])
        env["haproxy"] = up(hp, False)
        env["lb_ports"], env["haproxy_cfg"] = ports, cfg
        v = rr.run_quiet([HAPROXY, "-v"], timeout=10).stdout.split()
        env["haproxy_version"] = v[2] if len(v) > 2 else "?"
    return env


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--parts", default="state,lb,resume", help="comma list of state, lb, resume (default all)")
    p.add_argument(
        "--quick", action="store_true", help="short run (a few minutes): 2 rounds × 1.5 s windows, 20 resumes"
    )
    p.add_argument(
        "--replicas", type=int, default=3, help="replicas behind HAProxy in the lb part (default 3; at least 2)"
    )
    p.add_argument("--eras", default="legacy,2026", help="comma list of legacy,2026 (default both)")
    p.add_argument("-c", "--state-concurrency", default="1,16", help="concurrencies of the state part (default 1,16)")
    p.add_argument(
        "--lb-concurrency",
        default="1,16,64",
        help="concurrencies of the lb part; the largest is the throughput table (default 1,16,64)",
    )
    p.add_argument(
        "--haproxy-mode",
        choices=["keep-alive", "server-close"],
        default="keep-alive",
        help="HAProxy's connection mode (default keep-alive, its own default)",
    )
    p.add_argument("--duration", type=float, default=None, help="measured seconds per cell (default 5; --quick 1.5)")
    p.add_argument(
        "--warmup", type=float, default=None, help="unmeasured seconds before each window (default 1; --quick 0.5)"
    )
    p.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 3; --quick 2)")
    p.add_argument("--order", choices=["abab", "abba"], default="abba")
    p.add_argument(
        "--target-warmup",
        type=float,
        default=None,
        help="seconds of load through each HAProxy frontend before the first cell (default 3; --quick 1.5)",
    )
    p.add_argument("--prime-max", type=int, default=10, help="most priming runs per (target, era, c) (default 10)")
    p.add_argument(
        "--prime",
        type=float,
        default=None,
        help="unmeasured seconds of calls on new sessions before their first window (default 1; --quick 0.5)",
    )
    p.add_argument(
        "--resume-sessions",
        type=int,
        default=None,
        help="sessions moved from r0 to r1 in the resume part (default 100; --quick 20)",
    )
    p.add_argument(
        "--no-metrics",
        dest="metrics",
        action="store_false",
        help="no admin listener on the replicas (no calls-per-replica or resume counts)",
    )
    p.add_argument("--log-level", default="warning", help="hopline --log-level (default warning)")
    p.add_argument(
        "--hopline-env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra environment for hopline processes (repeatable)",
    )
    p.add_argument("--ready-timeout", type=float, default=90.0)
    p.add_argument("--setup-timeout", type=float, default=300.0)
    p.add_argument(
        "--quiet-wait",
        type=float,
        default=None,
        help="wait up to this many s for an idle box before each window (default 5; --quick 1)",
    )
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    defaults = {
        "duration": (5.0, 1.5),
        "warmup": (1.0, 0.5),
        "rounds": (3, 2),
        "target_warmup": (3.0, 1.5),
        "resume_sessions": (100, 20),
        "prime": (1.0, 0.5),
        "quiet_wait": (5.0, 1.0),
    }
    for k, (full, quick) in defaults.items():
        if getattr(args, k) is None:
            setattr(args, k, quick if args.quick else full)
    args.eras = [e.strip() for e in args.eras.split(",") if e.strip()]
    args.state_concurrency = [int(x) for x in args.state_concurrency.split(",")]
    args.lb_concurrency = [int(x) for x in args.lb_concurrency.split(",")]
    parts = [x.strip() for x in args.parts.split(",") if x.strip()]
    if unknown := [x for x in parts if x not in ("state", "lb", "resume")]:
        p.error(f"unknown part(s) {unknown}")
    if args.replicas < 2:
        p.error("--replicas: at least 2")
    for kv in args.hopline_env:
        k, _, v = kv.partition("=")
        rg.HOPLINE_ENV[k] = v
    for exe, what in ((REDIS, "redis-server"), (HAPROXY, "haproxy")):
        if not os.path.exists(exe) and (what == "redis-server" or "lb" in parts):
            p.error(f"{what} not found ({exe}): apt-get install {what.split('-')[0]}")

    stamp = time.strftime("%Y%m%d-%H%M%S")
    RESULTS.mkdir(parents=True, exist_ok=True)
    logdir = RESULTS / f"replicas-{stamp}-logs"
    logdir.mkdir()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    out: dict = {
        "issue": 15, "started": stamp, "command": [os.path.basename(PY), *sys.argv], "config": vars(args) | {"parts": parts},
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "cpu_model": rr._cpu_model()},
        "versions": {"hopline": rg.hopline_version().removeprefix("hopline "), "mcp": rr._pkg_version("mcp"), "python": platform.python_version(),
                     "redis": rr.run_quiet([REDIS, "--version"], timeout=10).stdout.strip()},
    }  # fmt: skip
    md: list[str] = []
    t0 = time.monotonic()
    env: dict = {"servers": []}
    try:
        env = start_all(args, logdir, parts)
        if "haproxy_version" in env:
            out["versions"]["haproxy"] = env["haproxy_version"]
        for part in parts:
            log(f"=== part {part}")
            gc.collect()
            md += {"state": part_state, "lb": part_lb, "resume": part_resume}[part](args, env, out)
            md.append("")
    except RuntimeError as e:
        md.append(f"FAILED to start: {e}")
        out["fatal"] = str(e)
    finally:
        for s in reversed(env["servers"]):
            rg.stop(s)
    md.append(
        "versions: " + "; ".join(f"{k} {v}" for k, v in out["versions"].items())
        + f"; {os.cpu_count()} CPUs ({rr._cpu_model()}); run took {time.monotonic() - t0:.0f}s"
    )  # fmt: skip
    text = "\n".join(md)
    print(text)
    path = Path(args.out) if args.out else RESULTS / f"replicas-{stamp}.json"
    out["table_md"] = text
    path.write_text(json.dumps(out, indent=1, default=str))
    path.with_suffix(".md").write_text(text + "\n")
    log(f"wrote {path} and {path.with_suffix('.md')} (logs and configs in {logdir})")
    return 1 if "fatal" in out else 0


if __name__ == "__main__":
    sys.exit(main())
