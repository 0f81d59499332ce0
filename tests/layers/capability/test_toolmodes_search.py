"""Search mode: the agentgateway wire shape (seed 001), ranked search, no_match, policy.

Every test drives ``SearchMode`` through a pure ``FakeHost``; the same mode over a
real gateway is in ``test_toolmodes_gateway.py``.
"""

from __future__ import annotations

import json

import pytest

from hopline.jsonrpc import InvalidParams
from hopline.layers.capability.toolmodes import SearchMode
from hopline.layers.capability.toolmodes.index import IndexCache
from tests.layers.capability.toolhosts import FakeHost, text_result, tool

# The get_tool outputSchema exactly as the seed shows it on the wire.
SEED_OUTPUT_SCHEMA = {
    "type": "object",
    "properties": {
        "results": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "tool_description": {"type": "string"},
                    "args": {"type": "object", "description": "The input argument schema for the tool."},
                },
                "required": ["name", "tool_description", "args"],
            },
        },
        "status": {"type": "string", "description": "no_match means the lookup succeeded but found no tool."},
        "available_tools": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["results"],
}
FETCH = {"name": "fetch", "description": "Fetches a website and returns its content", "inputSchema": {"type": "object", "required": ["url"], "properties": {"url": {"type": "string", "description": "URL to fetch"}}}}

CATALOGUE = [
    FETCH,
    tool("fs__create_directory", "Create a new directory or ensure a directory exists.", path="string"),
    tool("fs__read_text_file", "Read the complete contents of a file from the file system as text.", path="string"),
    tool("fs__move_file", "Move or rename files and directories.", source="string", destination="string"),
    tool("github__create_issue", "Create a new issue in a GitHub repository", owner="string", repo="string", title="string"),
    tool("github__getFileContents", "Get the contents of a file or directory from a GitHub repository", owner="string", repo="string", path="string"),
    tool("gitlab__create_issue", "Create a new issue in a GitLab project", project_id="string", title="string"),
    tool("slack__slack_post_message", "Post a new message to a Slack channel", channel_id="string", text="string"),
    tool("admin__drop_database", "Permanently delete every table of the production database", database="string"),
]


def payload(result: dict) -> dict:
    """The structured content, after checking the text block carries the same JSON."""
    assert result["isError"] is False
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    return result["structuredContent"]


async def test_lists_exactly_get_tool_and_invoke_tool_in_the_seed_shape():
    mode = SearchMode()
    tools = await mode.tools(FakeHost([FETCH]))
    assert [t["name"] for t in tools] == ["get_tool", "invoke_tool"]
    get_tool, invoke_tool = tools
    assert get_tool["description"].endswith("Available tools: [fetch]")
    assert 'Hits return {"results": [...]}. Lookup misses return {"results": [], "status": "no_match", "available_tools": [...]}.' in get_tool["description"]
    assert get_tool["inputSchema"]["properties"]["name"] == {"type": "string", "description": "Exact tool name. Use a name you have already seen from this server in the current session."}
    assert get_tool["outputSchema"] == SEED_OUTPUT_SCHEMA
    assert invoke_tool == {
        "name": "invoke_tool",
        "description": "Invoke a tool by name with the given arguments. Use get_tool first to discover available tools and their required arguments.",
        "inputSchema": {
            "type": "object",
            "properties": {"name": {"type": "string", "description": "The name of the tool to invoke."}, "arguments": {"type": "object", "description": "The arguments to pass to the tool."}},
            "required": ["name"],
        },
    }
    assert "inputSchema" not in get_tool["description"] and "URL to fetch" not in json.dumps(tools)  # no schema up front


async def test_exact_lookup_returns_the_seed_result():
    result = await SearchMode().call(FakeHost([FETCH]), "get_tool", {"name": "fetch"})
    assert payload(result) == {"results": [{"name": "fetch", "tool_description": "Fetches a website and returns its content", "args": FETCH["inputSchema"]}]}


async def test_lookup_miss_is_no_match_with_the_available_tools():
    result = await SearchMode().call(FakeHost(CATALOGUE), "get_tool", {"name": "fetch_page"})
    assert payload(result) == {"results": [], "status": "no_match", "available_tools": [t["name"] for t in CATALOGUE]}


