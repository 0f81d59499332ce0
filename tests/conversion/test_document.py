"""Reading a spec: files and URLs, JSON and YAML, what is refused, the base URL."""

from __future__ import annotations

import pytest

from hopline.conversion.document import base_url_for, load_document, parse_document
from hopline.conversion.errors import SpecError
from tests.conftest import SERVERS


def test_yaml_and_json_files_load(tmp_path):
    assert load_document(str(SERVERS / "petstore.openapi.yaml"))["info"]["title"] == "Test pet store"
    (tmp_path / "s.json").write_text('{"openapi": "3.0.3", "info": {"title": "j", "version": "1"}, "paths": {}}')
    assert load_document("s.json", str(tmp_path))["info"]["title"] == "j"  # relative to the config's directory


def test_a_missing_file_says_so():
    with pytest.raises(SpecError, match="cannot read the spec file nope.yaml: No such file"):
        load_document("nope.yaml", "/nonexistent-dir")


@pytest.mark.parametrize(("raw", "message"), [
    (b"openapi: [unclosed", "not valid JSON or YAML"),
    (b"- a\n- b\n", "expected a mapping"),
    (b"name: a gateway config\nbackends: {}\n", "not an OpenAPI 3.x document"),
    (b"openapi: 2.0\npaths: {}\n", "not an OpenAPI 3.x document"),
    (b"swagger: '2.0'\npaths: {}\n", "Swagger 2.0; only OpenAPI 3.0 and 3.1"),
    (b"openapi: 3.1.0\npaths: [1]\n", "`paths` must be a mapping"),
    (b"\xff\xfe", "not UTF-8"),
])
def test_documents_that_are_not_openapi_3_are_refused(raw, message):
    with pytest.raises(SpecError, match=message):
        parse_document(raw)


def test_a_spec_url_that_fails_is_reported_without_the_url():
    with pytest.raises(SpecError) as info:
        load_document("http://127.0.0.1:9/openapi.json?token=s3cret", timeout=2)
    assert "ConnectError" in str(info.value) and "s3cret" not in str(info.value) and "127.0.0.1" not in str(info.value)


def test_the_base_url():
    doc = {"servers": [{"url": "https://{region}.api.example/{v}", "variables": {"region": {"default": "eu"}, "v": {"default": "v2"}}}]}
    assert base_url_for(doc, None, "spec.yaml") == "https://eu.api.example/v2"
    assert base_url_for(doc, "http://localhost:9000/", "spec.yaml") == "http://localhost:9000"
    assert base_url_for({"servers": [{"url": "/api"}]}, None, "https://api.example/docs/openapi.json") == "https://api.example/api"
    with pytest.raises(SpecError, match="relative and the spec is a file; set `base_url`"):
        base_url_for({"servers": [{"url": "/api"}]}, None, "spec.yaml")
    with pytest.raises(SpecError, match="no servers") as info:
        base_url_for({}, None, "spec.yaml")
    assert info.value.key == "base_url"
    with pytest.raises(SpecError, match="without a default"):
        base_url_for({"servers": [{"url": "https://{host}/"}]}, None, "spec.yaml")
