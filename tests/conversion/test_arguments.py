"""Arguments → HTTP request parts: minimal validation and OpenAPI parameter styles."""

from __future__ import annotations

from typing import Any

from hopline.conversion.arguments import build, problem
from hopline.conversion.operations import convert


def operation(parameters: list[dict[str, Any]] | None = None, request_body: dict[str, Any] | None = None, path: str = "/x", method: str = "post"):
    o: dict[str, Any] = {"operationId": "op", "responses": {"200": {"description": "ok"}}}
    if parameters:
        o["parameters"] = parameters
    if request_body:
        o["requestBody"] = request_body
    return convert({"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "paths": {path: {method: o}}}).operations[0]


def param(name: str, where: str, schema: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"name": name, "in": where, "schema": schema, **({"required": True} if where == "path" else {}), **extra}


JSON_BODY = {"required": True, "content": {"application/json": {"schema": {
    "type": "object", "required": ["name"],
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}, "kind": {"type": "string", "enum": ["cat", "dog"]},
                   "owner": {"type": "object", "required": ["id"], "properties": {"id": {"type": "integer"}}, "additionalProperties": False},
                   "tags": {"type": "array", "items": {"type": "string"}}, "note": {"type": "string", "nullable": True},
                   "either": {"oneOf": [{"type": "integer"}, {"type": "boolean"}]}}}}}}


# -- validation ---------------------------------------------------------------------------------
def test_required_and_unknown_arguments_are_named_with_what_the_tool_takes():
    o = operation(request_body=JSON_BODY)
    assert problem(o, {}) == "missing required argument: name (this tool takes: name, age, kind, owner, tags, note, either)"
    assert problem(o, {"name": "x", "colour": 1}).startswith("unknown argument: colour")


def test_basic_types_are_checked_at_every_level():
    o = operation(request_body=JSON_BODY)
    assert problem(o, {"name": 3}) == "argument name must be string, got an integer"
    assert problem(o, {"name": "x", "age": True}) == "argument age must be integer, got a boolean"
    assert problem(o, {"name": "x", "age": 2.0}) is None  # an integral float is an integer
    assert problem(o, {"name": "x", "kind": "cow"}) == 'argument kind must be one of "cat", "dog"'
    assert problem(o, {"name": "x", "owner": {}}) == "argument owner is missing id"
    assert problem(o, {"name": "x", "owner": {"id": "1"}}) == "argument owner.id must be integer, got a string"
    assert problem(o, {"name": "x", "owner": {"id": 1, "x": 2}}) == "argument owner has unknown field x"
    assert problem(o, {"name": "x", "tags": ["a", 2]}) == "argument tags[1] must be string, got an integer"
    assert problem(o, {"name": "x", "note": None, "either": False}) is None
    assert problem(o, {"name": "x", "either": "no"}) == "argument either matches none of the shapes it may take"


# -- serialisation --------------------------------------------------------------------------------
def test_path_values_are_percent_encoded_so_they_cannot_change_the_path():
    o = operation([param("id", "path", {"type": "string"})], path="/items/{id}", method="get")
    assert build(o, {"id": "../admin?x=1#f"}).path == "/items/..%2Fadmin%3Fx%3D1%23f"
    assert build(o, {"id": "é ü"}).path == "/items/%C3%A9%20%C3%BC"


def test_path_styles_label_and_matrix_and_arrays():
    o = operation([param("a", "path", {"type": "array"}), param("b", "path", {"type": "string"}, style="label"), param("c", "path", {"type": "integer"}, style="matrix")],
                  path="/{a}/{b}/{c}", method="get")
    assert build(o, {"a": [1, True], "b": "x", "c": 5}).path == "/1,true/.x/;c=5"


def test_query_styles():
    o = operation([
        param("ids", "query", {"type": "array"}),
        param("csv", "query", {"type": "array"}, explode=False),
        param("pipes", "query", {"type": "array"}, style="pipeDelimited"),
        param("filter", "query", {"type": "object"}, style="deepObject", explode=True),
        param("flag", "query", {"type": "boolean"}),
        {"name": "doc", "in": "query", "content": {"application/json": {"schema": {"type": "object"}}}},
    ], method="get")
    request = build(o, {"ids": [1, 2], "csv": ["a", "b"], "pipes": [1, 2], "filter": {"color": "red"}, "flag": False, "doc": {"a": 1}})
    assert request.query == [("ids", "1"), ("ids", "2"), ("csv", "a,b"), ("pipes", "1|2"), ("filter[color]", "red"), ("flag", "false"), ("doc", '{"a":1}')]


def test_headers_and_cookies():
    o = operation([param("X-Ids", "header", {"type": "array"}), param("sid", "cookie", {"type": "string"}), param("theme", "cookie", {"type": "string"})], method="get")
    request = build(o, {"X-Ids": [1, 2], "sid": "a b;c", "theme": "dark"})
    assert request.headers == {"X-Ids": "1,2", "Cookie": "sid=a%20b%3Bc; theme=dark"}


def test_a_flattened_body_holds_only_its_own_fields():
    o = operation([param("dry", "query", {"type": "boolean"})], JSON_BODY)
    request = build(o, {"dry": True, "name": "Rex", "tags": ["a"]})
    assert request.has_json and request.json == {"name": "Rex", "tags": ["a"]} and request.query == [("dry", "true")]


def test_an_optional_flattened_body_is_not_sent_without_fields():
    o = operation(request_body={"content": {"application/json": {"schema": {"type": "object", "properties": {"a": {"type": "string"}}}}}})
    assert not build(o, {}).has_json
    assert build(o, {"a": "x"}).json == {"a": "x"}


def test_a_nested_body_is_sent_as_given_even_when_it_is_null():
    o = operation(request_body={"required": True, "content": {"application/merge-patch+json": {"schema": {"type": ["object", "null"]}}}})
    request = build(o, {"body": None})
    assert request.has_json and request.json is None
    assert o.body is not None and o.body.media_type == "application/merge-patch+json"


def test_a_form_body():
    o = operation(request_body={"content": {"application/x-www-form-urlencoded": {"schema": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "boolean"}}}}}})
    request = build(o, {"a": "x y", "b": True})
    assert request.form == {"a": "x y", "b": "true"} and not request.has_json
