"""MCP Apps links (apps.py): a tool's ``_meta`` UI links and a read App's contents, rewritten to the routed ``ui://`` URI."""

from __future__ import annotations

from hopline.layers.routing.apps import expose_read, expose_tool, expose_tools, hide_links
from hopline.layers.routing.uris import UriMapper

M = UriMapper()


def test_both_keys_are_rewritten_and_the_rest_of_meta_kept():
    tool = {"name": "t", "_meta": {"ui": {"resourceUri": "ui://w/v.html", "visibility": ["app"]}, "ui/resourceUri": "ui://w/v.html", "x": 1}}
    assert expose_tool(tool, "a", M) == {
        "name": "t",
        "_meta": {"ui": {"resourceUri": "ui://a__w/v.html", "visibility": ["app"]}, "ui/resourceUri": "ui://a__w/v.html", "x": 1},
    }
    assert tool["_meta"]["ui"]["resourceUri"] == "ui://w/v.html"  # the input is not changed
    assert expose_tool({"_meta": {"ui/resourceUri": "UI://w"}}, "a", M) == {"_meta": {"ui/resourceUri": "UI://a__w"}}


def test_nothing_to_rewrite_is_none():
    for tool in [{}, {"_meta": None}, {"_meta": {"ui": {"visibility": ["app"]}}}, {"_meta": {"ui": "x"}},
                 {"_meta": {"ui": {"resourceUri": "https://x/app"}}},  # not ui://: a host refuses it, as directly
                 {"_meta": {"ui/resourceUri": 7}}, "not a tool"]:
        assert expose_tool(tool, "a", M) is None, tool
    tools = [{"name": "plain"}]
    assert expose_tools(tools, "a", M) is tools


def test_a_read_names_only_ui_contents_by_the_routed_uri():
    result = {"contents": [{"uri": "ui://w/v.html", "text": "<html>"}, {"uri": "test://x", "text": "t"}], "_meta": {}}
    assert expose_read(result, "b", M) == {"contents": [{"uri": "ui://b__w/v.html", "text": "<html>"}, {"uri": "test://x", "text": "t"}], "_meta": {}}
    assert expose_read({"contents": [{"uri": "test://x"}]}, "b", M) is None
    assert expose_read({"contents": "x"}, "b", M) is None
    assert expose_read(None, "b", M) is None


def test_hidden_links_are_dropped_and_the_rest_of_ui_kept():
    tool = {"name": "t", "_meta": {"ui": {"resourceUri": "ui://a__v", "visibility": ["app"]}, "ui/resourceUri": "ui://a__v"}}
    assert hide_links(tool, lambda uri: True) is None
    assert hide_links(tool, lambda uri: False) == {"name": "t", "_meta": {"ui": {"visibility": ["app"]}}}
    assert hide_links({"name": "t", "_meta": {"ui": {"resourceUri": "ui://a__v"}}}, lambda uri: False) == {"name": "t"}
    assert hide_links({"_meta": {"ui/resourceUri": "ui://a__v", "x": 1}}, lambda uri: uri != "ui://a__v") == {"_meta": {"x": 1}}
    assert hide_links({"_meta": {"ui": {"resourceUri": "https://x"}}}, lambda uri: False) is None  # not a link we route
    assert hide_links({"name": "t"}, lambda uri: False) is None
