"""The profile -> command line translation (transports/confine.py) and the ``sandbox:`` config, as data."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from hopline.compose.sandboxing import profile_for
from hopline.config.schema import GatewayConfig
from hopline.transports.confine import Host, Profile, command_line, runtime_roots

HOST = Host(
    present=frozenset({"/usr", "/etc/ssl", "/etc/passwd", "/etc/resolv.conf"}),
    links={"/bin": "usr/bin", "/lib": "usr/lib"},
    runtime=("/opt/node", "/srv/app/node_modules"),
    hidden=("/srv/app/node_modules/gateway.yaml", "/home/op/gateway.yaml"),
)


def pairs(line: list[str], flag: str) -> list[tuple[str, str]]:
    return [(line[i + 1], line[i + 2]) for i, word in enumerate(line) if word == flag]


def test_root_runs_bwrap_without_a_user_namespace_and_drops_to_the_uid_with_setpriv():
    line = command_line(Profile(uid=4242), ["node", "server.js"], HOST)
    assert line[:5] == ["/usr/bin/prlimit", "--as=2147483648", "--nproc=512", "--nofile=1024", "--"]
    assert line[5] == "/usr/bin/bwrap" and "--unshare-user" not in line
    tail = line[line.index("/usr/bin/setpriv") :]
    assert tail == [
        "/usr/bin/setpriv", "--reuid=4242", "--regid=4242", "--clear-groups", "--inh-caps=-all",
        "--bounding-set=-all", "--", "node", "server.js",
    ]  # fmt: skip
    for flag in ("--die-with-parent", "--new-session", "--unshare-pid", "--unshare-net"):
        assert flag in line


def test_unprivileged_hopline_maps_the_uid_in_a_user_namespace():
    line = command_line(Profile(uid=4242, network="host"), ["x"], Host(root=False))
    assert "/usr/bin/setpriv" not in line and "--unshare-net" not in line
    assert line[line.index("--uid") + 1] == "4242" and "--disable-userns" in line
    assert line[-2:] == ["--", "x"]


def test_the_filesystem_is_the_system_the_runtime_and_the_named_paths_only():
    profile = Profile(read_only=("/data/ref",), read_write=("/data/out",))
    line = command_line(profile, ["node"], HOST, cwd="/srv/app")
    ro = pairs(line, "--ro-bind")
    assert ("/usr", "/usr") in ro and ("/etc/ssl", "/etc/ssl") in ro and ("/etc/passwd", "/etc/passwd") in ro
    assert ("/opt/node", "/opt/node") in ro and ("/data/ref", "/data/ref") in ro and ("/srv/app", "/srv/app") in ro
    assert pairs(line, "--bind") == [("/data/out", "/data/out")]
    assert ("usr/bin", "/bin") in pairs(line, "--symlink")
    assert not any(src.startswith(("/etc/shadow", "/home", "/root")) for src, _ in ro)
    # a hidden file under a visible tree is masked, after the binds; one elsewhere needs no mask
    masks = [dest for src, dest in ro if src == "/dev/null"]
    assert masks == ["/srv/app/node_modules/gateway.yaml"]
    assert line.index("/dev/null") > line.index("/data/out")
    assert line[line.index("--chdir") + 1] == "/srv/app"
    assert pairs(line, "--setenv")[0] == ("HOME", "/tmp")


def test_limits_left_unset_are_not_passed():
    line = command_line(Profile(memory=None, processes=None, open_files=None, cpu_seconds=7), ["x"], HOST)
    assert line[:3] == ["/usr/bin/prlimit", "--cpu=7:8", "--"]


def test_runtime_roots_take_node_modules_trees_and_bin_prefixes():
    roots = runtime_roots(
        [
            "/usr/bin/node",
            "/srv/app/node_modules/.bin/srv",
            "/srv/app/node_modules/pkg/node_modules/dep/x.js",
            "/home/op/.venv/bin/python",
            "/home/op/script.py",
        ]
    )
    assert roots == ["/srv/app/node_modules", "/home/op/.venv", "/home/op/script.py"]


def config(sandbox) -> GatewayConfig:
    return GatewayConfig.model_validate({"backends": {"b": {"command": "x", "sandbox": sandbox}}})


def test_a_preset_name_is_a_shorthand_and_sets_the_network():
    off, ro = config("network-off").backends["b"].sandbox, config("read-only").backends["b"].sandbox
    assert (off.profile, off.network_in_effect()) == ("network-off", "none")
    assert (ro.profile, ro.network_in_effect()) == ("read-only", "host")
    assert profile_for(config("none").backends["b"].sandbox, None) is None


def test_paths_are_resolved_against_the_config_directory():
    sandbox = config({"read_only": ["ref", "~/x"], "read_write": ["/abs"]}).backends["b"].sandbox
    profile = profile_for(sandbox, "/etc/hopline")
    assert profile.read_only[0] == "/etc/hopline/ref" and profile.read_only[1].endswith("/x")
    assert profile.read_write == ("/abs",) and profile.memory == 2048 * 2**20


@pytest.mark.parametrize(
    "sandbox, message",
    [
        ({"profile": "read-only", "allow": ["api.example.com"]}, "an allow-list filters nothing on hopline's network"),
        ({"allow": ["api.example.com", "http://x.example"]}, "write host, host:port, *.domain[:port] or an IP"),
        ({"allow": ["x.example:0"]}, "the port must be a number from 1 to 65535"),
        ({"allow": ["*.com"]}, "a wildcard names a domain with a dot"),
        ({"launcher": "docker"}, "docker launcher is not built yet"),
        ({"profile": "read-only", "read_write": ["/x"]}, "writes nowhere but its private home"),
        ({"profile": "network-off", "network": "host"}, "has no network"),
        ({"profile": "none", "memory": 100}, "profile `none` confines nothing"),
        ("strict", "Input should be 'none', 'network-off' or 'read-only'"),
    ],
)
def test_settings_that_cannot_be_enforced_are_refused(sandbox, message):
    with pytest.raises(ValidationError) as info:
        config(sandbox)
    assert message in str(info.value)


def test_sandbox_applies_to_command_backends_only():
    with pytest.raises(ValidationError) as info:
        GatewayConfig.model_validate({"backends": {"b": {"url": "http://h/mcp", "sandbox": "network-off"}}})
    assert "applies to `command` backends only" in str(info.value)


def test_an_allow_list_runs_the_command_under_the_egress_shim_with_the_proxy_socket_bound_read_only():
    from hopline.transports.egress import PROXY_PORT, SHIM, SOCKET_DIR

    profile = profile_for(config({"allow": ["api.example.com", "10.0.0.5:8080"]}).backends["b"].sandbox, None)
    assert profile.allow == ("api.example.com", "10.0.0.5:8080") and profile.network == "none"
    host = Host(**{**HOST.__dict__, "egress": "/tmp/hopline-egress-x", "python": "/usr/bin/python3.11"})
    line = command_line(profile, ["node", "server.js"], host)
    assert "--unshare-net" in line and ("/tmp/hopline-egress-x", SOCKET_DIR) in pairs(line, "--ro-bind")
    assert ("HTTPS_PROXY", f"http://127.0.0.1:{PROXY_PORT}") in pairs(line, "--setenv")
    tail = line[line.index("--bounding-set=-all") + 2 :]  # after setpriv's "--": the shim, then the command
    assert tail[:5] == ["/usr/bin/python3.11", "-I", "-S", "-c", SHIM] and tail[-3:] == ["--", "node", "server.js"]
    assert "egress proxy to 2 allowed" in profile.summary() and profile.describe()["allow"] == list(profile.allow)
    with pytest.raises(ValueError, match="egress proxy's socket directory"):
        command_line(profile, ["node"], HOST)  # never the command without its only way out being there


def test_a_top_level_sandbox_is_the_default_of_command_backends_that_name_none():
    c = GatewayConfig.model_validate(
        {
            "sandbox": "network-off",
            "backends": {
                "plain": {"command": "x"},
                "opted_out": {"command": "x", "sandbox": "none"},
                "own": {"command": "x", "sandbox": {"profile": "read-only"}},
                "remote": {"url": "http://127.0.0.1:1/mcp"},
            },
        }
    )
    profiles = {b: (s.sandbox.profile if s.sandbox else None) for b, s in c.backends.items()}
    assert profiles == {"plain": "network-off", "opted_out": "none", "own": "read-only", "remote": None}
    assert profile_for(c.backends["opted_out"].sandbox, None) is None
