"""Namespace: backend-id gate, join/split bijection, name validity and aliases (draft §8.2; BAD-10)."""

from __future__ import annotations

import random
import string

import pytest
from hypothesis import given, settings, strategies as st

from hopline.layers.routing.namespace import Namespace

NS = Namespace()
CHARSET = string.ascii_letters + string.digits + "_-"


def valid_ids(ns: Namespace = NS) -> st.SearchStrategy[str]:
    def ok(b: str) -> bool:
        try:
            ns.check_backend_id(b)
        except ValueError:
            return False
        return True

    return st.text(alphabet=CHARSET, min_size=1, max_size=ns.max_backend_length).filter(ok)


@pytest.mark.parametrize("backend", ["github", "my-db", "_lead", "a", "A9", "x" * NS.max_backend_length, "a-_b", "a_b"])
def test_accepts_operator_ids(backend):
    NS.check_backend_id(backend)


@pytest.mark.parametrize(
    ("backend", "why"),
    [
        ("", "non-empty"),
        ("a__b", "delimiter"),
        ("__", "delimiter"),
        ("acme_", "runs into the delimiter"),  # F13: acme_ + _status == acme + __status
        ("a.b", "outside"),
        ("gïthub", "outside"),
        ("a b", "outside"),
        ("x" * (NS.max_backend_length + 1), "longer"),
        ("x" * 1024, "longer"),
    ],
)
@pytest.mark.req("NS-ID-NO-DELIMITER")
def test_refuses_ambiguous_or_unusable_ids(backend, why):
    with pytest.raises(ValueError, match=why):
        NS.check_backend_id(backend)


def test_refuses_non_string_id():
    with pytest.raises(ValueError):
        NS.check_backend_id(None)  # type: ignore[arg-type]


@pytest.mark.req("NS-SPLIT-FIRST")
def test_split_takes_the_first_delimiter():
    assert NS.join("github", "create_issue") == "github__create_issue"
    assert NS.split("github__create_issue") == ("github", "create_issue")
    assert NS.split("a__b__c") == ("a", "b__c")
    assert NS.split("a___x") == ("a", "_x")
    assert NS.split("plain") is None
    assert NS.split("__x") is None and NS.split("x__") is None and NS.split("") is None
    assert NS.split(None) is None  # type: ignore[arg-type]


@settings(max_examples=500)
@given(valid_ids(), st.text(min_size=1))
def test_join_split_round_trip(backend, name):
    assert NS.split(NS.join(backend, name)) == (backend, name)


def test_join_split_bijection_on_1e5_random_examples():
    """BAD-10 acceptance: 0 counterexamples in >= 10^5 examples (plain loop, seeded)."""
    rng = random.Random(20260728)
    alphabet = CHARSET + "._ü:/"
    checked = 0
    while checked < 100_000:
        backend = "".join(rng.choices(CHARSET, k=rng.randint(1, 12)))
        try:
            NS.check_backend_id(backend)
        except ValueError:
            continue
        name = "".join(rng.choices(alphabet, k=rng.randint(1, 12)))
        assert NS.split(NS.join(backend, name)) == (backend, name)
        checked += 1


@pytest.mark.parametrize(
    ("delimiter", "max_length", "bad"),
    [("-", 32, "a-b"), ("--", 40, "a-"), ("_", 40, "a_b"), ("xx", 64, "ax")],
)
@settings(max_examples=100)
@given(data=st.data())
def test_other_delimiters_round_trip(delimiter, max_length, bad, data):
    ns = Namespace(delimiter=delimiter, charset=r"[a-zA-Z0-9_-]", max_length=max_length)
    with pytest.raises(ValueError):
        ns.check_backend_id(bad)
    backend = data.draw(valid_ids(ns))
    name = data.draw(st.text(min_size=1))
    assert ns.split(ns.join(backend, name)) == (backend, name)


def test_is_valid_name():
    assert NS.is_valid_name("get_weather-2")
    assert NS.is_valid_name("x" * 64)
    for bad in ["", "x" * 65, "get.weather", "gеt", "a b", "a\u200bb", "a\n", None, 3]:
        assert not NS.is_valid_name(bad), bad


@settings(max_examples=300)
@given(valid_ids(), st.text(min_size=1, max_size=300))
def test_alias_is_valid_deterministic_and_keeps_the_prefix(backend, original):
    wanted = NS.join(backend, original)
    alias = NS.alias(wanted, backend, original)
    assert NS.is_valid_name(alias)
    assert alias == NS.alias(wanted, backend, original)
    assert NS.split(alias)[0] == backend  # the id limit leaves room for prefix + tag
    assert alias != NS.alias(wanted, backend, original + "x")


def test_bad_configurations_are_refused():
    with pytest.raises(ValueError):
        Namespace(delimiter="")
    with pytest.raises(ValueError):
        Namespace(delimiter=".")  # outside the charset: exposed names would be invalid
    with pytest.raises(ValueError):
        Namespace(charset="[a-z]")  # no "_" or digits for alias tags
    with pytest.raises(ValueError):
        Namespace(max_length=12)
    assert "max_length=64" in repr(NS)
