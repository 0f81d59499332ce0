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

import datetime
import functools
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
    problem = _nobody_cannot_run_hopline()
    if problem is not None:
        pytest.fail(
            f"hopline runs as nobody in these tests (the deployment they check), but nobody cannot run {sys.executable} "
            f"with {ROOT / 'src'}: {problem}; make the checkout and the interpreter readable by other users",
            pytrace=False,
        )


@functools.cache
def _nobody_cannot_run_hopline() -> str | None:
    done = subprocess.run(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", sys.executable, "-c", "import hopline, mcp"],
        capture_output=True, text=True, timeout=60, env=ENV, cwd="/",
    )  # fmt: skip
    return None if done.returncode == 0 else (done.stderr.strip() or f"exit {done.returncode}")[-400:]


class Namespace:
    """A network namespace of the test's own, with its loopback up; every process started
    in it is stopped, and the namespace removed, however the test ends."""

    def __init__(self) -> None:
        self.name = f"hlt-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.procs: list[Proc] = []
        self.etc = Path("/etc/netns") / self.name  # ip netns exec mounts its files over /etc's

    def hosts(self, text: str) -> None:
        """/etc/hosts as the namespace's processes see it."""
        self.etc.mkdir(parents=True, exist_ok=True)
        (self.etc / "hosts").write_text(text)

    def run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(["ip", "netns", "exec", self.name, *argv], capture_output=True, text=True, timeout=60, env=ENV, cwd=ROOT)
        if check and done.returncode != 0:
            raise AssertionError(f"{' '.join(argv)} in {self.name} failed ({done.returncode}): {done.stderr.strip()}")
        return done

    def start(self, *argv: str, user: int | None = None, env: dict[str, str] | None = None) -> Proc:
        prefix = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups"] if user is not None else []
        proc = start(["ip", "netns", "exec", self.name, *prefix, *argv], env={**ENV, **(env or {})})
        self.procs.append(proc)
        return proc

    def dial(self, *args: str) -> dict:
        """tests/servers/dial.py in the namespace (as root: its connections are redirected)."""
        done = self.run(sys.executable, "-m", "tests.servers.dial", *args)
        return json.loads(done.stdout.strip().splitlines()[-1])

    def sdk(self, url: str, *flags: str) -> dict:
        """The official SDK client dialling ``url`` in each era: {mode: exercise()'s results, or its error}."""
        return self.dial("sdk", url, ",".join(MODES), *flags)

    def redirect(self, *ports: int) -> None:
        """The clients' connections to 127.0.0.1:ports go to hopline; hopline's own (uid nobody) do not."""
        self.run(
            "iptables", "-t", "nat", "-A", "OUTPUT", "-p", "tcp", "-d", "127.0.0.1", "-m", "multiport",
            "--dports", ",".join(map(str, ports)), "-m", "owner", "!", "--uid-owner", str(NOBODY),
            "-j", "REDIRECT", "--to-ports", str(HOPLINE_PORT),
        )  # fmt: skip

    def recorder(self, port: int, record: Path) -> Proc:
        """tests/servers/recorder_server.py: every request it receives, in ``record``."""
        proc = self.start(sys.executable, str(ROOT / "tests" / "servers" / "recorder_server.py"), "--port", str(port), "--record", str(record))
        assert self.dial("wait", "127.0.0.1", str(port)) == {"ok": True}
        return proc

    def backend(self, port: int, *flags: str) -> Proc:
        proc = self.start(sys.executable, str(ROOT / "tests" / "servers" / "sdk_server.py"), "http", "--port", str(port), *flags)
        assert self.dial("wait", "127.0.0.1", str(port)) == {"ok": True}
        return proc

    def hopline(self, config: Path, env: dict[str, str] | None = None) -> Proc:
        """``hopline serve`` as nobody, announced on the example's port."""
        proc = self.start(sys.executable, "-m", "hopline", "serve", str(config), user=NOBODY, env=env)
        m = proc.wait_line(r"at ((?:https?|tcp)://\S+) \((?:Streamable HTTP|TLS passthrough)\)")
        proc.url = m.group(1)
        return proc

    def close(self) -> None:
        for proc in self.procs:
            proc.stop()
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True, timeout=30)
        shutil.rmtree(self.etc, ignore_errors=True)


