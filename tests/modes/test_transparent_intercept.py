"""Transparent mode behind real network interception (draft §5.4.2): inside a network
namespace of its own, an MCP backend listens on 127.0.0.1:8080 and an iptables REDIRECT
(the namespace's nat OUTPUT chain) sends every connection to it into hopline on 15001,
but hopline's own (it runs as ``nobody``, excluded by ``-m owner``). hopline recovers the
address each client dialled from the socket (``SO_ORIGINAL_DST``) and forwards there.

The clients (the official SDK client, both eras, and plain HTTP) dial the backend's own
address, knowing nothing of hopline. They must get the same answers as without it; with
hopline stopped the same dial must fail (so the answers came through it); a destination
not on the allow-list and a ``Host`` that disagrees with the socket are refused.

These tests need root and ``ip netns`` / ``iptables`` (CI runs as root, and
scripts/test installs Debian's iptables and iproute2): without them they fail, saying why.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, Proc, start
from tests.peers import MODES

EXAMPLE = ROOT / "examples" / "transparent-intercept.yaml"
NOBODY = 65534
HOPLINE_PORT = 15001
CLEAN = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}  # no environment proxy inside the namespace
ENV = {**CLEAN, "PYTHONPATH": f"{ROOT / 'src'}:{ROOT}", "PYTHONUNBUFFERED": "1"}


def _require_netns() -> None:
    """Fail (not skip) when this machine cannot run them, with the reason."""
    missing = [tool for tool in ("ip", "iptables", "setpriv") if shutil.which(tool) is None]
    if os.geteuid() != 0:
        pytest.fail("the network-namespace tests need root (ip netns, iptables); CI runs them as root", pytrace=False)
    if missing:
        pytest.fail(f"the network-namespace tests need {', '.join(missing)} (apt-get install iptables iproute2)", pytrace=False)


class Namespace:
    """A network namespace of the test's own, with its loopback up; every process started
    in it is stopped, and the namespace removed, however the test ends."""

    def __init__(self) -> None:
        self.name = f"hlt-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.procs: list[Proc] = []

    def run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(["ip", "netns", "exec", self.name, *argv], capture_output=True, text=True, timeout=60, env=ENV, cwd=ROOT)
        if check and done.returncode != 0:
            raise AssertionError(f"{' '.join(argv)} in {self.name} failed ({done.returncode}): {done.stderr.strip()}")
        return done

    def start(self, *argv: str, user: int | None = None) -> Proc:
        prefix = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups"] if user is not None else []
        proc = start(["ip", "netns", "exec", self.name, *prefix, *argv], env=ENV)
        self.procs.append(proc)
        return proc

    def dial(self, *args: str) -> dict:
        """tests/servers/dial.py in the namespace (as root: its connections are redirected)."""
        done = self.run(sys.executable, "-m", "tests.servers.dial", *args)
        return json.loads(done.stdout.strip().splitlines()[-1])

    def redirect(self, *ports: int) -> None:
        """The clients' connections to 127.0.0.1:ports go to hopline; hopline's own (uid nobody) do not."""
        self.run(
            "iptables", "-t", "nat", "-A", "OUTPUT", "-p", "tcp", "-d", "127.0.0.1", "-m", "multiport",
            "--dports", ",".join(map(str, ports)), "-m", "owner", "!", "--uid-owner", str(NOBODY),
            "-j", "REDIRECT", "--to-ports", str(HOPLINE_PORT),
        )  # fmt: skip

    def backend(self, port: int) -> Proc:
        proc = self.start(sys.executable, str(ROOT / "tests" / "servers" / "sdk_server.py"), "http", "--port", str(port))
        assert self.dial("wait", "127.0.0.1", str(port)) == {"ok": True}
        return proc

    def hopline(self, config: Path) -> Proc:
        """``hopline serve`` as nobody, announced on the example's port."""
        proc = self.start(sys.executable, "-m", "hopline", "serve", str(config), user=NOBODY)
        m = proc.wait_line(r"at (http://\S+) \(Streamable HTTP\)")
        proc.url = m.group(1)
        return proc

    def close(self) -> None:
        for proc in self.procs:
            proc.stop()
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True, timeout=30)


@pytest.fixture
def netns():
    _require_netns()
    ns = Namespace()
    subprocess.run(["ip", "netns", "add", ns.name], check=True, capture_output=True, timeout=30)
    try:
        ns.run("ip", "link", "set", "lo", "up")
        yield ns
    finally:
        ns.close()
    assert ns.name not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


@pytest.fixture
def readable():
    """A directory nobody (the uid hopline runs as) can read (pytest's tmp_path is root's only)."""
    where = Path(tempfile.mkdtemp(prefix="hopline-intercept-"))
    where.chmod(0o755)
    try:
        yield where
    finally:
        shutil.rmtree(where, ignore_errors=True)


