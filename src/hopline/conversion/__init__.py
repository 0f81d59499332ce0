"""Conversion mode (draft §5.7): a REST API described by OpenAPI, presented as MCP tools.

The translation sublayer between Layer 1 and Layer 2. A backend configured with
``openapi: <file or URL>`` is served by an in-process MCP server whose tools are the
API's operations; the gateway connects to it like to any backend, so routing,
namespacing, policy, resilience and both MCP eras apply unchanged.

- :mod:`.errors`     ``SpecError``, what every step below raises for a spec it cannot use
- :mod:`.document`   read the spec (file or URL, JSON or YAML), check it, find the base URL
- :mod:`.refs`       inline local ``$ref`` s, cut cycles, OpenAPI 3.0 → JSON Schema
- :mod:`.operations` operations → tool names, descriptions, input schemas, annotations
- :mod:`.arguments`  validate a call's arguments; serialise them into an HTTP request
- :mod:`.invoke`     send it (httpx) and turn the response into a ``CallToolResult``
- :mod:`.server`     the in-process MCP server and the gateway's connector
- :mod:`.preflight`  the start-up check ``hopline check`` / ``hopline serve`` run
"""
