"""The interceptor chain: the four points, decisions, order, failures, the guard, loading."""

from __future__ import annotations

import asyncio
import importlib.metadata
import logging
from pathlib import Path

import pytest

from hopline.config.load import ConfigError, parse_config
from hopline.context import Principal
from hopline.jsonrpc import InternalError, InvalidParams, Message, UnavailableError, error_response, result
from hopline.layers.policy import chain as chain_module
from hopline.layers.policy import loader as loader_module
from hopline.compose.policy import build
from hopline.layers.policy.chain import (
    CONTINUE,
    Entry,
    InterceptorChain,
    PolicyDenied,
    SurfaceGuard,
    item_of,
    mutate,
    reject,
    unknown_error,
)
from hopline.pipeline import Call, Item, Pipeline

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
ALICE = Principal("alice", claims={"sub": "alice", "roles": ["dev"]}, issuer="https://idp", token="SECRET-TOKEN-VALUE")


def call(method="tools/call", name="echo", backend="gh", args=None, **kw) -> Call:
    params = {"name": name, "arguments": args if args is not None else {"text": "hi"}}
    return Call(method, backend, params, kw.pop("principal", ALICE), target=name, exposed=f"{backend}__{name}", **kw)


class Backend:
    """The `next` step: records what it received, answers a result."""

    def __init__(self, answer: Message | None = None) -> None:
        self.seen: list[Call] = []
        self.answer = answer or result(1, {"content": [{"type": "text", "text": "ok"}]})

    async def __call__(self, c: Call) -> Message:
        self.seen.append(Call(c.method, c.backend, dict(c.params), c.principal, c.direction, c.target))
        return self.answer


class Recorder:
    def __init__(self, name, log, decisions=None):
        self.name = name
        self.log = log
        self.decisions = decisions or {}

    def _hook(point):
        def hook(self, view):
            self.log.append((self.name, point))
            return self.decisions.get(point)

        hook.__name__ = point
        return hook

    pre_route = _hook("pre_route")
    post_route = _hook("post_route")
    pre_response = _hook("pre_response")
    post_response = _hook("post_response")


async def run(entries, c=None, backend=None, audit=None):
    backend = backend or Backend()
    chain = InterceptorChain([e if isinstance(e, Entry) else Entry(e) for e in entries], audit=audit)
    answer = await chain(c or call(), backend)
    return answer, backend


# -- the four points ----------------------------------------------------------------------------------
async def test_hooks_run_as_an_onion_and_continue_keeps_the_answer_object():
    log: list = []
    backend = Backend()
    answer, _ = await run([Recorder("a", log), Recorder("b", log)], backend=backend)
    assert answer is backend.answer  # untouched: its original bytes stay valid
    assert log == [("a", "pre_route"), ("b", "pre_route"), ("a", "post_route"), ("b", "post_route"),
                   ("b", "pre_response"), ("a", "pre_response"), ("b", "post_response"), ("a", "post_response")]


async def test_views_show_what_each_point_may_see():
    seen = {}

    class Spy:
        name = "spy"

        def pre_route(self, v):
            seen["pre"] = v

        def post_route(self, v):
            seen["post"] = v

        def pre_response(self, v):
            seen["resp"] = v

    c = call(meta={"traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01"}, definition={"name": "echo", "annotations": {}})
    await run([Spy()], c)
    pre, post, resp = seen["pre"], seen["post"], seen["resp"]
    assert not hasattr(pre, "backend") and pre.name == "gh__echo" and pre.principal is ALICE and pre.direction == "to_backend"
    assert (post.backend, post.target, post.definition) == ("gh", "echo", {"name": "echo", "annotations": {}})
    assert resp.result == {"content": [{"type": "text", "text": "ok"}]} and resp.error is None
    with pytest.raises(AttributeError):
        pre.params = {}  # frozen


async def test_mutations_at_request_points_reach_the_backend_but_cannot_reroute(caplog):
    class Rewrite:
        name = "rewrite"

        def pre_route(self, v):
            return mutate({**v.params, "arguments": {"text": "HI"}, "name": "other_tool"}, reason="upper")

        def post_route(self, v):
            return mutate({**v.params, "_meta": {"x": 1}, "uri": "file:///etc"})

    audit_lines: list[bytes] = []
    from hopline.layers.policy.audit import AuditLog

    with caplog.at_level(logging.WARNING, "hopline.policy"):
        _, backend = await run([Rewrite()], audit=AuditLog(audit_lines.append))
    sent = backend.seen[0].params
    assert sent == {"name": "echo", "arguments": {"text": "HI"}, "_meta": {"x": 1}}
    assert "tried to change the routing fields" in caplog.text
    assert b'"mutations":[{"by":"rewrite","point":"pre_route","reason":"upper"}' in audit_lines[0]