@pytest.fixture
def netns():
    _require_netns()
    ns = Namespace()
    made = subprocess.run(["ip", "netns", "add", ns.name], capture_output=True, text=True, timeout=30)
    if made.returncode != 0:
        pytest.fail(f"cannot create a network namespace (root with CAP_SYS_ADMIN and CAP_NET_ADMIN is needed): {made.stderr.strip()}", pytrace=False)
    try:
        ns.run("ip", "link", "set", "lo", "up")
        yield ns
    finally:
        ns.close()
    assert ns.name not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not ns.etc.exists()


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
    direct = netns.sdk(url)
    assert all("ok" in direct[mode] for mode in MODES), direct
    netns.redirect(8080)
    gw = netns.hopline(EXAMPLE if level == 2 else level1(readable))
    through = netns.sdk(url)
    assert through == direct  # the same tools, results, resources, prompts, and (legacy) the backend's own name
    gw.stop()
    stopped = netns.sdk(url)
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


def test_an_ipv6_client_is_redirected_and_its_destination_recovered(netns, readable):
    """IP6T_SO_ORIGINAL_DST: the client dials [::1]:8080, ip6tables sends it to hopline on [::1]:15001."""
    netns.backend(8080)  # on 127.0.0.1: where [::1]:8080 really is, per the allow-list
    config = yaml.safe_load(EXAMPLE.read_text())
    config["listen"]["host"] = "::1"
    config["transparent"]["destinations"] = {"[::1]:8080": "http://127.0.0.1:8080"}
    path = readable / "ipv6.yaml"
    path.write_text(yaml.safe_dump(config))
    netns.run(
        "ip6tables", "-t", "nat", "-A", "OUTPUT", "-p", "tcp", "-d", "::1", "--dport", "8080",
        "-m", "owner", "!", "--uid-owner", str(NOBODY), "-j", "REDIRECT", "--to-ports", str(HOPLINE_PORT),
    )  # fmt: skip
    gw = netns.hopline(path)
    url = "http://[::1]:8080/mcp"  # nothing listens there but hopline, through the redirect
    through = netns.sdk(url)
    assert all("ok" in through[mode] for mode in MODES), through
    assert through == netns.sdk("http://127.0.0.1:8080/mcp")
    refused = netns.dial("post", url, "--host", "127.0.0.1:8080")
    assert refused["status"] == 421 and "[::1]:8080" in refused["body"], refused
    gw.stop()
    assert all("error" in netns.dial("sdk", url, mode) for mode in MODES)


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


# -- TLS dispositions (draft §5.4.4) ---------------------------------------------------------

HOSTS = "127.0.0.1 localhost tools.test blocked.test\n127.0.0.2 other.test\n::1 localhost\n"


def _ca(common_name: str):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    return cert, key


def _pem(cert=None, key=None) -> bytes:
    from cryptography.hazmat.primitives import serialization

    out = b""
    if key is not None:
        out += key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    if cert is not None:
        out += cert.public_bytes(serialization.Encoding.PEM)
    return out


def _leaf(ca, ca_key, name: str):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    return cert, key


@pytest.fixture
def pki(readable):
    """Two CAs: the destination's (its own certificate for tools.test) and the operator's (hopline mints from it)."""
    files = {}
    dest, dest_key = _ca("destination test CA")
    operator, operator_key = _ca("operator test CA")
    leaf, leaf_key = _leaf(dest, dest_key, "tools.test")
    for name, data in {
        "dest-ca.pem": _pem(dest), "operator-ca.pem": _pem(operator), "operator-key.pem": _pem(key=operator_key),
        "server.pem": _pem(leaf), "server-key.pem": _pem(key=leaf_key),
    }.items():  # fmt: skip
        (readable / name).write_bytes(data)
        (readable / name).chmod(0o644)  # hopline runs as nobody (an operator keeps the CA key to hopline's uid)
        files[name] = str(readable / name)
    return files


def tls_config(readable: Path, tls: str, level: int, pki: dict, **extra) -> Path:
    config = yaml.safe_load(EXAMPLE.read_text())
    config["transparent"].update(
        level=level, tls=tls, destinations={"127.0.0.1:8443": "https://tools.test:8443", **extra.pop("destinations", {})}, **extra
    )
    if tls == "terminate":
        config["transparent"]["ca"] = {"cert": pki["operator-ca.pem"], "key": pki["operator-key.pem"]}
    path = readable / f"tls-{tls}-{level}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def tls_backend(netns, pki, port: int = 8443, *flags: str) -> None:
    netns.backend(port, "--tls-cert", pki["server.pem"], "--tls-key", pki["server-key.pem"], "--allow-host", f"tools.test:{port}", *flags)


