"""Transparent mode (draft §5.4): the ``transparent`` section.

hopline implements Transparent mode at **awareness level 1** (transport-aware: HTTP
method, path and headers; request and response bodies are streamed through unparsed)
and does not intercept traffic itself: the surrounding network does (DNS-based
interception, an L7 redirect such as an Envoy/Istio listener, or an iptables/nftables
REDIRECT), and the original destination reaches hopline as the request's ``Host``
(``destination: host``), in a header the interception layer sets (``destination:
header``), or from the accepted socket (``destination: socket``: ``SO_ORIGINAL_DST``, the
address the client dialled, which the kernel keeps across the redirect; its ``Host``
must then agree with it, ``check_host``). ``destinations`` is an allow-list from that
original destination to where it really is; a request for any other destination is
refused (421), so a client can never make hopline connect to a host of its choosing.

``rules`` are CEL allow rules over ``http`` (Layer 5, header-based filtering only):
``http.method``, ``http.path``, ``http.destination``, ``http.source`` (the client's
address), ``http.headers`` (lower-case names) and ``http.mcp_method``. A request is
forwarded iff one rule is true (no rules: all are). What a rule judges is what is
forwarded (``layers/policy/transparent.py``): a repeated header that a rule reads, or an
MCP routing header, is refused (400); ``mcp_method`` is the ``Mcp-Method`` header only
for a request that claims 2026-07-28 (which must then carry consistent mirror headers);
for any other request with a body the method is unknown, and ``unknown_method`` says
what happens then (default: refused, fail closed).
"""

from __future__ import annotations

import ipaddress
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from hopline.config.section import Loc, Section, raise_problems


def _socket_name(name: str) -> str:
    """``ip:port`` as the socket gives it (``[ip6]:port``, compressed); ValueError if it is not one."""
    host, _, port = name.rpartition(":")
    ip = ipaddress.ip_address(host[1:-1] if host.startswith("[") and host.endswith("]") else host)
    if (ip.version == 6) != host.startswith("[") or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(name)
    return f"[{ip.compressed}]:{int(port)}" if ip.version == 6 else f"{ip}:{int(port)}"


def _or_same(normal: Any, name: str) -> str:
    try:
        return normal(name)
    except ValueError:
        return name  # reported as not a destination


class MintingCA(Section):
    """A certificate and its key for ``tls: terminate`` (PEM files): the operator CA, or the certificate presented."""

    cert: str = Field(min_length=1, description="The certificate (PEM): the CA clients trust, or the one presented.")
    key: str = Field(min_length=1, description="Its private key (PEM, unencrypted), readable by hopline's uid only.")


