"""SEP-2624 interceptor servers, the chain semantics (layers/policy/remote.py), sans-io.

The protocol/chain fixtures of modelcontextprotocol/experimental-ext-interceptors
(conformance/fixtures/protocol/chain-*.json) state the behaviour; each is reproduced here
from reading it, with the fixture's interceptors (deny-all, crash, uppercase-note,
require-uppercase-note) as plain in-process servers. The servers over real stdio are in
tests/layers/policy/test_interceptor_servers.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from hopline.context import Context, Principal
from hopline.jsonrpc import Message, result
from hopline.layers.policy.chain import Entry, InterceptorChain, PolicyDenied
from hopline.layers.policy.remote import (
    MAX_INTERCEPTORS,
    InterceptorFailure,
    Override,
    RemoteChain,
    member,
    parse_list,
)
from hopline.pipeline import Call

BOTH = [{"events": ["tools/call"], "phase": "request"}, {"events": ["tools/call"], "phase": "response"}]


def behave(name: str, payload: dict[str, Any]) -> dict[str, Any]:
    """The fixtures' behaviours."""
    if name.endswith("deny-all"):
        msg = {"message": "denied by policy", "severity": "error"}
        return {"interceptor": name, "type": "validation", "valid": False, "severity": "error", "messages": [msg]}
    if "crash" in name:
        raise RuntimeError("the interceptor crashed")
    if name.endswith("uppercase-note"):
        note = (payload.get("arguments") or {}).get("note", "")
        if name.endswith("require-uppercase-note"):
            ok = note == note.upper()
            msgs = [] if ok else [{"message": "note must be upper case", "severity": "error"}]
            return {
                "interceptor": name,
                "type": "validation",
                "valid": ok,
                **({} if ok else {"severity": "error"}),
                "messages": msgs,
            }
        new = {**payload, "arguments": {**payload["arguments"], "note": note.upper()}}
        return {"interceptor": name, "type": "mutation", "modified": new != payload, "payload": new}
    if name.startswith("append-"):  # appends its letter to arguments.note
        new = {**payload, "arguments": {**payload["arguments"], "note": payload["arguments"]["note"] + name[-1]}}
        return {"interceptor": name, "type": "mutation", "modified": True, "payload": new}
    if name.endswith("quoting"):  # quotes a secret it refused
        msg = {"message": "refused key AKIAABCDEFGHIJKLMNOP", "severity": "error"}
        return {"interceptor": name, "type": "validation", "valid": False, "messages": [msg]}
    if name.endswith("warn"):
        msg = {"message": "looks odd", "severity": "warn"}
        return {"interceptor": name, "type": "validation", "valid": False, "severity": "warn", "messages": [msg]}
    if name.endswith("hang"):
        raise _Hang
    if name.endswith("garbage"):
        return {"interceptor": name, "valid": "perhaps"}
    return {"interceptor": name, "type": "validation", "valid": True}


class _Hang(Exception):
    pass


class FakeServer:
    """An interceptor server as plain data: descriptors in, the fixture behaviours out."""

    def __init__(
        self, descriptors: list[dict[str, Any]], name: str = "conf", open_when_down: bool = False, **override: Any
    ) -> None:
        self.name = name
        self.fail_open = open_when_down
        self.invoked: list[tuple[str, str, dict[str, Any]]] = []
        self._members = [
            member(self, d, Override(**override), 5.0) for d in parse_list({"interceptors": descriptors}, name)
        ]

    async def members(self, timeout: float | None):
        return self._members

    async def invoke(self, params: dict[str, Any], timeout: float | None) -> Any:
        self.invoked.append((params["name"], params["phase"], params["payload"]))
        try:
            return behave(params["name"], params["payload"])
        except _Hang:
            await asyncio.Event().wait()


def d(name: str, kind: str, **kw: Any) -> dict[str, Any]:
    return {"name": name, "type": kind, "hooks": BOTH, **kw}


PAYLOAD = {"name": "echo", "arguments": {"note": "hello"}}


async def apply(server: FakeServer, phase: str = "request", payload: dict[str, Any] | None = None, call: Any = None):
    notes: list[dict[str, Any]] = []
    decision = await RemoteChain([server]).run("tools/call", phase, payload or PAYLOAD, call, notes.append)
    return decision, notes


async def test_fail_open_crash_is_skipped():
    decision, notes = await apply(FakeServer([d("conf/crash-open", "validation", failOpen=True)]))
    assert decision is None  # allow, payload unchanged
    assert notes[0]["outcome"] == "failed; skipped"


