"""A created task adopted and its status told to its own client only (task_calls.py), on fakes of
the roles the task calls are handed (tests/layers/session_fakes.py): two client sessions on one
shared backend session, no gateway."""

from __future__ import annotations

from hopline.binding import Era
from hopline.context import Context, Principal
from hopline.jsonrpc import Message, notification
from hopline.layers.routing.tables import Routes
from hopline.layers.session import task_calls
from hopline.layers.session.task_store import MemoryTaskStore
from tests.layers.session_fakes import (
    FakeBackendSession,
    FakeConnectors,
    FakeTaskClient,
    FakeTaskHub,
    FakeTaskHubSettings,
)

ALICE, BOB = Principal("alice", issuer="t"), Principal("bob", issuer="t")


async def test_a_task_is_adopted_under_the_gateways_id_and_its_status_reaches_only_its_owner():
    async def nothing(method, params):
        return {}

    shared = FakeBackendSession("b", Era.MODERN, nothing)
    hub = FakeTaskHub(MemoryTaskStore(), Routes(), FakeTaskHubSettings(), FakeConnectors({"b": object()}))
    alice, bob = (
        FakeTaskClient(hub, task_calls.KnownTasks(10), {"b": shared}, principal=p) for p in (ALICE, BOB)
    )
    created = Message({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "task", "taskId": "t-9", "status": "working"}})
    answer = await task_calls.adopt(alice, Context(ALICE, "s-a"), "b", "slow", created)
    exposed = answer.body["result"]["taskId"]
    assert exposed != "t-9" and (await hub.tasks.get(exposed)).task_id == "t-9"
    assert await task_calls.lookup(bob, Context(BOB, "s-b"), exposed) is None  # another's task is unknown to bob
    status = notification(task_calls.TASK_STATUS, {"taskId": "t-9", "status": "completed"})
    assert task_calls.deliver_to_owner([bob, alice], "b", shared, status)
    assert bob.told == [] and [m.params["taskId"] for m in alice.told] == [exposed]