class TransparentConfig(Section):
    """Transparent mode, awareness level 1 (no body parsing) or 2 (a gateway per destination)."""

    level: Literal[1, 2] = Field(
        1,
        description="Awareness level: 1 (transport-aware: headers and path, bodies streamed unread) or 2 "
        "(protocol-aware: a Reverse-mode gateway per destination, dual-handshaken, with this file's policy, "
        "resilience, observability and tool modes).",
    )
    destination: Literal["host", "header", "socket"] = Field(
        "host",
        description="How the original destination reaches hopline (the interception mechanism it expects): `host`, "
        "the Host header (DNS-based interception, or an L7 redirect that keeps Host); `header`, a header set by the "
        "interception layer; `socket`, recovered from the accepted connection with SO_ORIGINAL_DST (IPv4) / "
        "IP6T_SO_ORIGINAL_DST (IPv6), after an iptables/nftables REDIRECT or a mesh's redirect: `destinations` are "
        "then named ip:port ([ip6]:port) and hopline's own outbound connections must be excluded from the redirect "
        "(its uid, `-m owner ! --uid-owner`).",
    )
    check_host: bool = Field(
        True,
        description="With `destination: socket`: a request whose Host (and SNI, where hopline terminates TLS) does "
        "not name the connection's original destination (the same IP, or a name resolving to it, and the same port) "
        "is refused (421), so no client reaches one destination with another's name.",
    )
    header: str = Field(
        "x-original-destination",
        min_length=1,
        description="With `destination: header`: the header holding the original host[:port].",
    )
    destinations: dict[str, str] = Field(
        min_length=1,
        description="Original destination (host or host:port, as the client addressed it) → the real base URL (http or "
        "https) to forward to.",
    )
    paths: list[str] = Field(
        default_factory=lambda: ["/mcp"],
        min_length=1,
        description="Level 2: the destinations' MCP endpoint paths, each served by a gateway; other paths are refused "
        "(except /.well-known/, streamed unread).",
    )
    single_handshake: list[str] = Field(
        default_factory=list,
        description="Level 2: destinations whose connections are carried at level 1 instead (draft §7.1: the "
        "disposition is per connection): single-handshake passthrough, bodies streamed unread, only `rules` apply. "
        "Every other connection is dual-handshaken. Named as in `destinations`.",
    )
    sse_path: str | None = Field(
        "/sse",
        description="Level 2: the destinations' legacy HTTP+SSE stream path (MCP 2024-11-05 clients), served by a "
        "gateway whose backend is the destination's own SSE endpoint there (the client posts its messages to "
        "/messages, as the stream's endpoint event says); null: not served.",
    )
    rules: list[str] = Field(
        default_factory=list,
        description="CEL allow rules over `http` (method, path, destination, source, sni, headers, mcp_method; with "
        "`tls: passthrough` only destination, source and sni); none: allow all. A header a rule reads (or any, if a "
        "rule reads `http.headers` other than by a quoted name) is refused (400) when repeated, as are the MCP "
        "routing headers.",
    )
    unknown_method: Literal["refuse", "read_body", "allow"] = Field(
        "refuse",
        description="With rules that read `mcp_method`, a request whose method no trustworthy header gives (one that "
        "does not claim "
        "MCP-Protocol-Version 2026-07-28: the handshake era) is refused (403, fail closed), or its "
        "method is read from the JSON-RPC "
        "envelope of its body (`read_body`: at most `max_method_body` bytes, then forwarded byte for "
        'byte), or `allow`: the rules see "".',
    )
    max_method_body: int = Field(
        1024 * 1024,
        gt=0,
        description="With `unknown_method: read_body`: the largest body read for its method, in bytes (403 above).",
    )
    tls: Literal["plaintext", "terminated", "terminate", "passthrough"] = Field(
        "plaintext",
        description="The TLS disposition (declared): `plaintext` (hopline warns when the traffic crosses a network); "
        "`terminated`, by the surrounding infrastructure in front of hopline; `terminate`, by hopline itself: "
        "termination and re-origination, a certificate for the name the client asked for (SNI) minted on the fly "
        "from `ca` (the clients trust that CA), and hopline's own TLS to the destination (https, verified against the "
        "system's trust store: SSL_CERT_FILE); `passthrough`: the encrypted stream forwarded unread (level 1, "
        "`destination: socket`, rules over connection metadata only: the connection is judged on its original "
        "destination, source and SNI).",
    )
    ca: MintingCA | None = Field(
        None,
        description="With `tls: terminate`: the operator CA that signs the certificates hopline presents (needs "
        "cryptography: the auth extra).",
    )
    certificate: MintingCA | None = Field(
        None,
        description="With `tls: terminate`, instead of `ca`: one certificate (a wildcard, typically) and its key, "
        "presented to every client (one whose SNI it does not name sees a hostname mismatch).",
    )
    trusted_network: bool = Field(
        False,
        description="Allow forwarding in plaintext what arrived over TLS (tls: terminated or terminate, http:// "
        "destinations): only inside a trusted network boundary.",
    )
    max_body: int = Field(4 * 1024 * 1024, gt=0, description="Largest request body forwarded, in bytes (413 above).")
    connect_timeout: float = Field(10.0, gt=0, description="Seconds to connect to a destination (502 after).")

    @field_validator("destinations")
    @classmethod
    def _targets(cls, destinations: dict[str, str]) -> dict[str, str]:
        problems: list[tuple[Loc, str]] = []
        for name, url in destinations.items():
            parts = urlsplit(url)
            if (
                parts.scheme not in ("http", "https")
                or not parts.hostname
                or parts.path not in ("", "/")
                or parts.query
                or parts.username
            ):
                problems.append(
                    ((name,), "must be a base URL: http(s)://host[:port], without path, query or credentials")
                )
            if not name or any(c in name for c in "/ @?#"):
                problems.append(((name,), "a destination is a host or host:port, as in the Host header"))
        raise_problems(problems)
        return {name.lower(): url.rstrip("/") for name, url in destinations.items()}

    @model_validator(mode="after")
    def _socket_names(self) -> TransparentConfig:
        """With ``destination: socket`` a destination is the ip:port a client dials (named as recovered)."""
        if self.destination != "socket":
            return self
        named: dict[str, str] = {}
        problems: list[tuple[Loc, str]] = []
        for name, url in self.destinations.items():
            try:
                named[_socket_name(name)] = url
            except ValueError:
                why = "with destination: socket, a destination is the ip:port clients dial ([ip6]:port for IPv6)"
                problems.append((("destinations", name), why))
        raise_problems(problems)
        self.destinations = named
        self.single_handshake = [_or_same(_socket_name, name) for name in self.single_handshake]
        return self

    @field_validator("paths")
    @classmethod
    def _paths(cls, paths: list[str]) -> list[str]:
        problems = [
            ((i,), "a path starts with '/' and has no query")
            for i, p in enumerate(paths)
            if not p.startswith("/") or "?" in p or "#" in p
        ]
        raise_problems(problems)
        return [p.rstrip("/") or "/" for p in paths]

    @field_validator("sse_path")
    @classmethod
    def _sse_path(cls, path: str | None) -> str | None:
        if path is not None and (not path.startswith("/") or "?" in path or "#" in path or path.rstrip("/") == ""):
            raise ValueError("a path starts with '/' and has no query")
        return path.rstrip("/") if path is not None else None

    @field_validator("header")
    @classmethod
    def _lower(cls, header: str) -> str:
        return header.lower()

    @model_validator(mode="after")
    def _no_downgrade(self) -> TransparentConfig:
        problems: list[tuple[Loc, str]] = [
            (("single_handshake", i), f"{name} is not one of the destinations")
            for i, name in enumerate(self.single_handshake)
            if name.lower() not in self.destinations
        ]
        if self.single_handshake and self.level != 2:
            problems.append((("single_handshake",), "level 1 is single-handshake for every connection already"))
        if self.tls == "terminate" and (self.ca is None) == (self.certificate is None):
            problems.append(
                (
                    ("ca",),
                    "tls: terminate presents certificates minted from an operator CA (ca.cert, ca.key) or one "
                    "configured certificate (certificate.cert, certificate.key): give one of the two",
                )
            )
        for key in ("ca", "certificate"):
            if getattr(self, key) is not None and self.tls != "terminate":
                problems.append(((key,), f"{key} is used only with tls: terminate"))
        if self.tls == "passthrough":
            if self.level != 1:
                problems.append((("level",), "tls: passthrough reads no body: awareness level 1 only"))
            if self.destination != "socket":
                problems.append(
                    (("destination",), "tls: passthrough sees no Host or header: the destination comes from the socket")
                )
            from hopline.layers.policy.transparent import connection_only

            problems += [
                (
                    ("rules", i),
                    "tls: passthrough sees no HTTP: a rule may read http.destination, http.source and http.sni only "
                    "(header rules need tls: terminate)",
                )
                for i in connection_only(self.rules)
            ]
            plain = [name for name, url in self.destinations.items() if not url.startswith("https://")]
            if plain:
                problems.append(
                    (("destinations", plain[0]), "tls: passthrough forwards TLS: the destination is https://host:port")
                )
        raise_problems(problems)
        if self.tls in ("terminated", "terminate") and not self.trusted_network:
            plain = [name for name, url in self.destinations.items() if url.startswith("http://")]
            if plain:
                why = (
                    "TLS arrives (or is terminated here) but this destination is plaintext: that downgrades TLS; use "
                    "https, or set trusted_network: true inside a trusted network boundary"
                )
                raise_problems([(("destinations", plain[0]), why)])
        from hopline.layers.policy.transparent import compile_rules  # the CEL programs, checked when the file loads

        for i, expr in enumerate(self.rules):
            try:
                compile_rules([expr])
            except ImportError:  # the cel extra is not installed: config/extras.py reports it at transparent.rules
                break
            except ValueError as exc:
                problems.append((("rules", i), str(exc)))
        raise_problems(problems)
        return self
