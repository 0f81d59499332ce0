"""OpenAPI operations → tool descriptions: names, schemas, $refs, cycles, collisions."""

from __future__ import annotations

from typing import Any

import pytest

from hopline.conversion.errors import SpecError
from hopline.conversion.operations import convert, tool_name
from hopline.conversion.refs import MAX_NODES, Resolver


def spec(paths: dict[str, Any], schemas: dict[str, Any] | None = None, **components: Any) -> dict[str, Any]:
    return {"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "paths": paths,
            "components": {"schemas": schemas or {}, **components}}


def op(**fields: Any) -> dict[str, Any]:
    return {"responses": {"200": {"description": "ok"}}, **fields}


def tools(document: dict[str, Any], allow: list[str] | None = None) -> dict[str, Any]:
    return {o.tool: o for o in convert(document, allow).operations}


# -- names ---------------------------------------------------------------------------------
def test_the_operation_id_is_the_name_sanitised_to_the_mcp_charset():
    found = tools(spec({"/a": {"get": op(operationId="list.pets v2!"), "post": op(operationId="ok_name-1")}}))
    assert set(found) == {"list_pets_v2", "ok_name-1"}


def test_without_an_operation_id_the_name_is_method_and_path():
    pet_id = [{"name": "petId", "in": "path", "required": True, "schema": {"type": "string"}}]
    found = tools(spec({"/pets/{petId}/toys": {"parameters": pet_id, "get": op(), "delete": op(operationId="   ")}}))
    assert set(found) == {"get_pets_petId_toys", "delete_pets_petId_toys"}


def test_names_are_unique_and_at_most_64_characters():
    long = "x" * 80
    found = tools(spec({"/a": {"get": op(operationId="same"), "put": op(operationId="same!")}, "/b": {"get": op(operationId=long), "put": op(operationId=long)}}))
    assert set(found) == {"same", "same_2", "x" * 64, "x" * 62 + "_2"}
    assert tool_name(None, "get", "/", set()) == "get"


# -- descriptions and annotations ----------------------------------------------------------------
def test_description_is_summary_then_description():
    found = tools(spec({"/a": {"get": op(operationId="a", summary="Short.", description="Longer text."), "post": op(operationId="b", deprecated=True)}}))
    assert found["a"].description == "Short.\n\nLonger text." and found["a"].annotations["title"] == "Short."
    assert found["b"].description == "(deprecated) POST /a"


def test_annotations_follow_the_http_method():
    found = tools(spec({"/a": {m: op(operationId=m) for m in ("get", "head", "put", "delete", "post", "patch")}}))
    assert found["get"].annotations == found["head"].annotations == {"readOnlyHint": True}
    assert found["put"].annotations == {"readOnlyHint": False, "idempotentHint": True}
    assert found["delete"].annotations == {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True}
    assert found["post"].annotations == {"readOnlyHint": False, "destructiveHint": False}
    assert found["patch"].annotations == {"readOnlyHint": False}


# -- parameters ------------------------------------------------------------------------------------
def test_parameters_become_properties_and_path_parameters_are_always_required():
    document = spec({"/pets/{id}": {
        "parameters": [{"name": "id", "in": "path", "schema": {"type": "integer"}}],  # `required` forgotten
        "get": op(operationId="get", parameters=[
            {"$ref": "#/components/parameters/Limit"},
            {"name": "X-Trace", "in": "header", "required": True, "schema": {"type": "string"}},
            {"name": "Authorization", "in": "header", "schema": {"type": "string"}},  # ignored: credentials are the operator's
            {"name": "session", "in": "cookie", "schema": {"type": "string"}},
        ]),
    }}, parameters={"Limit": {"name": "limit", "in": "query", "description": "at most", "schema": {"type": "integer"}}})
    o = tools(document)["get"]
    assert o.input_schema == {
        "type": "object",
        "properties": {"id": {"type": "integer"}, "limit": {"type": "integer", "description": "at most"}, "X-Trace": {"type": "string"}, "session": {"type": "string"}},
        "required": ["id", "X-Trace"],
        "additionalProperties": False,
    }
    assert [(p.arg, p.location) for p in o.params] == [("id", "path"), ("limit", "query"), ("X-Trace", "header"), ("session", "cookie")]


