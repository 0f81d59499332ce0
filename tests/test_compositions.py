"""Each mode is a composition of layers (hopline/modes/*.py, hopline/composition.py):
the modules it names exist, the declaration reports exactly its layers, a built
gateway holds an object of each, and modes/ stays compositions only (issue 14)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from hopline.composition import NAMES
from hopline.declaration import HANDSHAKE_DISPOSITION, MODE_LAYERS, declare, Deployment
from hopline.modes import COMPOSITIONS

MODES = Path(__file__).resolve().parent.parent / "src" / "hopline" / "modes"


@pytest.mark.parametrize("mode", sorted(COMPOSITIONS))
def test_every_part_a_composition_names_is_a_module(mode):
    composition = COMPOSITIONS[mode]
    assert composition.layers, mode
    for part in (*composition.layers, *composition.optional):
        assert part.number in NAMES
        for module in part.parts:
            assert importlib.util.find_spec(f"hopline.{module}") is not None, f"{mode}: layer {part.number} names hopline.{module}"


def test_the_declaration_reports_the_compositions():
    assert set(MODE_LAYERS) == set(COMPOSITIONS) == set(HANDSHAKE_DISPOSITION)
    for mode, composition in COMPOSITIONS.items():
        doc = declare(Deployment(modes=[mode]))
        assert doc["layers"] == sorted(composition.numbers)
        assert doc["handshake"][mode] == composition.handshake
    assert declare(Deployment(modes=["relay"]))["tier"] == 1
    assert declare(Deployment(modes=["forward"]))["layers"] == [1, 2, 3, 6, 7]


def test_modes_hold_compositions_only():
    """No process in modes/: the serve functions of relay and transparent mode are commands/serve_*.py,
    federation's member watcher compose/federation.py (issue 30 item 3)."""
    texts = {p.name: p.read_text() for p in MODES.glob("*.py")}
    sizes = {name: len(text.splitlines()) for name, text in texts.items()}
    assert all(n <= 150 for n in sizes.values()), sizes
    assert sum(sizes.values()) <= 400, sizes
    for name, text in texts.items():
        assert "async def" not in text and "import asyncio" not in text and "runtime" not in text, name


async def test_a_built_gateway_holds_each_layer_of_its_composition():
    from hopline.config.load import parse_config
    from hopline.layers.discovery.registry import Registry
    from hopline.layers.routing.tables import Routes
    from hopline.layers.session.sharing import Sharing
    from hopline.modes import GATEWAYS, build, forward
    from hopline.pipeline import Pipeline

    config = parse_config("backends:\n  demo: {command: python, args: [-m, hopline.demo]}\n")
    gateway = forward.build(config)
    try:
        assert gateway.composition is forward.COMPOSITION
        assert isinstance(gateway.registry, Registry) and set(gateway.registry.connectors) == {"demo"}  # L1, L2
        assert isinstance(gateway.routes, Routes) and not gateway.routes.reverse  # L3: namespaced
        assert isinstance(gateway.sharing, Sharing)  # L6
        assert isinstance(gateway.pipeline, Pipeline) and gateway.pipeline.tools.modes == {}  # L7 (Standard)
        assert gateway.pipeline.gates and gateway.resilience.retry is not None  # L4 (on by default)
    finally:
        await gateway.aclose()
    # Each gateway mode's build is its composition's: Layer 3 from its factory, unknown methods as it says.
    assert set(GATEWAYS) == {"forward", "reverse", "sidecar", "federation"}
    for mode, single, pass_on in (("reverse", "demo", False), ("sidecar", "demo", True), ("federation", None, False)):
        gateway = build(parse_config(f"mode: {mode}\nbackends:\n  demo: {{command: python, args: [-m, hopline.demo]}}\n"))
        try:
            assert gateway.composition is COMPOSITIONS[mode]
            assert gateway.routes.single == single and gateway.routes.pass_on is pass_on, mode
        finally:
            await gateway.aclose()


def test_the_declared_layers_are_the_compositions_layers_for_the_configuration():
    from hopline.config.schema import GatewayConfig
    from hopline.declaration import for_config

    for conf, layers in (
        ({"backends": {"a": {"command": "x"}}}, [1, 2, 3, 4, 6, 7]),  # breaker and retry are on by default
        ({"backends": {"a": {"command": "x"}}, "resilience": {"breaker": {"enabled": False}, "retry": {"enabled": False}}}, [1, 2, 3, 6, 7]),
        ({"mode": "reverse", "backends": {"a": {"command": "x"}}, "policy": {"rules": ["true"]}}, [1, 2, 3, 4, 5, 6, 7]),
    ):
        config = GatewayConfig.model_validate(conf)
        assert sorted(for_config(config).layers or ()) == layers == sorted(COMPOSITIONS[config.mode].layers_for(config))


def test_transparent_and_relay_are_not_gateway_compositions():
    from hopline.config.schema import GatewayConfig
    from hopline.modes import build

    with pytest.raises(ValueError, match="mode transparent is not a gateway mode"):
        build(GatewayConfig.model_validate({"mode": "transparent", "transparent": {"level": 2, "destinations": {"a": "http://10.0.0.1"}}}))
    assert COMPOSITIONS["relay"].factory(3) is None and COMPOSITIONS["sidecar"].unknown == "pass on"


def test_only_federation_keeps_watching_in_layer_2():
    from hopline.compose.federation import watch_members

    assert COMPOSITIONS["federation"].factory(2) is watch_members
    assert all(COMPOSITIONS[m].factory(2) is None for m in ("forward", "reverse", "sidecar"))
