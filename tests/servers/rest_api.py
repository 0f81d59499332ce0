"""A small REST API (plain ASGI, served by uvicorn) for the Conversion-mode tests.

Usage::

    python rest_api.py --port P [--record FILE]

Its OpenAPI 3.1 description is ``petstore.openapi.yaml`` beside this file. Pets live
in memory (two to start with). Endpoints:

- ``GET /pets?limit=&tag=`` → a JSON array; ``POST /pets`` (JSON body) → 201 + the pet
- ``GET|PUT|DELETE /pets/{petId}`` → the pet / the updated pet / 204; unknown id → 404
- ``GET /pets/{petId}/notes`` → ``text/plain``
- ``GET /broken`` → 500 with a JSON error body
- ``GET /garbage`` → 200, ``application/json``, a body that is not JSON
- ``GET /slow`` → never answers (until the client goes away)
- ``GET /big`` → 2 MiB of JSON
- ``GET /echo/{value}`` → ``{"path": <raw path>, "query": <raw query>}`` (encoding checks)
- ``GET /openapi.yaml`` → the spec itself (to load a spec from a URL)

With ``--record FILE`` each request (method, raw path, query, headers) is appended to
FILE as one JSON line before it is answered, so a test can see what reached the API.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from urllib.parse import parse_qs

PETS: dict[int, dict] = {
    1: {"id": 1, "name": "Rex", "tag": "dog", "category": {"name": "mammals", "parent": {"name": "animals"}}},
    2: {"id": 2, "name": "Tom", "tag": "cat"},
}
RECORD: Path | None = None


async def _body(receive) -> bytes:
    chunks = []
    while True:
        event = await receive()
        chunks.append(event.get("body", b""))
        if not event.get("more_body"):
            return b"".join(chunks)


async def _send(send, status: int, body: bytes = b"", content_type: str = "application/json") -> None:
    headers = [(b"content-type", content_type.encode())] if body else []
    await send({"type": "http.response.start", "status": status, "headers": [*headers, (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def _json(value) -> bytes:
    return json.dumps(value).encode()


async def app(scope, receive, send) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    method, raw_path = scope["method"], scope.get("raw_path", scope["path"].encode()).decode("latin-1")
    query = scope["query_string"].decode("latin-1")
    if RECORD is not None:
        headers = [[k.decode("latin-1"), v.decode("latin-1")] for k, v in scope["headers"]]
        with RECORD.open("a") as f:
            f.write(json.dumps({"method": method, "path": raw_path, "query": query, "headers": headers}) + "\n")
    body = await _body(receive)
    parts = [p for p in scope["path"].split("/") if p]
    args = parse_qs(query)
    if parts == ["pets"] and method == "GET":
        pets = [p for p in PETS.values() if "tag" not in args or p.get("tag") in args["tag"]]
        return await _send(send, 200, _json(pets[: int(args.get("limit", ["100"])[0])]))
    if parts == ["pets"] and method == "POST":
        data = json.loads(body or b"{}")
        if not isinstance(data, dict) or not isinstance(data.get("name"), str):
            return await _send(send, 400, _json({"error": "a pet needs a name"}))
        pet = {"id": max(PETS, default=0) + 1, **data}
        PETS[pet["id"]] = pet
        return await _send(send, 201, _json(pet))
    if len(parts) in (2, 3) and parts[0] == "pets":
        pet = PETS.get(int(parts[1])) if parts[1].isdigit() else None
        if pet is None:
            return await _send(send, 404, _json({"error": f"no pet {parts[1]}"}))
        if len(parts) == 3 and parts[2] == "notes":
            return await _send(send, 200, f"{pet['name']} is a good {pet.get('tag', 'pet')}.".encode(), "text/plain; charset=utf-8")
        if method == "GET":
            return await _send(send, 200, _json(pet))
        if method == "PUT":
            PETS[pet["id"]] = {**json.loads(body or b"{}"), "id": pet["id"]}
            return await _send(send, 200, _json(PETS[pet["id"]]))
        if method == "DELETE":
            del PETS[pet["id"]]
            return await _send(send, 204)
    if parts == ["broken"]:
        return await _send(send, 500, _json({"error": "database on fire"}))
    if parts == ["garbage"]:
        return await _send(send, 200, b"<html>this is not JSON", "application/json")
    if parts == ["slow"]:  # no answer; ends when the client goes away (or at shutdown)
        while (await receive())["type"] != "http.disconnect":
            pass
        return
    if parts == ["big"]:
        return await _send(send, 200, _json({"blob": "x" * (2 * 1024 * 1024)}))
    if parts == ["openapi.yaml"]:
        return await _send(send, 200, (Path(__file__).parent / "petstore.openapi.yaml").read_bytes(), "application/yaml")
    if parts and parts[0] == "echo":
        return await _send(send, 200, _json({"path": raw_path, "query": query}))
    await _send(send, 404, _json({"error": "no such endpoint"}))


def main() -> int:
    global RECORD
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--record", type=Path)
    args = parser.parse_args()
    RECORD = args.record
    from serving import bind, port_of, serve

    sock = bind(args.port)
    serve(app, sock, f"rest_api: http://127.0.0.1:{port_of(sock)}", lifespan="on")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
