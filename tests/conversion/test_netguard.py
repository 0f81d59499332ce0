"""Conversion mode's fetch guard: the spec URL cannot send hopline (or the backend's
credential) to another origin or to a cloud-metadata address.

Two real HTTP servers (stdlib ``http.server`` in threads, on two loopback ports: two
origins) record every request and its headers; hopline loads specs from them through
its start-up check and its in-process connector, and calls the API through the guarded
client, as ``hopline serve`` does.
"""

from __future__ import annotations

import argparse
import ipaddress
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import httpx
import pytest
import yaml

from hopline.binding import Era
from hopline.commands import check as check_cli
from hopline.conversion.netguard import async_client, fetch_spec, refused
from hopline.conversion.server import OpenApiBackends
from hopline.jsonrpc import UnavailableError
from hopline.layers.discovery.backend import BackendSession

SECRET = "Bearer api-s3cret"
pytestmark = pytest.mark.timeout(60)


class Origin:
    """One loopback HTTP server: ``routes`` path → (status, headers, body); ``seen`` (path, headers) of each request."""

    def __init__(self) -> None:
        self.routes: dict[str, tuple[int, dict[str, str], bytes]] = {}
        self.seen: list[tuple[str, dict[str, str]]] = []
        me = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                me.seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
                status, headers, body = me.routes.get(self.path.split("?", 1)[0], (404, {}, b"{}"))
                self.send_response(status)
                for k, v in {"content-type": "application/json", **headers, "content-length": str(len(body))}.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def spec(self, servers: str, path: str = "/openapi.yaml") -> None:
        doc = {"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "servers": [{"url": servers}],
               "paths": {"/pets": {"get": {"operationId": "listPets", "responses": {"200": {"description": "ok"}}}}}}
        self.routes[path] = (200, {"content-type": "application/yaml"}, yaml.safe_dump(doc).encode())
        self.routes["/pets"] = (200, {}, b'[{"id": 1}]')

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture
def origins():
    a, b = Origin(), Origin()
    yield a, b
    a.close()
    b.close()


def spec(**kw):
    return SimpleNamespace(**{"base_url": None, "headers": {"Authorization": SECRET}, "operations": None, "allow_addresses": [], **kw})


def check(tmp_path, capsys, backend: dict) -> tuple[int, str, str]:
    path = tmp_path / "gw.yaml"
    path.write_text(yaml.safe_dump({"backends": {"pets": backend}}))
    code = check_cli.run(argparse.Namespace(config=str(path)))
    out = capsys.readouterr()
    return code, out.out, out.err


async def call_list_pets(connector: OpenApiBackends) -> dict:
    session = await BackendSession.open("pets", await connector.open_session(Era.HANDSHAKE), prefer=Era.HANDSHAKE, timeout=10)
    try:
        return (await session.call("tools/call", {"name": "listPets", "arguments": {}})).body["result"]
    finally:
        await session.aclose()


def credentials_seen(origin: Origin) -> list[str]:
    return [h["authorization"] for _, h in origin.seen if "authorization" in h]


async def test_a_spec_url_that_redirects_to_another_origin_is_refused_and_the_credential_never_reaches_it(tmp_path, capsys, origins):
    a, b = origins
    a.routes["/openapi.yaml"] = (302, {"location": f"{b.url}/openapi.yaml"}, b"")
    b.spec(servers=b.url)  # the other origin's spec sends the calls (and the credential) to itself
    code, _, err = check(tmp_path, capsys, {"openapi": f"{a.url}/openapi.yaml?key=qq", "headers": {"Authorization": SECRET}})
    assert code == 1 and f"backends.pets.openapi: the spec URL redirects to another origin ({b.url})" in err and "qq" not in err
    connector = OpenApiBackends("pets", spec(openapi=f"{a.url}/openapi.yaml"), base_dir=None, timeout=10)
    try:
        with pytest.raises(UnavailableError, match="backend pets: the spec URL redirects to another origin"):
            await call_list_pets(connector)
    finally:
        await connector.aclose()
    assert not b.seen and not credentials_seen(a)  # the other origin was never contacted; the spec fetch carries no credential


async def test_a_same_origin_redirect_is_followed_and_the_calls_carry_the_credential_to_that_origin_only(origins):
    a, b = origins
    a.routes["/old.yaml"] = (302, {"location": "/openapi.yaml"}, b"")
    a.spec(servers=a.url)
    connector = OpenApiBackends("pets", spec(openapi=f"{a.url}/old.yaml"), base_dir=None, timeout=10)
    try:
        result = await call_list_pets(connector)
    finally:
        await connector.aclose()
    assert result["structuredContent"] == {"result": [{"id": 1}]}
    assert [p for p, _ in a.seen] == ["/old.yaml", "/openapi.yaml", "/pets"] and credentials_seen(a) == [SECRET] and not b.seen