@pytest.mark.parametrize("level", [1, 2])
def test_tls_termination_presents_a_certificate_for_the_original_host_and_reoriginates_verified_tls(netns, readable, pki, level):
    netns.hosts(HOSTS)
    tls_backend(netns, pki)
    url = "https://tools.test:8443/mcp"
    direct = netns.sdk(url, "--ca", pki["dest-ca.pem"])
    assert all("ok" in direct[mode] for mode in MODES), direct
    netns.redirect(8443)
    netns.hopline(tls_config(readable, "terminate", level, pki), env={"SSL_CERT_FILE": pki["dest-ca.pem"]})
    through = netns.sdk(url, "--ca", pki["operator-ca.pem"])  # trusting only the operator CA
    assert through == direct
    seen = netns.dial("tls", "127.0.0.1", "8443", "--sni", "tools.test", "--ca", pki["operator-ca.pem"])
    assert seen["issuer"] == "operator test CA" and seen["names"] == ["tools.test"] and seen["status"] == 200, seen
    trusting_the_destination = netns.dial("tls", "127.0.0.1", "8443", "--sni", "tools.test", "--ca", pki["dest-ca.pem"])
    assert "CERTIFICATE_VERIFY_FAILED" in trusting_the_destination["error"]  # hopline's certificate, not the destination's
    other = netns.dial("tls", "127.0.0.1", "8443", "--sni", "other.test", "--ca", pki["operator-ca.pem"], "--host", "other.test:8443")
    assert other["status"] == 421 and "TLS server name (other.test) does not name" in other["body"], other
    fronted = netns.dial("tls", "127.0.0.1", "8443", "--sni", "tools.test", "--ca", pki["operator-ca.pem"], "--host", "localhost:8443")
    assert fronted["status"] == 421 and "and its TLS server name (tools.test) differ" in fronted["body"], fronted


def test_tls_termination_verifies_the_destination(netns, readable, pki):
    """Without the destination's CA in hopline's trust store, its own TLS to it fails: 502, nothing forwarded."""
    netns.hosts(HOSTS)
    tls_backend(netns, pki)
    netns.redirect(8443)
    netns.hopline(tls_config(readable, "terminate", 1, pki))
    answer = netns.dial("tls", "127.0.0.1", "8443", "--sni", "tools.test", "--ca", pki["operator-ca.pem"])
    assert answer["status"] == 502 and "destination unreachable" in answer["body"], answer


def test_tls_termination_with_a_configured_wildcard_certificate(netns, readable, pki):
    """``certificate:`` instead of ``ca:``: one wildcard, valid for the names it covers (another SNI: a hostname mismatch)."""
    from cryptography.hazmat.primitives import serialization

    netns.hosts(HOSTS + "127.0.0.1 mcp.corp.test\n")
    tls_backend(netns, pki, 8443, "--allow-host", "mcp.corp.test:8443")
    operator = x509_load(pki["operator-ca.pem"])
    operator_key = serialization.load_pem_private_key(Path(pki["operator-key.pem"]).read_bytes(), password=None)
    wild, wild_key = _leaf(operator, operator_key, "*.corp.test")
    (readable / "wild.pem").write_bytes(_pem(wild))
    (readable / "wild-key.pem").write_bytes(_pem(key=wild_key))
    (readable / "wild-key.pem").chmod(0o644)
    config = yaml.safe_load(tls_config(readable, "terminate", 1, pki).read_text())
    del config["transparent"]["ca"]
    config["transparent"]["certificate"] = {"cert": str(readable / "wild.pem"), "key": str(readable / "wild-key.pem")}
    path = readable / "wildcard.yaml"
    path.write_text(yaml.safe_dump(config))
    direct = netns.sdk("https://tools.test:8443/mcp", "--ca", pki["dest-ca.pem"])
    netns.redirect(8443)
    netns.hopline(path, env={"SSL_CERT_FILE": pki["dest-ca.pem"]})
    seen = netns.dial("tls", "127.0.0.1", "8443", "--sni", "mcp.corp.test", "--ca", pki["operator-ca.pem"])
    assert seen["issuer"] == "operator test CA" and seen["names"] == ["*.corp.test"] and seen["status"] == 200, seen
    through = netns.sdk("https://mcp.corp.test:8443/mcp", "--ca", pki["operator-ca.pem"])
    assert through == direct
    uncovered = netns.dial("tls", "127.0.0.1", "8443", "--sni", "tools.test", "--ca", pki["operator-ca.pem"])
    assert "CERTIFICATE_VERIFY_FAILED" in uncovered["error"] and "Hostname mismatch" in uncovered["error"], uncovered


