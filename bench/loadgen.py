"""Lean MCP load generator: raw asyncio HTTP/1.1 keep-alive, one MCP session per virtual client.

    python bench/loadgen.py --url http://127.0.0.1:8801/mcp -c 16 --duration 5
    python bench/loadgen.py --url http://127.0.0.1:8801/mcp -c 1 --era 2026 --count 2000

Each virtual client owns one TCP connection and, in the handshake era (``--era legacy``,
the default), one MCP session: POST ``initialize`` (captures ``Mcp-Session-Id``), POST
``notifications/initialized``, then a loop of ``tools/call echo`` (``--tool NAME`` when the server
exposes it under another name, e.g. a gateway's ``e__echo``); it ends with DELETE.
In the 2026-07-28 era (``--era 2026``) there is no handshake: every ``tools/call`` carries
``MCP-Protocol-Version``/``Mcp-Method``/``Mcp-Name`` headers and ``params._meta`` with the
protocol version and ``clientCapabilities``.

Responses may be ``application/json`` or ``text/event-stream`` (parsed incrementally), with
Content-Length, chunked or close-delimited bodies. Every response is checked (JSON-RPC id and
echoed text); anything else counts as an error. Latency is measured from the first byte
written to the moment the matching JSON-RPC response is parsed.

Phases: connect + handshake (all clients, not timed), ``--warmup`` seconds (not recorded),
then the measured window (``--duration`` seconds, or ``--count`` calls per client).
``--header 'Name: value'`` (repeatable) adds a header to every request a client sends
(handshake, calls, DELETE), e.g. ``--header 'Authorization: Bearer <jwt>'`` for a gateway that
authenticates its callers.
With ``--markers`` the lines ``#MEASURE_START`` / ``#MEASURE_END`` are printed on stdout at the
window's edges so a supervisor can snapshot /proc; ``--json`` prints the result as one JSON line.
No httpx (or any HTTP library) in the hot loop: request bytes are assembled by hand.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

try:
    import orjson

    def dumps(obj) -> bytes:
        return orjson.dumps(obj)

    loads = orjson.loads
except ImportError:  # pragma: no cover - stdlib fallback
    import json

    def dumps(obj) -> bytes:
        return json.dumps(obj, separators=(",", ":")).encode()

    loads = json.loads

LEGACY_VERSION = "2025-11-25"
MODERN_VERSION = "2026-07-28"
ACCEPT = b"application/json, text/event-stream"


class ProtocolError(Exception):
    """The server answered, but not with what a well-behaved MCP server would."""


class SessionLost(ProtocolError):
    """404 on a request carrying a session id: the client must re-initialize."""


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    message: dict | None  # the JSON-RPC message matching our id (None for 202/empty bodies)
    keep_alive: bool


@dataclass
class Stats:
    latencies_us: list[int] = field(default_factory=list)
    ok: int = 0
    errors: int = 0
    reconnects: int = 0
    rehandshakes: int = 0
    sse_left_open: int = 0
    sse_responses: int = 0
    json_responses: int = 0
    error_samples: list[str] = field(default_factory=list)

    def reset(self) -> None:
        self.latencies_us = []
        self.ok = self.errors = self.reconnects = self.rehandshakes = 0
        self.sse_left_open = self.sse_responses = self.json_responses = 0
        self.error_samples = []

    def error(self, what: str) -> None:
        self.errors += 1
        if len(self.error_samples) < 10:
            self.error_samples.append(what[:300])


def parse_header(text: str) -> tuple[bytes, bytes]:
    """``'Name: value'`` (or ``Name:value``) → (name, value) as bytes; raises ValueError."""
    name, sep, value = text.partition(":")
    name, value = name.strip(), value.strip()
    if not sep or not name or any(c in name for c in " \t\r\n") or any(c in value for c in "\r\n\0"):
        raise ValueError(f"not a header 'Name: value': {text[:40]!r}")
    return name.encode("latin-1"), value.encode("latin-1")


class Conn:
    """One HTTP/1.1 keep-alive connection speaking MCP Streamable HTTP."""

    def __init__(self, host: str, port: int, path: str, era: str, stats: Stats, headers: list[tuple[bytes, bytes]] | tuple = ()):
        self.host, self.port, self.path, self.era, self.stats = host, port, path, era, stats
        self.headers = [k + b": " + v for k, v in headers]  # sent with every request (e.g. Authorization)
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self._host_hdr = f"{host}:{port}".encode()

    async def connect(self) -> None:
        await self.close()
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port, limit=1 << 20)

    async def close(self) -> None:
        if self.writer is not None:
            w, self.writer, self.reader = self.writer, None, None
            w.close()
            try:
                await w.wait_closed()
            except Exception:
                pass

    def _head(self, method: bytes, extra: list[tuple[bytes, bytes]], length: int | None) -> bytes:
        lines = [method + b" " + self.path.encode() + b" HTTP/1.1", b"Host: " + self._host_hdr, b"Accept: " + ACCEPT]
        if length is not None:
            lines.append(b"Content-Type: application/json")
            lines.append(b"Content-Length: " + str(length).encode())
        if self.session_id:
            lines.append(b"Mcp-Session-Id: " + self.session_id.encode())
        if self.headers:
            lines += self.headers
        for k, v in extra:
            lines.append(k + b": " + v)
        return b"\r\n".join(lines) + b"\r\n\r\n"

    async def request(self, method: bytes, body: bytes | None, extra: list[tuple[bytes, bytes]], want_id) -> Response:
        if self.writer is None or self.reader.at_eof():
            # never connected, or the server closed the idle keep-alive connection (uvicorn and
            # Node close idle connections after ~5 s, e.g. between two windows of a run)
            await self.connect()
            self.stats.reconnects += 1
        head = self._head(method, extra, None if body is None else len(body))
        self.writer.write(head + body if body is not None else head)
        return await self._read_response(want_id)

    async def _read_response(self, want_id) -> Response:
        reader = self.reader
        raw = await reader.readuntil(b"\r\n\r\n")
        lines = raw[:-4].split(b"\r\n")
        parts = lines[0].split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
            raise ProtocolError(f"bad status line {lines[0]!r}")
        status = int(parts[1])
        headers: dict[str, str] = {}
        for line in lines[1:]:
            k, _, v = line.partition(b":")
            headers[k.strip().lower().decode()] = v.strip().decode("latin-1")
        keep_alive = headers.get("connection", "").lower() != "close" and parts[0] == b"HTTP/1.1"
        ctype = headers.get("content-type", "")
        chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        clen = headers.get("content-length")

        if status in (204, 304) or (clen is not None and int(clen) == 0):
            return Response(status, headers, None, keep_alive)

        if ctype.startswith("text/event-stream"):
            self.stats.sse_responses += 1
            msg, finished = await self._read_sse(reader, chunked, clen, want_id)
            if not finished:
                keep_alive = False
            return Response(status, headers, msg, keep_alive)

        # application/json (or an error page): read the whole body
        if clen is not None:
            body = await reader.readexactly(int(clen))
        elif chunked:
            body = b"".join([c async for c in self._chunks(reader)])
        else:
            body = await reader.read()  # close-delimited
            keep_alive = False
        self.stats.json_responses += 1
        msg = None
        if body.strip():
            try:
                msg = loads(body)
            except Exception:
                raise ProtocolError(f"HTTP {status} non-JSON body {body[:200]!r}")
        return Response(status, headers, msg, keep_alive)

    @staticmethod
    async def _chunks(reader: asyncio.StreamReader):
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";", 1)[0], 16)
            if size == 0:
                while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
                    pass
                return
            data = await reader.readexactly(size + 2)
            yield data[:-2]

    async def _read_sse(self, reader, chunked: bool, clen, want_id) -> tuple[dict | None, bool]:
        """Parse SSE events until the response with ``want_id`` arrives.

        Returns (message, body_finished). Once the response is found the rest of the body is
        drained with a short grace period; a server that keeps the stream open makes the
        connection non-reusable (the caller reconnects)."""
        buf = b""
        found: dict | None = None

        def scan() -> dict | None:
            nonlocal buf
            if b"\r" in buf:
                buf = buf.replace(b"\r\n", b"\n")
            while True:
                i = buf.find(b"\n\n")
                if i < 0:
                    return None
                event, buf = buf[:i], buf[i + 2 :]
                data = [ln[5:].lstrip(b" ") if ln.startswith(b"data:") else None for ln in event.split(b"\n")]
                payload = b"\n".join(d for d in data if d is not None)
                if not payload.strip():
                    continue  # comment, priming event, keepalive
                msg = loads(payload)
                if isinstance(msg, dict) and ("result" in msg or "error" in msg) and "method" not in msg:
                    if want_id is None or msg.get("id") == want_id:
                        return msg
                # else: a notification or someone else's message; keep going

        if chunked:
            gen = self._chunks(reader)
            async for chunk in gen:
                buf += chunk
                if found is None:
                    found = scan()
                    if found is not None:
                        break
            else:
                return found, True
            # drain the remainder of the stream (normally just the terminating chunk)
            try:
                async with asyncio.timeout(1.0):
                    async for _ in gen:
                        pass
                return found, True
            except TimeoutError:
                self.stats.sse_left_open += 1
                return found, False
        if clen is not None:
            buf = await reader.readexactly(int(clen))
            if not buf.endswith(b"\n\n"):
                buf += b"\n\n"
            return scan(), True
        # close-delimited SSE
        while True:
            chunk = await reader.read(65536)
            if not chunk:
                return found, False
            buf += chunk
            if found is None:
                found = scan()
                if found is not None:
                    return found, False


class Client:
    def __init__(self, idx: int, url: str, era: str, stats: Stats, payload: int, tool: str = "echo", headers: list[tuple[bytes, bytes]] | tuple = ()):
        u = urlsplit(url)
        self.idx = idx
        self.tool = tool  # the echo tool's name as the server exposes it (a gateway prefixes it)
        self.era = era
        self.stats = stats
        self.conn = Conn(u.hostname or "127.0.0.1", u.port or 80, u.path or "/mcp", era, stats, headers)
        self.next_id = 1
        self.pad = "x" * max(0, payload - 16)

    def _id(self) -> int:
        i = self.next_id
        self.next_id += 1
        return i

    async def handshake(self) -> None:
        if self.era != "legacy":
            return
        c = self.conn
        c.session_id = None
        rid = self._id()
        body = dumps(
            {
                "jsonrpc": "2.0",
                "id": rid,
                "method": "initialize",
                "params": {
                    "protocolVersion": LEGACY_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "hopline-bench-loadgen", "version": "1"},
                },
            }
        )
        r = await c.request(b"POST", body, [], rid)
        if not r.keep_alive:
            await c.close()
        if r.status != 200 or not r.message or "result" not in r.message:
            raise ProtocolError(f"initialize: HTTP {r.status} {r.message}")
        c.session_id = r.headers.get("mcp-session-id")
        c.protocol_version = r.message["result"].get("protocolVersion", LEGACY_VERSION)
        body = dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
        r = await c.request(b"POST", body, [(b"MCP-Protocol-Version", c.protocol_version.encode())], None)
        if not r.keep_alive:
            await c.close()
        if r.status not in (200, 202, 204):
            raise ProtocolError(f"notifications/initialized: HTTP {r.status} {r.message}")

    async def goodbye(self) -> None:
        """End the session with DELETE (so relays can stop a per-session backend)."""
        c = self.conn
        if self.era == "legacy" and c.session_id:
            for _attempt in range(2):
                try:
                    r = await asyncio.wait_for(
                        c.request(b"DELETE", None, [(b"MCP-Protocol-Version", (c.protocol_version or LEGACY_VERSION).encode())], None),
                        5,
                    )
                    if r.status in (200, 202, 204, 404, 405):
                        break
                except Exception:  # noqa: BLE001  (stale connection: retry once on a fresh one)
                    await c.close()
        await c.close()

    def build_call(self) -> tuple[int, str, bytes, list[tuple[bytes, bytes]]]:
        rid = self._id()
        text = f"c{self.idx}-{rid}-{self.pad}"
        params: dict = {"name": self.tool, "arguments": {"text": text}}
        if self.era == "legacy":
            extra = [(b"MCP-Protocol-Version", (self.conn.protocol_version or LEGACY_VERSION).encode())]
        else:
            params["_meta"] = {
                "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
                "io.modelcontextprotocol/clientCapabilities": {},
            }
            extra = [
                (b"MCP-Protocol-Version", MODERN_VERSION.encode()),
                (b"Mcp-Method", b"tools/call"),
                (b"Mcp-Name", self.tool.encode()),
            ]
        body = dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params})
        return rid, text, body, extra

    async def call_once(self, record: bool) -> bool:
        """One tools/call; returns True if the answer was correct."""
        rid, text, body, extra = self.build_call()
        c = self.conn
        t0 = time.perf_counter_ns()
        try:
            r = await c.request(b"POST", body, extra, rid)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ProtocolError, ValueError) as e:
            if record:
                self.stats.error(f"transport: {type(e).__name__}: {e}")
            await c.close()
            await asyncio.sleep(0.01)
            return False
        t1 = time.perf_counter_ns()
        if not r.keep_alive:
            await c.close()
        msg = r.message
        ok = (
            r.status == 200
            and msg is not None
            and msg.get("id") == rid
            and "result" in msg
            and not msg["result"].get("isError")
            and (msg["result"].get("content") or [{}])[0].get("text") == text
        )
        if ok:
            if record:
                self.stats.ok += 1
                self.stats.latencies_us.append((t1 - t0) // 1000)
            return True
        if record:
            self.stats.error(f"HTTP {r.status}: {str(msg)[:240]}")
        if r.status == 404 and self.era == "legacy" and c.session_id:
            self.stats.rehandshakes += 1
            try:
                await self.handshake()
            except Exception as e:  # noqa: BLE001
                self.stats.error(f"re-handshake: {e}")
                await asyncio.sleep(0.05)
        return False


def percentile(sorted_vals: list[int], q: float) -> float:
    if not sorted_vals:
        return float("nan")
    k = min(len(sorted_vals) - 1, max(0, int(round(q * (len(sorted_vals) - 1)))))
    return sorted_vals[k]


def summarize(latencies_us: list[int], ok: int, window_s: float) -> dict:
    s = sorted(latencies_us)
    return {
        "requests": ok,
        "window_s": window_s,
        "rps": ok / window_s if window_s > 0 else 0.0,
        "p50_ms": percentile(s, 0.50) / 1000,
        "p90_ms": percentile(s, 0.90) / 1000,
        "p99_ms": percentile(s, 0.99) / 1000,
        "max_ms": (s[-1] / 1000) if s else float("nan"),
        "mean_ms": (sum(s) / len(s) / 1000) if s else float("nan"),
    }


async def setup_clients(args, stats: Stats) -> tuple[list[Client], dict]:
    """Connect every virtual client and (legacy era) run its handshake. Not timed."""
    headers = [parse_header(h) for h in getattr(args, "header", None) or ()]
    clients = [Client(i, args.url, args.era, stats, args.payload, getattr(args, "tool", "echo"), headers) for i in range(args.concurrency)]
    # Bounded parallelism: relays that spawn a backend per session would otherwise face a
    # thundering herd of process starts.
    sem = asyncio.Semaphore(8)
    setup_errors: list[str] = []

    async def setup(cl: Client) -> None:
        err = "?"
        async with sem:
            for attempt in range(3):
                try:
                    await cl.conn.connect()
                    await cl.handshake()
                    return
                except Exception as e:  # noqa: BLE001
                    err = f"setup client {cl.idx} attempt {attempt}: {type(e).__name__}: {e}"
                    await asyncio.sleep(0.2)
            setup_errors.append(err)

    t0 = time.perf_counter()
    try:
        async with asyncio.timeout(args.setup_timeout):
            await asyncio.gather(*(setup(cl) for cl in clients))
    except TimeoutError:
        setup_errors.append(f"setup timed out after {args.setup_timeout}s")
    info = {"setup_s": time.perf_counter() - t0}
    if setup_errors:
        await asyncio.gather(*(cl.goodbye() for cl in clients))
        info["fatal"] = "; ".join(setup_errors[:3])
    stats.reset()
    gc.collect()
    gc.freeze()  # keep the cyclic GC from walking setup garbage during windows
    return clients, info


def _marker(args, text: str) -> None:
    if args.markers:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()


async def measure(clients: list[Client], stats: Stats, args, warmup: float, duration: float, count: int) -> dict:
    """Warm up, then one measured window (duration seconds, or count calls per client)."""
    stats.reset()
    phase = {"record": False, "stop": False}
    start_evt = asyncio.Event()
    remaining = [count * len(clients)] if count else None

    async def worker(cl: Client) -> None:
        await start_evt.wait()
        while not phase["stop"]:
            rec = phase["record"]
            if rec and remaining is not None:
                if remaining[0] <= 0:
                    return
                remaining[0] -= 1
            await cl.call_once(rec)

    tasks = [asyncio.create_task(worker(cl)) for cl in clients]
    start_evt.set()
    await asyncio.sleep(warmup)
    _marker(args, "#MEASURE_START")
    stats.reset()
    t0 = time.perf_counter()
    c0 = time.process_time()
    phase["record"] = True
    if remaining is None:
        await asyncio.sleep(duration)
    else:
        await asyncio.wait(tasks, timeout=max(60.0, duration * 100))
    phase["stop"] = True
    t1 = time.perf_counter()
    c1 = time.process_time()
    _marker(args, "#MEASURE_END")
    # Requests in flight at the end still complete (their latency is kept) but only those
    # finished inside the window count towards req/s.
    n = stats.ok
    done, pending = await asyncio.wait(tasks, timeout=30)
    for t in pending:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    window = t1 - t0
    res = summarize(stats.latencies_us, n, window)
    res.update(
        {
            "url": args.url,
            "era": args.era,
            "concurrency": len(clients),
            "errors": stats.errors,
            "error_samples": stats.error_samples,
            "reconnects": stats.reconnects,
            "rehandshakes": stats.rehandshakes,
            "sse_left_open": stats.sse_left_open,
            "sse_responses": stats.sse_responses,
            "json_responses": stats.json_responses,
            "loadgen_cpu_s": c1 - c0,
            "loadgen_cpu_ms_per_req": (c1 - c0) * 1000 / n if n else None,
            "loadgen_cpu_util": (c1 - c0) / window if window > 0 else None,
        }
    )
    if args.samples:
        res["latencies_us"] = list(stats.latencies_us)
    return res


def emit(args, res: dict) -> None:
    if args.json:
        sys.stdout.write(dumps(res).decode() + "\n")
        sys.stdout.flush()


async def run_once(args) -> dict:
    stats = Stats()
    clients, info = await setup_clients(args, stats)
    if "fatal" in info:
        return info
    try:
        res = await measure(clients, stats, args, args.warmup, args.duration, args.count)
    finally:
        await asyncio.gather(*(cl.goodbye() for cl in clients))
    res.update(info)
    return res


async def serve(args) -> int:
    """Keep the sessions open and run one window per command read from stdin:
    ``RUN <warmup_s> <duration_s>`` → markers + one JSON line; ``QUIT`` → DELETE sessions, exit."""
    stats = Stats()
    clients, info = await setup_clients(args, stats)
    if "fatal" in info:
        emit(args, info)
        return 1
    sys.stdout.write("#READY " + dumps(info).decode() + "\n")
    sys.stdout.flush()
    loop = asyncio.get_running_loop()
    try:
        while True:
            line = await loop.run_in_executor(None, sys.stdin.readline)
            words = line.split()
            if not words or words[0] == "QUIT":
                break
            if words[0] == "RUN":
                warmup, duration = float(words[1]), float(words[2])
                emit(args, await measure(clients, stats, args, warmup, duration, 0))
    finally:
        await asyncio.gather(*(cl.goodbye() for cl in clients))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", required=True, help="MCP endpoint, e.g. http://127.0.0.1:8801/mcp")
    p.add_argument("-c", "--concurrency", type=int, default=1, help="virtual clients (one connection + session each)")
    p.add_argument("--era", choices=["legacy", "2026"], default="legacy", help="legacy = initialize handshake + session; 2026 = stateless 2026-07-28")
    p.add_argument("--duration", type=float, default=5.0, help="measured seconds (ignored with --count)")
    p.add_argument("--count", type=int, default=0, help="measured calls per client instead of a duration")
    p.add_argument("--warmup", type=float, default=1.0, help="unrecorded seconds before the window")
    p.add_argument("--payload", type=int, default=32, help="approximate length of the echoed text")
    p.add_argument("--tool", default="echo", help="name of the echo tool on this server (a gateway exposes e.g. e__echo)")
    p.add_argument(
        "--header", action="append", default=[], metavar="'NAME: VALUE'",
        help="extra header on every request (repeatable), e.g. 'Authorization: Bearer <token>'",
    )  # fmt: skip
    p.add_argument("--setup-timeout", type=float, default=180.0)
    p.add_argument("--markers", action="store_true", help="print #MEASURE_START/#MEASURE_END on stdout")
    p.add_argument("--json", action="store_true", help="print the result as one JSON line on stdout")
    p.add_argument("--samples", action="store_true", help="include raw latencies (µs) in the JSON")
    p.add_argument("--serve", action="store_true", help="keep sessions open; windows on stdin commands (used by run_relay.py)")
    args = p.parse_args(argv)
    for h in args.header:
        try:
            parse_header(h)
        except ValueError as e:
            p.error(f"--header: {e}")

    try:
        import uvloop  # type: ignore

        uvloop.install()
    except ImportError:
        pass
    if args.serve:
        return asyncio.run(serve(args))
    res = asyncio.run(run_once(args))
    emit(args, res)
    if "fatal" in res:
        print(f"loadgen: FATAL {res['fatal']}", file=sys.stderr)
        return 1
    print(
        f"loadgen: {args.era} c={args.concurrency} {res['requests']} ok in {res['window_s']:.2f}s = {res['rps']:.0f} req/s, "
        f"p50 {res['p50_ms']:.3f} ms, p99 {res['p99_ms']:.3f} ms, errors {res['errors']}, "
        f"loadgen CPU {res['loadgen_cpu_util'] * 100:.0f}% ({res['loadgen_cpu_ms_per_req'] or 0:.3f} ms/req)",
        file=sys.stderr,
    )
    for e in res["error_samples"][:3]:
        print(f"  error: {e}", file=sys.stderr)
    return 0 if res["errors"] == 0 else 3


if __name__ == "__main__":
    sys.exit(main())
