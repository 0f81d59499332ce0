"""A mode of this test's own, composed from hopline's existing layers with no change under
``src/`` (issue 30 item 3): Forward mode's stack with another Layer 3 factory (names
namespaced ``{backend}-{name}``, URIs under ``lean://``) and without Layer 4 (no breaker,
no retry: only the request timeout bounds a call). It serves the official SDK client over
Streamable HTTP in both eras (handshake era, and 2026-07-28 with its per-request ``_meta``),
its declaration reads the same composition, and a configuration asking for the layer it
leaves out is refused when the gateway is built, and on reload.
"""

from __future__ import annotations

import asyncio

import pytest
import yaml

from hopline.compose import parts
from hopline.composition import Composition
from hopline.config.load import parse_config
from hopline.layers.routing.tables import Routes
from hopline.modes import forward
from hopline.modes.forward import GATEWAY_OPTIONAL, gateway_layers
from tests.conftest import PY
from tests.peers import MODES, bounded, client, text_of


# -- the mode: everything it is fits here ---------------------------------------------------------
def dotted(config, cursors, *, pass_on=False) -> Routes:
    """Layer 3: every backend's names as ``{backend}-{name}``, its URIs under ``lean://``."""
    r = config.routing
    return Routes.build(delimiter="-", max_name_length=r.max_name_length, uri_scheme="lean", pass_on=pass_on, cursors=cursors)


LEAN = Composition(
    mode="lean",
    section="(a test's own)",
    handshake="dual-handshake (composed capabilities)",
    layers=gateway_layers(dotted, "layers.routing.namespace"),
    optional=tuple(part for part in GATEWAY_OPTIONAL if part.number != 4),  # policy, but no resilience
)
# ---------------------------------------------------------------------------------------------------

BACKENDS = {"demo": {"command": PY, "args": ["-m", "hopline.demo"]}}


def conf(**top):
    return parse_config(yaml.safe_dump({"backends": BACKENDS, **top}))


@pytest.fixture
async def lean():
    """The LEAN gateway behind hopline's own HTTP listener (in this process, port 0)."""
    from hopline import runtime
    from hopline.compose.listen import session_table
    from hopline.transports import http_util as hu
    from hopline.transports.app import HoplineApp
    from hopline.transports.streamable_http_server import ListenerOptions, StreamableHttpListener

    config = conf(policy={"rules": ['mcp.tool.name != "echo"', 'mcp.kind != "tool"']})
    gateway = forward.build(config, LEAN)
    sessions = session_table(config.listen)
    app = HoplineApp(
        StreamableHttpListener(gateway, sessions, ListenerOptions(discover_versions=("2026-07-28",))),
        security=hu.SecurityPolicy(bound_host="127.0.0.1"),
        declaration=lambda: {},
    )
    bound: asyncio.Future = asyncio.get_running_loop().create_future()
    stop = asyncio.Event()
    serving = asyncio.create_task(
        runtime.serve_admin(app, host="127.0.0.1", port=0, on_ready=lambda h, p: bound.set_result(p), stop=stop)
    )
    try:
        port = await bounded(bound, 10)
        yield gateway, f"http://127.0.0.1:{port}/mcp"
    finally:
        stop.set()
        await serving
        await sessions.close_all()
        await gateway.aclose()


@pytest.mark.parametrize("era", MODES)
async def test_a_mode_composed_in_a_test_serves_the_sdk_client_in_both_eras(lean, era):
    gateway, url = lean
    async with client(url, era) as c:
        names = {t.name for t in (await bounded(c.list_tools())).tools}
        assert "demo-add" in names and not any("__" in n for n in names)  # this mode's Layer 3 named them
        assert "demo-echo" not in names  # Layer 5 (admitted) hides it
        assert text_of(await bounded(c.call_tool("demo-add", {"a": 2, "b": 3}))) == '{"sum":5}'
        resources = (await bounded(c.list_resources())).resources
        assert resources and all(str(r.uri).startswith("lean://") for r in resources)
    assert gateway.composition is LEAN and gateway.routes.namespace.delimiter == "-"
    assert gateway.pipeline.gates == [] and gateway.resilience.breakers is None and gateway.resilience.retry is None


async def test_the_layer_a_mode_leaves_out_is_refused_and_not_declared():
    with pytest.raises(ValueError, match=r"mode lean has no layer 4 \(resilience\)"):
        forward.build(conf(resilience={"breaker": {"enabled": True}}), LEAN)
    assert LEAN.layers_for(conf(resilience={"retry": {"enabled": True}}, policy={"rules": ["true"]})) == {1, 2, 3, 5, 6, 7}
    assert forward.COMPOSITION.layers_for(conf(resilience={"retry": {"enabled": True}})) == {1, 2, 3, 4, 6, 7}
    gateway = forward.build(first := conf(), LEAN)
    try:
        with pytest.raises(ValueError, match="no layer 4"):
            await gateway.reload(conf(resilience={"retry": {"enabled": True}}))
        assert gateway.reload_status["ok"] is False and gateway.config is first  # what runs is kept
    finally:
        await gateway.aclose()


def test_a_gateway_is_built_only_from_a_composition_that_routes():
    from hopline.modes import relay

    with pytest.raises(ValueError, match="mode relay builds no gateway"):
        forward.build(conf(), relay.COMPOSITION)
    with pytest.raises(ValueError, match="unknown methods are refuse or pass on"):
        Composition(mode="x", section="", handshake="", layers=(), unknown="answer")