def x509_load(path: str):
    from cryptography import x509

    return x509.load_pem_x509_certificate(Path(path).read_bytes())


def test_tls_passthrough_forwards_the_encrypted_stream_and_judges_the_sni(netns, readable, pki):
    netns.hosts(HOSTS)
    tls_backend(netns, pki)
    tls_backend(netns, pki, 8444)  # reachable, not on the allow-list
    url = "https://tools.test:8443/mcp"
    direct = netns.sdk(url, "--ca", pki["dest-ca.pem"])
    assert all("ok" in direct[mode] for mode in MODES), direct
    netns.redirect(8443, 8444)
    gw = netns.hopline(tls_config(readable, "passthrough", 1, pki, rules=['http.sni != "blocked.test" && http.source == "127.0.0.1"']))
    assert gw.url.startswith("tcp://")
    through = netns.sdk(url, "--ca", pki["dest-ca.pem"])
    assert through == direct
    seen = netns.dial("tls", "127.0.0.1", "8443", "--sni", "tools.test", "--ca", pki["dest-ca.pem"])
    assert seen["issuer"] == "destination test CA" and seen["status"] == 200, seen  # the destination's own certificate
    other = netns.dial("tls", "127.0.0.1", "8443", "--sni", "other.test", "--ca", pki["dest-ca.pem"])
    assert "UNRECOGNIZED_NAME" in other["error"], other
    unlisted = netns.dial("tls", "127.0.0.1", "8444", "--sni", "tools.test", "--ca", pki["dest-ca.pem"])
    assert "ACCESS_DENIED" in unlisted["error"], unlisted
    blocked = netns.dial("tls", "127.0.0.1", "8443", "--sni", "blocked.test", "--ca", pki["dest-ca.pem"])  # it names the address: the rule refuses
    assert "ACCESS_DENIED" in blocked["error"], blocked
    gw.stop()
    stopped = netns.dial("tls", "127.0.0.1", "8443", "--sni", "tools.test", "--ca", pki["dest-ca.pem"])
    assert "error" in stopped, stopped


# -- what the section accepts (no namespace needed) ------------------------------------------

def _transparent(**section):
    from hopline.config.schema import GatewayConfig

    return GatewayConfig.model_validate({"mode": "transparent", "transparent": section})


@pytest.mark.parametrize(
    ("section", "says"),
    [
        ({"destination": "socket", "destinations": {"tools.internal:8080": "http://10.0.0.1"}}, "a destination is the ip:port clients dial"),
        ({"destination": "socket", "destinations": {"::1:8080": "http://10.0.0.1"}}, "[ip6]:port"),
        ({"tls": "terminate", "destinations": {"a:443": "https://10.0.0.1"}}, "give one of the two"),
        ({"tls": "terminate", "ca": {"cert": "c", "key": "k"}, "certificate": {"cert": "c", "key": "k"}, "destinations": {"a:443": "https://10.0.0.1"}}, "give one of the two"),
        ({"certificate": {"cert": "c", "key": "k"}, "destinations": {"a": "http://10.0.0.1"}}, "certificate is used only with tls: terminate"),
        ({"tls": "terminate", "ca": {"cert": "c", "key": "k"}, "destinations": {"a:443": "http://10.0.0.1"}}, "downgrades TLS"),
        ({"tls": "plaintext", "ca": {"cert": "c", "key": "k"}, "destinations": {"a": "http://10.0.0.1"}}, "only with tls: terminate"),
        ({"tls": "passthrough", "destinations": {"a:443": "https://10.0.0.1"}}, "the destination comes from the socket"),
        ({"tls": "passthrough", "level": 2, "destination": "socket", "destinations": {"10.0.0.1:443": "https://10.0.0.1"}}, "level 1 only"),
        ({"tls": "passthrough", "destination": "socket", "rules": ['http.sni == "a"', 'http.headers["x"] == "y"'], "destinations": {"10.0.0.1:443": "https://10.0.0.1"}}, "header rules need tls: terminate"),
        ({"tls": "passthrough", "destination": "socket", "rules": ['http.mcp_method == "tools/list"'], "destinations": {"10.0.0.1:443": "https://10.0.0.1"}}, "http.destination, http.source and http.sni only"),
        ({"tls": "passthrough", "destination": "socket", "destinations": {"10.0.0.1:80": "http://10.0.0.1"}}, "https://host:port"),
        ({"level": 2, "single_handshake": ["b"], "destinations": {"a": "http://10.0.0.1"}}, "b is not one of the destinations"),
        ({"level": 1, "single_handshake": ["a"], "destinations": {"a": "http://10.0.0.1"}}, "level 1 is single-handshake"),
        ({"level": 2, "sse_path": "sse", "destinations": {"a": "http://10.0.0.1"}}, "a path starts with '/'"),
    ],
)
def test_the_section_refuses_what_cannot_be_honoured(section, says):
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as caught:
        _transparent(**section)
    assert says in str(caught.value)


