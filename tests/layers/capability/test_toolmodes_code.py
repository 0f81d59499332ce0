"""Code mode: ``run_code`` in the Monty sandbox — the happy path, the in-sandbox API,
policy, and escape attempts (imports, files, network, processes, environment,
infinite loops, memory bombs, huge output, hidden tools).

Limits are small here so that every escape ends fast; each test is bounded by the
suite's timeout and by the sandbox's own wall clock.
"""

from __future__ import annotations

import asyncio
import json
import os
import time

import psutil
import pytest

from hopline.jsonrpc import UnavailableError
from hopline.layers.capability.toolmodes import CodeMode, Limits, sandbox
from hopline.transports.sandbox_pool import SandboxPool
from tests.layers.capability.toolhosts import FakeHost, text_result, tool

HIDDEN = "admin__drop_database"


async def _weather(arguments):
    return {"content": [{"type": "text", "text": "{\"temp\": 21}"}], "structuredContent": {"city": arguments["city"], "temp": 21}, "isError": False}


async def _news(arguments):
    return text_result(f"headline for {arguments['city']}")


async def _broken(arguments):
    return {"content": [{"type": "text", "text": "backend says no"}], "isError": True}


async def _unavailable(arguments):
    raise UnavailableError("backend weather is unavailable", backend="weather")


CATALOGUE = [
    tool("weather__forecast", "Weather forecast for a city", city="string"),
    tool("news__headlines", "Top news headlines for a city", city="string"),
    tool("weather__broken", "A tool that fails"),
    tool("weather__down", "A tool whose backend is down"),
    tool(HIDDEN, "Permanently delete the production database"),
]
FUNCTIONS = {"weather__forecast": _weather, "news__headlines": _news, "weather__broken": _broken, "weather__down": _unavailable}
FAST = Limits(timeout=2.0, memory=16 * 1024 * 1024, output=4096, max_calls=5)


def host() -> FakeHost:
    return FakeHost(CATALOGUE, hidden={HIDDEN}, functions=FUNCTIONS)


async def run(code: str, limits: Limits = FAST, on: FakeHost | None = None) -> dict:
    mode = CodeMode(limits=limits, workers=sandbox.pool(limits, SandboxPool))
    try:
        return await mode.call(on or host(), "run_code", {"code": code})
    finally:
        await mode.aclose()  # its spare worker too


def ok(result: dict):
    assert result["isError"] is False, result["content"][0]["text"]
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    return result["structuredContent"]


def failed(result: dict) -> str:
    assert result["isError"] is True
    return result["content"][0]["text"]


async def test_lists_one_run_code_tool_with_the_callers_tool_names():
    (only,) = await CodeMode(workers=sandbox.pool(Limits(), SandboxPool)).tools(host())
    assert only["name"] == "run_code" and only["inputSchema"]["required"] == ["code"]
    assert "weather__forecast" in only["description"] and HIDDEN not in json.dumps(only)
    assert "7 s" in only["description"]  # the seed's default timeout


async def test_code_calls_two_tools_and_returns_their_combined_result():
    h = host()
    out = ok(await run("w = call_tool('weather__forecast', {'city': 'Oslo'})\nn = call_tool('news__headlines', city='Oslo')\nprint('got both')\n{'temp': w['temp'], 'news': n}", on=h))
    assert out == {"result": {"temp": 21, "news": "headline for Oslo"}, "output": "got both\n"}
    assert h.calls == [("weather__forecast", {"city": "Oslo"}), ("news__headlines", {"city": "Oslo"})]


async def test_await_style_calls_work_too():
    out = ok(await run("a = await call_tool('weather__forecast', {'city': 'Rome'})\nasync def f():\n    return await call_tool('news__headlines', {'city': 'Rome'})\n[a['city'], await f()]"))
    assert out["result"] == ["Rome", "headline for Rome"]


async def test_search_get_and_list_tools_inside_the_sandbox_see_only_visible_tools():
    out = ok(await run("[t['name'] for t in search_tools('weather forecast city', 2)], get_tool('news__headlines')['args'], get_tool('nope'), list_tools()"))
    found, args, missing, names = out["result"]
    assert found[0] == "weather__forecast" and args == CATALOGUE[1]["inputSchema"] and missing is None
    assert HIDDEN not in names and "weather__forecast" in names
    hidden = ok(await run(f"search_tools('permanently delete production database', 10), get_tool('{HIDDEN}')"))
    assert HIDDEN not in json.dumps(hidden)


