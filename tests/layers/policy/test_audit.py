"""The audit log: one JSON line per decision, the fields it promises, never a secret."""

from __future__ import annotations

import logging
import os
import stat

import orjson
import pytest

from hopline.config.load import parse_config
from hopline.context import Principal
from hopline.jsonrpc import InvalidParams, result
from hopline.layers.policy.audit import AuditLog, safe_target, scrub, trace_id_of
from hopline.compose.policy import build
from hopline.layers.policy.ratelimit import RateLimited
from hopline.pipeline import Call, Item, Pipeline

TRACE = "0af7651916cd43dd8448eb211c80319c"
TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJlLXNpZ25hdHVyZQ"
ALICE = Principal("alice", claims={"sub": "alice", "role": "dev"}, issuer="https://idp.example", token=TOKEN)
CONFIG = """backends:
  gh: {command: python}
policy:
  rules: ['jwt.role == "dev" && mcp.tool.name != "drop"']
  rate_limits: {limits: [{requests: 1, per: [principal, tool], tools: [limited]}]}
  dlp: {}
  audit: {sink: stderr}
"""


def tool_call(name: str, args: dict, meta: dict | None = None) -> Call:
    return Call("tools/call", "gh", {"name": name, "arguments": args}, ALICE, target=name, exposed=f"gh__{name}",
                session="7f3c9e1d2b4a", meta=meta or {}, definition={"name": name})


async def test_every_call_leaves_one_record_with_the_promised_fields_and_no_secret(audit):
    surface, calls = build(parse_config(CONFIG), audit=audit.log)
    pipeline = Pipeline(calls=calls, surface=surface)
    meta = {"traceparent": f"00-{TRACE}-b7ad6b7169203331-01", "progressToken": "p1"}

    async def backend(c: Call):
        return result(1, {"content": [{"type": "text", "text": "the db password is result-secret-value"}]})

    await pipeline.run(tool_call("echo", {"text": "argument-secret-value", "key": "AKIAABCDEFGHIJKLMNOP"}, meta), backend)
    with pytest.raises(InvalidParams):
        await pipeline.run(tool_call("drop", {"text": "argument-secret-value"}, meta), backend)
    await pipeline.run(tool_call("limited", {}), backend)
    with pytest.raises(RateLimited):
        await pipeline.run(tool_call("limited", {}), backend)

    allowed, hidden, first, limited = audit.records
    assert list(allowed)[:2] == ["time", "event"] and allowed["time"] == "2023-11-14T22:13:20.000Z"
    assert {k: allowed[k] for k in ("event", "decision", "principal", "issuer", "direction", "method", "backend", "target", "trace_id", "outcome")} == {
        "event": "call", "decision": "allow", "principal": "alice", "issuer": "https://idp.example", "direction": "to_backend",
        "method": "tools/call", "backend": "gh", "target": "echo", "trace_id": TRACE, "outcome": "ok"}
    assert allowed["mutations"] == [{"by": "dlp", "point": "pre_route", "reason": "redacted aws_access_key×1", "redacted": {"aws_access_key": 1}}]
    assert isinstance(allowed["duration_ms"], float)
    assert (hidden["decision"], hidden["by"], hidden["point"], hidden["reason"], hidden["outcome"]) == ("deny", "visibility", "post_route", "hidden by CelPolicy", "error -32602")
    assert first["decision"] == "allow" and "trace_id" not in first
    assert (limited["decision"], limited["by"], limited["outcome"]) == ("deny", "rate_limit", "error -31004")
    assert limited["details"]["retryAfter"] == 1.0
    text = audit.text()
    for secret in (TOKEN, "argument-secret-value", "result-secret-value", "AKIAABCDEFGHIJKLMNOP", "7f3c9e1d2b4a", "p1"):
        assert secret not in text


def test_trace_ids_come_only_from_valid_traceparents():
    assert trace_id_of({"traceparent": f"00-{TRACE}-b7ad6b7169203331-01"}) == TRACE
    for bad in (None, 5, "", f"00-{TRACE.upper()}-b7ad6b7169203331-01", "00-" + "0" * 32 + "-b7ad6b7169203331-01", f"00-{TRACE}-b7ad", f"x{TRACE}"):
        assert trace_id_of({"traceparent": bad}) is None
    assert trace_id_of({}) is None and trace_id_of(None) is None


