"""The launcher's side of the sandbox (issue 35): ``hopline check`` names each backend's profile and
launcher, and a profile that cannot be enforced (here: bwrap not on hopline's PATH) stops that
backend with a message naming what is missing: never an unconfined start."""

from __future__ import annotations

import subprocess

import psutil
import yaml

from tests.conftest import PY, SERVERS, start
from tests.peers import bounded, client

HOSTILE = [str(SERVERS / "hostile.py")]


def write(tmp_path, backends) -> str:
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump({"backends": backends}))
    return str(path)


def check(path: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PY, "-m", "hopline", "check", path], capture_output=True, text=True, env=env, timeout=60)


def test_check_names_each_backends_profile_and_launcher(tmp_path):
    path = write(
        tmp_path,
        {
            "boxed": {"command": PY, "args": HOSTILE, "sandbox": {"profile": "read-only", "memory": 512}},
            "open": {"command": PY, "args": HOSTILE},
        },
    )
    out = check(path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    boxed = lines[lines.index(next(x for x in lines if x.startswith("  boxed "))) :]
    assert any(x.startswith("    sandbox: read-only via bubblewrap (uid 65534; host network;") for x in boxed[:6])
    assert any("memory 512 MiB, 512 processes" in x for x in boxed[:6])
    assert "    sandbox: none (unconfined: hopline's user, filesystem and network)" in lines


def test_without_bwrap_check_fails_naming_it(tmp_path):
    path = write(tmp_path, {"boxed": {"command": PY, "args": HOSTILE, "sandbox": "network-off"}})
    bare = tmp_path / "bin"
    bare.mkdir()
    out = check(path, env={"PATH": str(bare)})
    assert out.returncode == 1
    assert out.stderr == (
        f"{path}: backends.boxed.sandbox: cannot be enforced here: bwrap not found (install the bubblewrap package)\n"
    )


async def test_without_bwrap_serve_starts_no_unconfined_child(tmp_path):
    path = write(
        tmp_path,
        {
            "boxed": {"command": PY, "args": [*HOSTILE, "--boxed"], "sandbox": "network-off"},
            "open": {"command": PY, "args": HOSTILE},
        },
    )
    bare = tmp_path / "bin"
    bare.mkdir()
    proc = start([PY, "-m", "hopline", "serve", path, "--port", "0"], env={"PATH": str(bare)})
    try:
        url = proc.wait_line(r"at (http://\S+) \(Streamable HTTP\)").group(1)
        reports = dict(proc.wait_line(r"backend (\w+): (.*)", timeout=30).groups() for _ in range(2))
        assert reports["open"].startswith("up")
        assert reports["boxed"] == (
            "unavailable: sandbox profile 'network-off' cannot be enforced, the backend is not started: "
            "bwrap not found (install the bubblewrap package)"
        )
        async with client(url, "legacy") as c:
            names = {t.name for t in (await bounded(c.list_tools())).tools}
        assert "open__whoami" in names and not any(n.startswith("boxed__") for n in names)
        children = psutil.Process(proc.popen.pid).children(recursive=True)
        assert any(HOSTILE[0] in p.cmdline() for p in children)  # the open one
        assert not any("--boxed" in p.cmdline() for p in children)  # the boxed one: never, not even unconfined
    finally:
        proc.stop()


def test_declare_states_each_stdio_backends_isolation(tmp_path):
    import orjson

    path = write(
        tmp_path,
        {
            "boxed": {"command": PY, "args": HOSTILE, "sandbox": {"profile": "network-off", "processes": 32}},
            "open": {"command": PY, "args": HOSTILE},
        },
    )
    out = subprocess.run([PY, "-m", "hopline", "declare", path], capture_output=True, check=True, timeout=60)
    isolation = orjson.loads(out.stdout)["isolation"]
    assert isolation["open"]["profile"] == "none" and isolation["open"]["launcher"] is None
    boxed = isolation["boxed"]
    assert (boxed["profile"], boxed["launcher"], boxed["network"], boxed["uid"]) == (
        "network-off",
        "bubblewrap",
        "none",
        65534,
    )
    assert boxed["limits"] == {"memory_mib": 2048, "processes": 32, "cpu_seconds": None}


def test_check_shows_the_default_profile_on_backends_that_name_none(tmp_path):
    path = tmp_path / "gateway.yaml"
    backends = {"boxed": {"command": PY, "args": HOSTILE}, "open": {"command": PY, "args": HOSTILE, "sandbox": "none"}}
    path.write_text(yaml.safe_dump({"sandbox": {"profile": "network-off", "memory": 256}, "backends": backends}))
    out = check(str(path))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    boxed = lines[lines.index(next(x for x in lines if x.startswith("  boxed "))) :]
    assert any(x.startswith("    sandbox: network-off via bubblewrap (uid 65534; no network;") for x in boxed[:6])
    assert any("memory 256 MiB" in x for x in boxed[:6])
    assert "    sandbox: none (unconfined: hopline's user, filesystem and network)" in lines