async def test_a_hidden_tool_is_unknown_inside_the_sandbox_too():
    h = host()
    caught = ok(await run(f"try:\n    call_tool('{HIDDEN}', {{}})\nexcept LookupError as e:\n    r = str(e)\nr", on=h))
    unknown = ok(await run("try:\n    call_tool('admin__no_such', {})\nexcept LookupError as e:\n    r = str(e)\nr", on=h))
    assert caught["result"] == f"Unknown tool: {HIDDEN!r}" and unknown["result"] == "Unknown tool: 'admin__no_such'"
    assert f"Unknown tool: {HIDDEN!r}" in failed(await run(f"call_tool('{HIDDEN}')", on=h))
    assert h.calls == []


async def test_tool_errors_and_unavailable_backends_raise_in_the_sandbox():
    assert ok(await run("try:\n    call_tool('weather__broken')\nexcept RuntimeError as e:\n    r = str(e)\nr"))["result"] == "tool weather__broken failed: backend says no"
    assert "backend weather is unavailable" in failed(await run("call_tool('weather__down')"))


async def test_wrong_api_use_is_a_python_error_in_the_sandbox():
    assert "TypeError" in failed(await run("call_tool()"))
    assert "TypeError" in failed(await run("call_tool('weather__forecast', [1])"))
    assert "NameError" in failed(await run("launch_missiles('now')"))
    assert "NameError" in failed(await run("some_undefined_name"))
    assert "SyntaxError" in failed(await run("def broken(:\n"))


async def test_too_many_tool_calls_stop_at_the_limit():
    h = host()
    text = failed(await run("for i in range(50):\n    call_tool('news__headlines', {'city': str(i)})", on=h))
    assert "more than 5 tool calls" in text and len(h.calls) == 5


# -- escape attempts --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("import os\nos.listdir('/')", "PermissionError"),
        ("open('/etc/passwd').read()", "PermissionError"),
        ("from pathlib import Path\nPath('/etc/hostname').read_text()", "PermissionError"),
        ("open('/tmp/hopline-escape', 'w').write('x')", "PermissionError"),
        ("import os\nos.getenv('HOME')", "not supported"),
        ("import os\nos.environ['PATH']", "Error"),
        ("import socket\nsocket.create_connection(('127.0.0.1', 80))", "ModuleNotFoundError"),
        ("import urllib.request", "ModuleNotFoundError"),
        ("import subprocess\nsubprocess.run(['id'])", "ModuleNotFoundError"),
        ("import os\nos.system('id')", "AttributeError"),
        ("import ctypes", "ModuleNotFoundError"),
        ("import sys\nsys.modules", "AttributeError"),
        ("__import__('os').system('id')", "NameError"),
        ("().__class__.__bases__[0].__subclasses__()", "AttributeError"),
        ("def f(n):\n    return f(n + 1)\nf(0)", "RecursionError"),
    ],
)
async def test_no_file_system_network_process_or_environment(code, expected):
    text = failed(await run(code))
    assert expected in text
    assert not os.path.exists("/tmp/hopline-escape")


async def test_an_infinite_loop_ends_at_the_wall_clock_limit():
    started = time.monotonic()
    text = failed(await run("while True:\n    pass", Limits(timeout=1.0)))
    assert "TimeoutError" in text and time.monotonic() - started < 5


async def test_the_wall_clock_limit_includes_time_spent_in_tool_calls():
    never = asyncio.Event()

    async def hang(arguments):
        await never.wait()

    h = FakeHost([tool("slow__hang", "never answers")], functions={"slow__hang": hang})
    started = time.monotonic()
    text = failed(await run("call_tool('slow__hang')", Limits(timeout=0.5), on=h))
    assert "TimeoutError" in text and "0.5 s" in text and time.monotonic() - started < 4


