"""DLP: redaction of arguments (pre-route) and results (pre-response), audited without the secret."""

from __future__ import annotations

import pytest

from hopline.compose.policy import build
from hopline.config.load import ConfigError, parse_config
from hopline.context import Principal
from hopline.jsonrpc import Message, UnavailableError, error_response, result
from hopline.layers.policy.dlp import BUILTINS, Redactor, compile_patterns
from hopline.pipeline import Call, Pipeline

ALICE = Principal("alice")
AWS = "AKIAIOSFODNN7EXAMPLE"
AWS_SECRET = "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
GH = "ghp_" + "a1B2c3D4e5" * 4
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA75\nabcdef==\n-----END RSA PRIVATE KEY-----"


def redactor(**custom) -> Redactor:
    return Redactor(compile_patterns(BUILTINS, custom))


@pytest.mark.parametrize(
    ("text", "expected", "name"),
    [
        (f"key={AWS} ok", "key=[REDACTED:aws_access_key] ok", "aws_access_key"),
        (AWS_SECRET, "[REDACTED:aws_secret_key]", "aws_secret_key"),
        ("Authorization: Bearer abc.def-ghi_jkl~mno+p/q==", "Authorization: [REDACTED:bearer_token]", "bearer_token"),
        (f"before\n{PEM}\nafter", "before\n[REDACTED:private_key]\nafter", "private_key"),
        ("-----BEGIN PRIVATE KEY-----\nMIIEv truncated", "[REDACTED:private_key]", "private_key"),
        (f"token {GH}", "token [REDACTED:github_token]", "github_token"),
        (f"id_token={JWT}", "id_token=[REDACTED:jwt]", "jwt"),
    ],
)
def test_builtin_patterns(text, expected, name):
    counts: dict[str, int] = {}
    assert redactor().redact(text, counts) == expected
    assert counts == {name: 1}


def test_ordinary_text_is_left_alone_as_the_same_objects():
    r = redactor()
    value = {"text": "The bearer of this letter", "nested": [{"n": 1, "s": "AKIA is a prefix"}], "b": True}
    counts: dict[str, int] = {}
    assert r.redact(value, counts) is value and counts == {}


async def run(calls, c, answer):
    async def backend(call: Call) -> Message:
        backend.sent = call.params  # type: ignore[attr-defined]
        return answer

    out = await Pipeline(calls=calls).run(c, backend)
    return out, backend.sent  # type: ignore[attr-defined]


async def test_arguments_are_redacted_before_the_backend_and_routing_fields_kept(audit):
    _, calls = build(parse_config("backends:\n  gh: {command: python}\npolicy:\n  dlp: {}\n"), audit=audit.log)
    params = {"name": "AKIAIOSFODNN7EXAMPLEX", "arguments": {"cmd": f"deploy --key {AWS}", "list": [GH, "x"]}, "_meta": {"note": AWS}}
    c = Call("tools/call", "gh", params, ALICE, target="deploy")
    answer = result(1, {"content": [{"type": "text", "text": "done"}]})
    out, sent = await run(calls, c, answer)
    assert sent["arguments"] == {"cmd": "deploy --key [REDACTED:aws_access_key]", "list": ["[REDACTED:github_token]", "x"]}
    assert sent["name"] == params["name"] and sent["_meta"] == {"note": AWS}  # routing and _meta untouched
    assert params["arguments"]["cmd"].endswith(AWS)  # the client's dict was not changed in place
    assert out is answer
    (rec,) = audit.records
    assert rec["mutations"] == [{"by": "dlp", "point": "pre_route", "reason": "redacted aws_access_key×1, github_token×1", "redacted": {"aws_access_key": 1, "github_token": 1}}]
    assert AWS not in audit.text() and GH not in audit.text()


