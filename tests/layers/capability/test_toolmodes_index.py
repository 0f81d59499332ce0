"""The search index: tokenisation, ranking, catalogue versions and the shared cache."""

from __future__ import annotations

import pytest

from hopline.layers.capability.toolmodes.index import (
    IndexCache,
    document,
    tokens,
    words,
)
from tests.layers.capability.toolhosts import tool


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("getFileContents", ["get", "file", "contents"]),
        ("github__create_pull_request", ["github", "create", "pull", "request"]),
        ("API-post-search", ["api", "post", "search"]),
        ("HTTPServerError", ["http", "server", "error"]),
        ("kubectl_get v2 pods", ["kubectl", "get", "v2", "pods"]),
        ("Zürich café", ["zürich", "café"]),
    ],
)
def test_words_split_identifiers(text, expected):
    assert words(text) == expected


def test_tokens_drop_stopwords_and_fold_word_forms():
    assert tokens("Please list the files in my folder") == tokens("listing file folders")
    assert "the" not in tokens("the") and tokens("") == []


def test_a_document_weights_the_name_and_splits_off_the_backend():
    doc = document(tool("github__create_issue", "Open a ticket", owner="string", issue_number="integer"))
    assert doc.count(tokens("create")[0]) == 3 and doc.count("github") == 1
    assert set(tokens("owner issue number ticket")) <= set(doc)


def test_the_index_ranks_and_filters_by_the_allowed_names():
    tools = [tool("a__read_file", "Read a file"), tool("a__write_file", "Write a file"), tool("b__read_mail", "Read e-mail messages")]
    index = IndexCache().index_for(tools)
    assert [t["name"] for t in index.search("read file", 3)] == ["a__read_file", "a__write_file", "b__read_mail"]
    assert [t["name"] for t in index.search("read file", 3, allowed={"b__read_mail"})] == ["b__read_mail"]
    assert index.search("read file", 1)[0]["name"] == "a__read_file" and index.search("unrelated words", 3) == []
    assert index.lookup("a__write_file")["description"] == "Write a file" and index.lookup("a__write_file", allowed=set()) is None


def test_one_index_per_catalogue_version_bounded_in_number():
    cache = IndexCache(max_indexes=2)
    first = [tool("x__one", "first tool")]
    index = cache.index_for(first)
    assert cache.index_for([dict(first[0])]) is index  # same definitions, new objects
    cache.index_for(first + [tool("x__two", "second")])
    cache.index_for(first + [tool("x__three", "third")])
    assert cache.index_for(first) is not index and cache.builds == 4  # the least recently used was dropped
    assert cache.tokenised == 3  # but its documents were kept


def test_definitions_that_are_not_tools_are_ignored():
    index = IndexCache().index_for([{"description": "no name"}, "junk", tool("ok__one", "fine")])  # type: ignore[list-item]
    assert index.names() == ["ok__one"]
    assert IndexCache().index_for([]).search("anything", 5) == []


def test_query_synonyms_reach_the_words_tools_use():
    tools = [tool("fs__create_directory", "Create a new directory"), tool("fs__delete_file", "Delete a file"), tool("fs__read_file", "Read a file")]
    expanded, plain = IndexCache().index_for(tools), IndexCache(expand=False).index_for(tools)
    assert expanded.search("make a folder", 1)[0]["name"] == "fs__create_directory"
    assert plain.search("make a folder", 1) == []  # the table is what finds it
    assert expanded.search("remove notes.txt", 1)[0]["name"] == "fs__delete_file"


class KeywordEncoder:
    """A stand-in for the MiniLM encoder: one dimension per keyword, L2-normalised."""

    KEYWORDS = ("weather", "money", "mail")

    def encode(self, texts):
        import numpy as np

        rows = [[1.0 if k in t.lower() or (k == "money" and "pay" in t.lower()) else 0.0 for k in self.KEYWORDS] for t in texts]
        m = np.array(rows, dtype=np.float32) + 1e-6
        return m / np.linalg.norm(m, axis=1, keepdims=True)


def test_the_hybrid_ranker_fuses_embeddings_with_bm25():
    tools = [tool("a__forecast", "Weather forecast"), tool("b__transfer", "Send money to a friend"), tool("c__inbox", "Read mail")]
    cache = IndexCache(encoder=KeywordEncoder())
    index = cache.index_for(tools)
    assert index.hybrid and index.vectors.shape == (3, 3)
    assert index.search("pay my rent", 1)[0]["name"] == "b__transfer"  # no shared word: only the vector knows
    assert IndexCache().index_for(tools).search("pay my rent", 1) == []
    assert index.search("pay my rent", 3, allowed={"a__forecast", "c__inbox"}) == []  # filtered; the rest are below the floor
    cache.index_for(tools + [tool("d__news", "News")])
    assert cache.tokenised == 4  # vectors, like tokens, are computed once per definition