def level1(readable: Path, **transparent) -> Path:
    config = yaml.safe_load(EXAMPLE.read_text())
    config["transparent"].update(level=1, **transparent)
    path = readable / "intercept-level1.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.parametrize("level", [2, 1])
def test_a_redirected_client_gets_what_it_gets_without_hopline_and_nothing_once_hopline_stops(netns, readable, level):
    netns.backend(8080)
    url = "http://127.0.0.1:8080/mcp"  # what every client dials: the backend's own address
    direct = {mode: netns.dial("sdk", url, mode) for mode in MODES}
    assert all("ok" in direct[mode] for mode in MODES), direct
    netns.redirect(8080)
    gw = netns.hopline(EXAMPLE if level == 2 else level1(readable))
    through = {mode: netns.dial("sdk", url, mode) for mode in MODES}
    assert through == direct  # the same tools, results, resources, prompts, and (legacy) the backend's own name
    gw.stop()
    stopped = {mode: netns.dial("sdk", url, mode) for mode in MODES}
    assert all("error" in stopped[mode] for mode in MODES), stopped  # the REDIRECT leads only to hopline: no way around


@pytest.mark.parametrize("level", [2, 1])
def test_an_unlisted_destination_and_a_disagreeing_host_are_refused(netns, readable, level):
    netns.backend(8080)
    netns.backend(8081)  # reachable, but not on the allow-list
    netns.redirect(8080, 8081)
    netns.hopline(EXAMPLE if level == 2 else level1(readable))
    unlisted = netns.dial("post", "http://127.0.0.1:8081/mcp")
    assert unlisted["status"] == 421, unlisted
    assert "127.0.0.1:8081" in json.loads(unlisted["body"])["error"]["message"]
    for host in ("tools.example:8080", "127.0.0.2:8080", "127.0.0.1:8081", "localhost:9999", "127.0.0.1"):
        answer = netns.dial("post", "http://127.0.0.1:8080/mcp", "--host", host)
        assert answer["status"] == 421, (host, answer)
        message = json.loads(answer["body"])["error"]["message"]
        assert f"Host ({host})" in message and "127.0.0.1:8080" in message, message
    for host in ("127.0.0.1:8080", "localhost:8080"):  # the address itself, or a name that resolves to it
        answer = netns.dial("post", "http://127.0.0.1:8080/mcp", "--host", host)
        assert answer["status"] == 200, (host, answer)


def test_without_check_host_a_disagreeing_host_is_forwarded(netns, readable):
    netns.backend(8080)
    netns.redirect(8080)
    netns.hopline(level1(readable, check_host=False))
    answer = netns.dial("post", "http://127.0.0.1:8080/mcp", "--host", "localhost:9999")  # refused with check_host
    assert answer["status"] == 200 and answer["headers"].get("mcp-session-id"), answer  # the backend's own answer


def test_a_connection_dialled_to_hopline_itself_gets_its_declaration(netns):
    netns.hopline(EXAMPLE)
    own = netns.run(sys.executable, "-c", "import httpx; print(httpx.get('http://127.0.0.1:15001/.well-known/agent-tool-proxy', trust_env=False).text)")
    declared = json.loads(own.stdout)["transparent"]
    assert declared["mechanism"] == "SO_ORIGINAL_DST" and declared["awareness_level"] == 2


PROBE = """
import json, socket, sys
from hopline.transports.interception import original_destination
family, host, listen, dialled = (socket.AF_INET6, "::1", 15002, 8082) if sys.argv[1] == "6" else (socket.AF_INET, "127.0.0.1", 15002, 8082)
server = socket.socket(family)
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind((host, listen)); server.listen()
out = {}
for port in (dialled, listen):
    c = socket.create_connection((host, port)); a, _ = server.accept()
    out[port] = original_destination(a); a.close(); c.close()
print(json.dumps(out))
"""


@pytest.mark.parametrize("family", ["4", "6"])
def test_the_original_destination_is_read_from_the_socket_for_ipv4_and_ipv6(netns, family):
    table = "iptables" if family == "4" else "ip6tables"
    host = "127.0.0.1" if family == "4" else "::1"
    netns.run(table, "-t", "nat", "-A", "OUTPUT", "-p", "tcp", "-d", host, "--dport", "8082", "-j", "REDIRECT", "--to-ports", "15002")
    found = json.loads(netns.run(sys.executable, "-c", PROBE, family).stdout)
    assert found == {"8082": [host, 8082], "15002": None}  # the address dialled; none when hopline itself was dialled
