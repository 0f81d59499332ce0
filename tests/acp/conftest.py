"""Fixtures for the ACP conductor tests.

``conductor(*components, options=...)`` starts ``python -m hopline.acp`` with a
raw NDJSON client attached and guarantees in teardown that it and every
component it spawned are gone (and that it left none behind after a clean
close).
"""

from __future__ import annotations

import psutil
import pytest
from acp_harness import RawClient, conductor_argv


@pytest.fixture
async def conductor():
    started: list[RawClient] = []

    async def launch(*components: str, options: tuple[str, ...] = ()) -> RawClient:
        client = await RawClient.start(conductor_argv(*components, options=options))
        started.append(client)
        return client

    try:
        yield launch
    finally:
        leftovers = []
        for client in started:
            children = client.descendants()
            await client.close(kill_group=False)
            _, alive = psutil.wait_procs(children, timeout=5)
            for p in alive:
                leftovers.append(p.pid)
            client.kill()
        assert not leftovers, f"the conductor left components behind: {leftovers}"