def test_operation_parameters_override_path_item_ones():
    document = spec({"/a": {"parameters": [{"name": "q", "in": "query", "schema": {"type": "string"}}],
                            "get": op(operationId="a", parameters=[{"name": "q", "in": "query", "required": True, "schema": {"type": "integer"}}])}})
    o = tools(document)["a"]
    assert o.input_schema["properties"] == {"q": {"type": "integer"}} and o.input_schema["required"] == ["q"]


def test_parameters_sharing_a_name_are_prefixed_by_location():
    document = spec({"/items/{id}": {"get": op(operationId="a", parameters=[
        {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}},
        {"name": "id", "in": "query", "schema": {"type": "string"}},
    ])}})
    o = tools(document)["a"]
    assert list(o.input_schema["properties"]) == ["path_id", "query_id"] and o.input_schema["required"] == ["path_id"]
    assert [(p.arg, p.name) for p in o.params] == [("path_id", "id"), ("query_id", "id")]


# -- request bodies ----------------------------------------------------------------------------------
def body(schema: dict[str, Any], required: bool = True, media: str = "application/json") -> dict[str, Any]:
    return {"required": required, "content": {media: {"schema": schema}}}


def test_an_object_body_is_flattened_and_its_required_fields_carried():
    document = spec({"/pets": {"post": op(operationId="create", requestBody=body({"$ref": "#/components/schemas/NewPet"}))}},
                    {"NewPet": {"type": "object", "required": ["name"], "properties": {"id": {"type": "integer", "readOnly": True}, "name": {"type": "string"}, "tag": {"type": "string"}}}})
    o = tools(document)["create"]
    assert o.input_schema["properties"] == {"name": {"type": "string"}, "tag": {"type": "string"}}  # readOnly `id` is not an input
    assert o.input_schema["required"] == ["name"]
    assert o.body is not None and o.body.arg is None and o.body.fields == ("name", "tag")


def test_an_optional_body_makes_its_fields_optional():
    document = spec({"/a": {"post": op(operationId="a", requestBody=body({"type": "object", "required": ["x"], "properties": {"x": {"type": "string"}}}, required=False))}})
    assert "required" not in tools(document)["a"].input_schema


def test_a_body_field_colliding_with_a_parameter_nests_the_body():
    document = spec({"/pets/{name}": {"put": op(operationId="put", parameters=[{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}],
                                               requestBody=body({"type": "object", "properties": {"name": {"type": "string"}}}))}})
    o = tools(document)["put"]
    assert set(o.input_schema["properties"]) == {"name", "body"} and o.input_schema["required"] == ["name", "body"]
    assert o.body is not None and o.body.arg == "body"


def test_a_parameter_called_body_moves_the_body_to_request_body():
    document = spec({"/a": {"post": op(operationId="a", parameters=[{"name": "body", "in": "query", "schema": {"type": "string"}}],
                                       requestBody=body({"type": "array", "items": {"type": "integer"}}))}})
    o = tools(document)["a"]
    assert o.input_schema["properties"]["request_body"] == {"type": "array", "items": {"type": "integer"}}
    assert o.body is not None and o.body.arg == "request_body"


def test_form_bodies_are_accepted_and_other_required_bodies_skip_the_operation():
    document = spec({"/form": {"post": op(operationId="form", requestBody=body({"type": "object", "properties": {"a": {"type": "string"}}}, media="application/x-www-form-urlencoded"))},
                     "/upload": {"post": op(operationId="upload", requestBody=body({"type": "string"}, media="application/octet-stream"))},
                     "/maybe": {"post": op(operationId="maybe", requestBody=body({"type": "string"}, required=False, media="text/plain"))}})
    converted = convert(document)
    assert [o.tool for o in converted.operations] == ["form", "maybe"]
    assert "only JSON and form bodies" in converted.skipped["POST /upload"]
    with pytest.raises(SpecError, match="'upload'.*only JSON and form bodies") as info:
        convert(document, ["upload"])
    assert info.value.key == "operations"


# -- $refs and cycles ---------------------------------------------------------------------------------
def test_a_self_recursive_schema_is_cut_after_one_level():
    schemas = {"Node": {"type": "object", "properties": {"value": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}}}}}
    out = Resolver(spec({}, schemas)).schema({"$ref": "#/components/schemas/Node"})
    assert out["properties"]["children"]["items"] == {"type": "object", "description": "recursive: Node (not expanded further)"}


def test_mutually_recursive_schemas_terminate():
    schemas = {"A": {"type": "object", "properties": {"b": {"$ref": "#/components/schemas/B"}}},
               "B": {"type": "object", "properties": {"a": {"$ref": "#/components/schemas/A"}}}}
    out = Resolver(spec({}, schemas)).schema({"$ref": "#/components/schemas/A"})
    assert out["properties"]["b"]["properties"]["a"]["description"] == "recursive: A (not expanded further)"


