"""CPU cost of the resilience and observability call layers per routed request.

Not a test (no ``test_`` prefix; benchmarks are never timed assertions, DESIGN §6).
Runs ``Pipeline.run`` on one event loop (uvloop, as the gateway does) with a last
step that answers at once, so what is measured is exactly what the layers add;
compare it with the ~0.2 CPU-ms a proxied call costs the gateway end to end.

    python tests/observability/bench_layers.py [--n 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from prometheus_client import CollectorRegistry  # noqa: E402

from hopline import jsonrpc as j  # noqa: E402
from hopline.compose.observability import build as build_observability  # noqa: E402
from hopline.compose.resilience import build as build_resilience  # noqa: E402
from hopline.config.schema import GatewayConfig  # noqa: E402
from hopline.observability.logs import REQUESTS, JsonFormatter, configure  # noqa: E402
from hopline.pipeline import Call, Pipeline  # noqa: E402

ANSWER = j.result(7, {"content": [{"type": "text", "text": "hello"}]})
META = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "progressToken": 3}
DEFINITION = {"name": "demo__echo", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}}


def config(**observability) -> GatewayConfig:
    return GatewayConfig.model_validate({"backends": {"demo": {"command": "x"}}, "observability": observability})


def variants() -> dict[str, Pipeline]:
    off = {"trace": {"enabled": False}, "hops": {"enabled": False}, "logs": {"requests": False}}
    res = build_resilience(config())
    out = {
        "no layers": Pipeline(),
        "resilience (retry+breaker+timeouts)": Pipeline(calls=res.calls, gates=res.gates),
        "propagation (trace+hops)": Pipeline(calls=build_observability(config(logs={"requests": False})).calls),
        "defaults: propagation + request log + resilience": Pipeline(calls=[*build_observability(config()).calls, *res.calls], gates=res.gates),
        "defaults + metrics": Pipeline(calls=[*build_observability(config(metrics={"port": 0}), registry=CollectorRegistry()).calls, *res.calls], gates=res.gates),
    }
    assert build_observability(config(**off)).calls == []
    try:
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        class Discard(InMemorySpanExporter):
            def export(self, spans):  # keep nothing: measure the spans, not a growing list
                return super().export([])

        otel = build_observability(config(metrics={"port": 0}), registry=CollectorRegistry(), exporter=Discard())
        out["defaults + metrics + OTel spans"] = Pipeline(calls=[*otel.calls, *res.calls], gates=res.gates)
    except ImportError:
        pass
    return out


async def measure(pipe: Pipeline, n: int) -> float:
    async def last(call: Call) -> j.Message:
        return ANSWER

    def call() -> Call:
        params = {"name": "echo", "arguments": {"text": "hello"}, "_meta": META}
        return Call(method="tools/call", backend="demo", params=params, target="echo", exposed="demo__echo", definition=DEFINITION, meta=META, timeout=300.0)

    for _ in range(500):  # warm up (label children, caches)
        await pipe.run(call(), last)
    started = time.process_time()
    for _ in range(n):
        await pipe.run(call(), last)
    return (time.process_time() - started) / n * 1e6  # CPU µs per request


async def main(n: int, rounds: int) -> None:
    handler = logging.StreamHandler(open(os.devnull, "w"))  # noqa: SIM115 - the log line is written, to nowhere
    configure("json", root=logging.getLogger("bench-root"))  # what `hopline serve` does (process-wide logging flags)
    handler.setFormatter(JsonFormatter())
    REQUESTS.addHandler(handler)
    REQUESTS.setLevel(logging.INFO)
    REQUESTS.propagate = False
    results: dict[str, list[float]] = {}
    pipes = variants()
    for _ in range(rounds):
        for name, pipe in pipes.items():
            results.setdefault(name, []).append(await measure(pipe, n))
    base = statistics.median(results["no layers"])
    print(f"{'variant':52} {'CPU µs/req':>11} {'added µs':>9} {'of 200 µs':>9}")
    for name, values in results.items():
        med = statistics.median(values)
        print(f"{name:52} {med:11.1f} {med - base:9.1f} {100 * (med - base) / 200:8.1f}%")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    try:
        import uvloop

        uvloop.run(main(args.n, args.rounds))
    except ImportError:
        asyncio.run(main(args.n, args.rounds))