async def test_sleeping_past_the_limit_is_stopped():
    started = time.monotonic()
    assert "Error" in failed(await run("import time\ntime.sleep(60)", Limits(timeout=0.5)))
    assert time.monotonic() - started < 4


@pytest.mark.parametrize("code", ["x = 'a' * (10 ** 10)\nlen(x)", "x = []\nwhile True:\n    x.append([1] * 10000)", "x = [0] * (10 ** 9)", "x = {i: str(i) for i in range(10 ** 8)}"])
async def test_memory_bombs_hit_the_memory_limit(code):
    text = failed(await run(code, Limits(timeout=5.0, memory=16 * 1024 * 1024)))
    assert "MemoryError" in text


async def test_huge_printed_output_is_capped():
    result = await run("for i in range(10 ** 6):\n    print('x' * 100)", Limits(timeout=2.0, output=4096))
    text = failed(result)
    assert len(text.encode()) < 4096 + 1024 and len(result["structuredContent"]["output"].encode()) <= 4096 + 64


async def test_a_huge_result_is_refused():
    text = failed(await run("'y' * 100000", Limits(timeout=2.0, output=4096)))
    assert "the limit is 4096" in text


async def test_code_over_the_size_limit_is_not_run():
    h = host()
    text = failed(await run("call_tool('news__headlines', {'city': 'x'})\n" + "#" * 70_000, Limits(max_code=64 * 1024), on=h))
    assert "code is" in text and h.calls == []


async def test_runs_are_isolated_from_each_other():
    await run("leaked = 'secret of caller one'")
    assert "NameError" in failed(await run("leaked"))


def _running_children() -> set[int]:
    """Live children of this process (a killed worker may stay a zombie until reaped)."""
    alive = set()
    for child in psutil.Process().children(recursive=True):
        try:
            if child.status() != psutil.STATUS_ZOMBIE:
                alive.add(child.pid)
        except psutil.NoSuchProcess:
            pass
    return alive


def _exit_of(pids: set[int], timeout: float = 5.0) -> set[int]:
    """Of ``pids``, those still running after waiting up to ``timeout`` for them to exit
    (the pool kills its worker on the way out; the exit itself is asynchronous)."""
    procs = []
    for pid in pids:
        try:
            procs.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            pass
    _gone, alive = psutil.wait_procs(procs, timeout=timeout)
    still = set()
    for p in alive:
        try:
            if p.status() != psutil.STATUS_ZOMBIE:
                still.add(p.pid)
        except psutil.NoSuchProcess:  # exited since wait_procs looked
            pass
    return still


async def test_no_worker_process_outlives_a_run():
    before = _running_children()
    await run("while True:\n    pass", Limits(timeout=0.5))
    assert _exit_of(_running_children() - before) == set()  # the looping worker was killed
    await run("1 + 1")
    assert _exit_of(_running_children() - before) == set()


async def test_the_gateway_process_never_executes_the_code(tmp_path):
    """The snippet's side effects would show in this process if it ran here: a
    global, a module attribute, a file. None appears."""
    marker = tmp_path / "ran-here"
    code = f"import sys\nsys.hopline_marker = 1\nopen({str(marker)!r}, 'w').write('x')"
    failed(await run(code))
    import sys

    assert not hasattr(sys, "hopline_marker") and not marker.exists()


async def test_non_json_results_are_made_json():
    out = ok(await run("{1, 2, 3}, b'ab', (1, 2)"))
    assert out["result"] == [[1, 2, 3], "YWI=", [1, 2]]


async def test_not_run_code_is_not_the_modes():
    assert await CodeMode(workers=sandbox.pool(Limits(), SandboxPool)).call(host(), "weather__forecast", {}) is None
    assert failed(await CodeMode(workers=sandbox.pool(Limits(), SandboxPool)).call(host(), "run_code", {"code": 42})) == "run_code: 'code' must be a string"


async def test_sandbox_run_reports_calls_and_elapsed_time():
    async def double(x):
        return 2 * x

    workers = sandbox.pool(FAST, SandboxPool)
    outcome = await sandbox.run("double(2) + double(3)", {"double": double}, FAST, workers)
    await workers.aclose()
    assert outcome.ok and outcome.value == 10 and outcome.calls == 2 and 0 < outcome.elapsed < 2