def test_socket_destinations_are_named_as_recovered_and_trusted_networks_may_downgrade():
    t = _transparent(destination="socket", destinations={"[0:0::1]:8080": "http://127.0.0.1:1", "10.0.0.1:443": "https://x"}).transparent
    assert set(t.destinations) == {"[::1]:8080", "10.0.0.1:443"}  # as the socket gives them
    assert _transparent(level=2, destination="socket", single_handshake=["[0::1]:8080"], destinations={"[::1]:8080": "http://x"}).transparent.single_handshake == ["[::1]:8080"]
    assert _transparent(tls="terminate", ca={"cert": "c", "key": "k"}, trusted_network=True, destinations={"a": "http://10.0.0.1"})
    rules = ['http.sni == "tools.test" && http.source == "127.0.0.1"', 'http.destination.startsWith("10.")']
    assert _transparent(tls="passthrough", destination="socket", rules=rules, destinations={"10.0.0.1:443": "https://x"}).transparent.rules == rules


def test_a_ca_that_is_not_a_ca_stops_serve_and_check_with_one_line(readable, pki):
    config = tls_config(readable, "terminate", 1, {**pki, "operator-ca.pem": pki["server.pem"], "operator-key.pem": pki["server-key.pem"]})
    why = "transparent.ca: the CA certificate is not a CA (basicConstraints CA:FALSE)"
    done = subprocess.run([sys.executable, "-m", "hopline", "serve", str(config)], capture_output=True, text=True, timeout=60, env=ENV, cwd=ROOT)
    assert done.returncode == 1 and done.stderr.strip() == f"hopline serve: {why}", done.stderr
    checked = subprocess.run([sys.executable, "-m", "hopline", "check", str(config)], capture_output=True, text=True, timeout=60, env=ENV, cwd=ROOT)
    assert checked.returncode == 1 and checked.stderr.strip() == f"{config}: {why}", checked.stderr
    good = subprocess.run([sys.executable, "-m", "hopline", "check", str(tls_config(readable, "terminate", 2, pki))], capture_output=True, text=True, timeout=60, env=ENV, cwd=ROOT)
    assert good.returncode == 0 and "tls: terminated by hopline (certificates for the SNI minted from" in good.stdout, good.stdout + good.stderr


# -- level 2, indistinguishable from the destination ----------------------------------------

def get(netns, url: str) -> dict:
    code = f"import httpx, json; r = httpx.get({url!r}, trust_env=False); print(json.dumps({{'status': r.status_code, 'body': r.text}}))"
    return json.loads(netns.run(sys.executable, "-c", code).stdout)


def test_level2_relays_the_destinations_401_challenge_unchanged(netns):
    netns.backend(8080, "--require-token", "the-token")
    url = "http://127.0.0.1:8080/mcp"
    metadata = "http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp"
    direct = netns.dial("post", url)
    direct_metadata = get(netns, metadata)
    direct_sdk = netns.sdk(url, "--header", "authorization: Bearer the-token")
    direct_refused = netns.sdk(url)
    assert direct["status"] == 401 and "resource_metadata=" in direct["headers"]["www-authenticate"]
    assert all("ok" in direct_sdk[mode] for mode in MODES), direct_sdk
    assert all(direct_refused[mode]["http_errors"][0][1:] == [401, direct["headers"]["www-authenticate"]] for mode in MODES), direct_refused
    netns.redirect(8080)
    netns.hopline(EXAMPLE)  # level 2
    through = netns.dial("post", url)
    assert through["status"] == 401, through
    for header in ("www-authenticate", "content-type", "x-destination"):
        assert through["headers"].get(header) == direct["headers"][header], header
    assert through["body"] == direct["body"]
    assert get(netns, metadata) == direct_metadata  # the RFC 9728 metadata, from the destination itself
    assert netns.sdk(url) == direct_refused  # both eras: the SDK sees the same 401
    with_token = netns.sdk(url, "--header", "authorization: Bearer the-token")
    assert with_token == direct_sdk  # the client's own token, passed through: the same session as without hopline
    wrong = netns.dial("post", url, "--header", "authorization: Bearer stale")
    assert wrong["status"] == 401 and wrong["headers"]["www-authenticate"] == direct["headers"]["www-authenticate"]


