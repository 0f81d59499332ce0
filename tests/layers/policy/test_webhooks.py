"""HTTP policy webhooks (issue 33, compose/webhooks.py) against a real receiver on loopback.

The receiver is a Starlette app served by uvicorn on port 0 in the test's loop; the webhooks
run in the real :class:`InterceptorChain` with the SEP-2624 chain (remote.py). JSON Patch
(layers/policy/jsonpatch.py) has its own cases.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import re

import orjson
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from hopline.compose.webhooks import Webhook
from hopline.config.policy import WebhookConfig
from hopline.jsonrpc import Message, result
from hopline.layers.policy.chain import Entry, InterceptorChain, PolicyDenied
from hopline.layers.policy.jsonpatch import MAX_OPS, PatchError, apply
from hopline.layers.policy.remote import RemoteChain
from hopline.pipeline import Call

SECRET = "webhook-secret-0123456789"
EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+")


# -- JSON Patch -----------------------------------------------------------------------------------------
def test_json_patch_add_remove_replace():
    doc = {"a": {"b": [1, 2]}, "x/y": 1, "t~": 2}
    out = apply(
        doc,
        [
            {"op": "add", "path": "/a/b/-", "value": 3},
            {"op": "add", "path": "/a/b/0", "value": 0},
            {"op": "replace", "path": "/x~1y", "value": "slash"},
            {"op": "remove", "path": "/t~0"},
            {"op": "add", "path": "/new", "value": {"k": [1]}},
        ],
    )
    assert out == {"a": {"b": [0, 1, 2, 3]}, "x/y": "slash", "new": {"k": [1]}}
    assert doc == {"a": {"b": [1, 2]}, "x/y": 1, "t~": 2}  # the input is never changed
    assert apply({"a": 1}, [{"op": "replace", "path": "", "value": {"b": 2}}]) == {"b": 2}


@pytest.mark.parametrize(
    "ops",
    [
        {"op": "add"},
        [{"op": "move", "from": "/a", "path": "/b"}],
        [{"op": "test", "path": "/a", "value": 1}],
        [{"op": "replace", "path": "/missing", "value": 1}],
        [{"op": "remove", "path": "/a/0"}],
        [{"op": "add", "path": "/l/5", "value": 1}],
        [{"op": "add", "path": "/l/01", "value": 1}],
        [{"op": "remove", "path": "/l/-"}],
        [{"op": "add", "path": "a", "value": 1}],
        [{"op": "add", "path": "/a"}],
        [{"op": "remove", "path": ""}],
        [{"op": "add", "path": "/n", "value": 1}] * (MAX_OPS + 1),
        ["add"],
    ],
)
def test_json_patch_refuses_what_it_cannot_do(ops):
    doc = {"a": 1, "l": [1]}
    with pytest.raises(PatchError):
        apply(doc, ops)
    assert doc == {"a": 1, "l": [1]}


# -- a receiver on loopback ---------------------------------------------------------------------------
class Receiver:
    def __init__(self) -> None:
        self.seen: list[dict] = []
        self.unsigned = 0
        self.app = Starlette(
            routes=[
                Route("/validate", self.validate, methods=["POST"]),
                Route("/redact", self.redact, methods=["POST"]),
                Route("/slow", self.slow, methods=["POST"]),
                Route("/garbage", self.garbage, methods=["POST"]),
                Route("/broken", self.broken, methods=["POST"]),
                Route("/badpatch", self.badpatch, methods=["POST"]),
            ]
        )

    async def _body(self, request: Request) -> dict | None:
        raw = await request.body()
        stamp = request.headers.get("x-hopline-timestamp", "")
        want = "sha256=" + hmac.new(SECRET.encode(), stamp.encode() + b"." + raw, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(request.headers.get("x-hopline-signature", ""), want):
            self.unsigned += 1
            return None
        body = orjson.loads(raw)
        self.seen.append(body)
        return body

    async def validate(self, request: Request) -> Response:
        body = await self._body(request)
        if body is None:
            return PlainTextResponse("bad signature", status_code=401)
        args = orjson.dumps(body["payload"].get("arguments", {})).decode()
        if "rm -rf" in args:
            return JSONResponse({"allowed": False, "reason": "destructive command in the arguments"})
        return JSONResponse({"allowed": True})

    async def redact(self, request: Request) -> Response:
        body = await self._body(request)
        if body is None:
            return PlainTextResponse("bad signature", status_code=401)
        patch = []
        for i, item in enumerate(body["payload"].get("content", [])):
            text = item.get("text", "")
            if EMAIL.search(text):
                patch.append({"op": "replace", "path": f"/content/{i}/text", "value": EMAIL.sub("[EMAIL]", text)})
        return JSONResponse({"patch": patch})

    async def slow(self, request: Request) -> Response:
        await asyncio.sleep(30)
        return JSONResponse({"allowed": True})

    async def garbage(self, request: Request) -> Response:
        return PlainTextResponse("sure, fine")

    async def broken(self, request: Request) -> Response:
        return PlainTextResponse("oops", status_code=500)

    async def badpatch(self, request: Request) -> Response:
        return JSONResponse({"patch": [{"op": "remove", "path": "/nothing/here"}]})


@pytest.fixture
async def receiver():
    r = Receiver()
    server = uvicorn.Server(uvicorn.Config(r.app, host="127.0.0.1", port=0, log_level="error", lifespan="off"))
    task = asyncio.create_task(server.serve())
    async with asyncio.timeout(10):  # uvicorn has no started event: its flag, polled, bounded
        while not server.started:
            await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    r.base = f"http://127.0.0.1:{port}"
    try:
        yield r
    finally:
        server.should_exit = True
        await task


def hook(receiver, path: str, **kw) -> Webhook:
    kw.setdefault("type", "validating")
    return Webhook(WebhookConfig(name=path.strip("/"), url=receiver.base + path, secret=SECRET, **kw))


async def run(hooks, args, answer=None, audit=None):
    chain = InterceptorChain([Entry(RemoteChain(hooks))], audit=audit)
    seen: list[dict] = []

    async def backend(c: Call) -> Message:
        seen.append(dict(c.params))
        return answer or result(1, {"content": [{"type": "text", "text": "ok"}]})

    try:
        call = Call("tools/call", "b", {"name": "run", "arguments": args}, target="run", exposed="b__run")
        return await chain(call, backend), seen
    finally:
        for h in hooks:
            await h.aclose()


async def test_a_validating_webhook_allows_and_denies_with_its_reason(receiver, audit):
    answer, seen = await run([hook(receiver, "/validate")], {"cmd": "ls"})
    assert seen and answer.body["result"]["content"][0]["text"] == "ok"
    with pytest.raises(PolicyDenied) as caught:
        await run([hook(receiver, "/validate")], {"cmd": "rm -rf /"}, audit=audit.log)
    assert caught.value.message == "blocked by interceptor validate: destructive command in the arguments"
    assert receiver.seen[-1] == {
        "name": "validate",
        "event": "tools/call",
        "phase": "request",
        "payload": {"name": "run", "arguments": {"cmd": "rm -rf /"}},  # the backend's own tool name
    }
    assert audit.records[-1]["interceptors"][0]["outcome"] == "invalid (error)"


async def test_a_mutating_webhook_patches_the_result(receiver):
    text = {"content": [{"type": "text", "text": "write to bob@example.com"}]}
    answer, _ = await run([hook(receiver, "/redact", type="mutating", phase="response")], {}, answer=result(1, text))
    assert answer.body["result"]["content"][0]["text"] == "write to [EMAIL]"


async def test_requests_are_signed_and_a_wrong_secret_is_refused(receiver):
    wrong = Webhook(WebhookConfig(name="v", url=receiver.base + "/validate", type="validating", secret="x" * 20))
    with pytest.raises(PolicyDenied) as caught:
        await run([wrong], {"cmd": "ls"})
    assert "webhook answered HTTP 401" in caught.value.message and receiver.unsigned == 1
    assert SECRET not in caught.value.message


@pytest.mark.parametrize(
    "path, why",
    [
        ("/slow", "no answer within 0.2 s"),
        ("/garbage", "webhook answer is not JSON"),
        ("/broken", "webhook answered HTTP 500"),
        ("/badpatch", "webhook patch does not apply"),
    ],
)
async def test_failure_policy(receiver, path, why):
    kind = "mutating" if path == "/badpatch" else "validating"
    with pytest.raises(PolicyDenied) as caught:
        await run([hook(receiver, path, type=kind, timeout=0.2)], {"cmd": "ls"})
    assert why in caught.value.message and "fail closed" in caught.value.message
    answer, seen = await run([hook(receiver, path, type=kind, timeout=0.2, fail_open=True)], {"cmd": "ls"})
    assert seen == [{"name": "run", "arguments": {"cmd": "ls"}}] and "result" in answer.body


async def test_an_unreachable_webhook_fails_as_configured(free_port):
    dead = WebhookConfig(name="dead", url=f"http://127.0.0.1:{free_port()}/v", type="validating")
    with pytest.raises(PolicyDenied) as caught:
        await run([Webhook(dead)], {})
    assert "webhook unreachable (ConnectError)" in caught.value.message
    answer, _ = await run([Webhook(dead.model_copy(update={"fail_open": True}))], {})
    assert "result" in answer.body
