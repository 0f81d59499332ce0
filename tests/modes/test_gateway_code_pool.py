"""Code mode's sandbox pool through `hopline serve` and the official SDK client:
`tools.code.max_workers` bounds the `monty` processes below the gateway while 20
`run_code` calls run at once, and the unused spare is reaped after `idle_timeout`
(the psutil descendants of the gateway process are the ground truth)."""

from __future__ import annotations

import asyncio
import threading

import yaml

from tests.conftest import PY
from tests.peers import bounded, client, eventually, live


def monty_below(proc) -> set[int]:
    return live(proc.descendants(), lambda p: p.name() == "monty")


async def test_twenty_parallel_runs_keep_to_tools_code_max_workers(tmp_path, hopline_serve):
    conf = {
        "backends": {"demo": {"command": PY, "args": ["-m", "hopline.demo"]}},
        "tools": {"mode": "code", "code": {"max_workers": 2, "spares": 1, "idle_timeout": 1.0}},
    }
    path = tmp_path / "code.yaml"
    path.write_text(yaml.safe_dump(conf))
    gw = hopline_serve(str(path))
    peak, stop = [0], threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], len(monty_below(gw)))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        async with client(gw.url, "legacy") as c:
            calls = [c.call_tool("run_code", {"code": f"call_tool('demo__add', a={i}, b=1)['sum']"}) for i in range(20)]
            results = await bounded(asyncio.gather(*calls), 60)
            assert [r.structured_content["result"] for r in results] == [i + 1 for i in range(20)]
        await eventually(lambda: not monty_below(gw), 15, "the spare, unused for 1 s, reaped")
    finally:
        stop.set()
        sampler.join(10)
    assert 1 <= peak[0] <= 2, peak[0]
