"""IdMap: many clients' ids onto one backend id space and back, exactly (hypothesis)."""

from __future__ import annotations

from hypothesis import given, strategies as st

from hopline.layers.session.idmap import IdMap

ids = st.one_of(st.integers(min_value=-5, max_value=5), st.sampled_from(["1", "0", "a", ""]))
owners = st.sampled_from(["A", "B", "C"])


@given(st.lists(st.tuples(owners, ids, st.one_of(st.none(), ids)), max_size=60, unique_by=lambda t: (t[0], t[1], type(t[1]))))
def test_round_trip_is_exact_and_never_crosses_owners(requests):
    m = IdMap()
    sent = [(owner, cid, tok, *m.outbound(owner, cid, tok)) for owner, cid, tok in requests]
    backend_ids = [bid for *_, bid, _ in sent]
    assert len(set(backend_ids)) == len(backend_ids)  # injective toward the backend
    for owner, cid, tok, bid, new_tok in sent:
        if tok is not None:
            assert m.progress_owner(new_tok).owner == owner
        entry = m.answered(bid)
        assert entry.owner == owner and entry.client_id == cid and type(entry.client_id) is type(cid)
        assert entry.progress_token == tok
    assert m.by_backend_id == {} and m.by_client == {} and m.tokens == {}


def test_duplicate_and_unknown_answers_are_refused():
    m = IdMap()
    bid, _ = m.outbound("A", 1)
    assert m.answered(bid) is not None
    assert m.answered(bid) is None  # a duplicate response goes nowhere
    assert m.answered(999) is None
    assert m.answered("1") is None  # a backend answering with another JSON type


def test_cancel_lookup_is_per_owner():
    m = IdMap()
    bid, _ = m.outbound("A", 7)
    assert m.backend_id_for("A", 7) == bid
    assert m.backend_id_for("B", 7) is None  # B cannot cancel A's request
    assert m.backend_id_for("A", "7") is None
    assert m.backend_id_for("A", [1]) is None  # unhashable garbage


def test_server_requests_answer_only_to_their_owner():
    m = IdMap()
    ours = m.server_request("A", "srv-1")
    assert m.server_request_answered("B", ours) is None
    assert m.server_request_answered("A", ours) == "srv-1"
    assert m.server_request_answered("A", ours) is None


def test_forget_owner_returns_its_outstanding_ids():
    m = IdMap()
    a1, _ = m.outbound("A", 1)
    a2, _ = m.outbound("A", 2, "tok")
    b1, _ = m.outbound("B", 1)
    assert sorted(m.forget_owner("A")) == sorted([a1, a2])
    assert list(m.by_backend_id) == [b1]


def test_backend_ids_are_random_integers_in_the_javascript_safe_range():
    m = IdMap()
    ids = [m.outbound("A", n, "tok")[0] for n in range(200)]
    assert all(type(i) is int and 0 < i < 2**53 for i in ids) and len(set(ids)) == 200
    assert len({y - x for x, y in zip(ids, ids[1:])}) > 1  # not a counter: the next id cannot be guessed