async def test_a_query_nothing_matches_is_no_match():
    result = await SearchMode().call(FakeHost(CATALOGUE), "get_tool", {"query": "zzz qqq"})
    assert payload(result)["status"] == "no_match"


@pytest.mark.parametrize(
    ("query", "best"),
    [
        ("create directory", "fs__create_directory"),
        ("rename a file", "fs__move_file"),
        ("open an issue on github", "github__create_issue"),
        ("new gitlab issue", "gitlab__create_issue"),
        ("file contents", "github__getFileContents"),  # camelCase name split, beside the description
        ("post message slack channel", "slack__slack_post_message"),
        ("Fetches a website", "fetch"),  # a description fragment
        # the words users say rather than the tools' own
        ("make a folder called backups", "fs__create_directory"),
        ("show me what's in notes/todo.md", "fs__read_text_file"),  # a path reads as "file"
        ("grab https://example.com/pricing for me", "fetch"),  # a URL as "url"
        ("say hi in #general", "slack__slack_post_message"),  # a #channel as "channel"
        ("file a ticket in gitlab", "gitlab__create_issue"),  # the backend the user names
        ("show me README.md from the octo/widgets repo on github", "github__getFileContents"),
    ],
)
async def test_ranked_search_puts_the_right_tool_first(query, best):
    result = payload(await SearchMode().call(FakeHost(CATALOGUE), "get_tool", {"query": query}))
    names = [r["name"] for r in result["results"]]
    assert names[0] == best


async def test_top_k_bounds_the_results_and_items_carry_the_schema():
    mode = SearchMode(top_k=2, max_top_k=3)
    host = FakeHost(CATALOGUE)
    default = payload(await mode.call(host, "get_tool", {"query": "create issue file directory"}))["results"]
    assert len(default) == 2
    asked = payload(await mode.call(host, "get_tool", {"query": "create issue file directory", "top_k": 50}))["results"]
    assert len(asked) == 3  # capped at max_top_k
    for item in asked:
        original = next(t for t in CATALOGUE if t["name"] == item["name"])
        assert item == {"name": original["name"], "tool_description": original["description"], "args": original["inputSchema"]}


async def test_name_wins_over_query_when_both_are_given():
    result = payload(await SearchMode().call(FakeHost(CATALOGUE), "get_tool", {"name": "fs__move_file", "query": "github issue"}))
    assert [r["name"] for r in result["results"]] == ["fs__move_file"]
    fallback = payload(await SearchMode().call(FakeHost(CATALOGUE), "get_tool", {"name": "no_such", "query": "github issue"}))
    assert fallback["results"][0]["name"] == "github__create_issue"


@pytest.mark.parametrize("arguments", [{}, {"name": 3}, {"query": ["x"]}, {"query": "x", "top_k": 0}, {"query": "x", "top_k": "2"}, {"query": "x", "top_k": True}])
async def test_bad_get_tool_arguments_are_tool_errors(arguments):
    result = await SearchMode().call(FakeHost(CATALOGUE), "get_tool", arguments)
    assert result["isError"] is True and "get_tool" in result["content"][0]["text"]


async def test_invoke_tool_calls_through_the_host():
    async def post(arguments):
        return text_result(f"posted {arguments['text']}")

    host = FakeHost(CATALOGUE, functions={"slack__slack_post_message": post})
    result = await SearchMode().call(host, "invoke_tool", {"name": "slack__slack_post_message", "arguments": {"channel_id": "C1", "text": "hi"}})
    assert result == text_result("posted hi")
    assert host.calls == [("slack__slack_post_message", {"channel_id": "C1", "text": "hi"})]
    assert await SearchMode().call(host, "invoke_tool", {"name": "fetch"}) == text_result("fetch ok")  # arguments may be left out
    assert host.calls[-1] == ("fetch", {})


@pytest.mark.parametrize("arguments", [{}, {"name": 1}, {"name": "fetch", "arguments": [1]}])
async def test_bad_invoke_tool_arguments_are_tool_errors(arguments):
    host = FakeHost(CATALOGUE)
    result = await SearchMode().call(host, "invoke_tool", arguments)
    assert result["isError"] is True and host.calls == []


async def test_other_names_are_not_the_modes():
    assert await SearchMode().call(FakeHost(CATALOGUE), "fetch", {}) is None