def test_free_text_is_bounded_and_scrubbed():
    assert scrub("key AKIAABCDEFGHIJKLMNOP leaked") == "key [REDACTED:aws_access_key] leaked"
    assert scrub("header was Bearer abcdefghijklmnop") == "header was [REDACTED:bearer_token]"
    assert len(scrub("x" * 5000)) == 300
    assert safe_target("https://api.example/doc?token=abc#frag") == "https://api.example/doc?…"
    assert safe_target("file:///a#b") == "file:///a?…" and safe_target("echo") == "echo" and safe_target(None) is None


def test_a_file_sink_appends_whole_lines_and_is_private(tmp_path):
    path = tmp_path / "audit.jsonl"
    from hopline.layers.policy import audit as module

    one, two = AuditLog.open(str(path)), AuditLog.open(str(tmp_path / "." / "audit.jsonl"))  # e.g. after a reload
    assert sum(1 for p in module._FILES if p == os.path.realpath(path)) == 1  # one descriptor, not one per reload
    for i in range(50):
        (one if i % 2 else two).record("call", decision="allow", n=i)
    lines = path.read_bytes().splitlines()
    assert [orjson.loads(line)["n"] for line in lines] == list(range(50))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_stdout_and_stderr_sinks(capfd):
    AuditLog.open("stdout").record("call", decision="allow")
    AuditLog.open("stderr").record("call", decision="deny")
    out, err = capfd.readouterr()
    assert orjson.loads(out)["decision"] == "allow" and orjson.loads(err)["decision"] == "deny"


def test_empty_fields_are_left_out():
    lines: list[bytes] = []
    AuditLog(lines.append, clock=lambda: 0.0).record("pin", decision="pin", reason=None, mutations=[], shadow={}, backend="gh")
    assert orjson.loads(lines[0]) == {"time": "1970-01-01T00:00:00.000Z", "event": "pin", "decision": "pin", "backend": "gh"}


def test_a_failing_sink_never_fails_the_caller_and_is_logged_once(caplog):
    state = {"fail": True}

    def write(line: bytes) -> None:
        if state["fail"]:
            raise OSError(28, "No space left on device")

    log = AuditLog(write, name="disk")
    with caplog.at_level(logging.WARNING, "hopline.audit"):
        for _ in range(5):
            log.record("call", decision="allow")
        state["fail"] = False
        log.record("call", decision="allow")
    messages = [r.getMessage() for r in caplog.records]
    assert messages == ["audit sink disk failed: OSError (records are being lost)", "audit sink disk works again"]


def test_visibility_records_when_lists_are_audited(audit):
    cfg = parse_config("backends:\n  gh: {command: python}\npolicy:\n  rules: ['jwt.role == \"dev\"']\n  audit: {sink: stderr, lists: true}\n")
    surface, _ = build(cfg, audit=audit.log)
    surface[0].visible(ALICE, Item("resource", "gh", "https://x/y?sig=abc", {}))
    (rec,) = audit.records
    assert (rec["event"], rec["decision"], rec["kind"], rec["target"]) == ("visibility", "allow", "resource", "https://x/y?…")


def test_an_invoke_the_gateway_refused_itself_is_audited(audit):
    from hopline.layers.policy.visibility import refused

    surface, calls = build(parse_config(CONFIG), audit=audit.log)
    c = tool_call("drop", {"text": "argument-secret-value"}, {"traceparent": f"00-{TRACE}-b7ad6b7169203331-01"})
    refused(calls, c, InvalidParams("Unknown tool: 'gh__drop'"))
    (rec,) = audit.records
    assert {k: rec[k] for k in ("event", "decision", "by", "principal", "target", "trace_id", "outcome")} == {
        "event": "call", "decision": "deny", "by": "visibility", "principal": "alice", "target": "drop", "trace_id": TRACE, "outcome": "error -32602"}
    assert "argument-secret-value" not in audit.text()
    refused([], c, InvalidParams("x"))  # no policy: nothing to do
