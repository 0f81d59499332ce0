"""A plain `pip install .` (not editable) must ship every subpackage and data file."""

from __future__ import annotations

from pathlib import Path

import hopline

SRC = Path(hopline.__file__).resolve().parent


def test_every_package_directory_has_an_init():
    missing = [str(d.relative_to(SRC)) for d in SRC.rglob("*") if d.is_dir() and d.name != "__pycache__" and any(d.glob("*.py")) and not (d / "__init__.py").exists()]
    assert not missing, f"setuptools' find_packages would leave these out of a wheel: {missing}"


def test_data_files_are_declared_as_package_data():
    text = (SRC.parent.parent / "pyproject.toml").read_text()
    for data in SRC.rglob("*.toml"):
        assert f'"{data.name}"' in text or '"*.toml"' in text, f"{data} is not in [tool.setuptools.package-data]"


# -- a light install: the core's dependencies, the extras, and code that imports them lazily --------

import re  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tomllib  # noqa: E402

from hopline.config.extras import EXTRAS  # noqa: E402

ROOT = SRC.parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
# What `pip install hopline` must not pull in: the extras' own packages, and what they drag
# along (cryptography via pyjwt[crypto]; typer, rich, prompt-toolkit via the CEL library).
HEAVY = {"numpy", "snowballstemmer", "pydantic-monty", "redis", "pyjwt", "cryptography", "common-expression-language",
         "typer", "rich", "prompt-toolkit", "pygments", "opentelemetry-sdk", "opentelemetry-api", "opentelemetry-exporter-otlp-proto-http"}


def name(requirement: str) -> str:
    """The normalised distribution name of a requirement (PEP 503)."""
    match = re.match(r"[A-Za-z0-9._-]+", requirement.strip())
    assert match, requirement
    return re.sub(r"[-_.]+", "-", match.group()).lower()


def test_the_core_dependencies_hold_no_heavy_package():
    core = {name(r) for r in PROJECT["dependencies"]}
    assert not core & HEAVY, f"move these behind an extra (hopline/config/extras.py): {sorted(core & HEAVY)}"
    assert not any(n.startswith("opentelemetry") for n in core)


def test_each_extra_in_pyproject_is_the_one_config_extras_names():
    optional = PROJECT["optional-dependencies"]
    for extra, (dists, _modules) in EXTRAS.items():
        assert sorted(name(r) for r in optional[extra]) == sorted(dists), extra
    assert optional["all"] == [f"hopline[{','.join(EXTRAS)}]"]
    assert "hopline[all]" in optional["test"]  # `bash scripts/test` installs -e '.[test]': every test's module


def test_the_license_pyproject_declares_is_shipped():
    assert PROJECT["license"] == {"text": "Apache-2.0"}
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("Copyright (c) 2026 the hopline authors\n")
    assert "Apache License\n                           Version 2.0, January 2004" in text and "END OF TERMS AND CONDITIONS" in text


# Run in a fresh interpreter with every extra's modules made unimportable, as in a core install.
CORE_ONLY = r"""
import importlib, pkgutil, sys, textwrap
BLOCKED = sys.argv[1].split(",")
sys.modules.update(dict.fromkeys(BLOCKED))
import hopline
OWN = {"hopline.layers.capability.toolmodes.embed", "hopline.layers.policy.cel", "hopline.observability.otel"}  # the extras' own code
for info in pkgutil.walk_packages(hopline.__path__, "hopline."):
    extra = info.name.startswith(("hopline.signin.", "hopline.connect."))  # the signin extra's own code (Authlib)
    if info.name not in OWN and not extra and not info.name.endswith("__main__"):  # a __main__ runs its command
        importlib.import_module(info.name)

from hopline.cli import main
for example in sys.argv[2:]:
    assert main(["check", example]) == 0, example

from hopline.compose.pipeline import build_pipeline
from hopline.config.load import load_config, parse_config
from hopline.layers.policy.auth import Authenticator
from hopline.layers.policy.transparent import HeaderPolicy
build_pipeline(load_config("examples/gateway.yaml"))
keys = parse_config(textwrap.dedent('''
    backends: {demo: {command: python, args: ["-m", "hopline.demo"]}}
    auth: {resource: "http://127.0.0.1:8000/mcp", api_keys: [{name: ci, key: "0123456789abcdef0123"}]}
    policy: {rate_limits: {limits: [{requests: 10, per: [principal]}]}, dlp: {}}
'''))
build_pipeline(keys)
Authenticator(keys.auth)
assert HeaderPolicy([]).allows({"method": "GET"})
loaded = sorted(m for m in BLOCKED if sys.modules.get(m) is not None)
assert not loaded, loaded
print("core ok")
"""


def test_the_core_imports_runs_and_checks_its_examples_without_any_extra():
    blocked = sorted({m.split(".")[0] for _dists, modules in EXTRAS.values() for m in modules} | {"snowballstemmer"})
    core = [f"examples/{n}" for n in ("gateway.yaml", "reverse.yaml", "openapi.yaml", "stdio-pool.yaml", "acp-chain.yaml")]
    proc = subprocess.run([sys.executable, "-c", CORE_ONLY, ",".join(blocked), *core], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0 and proc.stdout.endswith("core ok\n"), proc.stderr[-3000:]