async def test_pre_response_mutates_results_and_errors():
    class Label:
        name = "label"

        def pre_response(self, v):
            if v.result is not None:
                return mutate({**v.result, "_meta": {"labelled": True}})
            return mutate({**v.error, "message": "hidden"})

    answer, _ = await run([Label()])
    assert answer.body["result"]["_meta"] == {"labelled": True}
    err = error_response(1, UnavailableError("backend gh said: db password is hunter2"))
    answer, _ = await run([Label()], backend=Backend(err))
    assert answer.body["error"]["message"] == "hidden" and answer.body["error"]["code"] == -31001


@pytest.mark.parametrize("point", ["pre_route", "post_route"])
async def test_a_reject_before_the_backend_stops_the_call(point, audit):
    log: list = []
    denial = reject(InvalidParams("no"), reason="because")
    backend = Backend()
    with pytest.raises(InvalidParams, match="no"):
        await run([Recorder("outer", log), Recorder("judge", log, {point: denial}), Recorder("inner", log)], backend=backend, audit=audit.log)
    assert backend.seen == []
    assert ("inner", "post_route") not in log
    assert ("outer", "post_response") in log  # observers see refusals too
    rec = audit.records[0]
    assert (rec["decision"], rec["by"], rec["point"], rec["reason"], rec["outcome"]) == ("deny", "judge", point, "because", "error -32602")


async def test_reject_with_a_message_is_policy_denied_and_pre_response_can_withhold():
    class Judge:
        name = "judge"

        def pre_response(self, v):
            return reject("result withheld")

    backend = Backend()
    with pytest.raises(PolicyDenied) as err:
        await run([Judge()], backend=backend)
    assert backend.seen and err.value.to_error_object() == {"code": -31005, "message": "result withheld"}


async def test_post_response_observes_only(caplog):
    class Meddler:
        name = "meddler"

        def post_response(self, v):
            return reject("too late")

    backend = Backend()
    chain = InterceptorChain([Entry(Meddler())])
    with caplog.at_level(logging.WARNING, "hopline.policy"):
        answer = await chain(call(), backend)
        await chain(call(), backend)
    assert answer is backend.answer
    assert caplog.text.count("only observes") == 1


async def test_post_response_sees_the_decision_and_the_answer_of_a_refusal():
    views = []

    class Observer:
        name = "obs"

        def post_response(self, v):
            views.append(v)

    class Deny:
        name = "deny"

        def post_route(self, v):
            return reject(InvalidParams("Unknown tool: 'gh__echo'"))

    with pytest.raises(InvalidParams):
        await run([Observer(), Deny()])
    assert views[0].decision == "deny" and views[0].answer.body["error"]["code"] == -32602


async def test_async_hooks_and_hooks_raising_protocol_errors():
    class Slow:
        name = "slow"

        async def post_route(self, v):
            await asyncio.sleep(0)
            return CONTINUE

    class Raiser:
        name = "raiser"

        def pre_route(self, v):
            raise InvalidParams("bad arguments")

    answer, backend = await run([Slow()])
    assert backend.seen
    with pytest.raises(InvalidParams, match="bad arguments"):
        await run([Raiser()])


async def test_a_failing_interceptor_fails_closed_or_open_as_configured(caplog, audit):
    class Broken:
        name = "broken"

        def post_route(self, v):
            raise RuntimeError("boom at /secret/path")

    with caplog.at_level(logging.ERROR, "hopline.policy"):
        with pytest.raises(InternalError) as err:
            await run([Broken()], audit=audit.log)
    assert "boom" not in err.value.message and "Traceback" not in err.value.message
    assert "boom at /secret/path" in caplog.text  # the operator finds it in the log
    assert audit.records[0]["decision"] == "deny" and audit.records[0]["by"] == "broken"
    answer, backend = await run([Entry(Broken(), fail_open=True)], audit=audit.log)
    assert backend.seen and audit.records[1]["decision"] == "allow" and audit.records[1]["shadow"][0]["would"] == "error"