# -- policy: a hidden tool is absent everywhere, and invoking it is "unknown tool" -----------
HIDDEN = "admin__drop_database"


async def test_hidden_tool_is_absent_from_the_index_description():
    (get_tool, _invoke) = await SearchMode().tools(FakeHost(CATALOGUE, hidden={HIDDEN}))
    assert HIDDEN not in json.dumps(get_tool)
    (visible_get_tool, _invoke) = await SearchMode().tools(FakeHost(CATALOGUE))
    assert HIDDEN in visible_get_tool["description"]  # the check above can fail


async def test_hidden_tool_is_absent_from_lookup_and_from_search():
    mode = SearchMode()
    host = FakeHost(CATALOGUE, hidden={HIDDEN})
    miss = payload(await mode.call(host, "get_tool", {"name": HIDDEN}))
    assert miss["status"] == "no_match" and HIDDEN not in miss["available_tools"]
    for query in ("drop database", "permanently delete every table of the production database", HIDDEN):
        found = payload(await mode.call(host, "get_tool", {"query": query, "top_k": 20}))
        assert HIDDEN not in json.dumps(found)
    # the same queries do find it for a caller who may see it (the test can fail)
    seen = payload(await mode.call(FakeHost(CATALOGUE), "get_tool", {"query": "drop database"}))
    assert seen["results"][0]["name"] == HIDDEN


async def test_invoking_a_hidden_tool_is_answered_like_an_unknown_one():
    mode = SearchMode()
    host = FakeHost(CATALOGUE, hidden={HIDDEN})
    with pytest.raises(InvalidParams) as hidden:
        await mode.call(host, "invoke_tool", {"name": HIDDEN, "arguments": {"database": "prod"}})
    with pytest.raises(InvalidParams) as unknown:
        await mode.call(host, "invoke_tool", {"name": "admin__no_such_tool", "arguments": {}})
    assert hidden.value.code == unknown.value.code == -32602
    assert hidden.value.message == f"Unknown tool: {HIDDEN!r}" and unknown.value.message == "Unknown tool: 'admin__no_such_tool'"
    assert host.calls == []


async def test_two_callers_with_different_policies_share_nothing_they_may_not_see():
    mode = SearchMode()  # one mode, one cache, for the whole gateway
    admin, user = FakeHost(CATALOGUE, subject="admin"), FakeHost(CATALOGUE, hidden={HIDDEN}, subject="user")
    assert payload(await mode.call(admin, "get_tool", {"query": "drop database"}))["results"][0]["name"] == HIDDEN
    assert HIDDEN not in json.dumps(await mode.call(user, "get_tool", {"query": "drop database"}))
    assert mode.cache.builds == 2  # two catalogue versions, one index each


# -- the index is per catalogue version, shared across sessions -----------------------------
async def test_sessions_with_the_same_catalogue_share_one_index():
    cache = IndexCache()
    mode = SearchMode(cache=cache)
    for session in range(5):
        host = FakeHost([dict(t) for t in CATALOGUE], subject=f"user{session}")  # equal definitions, new objects
        await mode.call(host, "get_tool", {"query": "create issue"})
        await mode.call(host, "get_tool", {"name": "fetch"})
    assert cache.builds == 1 and cache.tokenised == len(CATALOGUE)


async def test_a_changed_tool_rebuilds_the_index_and_retokenises_only_that_tool():
    cache = IndexCache()
    mode = SearchMode(cache=cache)
    host = FakeHost(list(CATALOGUE))
    assert payload(await mode.call(host, "get_tool", {"query": "weather forecast"}))["status"] == "no_match"
    host.tools[1] = tool("fs__create_directory", "Create a directory. Also reports the weather forecast.", path="string")
    found = payload(await mode.call(host, "get_tool", {"query": "weather forecast"}))
    assert found["results"][0]["name"] == "fs__create_directory"
    assert cache.builds == 2 and cache.tokenised == len(CATALOGUE) + 1
    host.tools.append(tool("weather__forecast", "Forecast for a city", city="string"))  # list_changed: a new tool
    assert payload(await mode.call(host, "get_tool", {"name": "weather__forecast"}))["results"][0]["name"] == "weather__forecast"
    assert cache.builds == 3 and cache.tokenised == len(CATALOGUE) + 2
