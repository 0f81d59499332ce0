"""UriMapper: reversible URI and URI-template rewrite (draft §8; mcp-wire.md §9 "Resource URIs and templates")."""

from __future__ import annotations

import string
from urllib.parse import quote

import pytest
from hypothesis import given, settings, strategies as st

from hopline.layers.routing.namespace import Namespace
from hopline.layers.routing.uris import UriMapper, is_ui

M = UriMapper()
backends = st.text(alphabet=string.ascii_letters + string.digits + "_-", min_size=1, max_size=30)


def _usable(backend: str, namespace: Namespace = Namespace()) -> bool:
    try:
        namespace.check_backend_id(backend)
    except ValueError:
        return False
    return True


backend_ids = backends.filter(_usable)  # what configuration admits (no "__", no trailing "_")


@settings(max_examples=500)
@given(backends, st.text().filter(lambda u: not is_ui(u)))
def test_round_trip_for_any_uri(backend, uri):
    exposed = M.expose(backend, uri)
    assert exposed == f"hopline://{backend}/{uri}"
    assert M.resolve(exposed) == (backend, uri)


@settings(max_examples=500)
@given(backend_ids, st.sampled_from(["ui://", "UI://", "uI://"]), st.text())
def test_a_ui_uri_stays_ui_with_the_backend_inside_and_round_trips(backend, scheme, rest):
    exposed = M.expose(backend, scheme + rest)
    assert exposed == f"{scheme}{backend}__{rest}"  # the scheme as the backend spelled it
    assert M.resolve(exposed) == (backend, scheme + rest)


@settings(max_examples=200)
@given(backend_ids, st.sampled_from(["-", "_", "__", "x-"]), st.text())
def test_ui_round_trip_holds_for_any_delimiter_configuration_admits(backend, delimiter, rest):
    namespace = Namespace(delimiter)
    if not _usable(backend, namespace):
        return
    mapper = UriMapper(delimiter=delimiter)
    assert mapper.resolve(mapper.expose(backend, "ui://" + rest)) == (backend, "ui://" + rest)


@settings(max_examples=200)
@given(backend_ids, st.text().map(lambda s: s.replace("{", "(").replace("}", ")")), st.text())
def test_an_expanded_ui_template_resolves_to_the_expanded_original(backend, before, value):
    template = f"ui://{before}{{var}}"
    exposed = M.expose_template(backend, template)
    assert exposed.startswith(f"ui://{backend}__")
    assert M.resolve(expand(exposed, value)) == (backend, expand(template, value))


def test_ui_examples_and_the_one_name_per_ui_resource():
    assert M.expose("a", "ui://weather/view.html") == "ui://a__weather/view.html"
    assert M.resolve("ui://a__weather/view.html") == ("a", "ui://weather/view.html")
    assert M.resolve("ui://a___x/y") == ("a", "ui://_x/y")  # ids never end in "_": the first "__" is ours
    assert M.resolve("ui://a__") == ("a", "ui://")
    assert M.resolve("ui://a__/x?q=1#f") == ("a", "ui:///x?q=1#f")
    assert M.resolve("ui://a__b__c/x") == ("a", "ui://b__c/x")  # a gateway behind a gateway: peeled one at a time
    assert M.expose("a", "hopline://b/x") == "hopline://a/hopline://b/x"  # only ui:// is special
    for forged in ["ui://weather/view.html", "ui://__x", "ui://a/b__c", "ui://a?b__c", "ui://a b__c", "ui:a__b"]:
        assert M.resolve(forged) is None, forged
    assert M.resolve("hopline://a/ui://weather/view.html") is None  # ui:// has one exposed form only
    assert M.resolve("hopline://a/UI://x") is None
    with pytest.raises(ValueError, match="MCP Apps"):
        UriMapper("ui")
    with pytest.raises(ValueError, match="MCP Apps"):
        UriMapper("UI")
    for delimiter in ["", "/", "a b", "::"]:
        with pytest.raises(ValueError):
            UriMapper(delimiter=delimiter)


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