async def test_bad_decisions_are_interceptor_failures():
    class Wrong:
        name = "wrong"

        def post_route(self, v):
            return "no"

    class NotAnObject:
        name = "nao"

        def pre_route(self, v):
            return mutate(["x"])

    for bad in (Wrong(), NotAnObject()):
        backend = Backend()
        with pytest.raises(InternalError):
            await run([bad], backend=backend)
        assert backend.seen == []


async def test_audit_mode_records_but_applies_nothing(audit):
    class Strict:
        name = "strict"

        def pre_route(self, v):
            return mutate({**v.params, "arguments": {}}, reason="would strip")

        def post_route(self, v):
            return reject("would refuse", reason="not allowed")

    answer, backend = await run([Entry(Strict(), mode="audit")], audit=audit.log)
    assert backend.seen[0].params["arguments"] == {"text": "hi"}
    rec = audit.records[0]
    assert rec["decision"] == "allow" and [s["would"] for s in rec["shadow"]] == ["mutate", "reject"]


async def test_the_chain_runs_for_server_to_client_requests():
    seen = []

    class Watch:
        name = "watch"

        def pre_route(self, v):
            seen.append((v.direction, v.method, v.params["messages"][0]["content"]["text"]))

    c = Call("sampling/createMessage", "gh", {"messages": [{"role": "user", "content": {"type": "text", "text": "hello"}}]}, ALICE, direction="to_client")
    answer, backend = await run([Watch()], c)
    assert seen == [("to_client", "sampling/createMessage", "hello")] and backend.seen


async def test_cancellation_is_audited_and_skips_observers(audit):
    log: list = []

    async def hang(c):
        raise asyncio.CancelledError

    chain = InterceptorChain([Entry(Recorder("r", log))], audit=audit.log)
    with pytest.raises(asyncio.CancelledError):
        await chain(call(), hang)
    assert ("r", "post_response") not in log and audit.records[0]["outcome"] == "cancelled"


def test_an_object_without_hooks_is_not_an_interceptor():
    with pytest.raises(TypeError, match="implements none of"):
        Entry(object())


# -- the visibility guard: hidden is exactly unknown ---------------------------------------------------
class Hide:
    def __init__(self, *hidden):
        self.hidden = set(hidden)

    def visible(self, principal, item):
        return (item.kind, item.name) not in self.hidden


@pytest.mark.parametrize(
    ("method", "params", "target", "exposed", "unknown"),
    [
        ("tools/call", {"name": "rm", "arguments": {}}, "rm", "gh__rm", InvalidParams("Unknown tool: 'gh__rm'")),
        ("prompts/get", {"name": "rm"}, "rm", "gh__rm", InvalidParams("Unknown prompt: 'gh__rm'")),
        ("resources/read", {"uri": "file:///rm"}, "file:///rm", "hopline://gh/file:///rm", InvalidParams("Unknown resource: 'hopline://gh/file:///rm'")),
        ("resources/subscribe", {"uri": "file:///rm"}, "file:///rm", "hopline://gh/x", InvalidParams("Unknown resource: 'hopline://gh/x'")),
        ("completion/complete", {"ref": {"type": "ref/prompt", "name": "rm"}}, None, "gh__rm", InvalidParams("Unknown prompt: 'gh__rm'")),
        ("completion/complete", {"ref": {"type": "ref/resource", "uri": "file:///rm"}}, None, None, InvalidParams("completion/complete: unknown ref")),
    ],
)
async def test_a_hidden_item_is_refused_exactly_like_an_unknown_one(method, params, target, exposed, unknown):
    guard = SurfaceGuard([Hide(("tool", "rm"), ("prompt", "rm"), ("resource", "file:///rm"))])
    backend = Backend()
    c = Call(method, "gh", params, ALICE, target=target, exposed=exposed)
    with pytest.raises(InvalidParams) as err:
        await InterceptorChain([Entry(guard)])(c, backend)
    assert err.value.to_error_object() == unknown.to_error_object()
    assert err.value.to_response(7).body == unknown.to_response(7).body
    assert backend.seen == []
    visible = Call(method, "gh", {**params, "name": "ls", "uri": "file:///ls", "ref": {"type": "ref/prompt", "name": "ls"}}, ALICE, target=None, exposed="gh__ls")
    await InterceptorChain([Entry(guard)])(visible, backend)
    assert backend.seen


async def test_the_guard_ignores_what_is_not_an_item():
    guard = SurfaceGuard([Hide()])
    for c in (Call("tasks/get", "gh", {"taskId": "t"}, ALICE), Call("sampling/createMessage", "gh", {}, ALICE, direction="to_client")):
        assert guard.post_route(InterceptorChain([Entry(guard)])._request_view("post_route", c)) is None


