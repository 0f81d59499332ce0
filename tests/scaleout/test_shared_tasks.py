"""Tasks across replicas: a task created through one replica is polled, updated and
cancelled through another, and stays its creator's (the task store in Redis)."""

from __future__ import annotations

import pytest

from tests import peers
from tests.conftest import SERVERS, PY
from tests.modes.tasks_peers import call_task, task_rpc, tasks_client
from tests.modes.test_gateway_tasks import KEYS, api_keys, refused, unknown, until_status
from tests.scaleout.conftest import Cluster, replica_config


@pytest.fixture
def task_replicas(tmp_path):
    """Redis, one task-capable SDK backend over HTTP, two replicas with API keys in front."""
    proc, port = peers.start_script(str(SERVERS / "sdk_task_server.py"), "http")
    c = Cluster(tmp_path)
    try:
        c.start_redis()
        config = replica_config(c.redis_url, c.key)
        config["backends"] = {"jobs": {"url": f"http://127.0.0.1:{port}/mcp"}}
        config["auth"] = api_keys()
        yield c, c.start_replica(config).url, c.start_replica(config).url
    finally:
        c.close()
        peers.stop(proc)


async def test_a_task_made_through_one_replica_is_driven_through_another_by_its_creator_only(task_replicas):
    c, a, b = task_replicas
    alice_a, _ = tasks_client(a, headers={"x-api-key": KEYS["alice"]})
    alice_b, _ = tasks_client(b, headers={"x-api-key": KEYS["alice"]})
    bob_b, _ = tasks_client(b, headers={"x-api-key": KEYS["bob"]})
    async with alice_a, alice_b, bob_b:
        job = await peers.bounded(call_task(alice_a, "jobs__job", {"steps": 2}))
        done = await until_status(alice_b, job["taskId"], {"completed"})
        assert done["result"]["content"][0]["text"] == "job done after 2 steps"

        ask = await peers.bounded(call_task(alice_b, "jobs__approve", {"question": "ship it?"}))
        await until_status(alice_a, ask["taskId"], {"input_required"})
        reply = {"approval": {"action": "accept", "content": {"answer": "yes"}}}
        assert await refused(bob_b, "tasks/update", ask["taskId"], input_responses=reply) == unknown(ask["taskId"])
        await peers.bounded(task_rpc(alice_a, "tasks/update", ask["taskId"], input_responses=reply))
        assert (await until_status(alice_b, ask["taskId"], {"completed"}))["result"]["content"][0]["text"] == "approval: accept yes"

        run = await peers.bounded(call_task(alice_a, "jobs__forever"))
        assert await refused(bob_b, "tasks/get", run["taskId"]) == unknown(run["taskId"])
        assert await refused(bob_b, "tasks/cancel", run["taskId"]) == unknown(run["taskId"])
        assert (await peers.bounded(task_rpc(alice_b, "tasks/cancel", run["taskId"])))["resultType"] == "complete"
        assert (await until_status(alice_a, run["taskId"], {"cancelled"}))["status"] == "cancelled"


async def test_with_redis_down_a_task_request_gets_a_clear_error_and_works_again_after(task_replicas):
    c, a, b = task_replicas
    alice_a, _ = tasks_client(a, headers={"x-api-key": KEYS["alice"]})
    async with alice_a:
        run = await peers.bounded(call_task(alice_a, "jobs__forever"))
        c.stop_redis()
        from mcp import MCPError

        with pytest.raises(MCPError) as caught:
            await peers.bounded(task_rpc(alice_a, "tasks/get", run["taskId"]))
        assert "task store is unreachable" in caught.value.error.message
        c.start_redis()  # an empty Redis: the task is unknown now (fail closed), new ones work
        assert await refused(alice_a, "tasks/get", run["taskId"]) == unknown(run["taskId"])
        again = await peers.bounded(call_task(alice_a, "jobs__job", {"steps": 1}))
        assert (await until_status(alice_a, again["taskId"], {"completed"}))["status"] == "completed"


async def test_a_task_in_one_replicas_stdio_child_is_driven_through_another(tmp_path):
    """A stdio backend is each replica's own child: the task lives in A's. Asked through B,
    the request is handed to A (transports/replica_link.py), still bound to its creator."""
    c = Cluster(tmp_path)
    try:
        c.start_redis()
        config = replica_config(c.redis_url, c.key)
        config["backends"] = {"jobs": {"command": PY, "args": [str(SERVERS / "sdk_task_server.py")]}}
        config["auth"] = api_keys()
        a, b = c.start_replica(config).url, c.start_replica(config).url
        alice_a, _ = tasks_client(a, headers={"x-api-key": KEYS["alice"]})
        alice_b, _ = tasks_client(b, headers={"x-api-key": KEYS["alice"]})
        bob_b, _ = tasks_client(b, headers={"x-api-key": KEYS["bob"]})
        async with alice_a, alice_b, bob_b:
            job = await peers.bounded(call_task(alice_a, "jobs__job", {"steps": 2}))
            done = await until_status(alice_b, job["taskId"], {"completed"})
            assert done["taskId"] == job["taskId"] and done["result"]["content"][0]["text"] == "job done after 2 steps"
            run = await peers.bounded(call_task(alice_a, "jobs__forever"))
            assert await refused(bob_b, "tasks/cancel", run["taskId"]) == unknown(run["taskId"])
            assert (await peers.bounded(task_rpc(alice_b, "tasks/cancel", run["taskId"])))["resultType"] == "complete"
            assert (await until_status(alice_a, run["taskId"], {"cancelled"}))["status"] == "cancelled"
            c.kill(c.replicas[0])  # A and its child are gone: so is the task, and B says so at once
            with pytest.raises(Exception) as caught:
                await peers.bounded(task_rpc(alice_b, "tasks/get", run["taskId"]))
            assert "the replica holding this task is gone" in str(caught.value)
    finally:
        c.close()