def test_shared_references_that_are_not_cycles_are_expanded_each_time():
    schemas = {"Money": {"type": "object", "properties": {"amount": {"type": "number"}}},
               "Order": {"type": "object", "properties": {"price": {"$ref": "#/components/schemas/Money"}, "tax": {"$ref": "#/components/schemas/Money"}}}}
    out = Resolver(spec({}, schemas)).schema({"$ref": "#/components/schemas/Order"})
    assert out["properties"]["price"] == out["properties"]["tax"] == schemas["Money"]


def test_an_exponential_diamond_is_refused_not_expanded_forever():
    schemas = {f"L{i}": {"type": "object", "properties": {"a": {"$ref": f"#/components/schemas/L{i + 1}"}, "b": {"$ref": f"#/components/schemas/L{i + 1}"}}} for i in range(30)}
    schemas["L30"] = {"type": "string"}
    with pytest.raises(SpecError, match=str(MAX_NODES)):
        Resolver(spec({}, schemas)).schema({"$ref": "#/components/schemas/L0"})


def test_ref_siblings_win_and_data_is_not_walked():
    schemas = {"Id": {"type": "string", "description": "an id"}}
    out = Resolver(spec({}, schemas)).schema({"type": "object", "properties": {
        "owner": {"$ref": "#/components/schemas/Id", "description": "the owner's id"},
        "$ref": {"type": "string"},  # a property that happens to be named $ref
    }, "example": {"$ref": "#/not/a/ref"}})
    assert out["properties"]["owner"] == {"type": "string", "description": "the owner's id"}
    assert out["properties"]["$ref"] == {"type": "string"} and out["example"] == {"$ref": "#/not/a/ref"}


def test_json_pointer_escapes_are_decoded():
    document = spec({}, {"a/b": {"type": "integer"}, "c~d": {"type": "boolean"}})
    resolver = Resolver(document)
    assert resolver.schema({"$ref": "#/components/schemas/a~1b"}) == {"type": "integer"}
    assert resolver.schema({"$ref": "#/components/schemas/c~0d"}) == {"type": "boolean"}


def test_openapi_3_0_spellings_become_json_schema():
    out = Resolver(spec({})).schema({"type": "integer", "nullable": True, "minimum": 0, "exclusiveMinimum": True, "maximum": 9, "exclusiveMaximum": False,
                                     "xml": {"name": "n"}, "discriminator": {"propertyName": "k"}})
    assert out == {"type": ["integer", "null"], "exclusiveMinimum": 0, "maximum": 9}


def test_an_undeclared_path_parameter_skips_the_operation():
    converted = convert(spec({"/pets/{petId}": {"get": op(operationId="a")}, "/ok": {"get": op(operationId="b")}}))
    assert [o.tool for o in converted.operations] == ["b"] and converted.skipped == {"GET /pets/{petId}": "path parameter {petId} is not declared"}


def test_broken_and_external_references_skip_the_operation():
    document = spec({"/a": {"get": op(operationId="missing", parameters=[{"$ref": "#/components/parameters/Nope"}])},
                     "/b": {"post": op(operationId="external", requestBody=body({"$ref": "other.yaml#/Pet"}))},
                     "/c": {"get": op(operationId="fine")}})
    converted = convert(document)
    assert [o.tool for o in converted.operations] == ["fine"]
    assert "names nothing" in converted.skipped["GET /a"] and "outside the document" in converted.skipped["POST /b"]


# -- the allow-list -------------------------------------------------------------------------------------
def test_the_allow_list_keeps_only_the_named_operations():
    document = spec({"/a": {"get": op(operationId="a"), "post": op(operationId="b")}, "/c": {"get": op(operationId="c")}})
    assert list(tools(document, ["c", "a"])) == ["a", "c"]


def test_an_allow_list_naming_unknown_operations_is_an_error():
    document = spec({"/a": {"get": op(operationId="listPets")}})
    with pytest.raises(SpecError, match=r"does not have: lsitPets \(the spec's: listPets\)") as info:
        convert(document, ["listPets", "lsitPets"])
    assert info.value.key == "operations"


def test_a_spec_without_operations_is_an_error():
    with pytest.raises(SpecError, match="no operations"):
        convert(spec({}))