async def test_fail_closed_is_the_default():
    decision, _ = await apply(FakeServer([d("conf/crash-closed", "validation")]))
    assert decision.action == "reject"
    assert "conf/crash-closed" in decision.error.message and "fail closed" in decision.error.message


async def test_audit_validator_never_blocks():
    decision, notes = await apply(FakeServer([d("conf/deny-all", "validation", mode="audit")]))
    assert decision is None
    assert notes == [
        {
            "interceptor": "conf/deny-all",
            "server": "conf",
            "phase": "request",
            "mode": "audit",
            "outcome": "invalid (error)",
            "reason": "denied by policy",
        }
    ]


async def test_audit_mutation_is_shadowed():
    decision, notes = await apply(FakeServer([d("conf/uppercase-note", "mutation", mode="audit")]))
    assert decision is None
    assert notes[0]["outcome"] == "would modify"


async def test_request_mutates_then_validates():
    server = FakeServer([d("conf/require-uppercase-note", "validation"), d("conf/uppercase-note", "mutation")])
    decision, _ = await apply(server, "request")
    assert decision.action == "mutate"
    assert decision.value == {"name": "echo", "arguments": {"note": "HELLO"}}
    assert [n for n, _, _ in server.invoked] == ["conf/uppercase-note", "conf/require-uppercase-note"]


async def test_response_validates_then_mutates():
    server = FakeServer([d("conf/require-uppercase-note", "validation"), d("conf/uppercase-note", "mutation")])
    decision, _ = await apply(server, "response")
    assert decision.action == "reject"
    assert decision.error.message == "blocked by interceptor conf/require-uppercase-note: note must be upper case"
    assert [n for n, _, _ in server.invoked] == ["conf/require-uppercase-note"]  # no mutation after a block


async def test_validation_blocks_with_the_interceptor_and_its_reason():
    decision, _ = await apply(FakeServer([d("conf/deny-all", "validation")]))
    assert isinstance(decision.error, PolicyDenied)
    assert decision.error.message == "blocked by interceptor conf/deny-all: denied by policy"
    assert decision.error.data == {"interceptor": "conf/deny-all", "reason": "denied by policy"}


async def test_the_clients_error_holds_no_secret_shaped_text():
    decision, _ = await apply(FakeServer([d("conf/quoting", "validation")]))  # valid: false, no severity
    assert decision.error.message == "blocked by interceptor conf/quoting: refused key [REDACTED:aws_access_key]"


async def test_only_severity_error_blocks():
    decision, notes = await apply(FakeServer([d("conf/warn", "validation")]))
    assert decision is None
    assert notes[0]["outcome"] == "invalid (warn)"


async def test_mutations_are_all_or_none():
    # the first mutator changes the payload, the second fails closed: nothing is applied
    server = FakeServer([d("append-a", "mutation", priorityHint=1), d("conf/crash", "mutation", priorityHint=2)])
    decision, notes = await apply(server)
    assert decision.action == "reject"
    assert [n["outcome"] for n in notes] == ["modified", "failed"]
    # a mutation followed by a blocking validation: nothing is sent
    server = FakeServer([d("append-a", "mutation"), d("conf/deny-all", "validation")])
    decision, _ = await apply(server)
    assert decision.action == "reject"


async def test_mutators_run_by_priority_then_name():
    server = FakeServer(
        [
            d("append-c", "mutation", priorityHint={"request": -5, "response": 5}),
            d("append-b", "mutation"),
            d("append-a", "mutation"),
        ]
    )
    decision, _ = await apply(server, "request")
    assert decision.value["arguments"]["note"] == "hellocab"
    decision, _ = await apply(server, "response")
    assert decision.value["arguments"]["note"] == "helloabc"


async def test_operator_overrides_win_over_the_server():
    server = FakeServer([d("conf/deny-all", "validation")], mode="audit")
    assert (await apply(server))[0] is None
    server = FakeServer([d("conf/crash", "validation")], fail_open=True)  # Override(fail_open=True)
    assert (await apply(server))[0] is None
    server = FakeServer([d("conf/deny-all", "validation")], events=frozenset({"prompts/get"}))
    assert (await apply(server))[0] is None and server.invoked == []


async def test_a_hanging_interceptor_fails_within_its_timeout():
    closed = FakeServer([d("slow/hang", "validation")], timeout=0.05)
    decision, notes = await apply(closed)
    assert decision.action == "reject" and "no answer within 0.05 s" in notes[0]["reason"]
    opened = FakeServer([d("slow/hang", "validation", failOpen=True)], timeout=0.05)
    assert (await apply(opened))[0] is None