async def test_a_spec_whose_servers_are_on_another_origin_needs_an_explicit_base_url_to_get_the_credential(tmp_path, capsys, origins):
    a, b = origins
    a.spec(servers=b.url)
    code, _, err = check(tmp_path, capsys, {"openapi": f"{a.url}/openapi.yaml", "headers": {"Authorization": SECRET}})
    assert code == 1 and f"backends.pets.base_url: the spec's servers[0].url is on another origin ({b.url}) than the spec URL" in err
    assert "set `base_url` explicitly" in err
    connector = OpenApiBackends("pets", spec(openapi=f"{a.url}/openapi.yaml"), base_dir=None, timeout=10)
    try:
        with pytest.raises(UnavailableError, match="another origin"):
            await call_list_pets(connector)
    finally:
        await connector.aclose()
    assert not b.seen
    assert check(tmp_path, capsys, {"openapi": f"{a.url}/openapi.yaml"})[0] == 0  # no credential to protect
    explicit = {"openapi": f"{a.url}/openapi.yaml", "base_url": b.url, "headers": {"Authorization": SECRET}}
    assert check(tmp_path, capsys, explicit)[0] == 0  # the operator's choice


@pytest.mark.parametrize("base_url", ["http://169.254.169.254/latest", "http://[::ffff:169.254.169.254]/", "http://100.100.100.200/", "http://[fe80::1]:8080"])
def test_a_metadata_or_link_local_base_url_is_refused_at_start_up(tmp_path, capsys, origins, base_url):
    a, _ = origins
    a.spec(servers=a.url)
    code, _, err = check(tmp_path, capsys, {"openapi": f"{a.url}/openapi.yaml", "base_url": base_url})
    assert code == 1 and "backends.pets.base_url: the API's base URL is refused:" in err and "link-local or cloud-metadata address" in err
    host = base_url.split("/")[2].rsplit(":", 1)[0] if "]" not in base_url else base_url.split("[")[1].split("]")[0]
    code, out, _ = check(tmp_path, capsys, {"openapi": f"{a.url}/openapi.yaml", "base_url": base_url, "allow_addresses": [host]})
    assert code == 0 and "allowed link-local/metadata: " + host in out


def test_a_metadata_spec_url_is_refused_before_any_connection(tmp_path, capsys):
    code, _, err = check(tmp_path, capsys, {"openapi": "http://169.254.169.254/openapi.yaml?sig=zz", "base_url": "http://127.0.0.1:9"})
    assert code == 1 and "backends.pets.openapi: the spec URL is refused: 169.254.169.254 resolves to 169.254.169.254" in err
    assert "zz" not in err
    code, _, err = check(tmp_path, capsys, {"openapi": "http://x/s.yaml", "base_url": "http://127.0.0.1:9", "allow_addresses": ["not-a-network"]})
    assert code == 1 and "backends.pets.allow_addresses: 'not-a-network' is not an IP address or network" in err


def test_which_addresses_are_refused():
    bad = ("169.254.169.254", "169.254.0.1", "fe80::1%eth0", "100.100.100.200", "fd00:ec2::254", "::ffff:169.254.169.254", "64:ff9b::a9fe:a9fe",
           "2002:a9fe:a9fe::1")
    for address in bad:
        assert refused(address, ()), address
    for address in ("127.0.0.1", "::1", "10.0.0.5", "192.168.1.1", "172.16.0.1", "100.100.100.201", "fd00:ec2::253", "93.184.216.34"):
        assert not refused(address, ()), address
    assert not refused("169.254.169.254", (ipaddress.ip_network("169.254.0.0/16"),))


async def test_every_connection_checks_the_addresses_the_name_resolves_to(origins):
    """A name checked at start-up may resolve elsewhere later (DNS rebinding): each connection
    resolves, checks every address and connects to a checked one. Shown here by forbidding
    loopback, where ``localhost`` resolves."""
    a, _ = origins
    a.spec(servers=a.url)
    port = a.url.rsplit(":", 1)[1]
    loopback = (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128"))
    async with async_client((), timeout=10, forbidden=loopback) as client:
        with pytest.raises(httpx.ConnectError, match="localhost resolves to .*, a link-local or cloud-metadata address"):
            await client.get(f"http://localhost:{port}/pets")
    with pytest.raises(httpx.ConnectError):
        fetch_spec(f"http://localhost:{port}/openapi.yaml", (), timeout=10, read=b"".join, forbidden=loopback)
    assert not a.seen
    async with async_client((), timeout=10) as client:
        assert (await client.get(f"http://localhost:{port}/pets")).status_code == 200  # the same request, loopback allowed
    assert fetch_spec(f"http://localhost:{port}/openapi.yaml", (), timeout=10, read=b"".join).startswith(b"info:")


async def test_api_calls_follow_no_redirect(origins):
    a, b = origins
    a.spec(servers=a.url)
    a.routes["/pets"] = (302, {"location": f"{b.url}/pets"}, b"")
    connector = OpenApiBackends("pets", spec(openapi=f"{a.url}/openapi.yaml"), base_dir=None, timeout=10)
    try:
        result = await call_list_pets(connector)
    finally:
        await connector.aclose()
    assert result["isError"] and "HTTP 302" in result["content"][0]["text"]
    assert not b.seen
