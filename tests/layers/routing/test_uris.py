"""UriMapper: reversible URI and URI-template rewrite (draft §8; mcp-wire.md §9 "Resource URIs and templates")."""

from __future__ import annotations

import string
from urllib.parse import quote

import pytest
from hypothesis import given, settings, strategies as st

from hopline.layers.routing.uris import UriMapper

M = UriMapper()
backends = st.text(alphabet=string.ascii_letters + string.digits + "_-", min_size=1, max_size=30)


@settings(max_examples=500)
@given(backends, st.text())
def test_round_trip_for_any_uri(backend, uri):
    exposed = M.expose(backend, uri)
    assert exposed == f"hopline://{backend}/{uri}"
    assert M.resolve(exposed) == (backend, uri)


def expand(template: str, value: str) -> str:
    """RFC 6570 level-1 expansion of ``{var}``: unreserved characters kept, the rest percent-encoded."""
    return template.replace("{var}", quote(value, safe="-._~"))


literal = st.text().map(lambda s: s.replace("{", "(").replace("}", ")"))  # template literal text


@settings(max_examples=300)
@given(backends, literal, literal, st.text(), st.sampled_from(["", "file:///", "db://x/", "{var}"]))
def test_expanded_template_resolves_to_the_expanded_original(backend, before, after, value, head):
    template = f"{head}{before}{{var}}{after}"
    exposed = M.expose_template(backend, template)
    assert M.resolve(exposed) == (backend, template)  # completion ref.uri may name the template itself
    assert M.resolve(expand(exposed, value)) == (backend, expand(template, value))


def test_examples():
    assert M.expose("fs", "file:///etc/hosts") == "hopline://fs/file:///etc/hosts"
    assert M.resolve("hopline://fs/file:///etc/hosts") == ("fs", "file:///etc/hosts")
    assert M.resolve("HopLine://fs/x") == ("fs", "x")  # schemes are case-insensitive
    assert M.resolve("hopline://fs/") == ("fs", "")
    assert M.resolve("hopline://fs//abs") == ("fs", "/abs")
    assert M.expose_template("gh", "repo://{owner}/{repo}") == "hopline://gh/repo://{owner}/{repo}"
    assert UriMapper("x-gw").resolve("x-gw://b/u") == ("b", "u")
    assert UriMapper("kgw").resolve("\u212agw://b/u") is None  # KELVIN SIGN lower-cases to "k": ASCII folding only


@pytest.mark.parametrize(
    "exposed",
    ["file:///etc/hosts", "hopline://fs", "hopline:///x", "hopline:/fs/x", "hopline//fs/x", "", "hopline://f s/x",
     "hopline://fs?q/x", "hopline://f%20/x", "other://fs/x", None, 7],
)
def test_not_ours_or_malformed_is_none(exposed):
    assert M.resolve(exposed) is None


def test_bad_backend_or_scheme_is_refused():
    for backend in ["", "a/b", "a b", "a@b", "a:1", None]:
        with pytest.raises(ValueError):
            M.expose(backend, "x")  # type: ignore[arg-type]
    for scheme in ["", "1x", "a b", "hop/line"]:
        with pytest.raises(ValueError):
            UriMapper(scheme)
    assert "hopline" in repr(M)