def test_item_of_and_unknown_error():
    assert item_of("tools/call", "gh", "x", {}, {"name": "x"}) == Item("tool", "gh", "x", {"name": "x"})
    assert item_of("tools/call", "gh", None, {"name": "y"}) == Item("tool", "gh", "y", {})
    assert item_of("resources/unsubscribe", "gh", None, {"uri": "u"}) == Item("resource", "gh", "u", {})
    assert item_of("tasks/cancel", "gh", None, {}) is None and item_of("tools/call", "gh", None, {"name": 3}) is None
    assert unknown_error("tools/call", "a__b").to_error_object() == {"code": -32602, "message": "Unknown tool: 'a__b'"}


# -- configuration: operator interceptors by dotted path or entry point --------------------------------
BACKENDS = "backends:\n  gh: {command: python}\n"


def test_interceptors_load_by_dotted_path(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    for path in ("interceptor_example:GuardDestructive", "interceptor_example.GuardDestructive"):
        cfg = parse_config(BACKENDS + f"policy:\n  interceptors:\n    - {{class: '{path}', options: {{role: root}}, mode: audit}}\n")
        surface, (chain,) = build(cfg)
        entry = chain.entries[0]
        assert (entry.name, entry.mode, entry.interceptor.role) == ("guard-destructive", "audit", "root")


def test_interceptors_load_by_entry_point(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    ep = importlib.metadata.EntryPoint("guard", "interceptor_example:GuardDestructive", chain_module.ENTRY_POINT_GROUP)
    monkeypatch.setattr(loader_module, "entry_points", lambda name: [ep] if name == "guard" else [])
    surface, (chain,) = build(parse_config(BACKENDS + "policy:\n  interceptors:\n    - {entry_point: guard, name: g}\n"))
    assert chain.entries[0].name == "g"
    with pytest.raises(ConfigError) as err:
        build(parse_config(BACKENDS + "policy:\n  interceptors:\n    - {entry_point: nope}\n"))
    assert err.value.problems[0][0] == "policy.interceptors[0].entry_point"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("{class: 'no_such_module_xyz:Thing'}", "cannot be imported"),
        ("{class: 'json:NoSuchThing'}", "has no 'NoSuchThing'"),
        ("{class: 'json:JSONDecoder'}", "implements none of"),
        ("{class: 'interceptor_example:GuardDestructive', options: {colour: red}}", "does not accept these options"),
    ],
)
def test_bad_interceptors_are_configuration_errors(monkeypatch, spec, message):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    with pytest.raises(ConfigError) as err:
        build(parse_config(BACKENDS + f"policy:\n  interceptors:\n    - {spec}\n"))
    (path, text), = err.value.problems
    assert path == "policy.interceptors[0].class" and message in text


async def test_the_example_interceptor_guards_destructive_tools(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    surface, calls = build(parse_config(BACKENDS + "policy:\n  interceptors:\n    - {class: 'interceptor_example:GuardDestructive'}\n"))
    pipeline = Pipeline(calls=calls, surface=surface)
    backend = Backend()
    destructive = {"name": "drop", "annotations": {"destructiveHint": True}}
    with pytest.raises(PolicyDenied, match="needs the admin role"):
        await pipeline.run(call(name="drop", definition=destructive), backend)
    admin = Principal("root", claims={"roles": ["admin"]})
    answer = await pipeline.run(call(name="drop", definition=destructive, principal=admin), backend)
    assert answer.body["result"]["_meta"] == {"example.org/backend": "gh"}
    assert calls[0].entries[0].interceptor.seen == 2


def test_build_orders_builtins_before_operator_interceptors(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    cfg = parse_config(BACKENDS + """policy:
  rules: ['true']
  dlp: {}
  pinning: {}
  rate_limits: {limits: [{requests: 5}]}
  audit: {sink: stderr}
  interceptors: [{class: 'interceptor_example:GuardDestructive'}]
""")
    surface, (chain,) = build(cfg)
    assert [type(s).__name__ for s in surface] == ["CelPolicy", "ToolPinning"]
    assert [e.name for e in chain.entries] == ["dlp", "visibility", "rate_limit", "guard-destructive"]
    assert build(parse_config(BACKENDS + "policy: {audit: {sink: stderr}}\n"))[1][0].entries == []  # audit alone still records calls