async def test_results_and_errors_are_redacted_before_the_client(audit):
    _, calls = build(parse_config("backends:\n  gh: {command: python}\npolicy:\n  dlp: {arguments: false}\n"), audit=audit.log)
    res = {"content": [{"type": "text", "text": f"creds: {AWS}"}, {"type": "image", "data": "QUtJQUlPU0ZPRE5ON0VYQU1QTEU=", "mimeType": "image/png"},
                       {"type": "resource", "resource": {"uri": "file:///k", "text": PEM}}],
           "structuredContent": {"key": AWS}, "_meta": {"k": AWS}}
    out, sent = await run(calls, Call("tools/call", "gh", {"name": "x", "arguments": {"a": AWS}}, ALICE), result(1, res))
    body = out.body["result"]
    assert sent["arguments"] == {"a": AWS}  # arguments: false
    assert body["content"][0]["text"] == "creds: [REDACTED:aws_access_key]"
    assert body["content"][1]["data"] == res["content"][1]["data"]  # base64 payloads are not searched
    assert body["content"][2]["resource"]["text"] == "[REDACTED:private_key]"
    assert body["structuredContent"] == {"key": "[REDACTED:aws_access_key]"} and body["_meta"] == {"k": AWS}
    assert audit.records[0]["mutations"][0]["redacted"] == {"aws_access_key": 2, "private_key": 1}
    err = error_response(1, UnavailableError(f"backend said {AWS}"))
    out, _ = await run(calls, Call("tools/call", "gh", {"name": "x"}, ALICE), err)
    assert out.body["error"]["message"] == "backend said [REDACTED:aws_access_key]" and out.body["error"]["code"] == -31001


async def test_server_to_client_requests_are_redacted_both_ways():
    _, calls = build(parse_config("backends:\n  gh: {command: python}\npolicy:\n  dlp: {builtins: [aws_access_key]}\n"))
    params = {"messages": [{"role": "user", "content": {"type": "text", "text": f"summarise {AWS}"}}], "maxTokens": 10}
    reply = result(9, {"role": "assistant", "content": {"type": "text", "text": f"it was {AWS}"}})
    out, sent = await run(calls, Call("sampling/createMessage", "gh", params, ALICE, direction="to_client"), reply)
    assert sent["messages"][0]["content"]["text"] == "summarise [REDACTED:aws_access_key]" and sent["maxTokens"] == 10
    assert out.body["result"]["content"]["text"] == "it was [REDACTED:aws_access_key]"


async def test_custom_patterns_and_a_chosen_builtin_subset():
    cfg = parse_config("backends:\n  gh: {command: python}\npolicy:\n  dlp:\n    builtins: [bearer_token]\n    patterns: {ticket: 'TKT-[0-9]{6}'}\n")
    _, calls = build(cfg)
    (chain,) = calls
    assert [name for name, _ in chain.entries[0].interceptor.patterns] == ["bearer_token", "ticket"]
    _, sent = await run(calls, Call("tools/call", "gh", {"name": "x", "arguments": {"t": f"TKT-123456 and {AWS}"}}, ALICE), result(1, {}))
    assert sent["arguments"]["t"] == f"[REDACTED:ticket] and {AWS}"
    assert parse_config("backends:\n  gh: {command: python}\npolicy:\n  dlp: {builtins: false}\n").policy.dlp.builtin_names() == []


def test_bad_patterns_are_configuration_errors():
    with pytest.raises(ConfigError) as err:
        parse_config("backends:\n  gh: {command: python}\npolicy:\n  dlp:\n    builtins: [nope]\n    patterns: {bad: '(', empty: 'x*', '1x': 'a'}\n")
    paths = {p for p, _ in err.value.problems}
    assert {"policy.dlp.builtins[0]", "policy.dlp.patterns.bad", "policy.dlp.patterns.empty", "policy.dlp.patterns.1x"} <= paths
    assert not any("x*" in m or "'('" in m for _, m in err.value.problems)  # values are not echoed


def test_the_configuration_offers_exactly_the_builtins():
    from hopline.config.policy import BUILTIN_PATTERNS

    assert BUILTIN_PATTERNS == tuple(BUILTINS)


def test_patterns_that_cannot_share_one_scan_still_redact():
    import re

    r = Redactor([("a", re.compile(r"(?P<x>A-\d+)")), ("b", re.compile(r"(?P<x>B-\d+)"))])  # same group name twice
    assert r._any is None
    counts: dict[str, int] = {}
    assert r.redact("A-1 and B-2", counts) == "[REDACTED:a] and [REDACTED:b]" and counts == {"a": 1, "b": 1}