async def test_the_exchange_deadline_bounds_every_invocation():
    loop = asyncio.get_running_loop()
    ctx = Context(Principal("alice"), "s1", deadline=loop.time() + 0.05)
    server = FakeServer([d("slow/hang", "validation")], timeout=300)
    decision, notes = await apply(server, call=Call("tools/call", "b", dict(PAYLOAD), context=ctx))
    assert decision.action == "reject"
    assert "no answer within" in notes[0]["reason"]


async def test_garbage_answers_fail_as_configured():
    decision, notes = await apply(FakeServer([d("junk/garbage", "validation")]))
    assert decision.action == "reject" and "no boolean 'valid'" in notes[0]["reason"]
    assert (await apply(FakeServer([d("junk/garbage", "validation", failOpen=True)])))[0] is None


async def test_an_unreachable_server_fails_closed_unless_told_otherwise():
    class Down(FakeServer):
        async def members(self, timeout):
            raise InterceptorFailure("cannot start 'nowhere': No such file or directory")

    decision, _ = await apply(Down([], name="down"))
    assert decision.action == "reject" and "server down" in decision.error.message
    assert (await apply(Down([], name="down", open_when_down=True)))[0] is None


async def test_a_server_that_never_starts_is_bounded_by_the_deadline():
    class Stuck(FakeServer):
        async def members(self, timeout):
            await asyncio.Event().wait()

    loop = asyncio.get_running_loop()
    ctx = Context(Principal("alice"), "s1", deadline=loop.time() + 0.05)
    stuck = apply(Stuck([], name="stuck"), call=Call("tools/call", "b", dict(PAYLOAD), context=ctx))
    decision, notes = await asyncio.wait_for(stuck, 10)  # a guard against a hang, not a timing
    assert decision.action == "reject" and "server stuck" in decision.error.message
    assert notes[0]["reason"].startswith("no answer within")


def test_list_results_are_checked():
    with pytest.raises(InterceptorFailure):
        parse_list({"interceptors": "lots"}, "s")
    with pytest.raises(InterceptorFailure):
        parse_list({"interceptors": [d(f"v{i}", "validation") for i in range(MAX_INTERCEPTORS + 1)]}, "s")
    found = parse_list(
        {
            "interceptors": [
                d("ok", "validation"),
                {"name": "no-type", "hooks": BOTH},
                {"name": "bad-phase", "type": "mutation", "hooks": [{"events": ["tools/call"], "phase": "later"}]},
                {"name": "old-shape", "type": "validation", "hook": {"events": ["*"], "phase": "both"}},
                d("ok", "mutation"),  # a repeated name keeps its first entry
            ]
        },
        "s",
    )
    assert [(x.name, x.type) for x in found] == [("ok", "validation"), ("old-shape", "validation")]


async def test_through_the_interceptor_chain_the_client_gets_the_reason_and_the_audit_every_verdict(audit):
    server = FakeServer([d("conf/deny-all", "validation"), d("conf/warn", "validation", mode="audit")])
    chain = InterceptorChain([Entry(RemoteChain([server]))], audit=audit.log)

    async def backend(c: Call) -> Message:
        raise AssertionError("a blocked call must not reach the backend")

    with pytest.raises(PolicyDenied) as caught:
        await chain(Call("tools/call", "b", dict(PAYLOAD), target="echo", exposed="b__echo"), backend)
    assert caught.value.message == "blocked by interceptor conf/deny-all: denied by policy"
    rec = audit.records[-1]
    assert rec["decision"] == "deny" and rec["by"] == "interceptor-servers"
    assert [(n["interceptor"], n["outcome"]) for n in rec["interceptors"]] == [
        ("conf/deny-all", "invalid (error)"),
        ("conf/warn", "invalid (warn)"),
    ]


async def test_through_the_interceptor_chain_a_response_mutation_reaches_the_client(audit):
    server = FakeServer([d("conf/uppercase-note", "mutation", hooks=[{"events": ["tools/call"], "phase": "response"}])])
    chain = InterceptorChain([Entry(RemoteChain([server]))], audit=audit.log)

    async def backend(c: Call) -> Message:
        return result(1, {"name": "echo", "arguments": {"note": "quiet"}})

    answer = await chain(Call("tools/call", "b", dict(PAYLOAD), target="echo", exposed="b__echo"), backend)
    assert answer.body["result"]["arguments"]["note"] == "QUIET"
    assert audit.records[-1]["mutations"][0]["by"] == "interceptor-servers"