def test_level2_carries_legacy_http_sse_clients(netns):
    netns.backend(8080, "--sse")
    url = "http://127.0.0.1:8080/sse"
    direct = netns.dial("sse", url)
    assert "ok" in direct, direct
    netns.redirect(8080)
    gw = netns.hopline(EXAMPLE)
    assert netns.dial("sse", url) == direct  # the destination's own name, version, tools and results
    gw.stop()
    assert "error" in netns.dial("sse", url)


def test_level2_tracks_the_handshake_disposition_per_connection(netns, readable):
    """Draft §7.1: at level 2 the disposition is per connection: dual-handshake through the
    destination's gateway, or (``single_handshake``) the client's own handshake carried unread."""
    from tests.servers import recorder_server

    dual, single = readable / "dual.jsonl", readable / "single.jsonl"
    netns.recorder(8080, dual)
    netns.recorder(8081, single)
    netns.redirect(8080, 8081)
    config = yaml.safe_load(EXAMPLE.read_text())
    config["transparent"].update(
        destinations={"127.0.0.1:8080": "http://127.0.0.1:8080", "127.0.0.1:8081": "http://127.0.0.1:8081"},
        single_handshake=["127.0.0.1:8081"],
    )
    path = readable / "dispositions.yaml"
    path.write_text(yaml.safe_dump(config))
    netns.hopline(path)
    for port in (8080, 8081):
        assert "ok" in netns.dial("sdk", f"http://127.0.0.1:{port}/mcp", "legacy")

    def client_info(record: Path) -> str:
        inits = [json.loads(r["body"]) for r in recorder_server.recorded(record) if '"initialize"' in r["body"]]
        return inits[0]["params"]["clientInfo"]["name"]

    assert client_info(dual) == "hopline"  # hopline's own handshake with the destination
    assert client_info(single) != "hopline"  # the client's, unchanged
    declared = json.loads(get(netns, "http://127.0.0.1:15001/.well-known/agent-tool-proxy")["body"])["transparent"]
    assert declared["handshake_per_connection"]["single-handshake passthrough"] == ["127.0.0.1:8081"]
    assert declared["connections"]["dual-handshake"] >= 1 and declared["connections"]["single-handshake passthrough"] >= 1


@pytest.mark.parametrize(
    ("tls", "level", "disposition"),
    [("plaintext", 2, "plaintext"), ("terminate", 2, "termination and re-origination"), ("passthrough", 1, "passthrough")],
)
def test_declare_names_the_mechanism_the_tls_disposition_and_the_level(readable, pki, tls, level, disposition):
    config = EXAMPLE if tls == "plaintext" else tls_config(readable, tls, level, pki)
    done = subprocess.run([sys.executable, "-m", "hopline", "declare", str(config)], capture_output=True, text=True, timeout=60, env=ENV, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    t = doc["transparent"]
    assert t["mechanism"] == "SO_ORIGINAL_DST" and "REDIRECT" in t["interception"] and t["awareness_level"] == level
    assert t["tls_disposition"] == disposition and doc["tls"].startswith(disposition) and t["tls_downgrade"] == "never"
    assert doc["handshake"]["transparent"].startswith(f"level {level}")


def _client_hello(server_hostname: str | None) -> bytes:
    """The ClientHello Python's ssl sends (its first flight), from memory BIOs."""
    import ssl

    context = ssl.create_default_context()
    if server_hostname is None:
        context.check_hostname = False
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname=server_hostname)
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


def test_the_client_hello_is_read_for_its_sni_whole_or_in_pieces():
    from hopline.transports.transparent_tls import client_hello

    hello = _client_hello("Tools.Test")
    assert client_hello(hello) == (True, "tools.test")
    assert all(client_hello(hello[:n]) == (False, None) for n in range(0, len(hello), 7))  # not whole yet: read on
    assert client_hello(_client_hello(None)) == (True, None)  # no SNI (an IP address, or none given)
    for bad in (b"GET / HTTP/1.1\r\n", b"\x16\x03\x01\x00\x05\x02\x00\x00\x01\x00", hello[:5] + b"\x01" + b"\xff" * (len(hello) - 6)):
        with pytest.raises(ValueError):
            client_hello(bad)
