"""Layer 5's visibility call layer (layers/policy/visibility.py): an invoke of an item the
caller's surface hides is refused exactly as an unknown name, audited, and never reaches
the next layer; compose/pipeline.py puts it first, and only where there are surface layers."""

from __future__ import annotations

import pytest

from hopline.compose.pipeline import build_pipeline
from hopline.config.schema import GatewayConfig
from hopline.context import Principal
from hopline.jsonrpc import InvalidParams, Message
from hopline.layers.policy.audit import AuditLog
from hopline.layers.policy.chain import InterceptorChain
from hopline.layers.policy.visibility import Hidden, Visibility
from hopline.pipeline import Call

from tests.layers.fakes_lists import Hide

MALLORY, ADMIN = Principal("mallory"), Principal("admin")
OK = Message({"jsonrpc": "2.0", "id": 1, "result": {}})


class Next:
    def __init__(self) -> None:
        self.calls: list[Call] = []

    async def __call__(self, call: Call) -> Message:
        self.calls.append(call)
        return OK


def audited() -> tuple[InterceptorChain, list[dict]]:
    records: list[dict] = []
    return InterceptorChain([], audit=AuditLog(None, tap=records.append)), records


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (Call("tools/call", "a", {"name": "rm"}, MALLORY, target="rm", exposed="a__rm"), "Unknown tool: 'a__rm'"),
        (Call("prompts/get", "a", {"name": "rm"}, MALLORY, target="rm", exposed="a__rm"), "Unknown prompt: 'a__rm'"),
        (Call("resources/read", "a", {}, MALLORY, target="rm", exposed="hop://a/rm"), "Unknown resource: 'hop://a/rm'"),
        (
            Call("resources/subscribe", "a", {}, MALLORY, target="rm", exposed="hop://a/rm"),
            "Unknown resource: 'hop://a/rm'",
        ),
        (
            Call("completion/complete", "a", {"ref": {"type": "ref/prompt", "name": "rm"}}, MALLORY, exposed="a__rm"),
            "Unknown prompt: 'a__rm'",
        ),
        (
            Call(
                "completion/complete",
                "a",
                {"ref": {"type": "ref/resource", "uri": "rm"}},
                MALLORY,
                exposed="hop://a/rm",
            ),
            "Unknown resource: 'hop://a/rm'",
        ),
    ],
)
async def test_a_hidden_item_is_refused_as_unknown_audited_and_never_passed_on(call, message):
    chain, records = audited()
    layer, after = Visibility([Hide("rm")], audit=[chain]), Next()
    with pytest.raises(Hidden) as refused:
        await layer(call, after)
    assert isinstance(refused.value, InvalidParams) and refused.value.code == -32602
    assert refused.value.message == message and after.calls == []
    assert [(r["decision"], r["by"], r["point"], r["principal"]) for r in records] == [
        ("deny", "visibility", "pre_route", "mallory")
    ]


async def test_what_the_caller_may_see_and_what_is_no_listed_item_pass_unchanged():
    layer, after = Visibility([Hide("rm")]), Next()
    allowed = [
        Call("tools/call", "a", {"name": "rm"}, ADMIN, target="rm", exposed="a__rm"),  # admin sees everything
        Call("tools/call", "a", {"name": "ls"}, MALLORY, target="ls", exposed="a__ls"),
        Call("tasks/get", "a", {"taskId": "t"}, MALLORY, target="rm"),  # a caller's own task: not this layer's
        Call("sampling/createMessage", "a", {}, MALLORY, direction="to_client", target="rm"),
    ]
    for call in allowed:
        assert await layer(call, after) is OK
    assert after.calls == allowed


def test_the_pipeline_runs_it_first_and_only_where_the_policy_has_surface_layers():
    base = {"name": "gw", "backends": {"a": {"command": "true"}}}
    ruled = build_pipeline(GatewayConfig.model_validate({**base, "policy": {"rules": ['mcp.tool.name != "rm"']}}))
    assert isinstance(ruled.calls[0], Visibility) and ruled.calls[0].surface == ruled.surface
    assert isinstance(ruled.calls[1], InterceptorChain) and ruled.calls[0].audit == [ruled.calls[1]]
    plain = build_pipeline(GatewayConfig.model_validate(base))
    assert not any(isinstance(c, Visibility) for c in plain.calls)
