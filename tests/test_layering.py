"""The import rules between hopline's layers, read from the source (every import
statement counts, including those under ``TYPE_CHECKING`` and inside functions).

- the layers (``hopline.layers``) import no transport and no mode;
- ``hopline.jsonrpc`` imports no layer; ``hopline.transports`` imports only the L1
  contract (``hopline.layers.transport``);
- ``hopline.context`` imports only the standard library and ``hopline.binding``;
  ``hopline.layers.transport`` (the L1 interface) no transport.

The composition files still under ``hopline/layers`` (``build.py``) build layers from
configuration and transports, and are on their way out of the package: exempt.
"""

from __future__ import annotations

import ast
from pathlib import Path

import hopline

SRC = Path(hopline.__file__).parent


def module_name(path: Path) -> str:
    parts = ["hopline", *path.relative_to(SRC).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    found: set[str] = set()
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)  # `from pkg import module`
    return found


GRAPH = {module_name(p): imports(p) for p in SRC.rglob("*.py")}


def under(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def violations(importer: str, forbidden: tuple[str, ...], allowed: tuple[str, ...] = ()) -> list[str]:
    return sorted(
        f"{m} -> {d}"
        for m, deps in GRAPH.items()
        if under(m, importer) and not m.endswith(".build")
        for d in deps
        if any(under(d, f) for f in forbidden) and not any(under(d, a) for a in allowed)
    )


def test_the_graph_is_read():
    assert "hopline.layers.transport.channel" in GRAPH["hopline.layers.session.mux"]
    assert "hopline.context" in GRAPH["hopline.pipeline"]


def test_layers_import_no_transport_and_no_mode():
    assert violations("hopline.layers", ("hopline.transports", "hopline.modes")) == []


def test_jsonrpc_and_transports_import_no_layer_but_the_l1_contract():
    assert violations("hopline.jsonrpc", ("hopline.layers",)) == []
    assert violations("hopline.transports", ("hopline.layers",), allowed=("hopline.layers.transport",)) == []


def test_the_contracts_stand_alone():
    assert all(under(d, "hopline.binding") for d in GRAPH["hopline.context"] if under(d, "hopline")), GRAPH["hopline.context"]
    assert violations("hopline.layers.transport", ("hopline.transports", "hopline.modes", "hopline.config", "hopline.layers.capability", "hopline.layers.policy")) == []
