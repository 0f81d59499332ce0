"""The ranker contract of Search mode (layers/capability/toolmodes/index.py), over every ranker.

``ToolIndex.search(query, k, allowed)``, whatever ranks:

- at most ``k`` tools (none for ``k`` ≤ 0 or an empty catalogue), each a definition of the
  catalogue as given (not a copy, never changed), none twice, best first (``scored`` is
  non-increasing);
- with ``allowed``, exactly the unrestricted ranking's allowed tools, in its order: never a
  tool outside ``allowed``, and a hidden tool changes no visible tool's place;
- the same query answers the same;
- a query that says a tool's name finds that tool first.

Rankers: BM25F with word families and shapes (the default), BM25F alone (``expand`` off),
and the hybrid ranker with an encoder (the keyword stand-in of the index's own tests: the
MiniLM weights are an optional package this suite does not install).
"""

from __future__ import annotations

import copy

import pytest

from hopline.layers.capability.toolmodes.index import IndexCache
from tests.layers.capability.test_toolmodes_index import KeywordEncoder


def tool(name: str, description: str, **props: dict) -> dict:
    return {"name": name, "description": description, "inputSchema": {"type": "object", "properties": props}}


CATALOGUE = [
    tool("weather__forecast", "Weather forecast for a city", city={"type": "string"}),
    tool("bank__transfer", "Send money to a friend", amount={"type": "number"}),
    tool("mail__read_inbox", "Read mail in the inbox"),
    tool("mail__send_mail", "Send a mail message", to={"type": "string"}),
    tool("github__list_issues", "List the issues of a repository", state={"enum": ["open", "closed"]}),
    tool("github__create_issue", "Open a new issue", title={"type": "string"}),
    tool("fs__read_file", "Read a file from disk", path={"type": "string"}),
    tool("fs__delete_file", "Delete a file", path={"type": "string"}),
]
QUERIES = ["send money", "read a file", "open issues in the repo", "weather in Paris", "mail", "nothing matches zzz", ""]
RANKERS = {
    "bm25f": lambda: IndexCache(),
    "bm25f-plain": lambda: IndexCache(expand=False),
    "hybrid": lambda: IndexCache(encoder=KeywordEncoder()),
}


@pytest.fixture(params=list(RANKERS))
def cache(request) -> IndexCache:
    return RANKERS[request.param]()


@pytest.mark.parametrize("query", QUERIES)
def test_at_most_k_of_the_catalogues_own_definitions_best_first(cache, query):
    tools = copy.deepcopy(CATALOGUE)
    index = cache.index_for(tools)
    for k in (1, 3, len(tools) + 2):
        scored = index.scored(query, k)
        found = [t for t, _ in scored]
        assert len(found) <= k
        assert all(any(t is given for given in tools) for t in found)  # the definitions themselves
        assert len({t["name"] for t in found}) == len(found)
        assert [s for _, s in scored] == sorted((s for _, s in scored), reverse=True)
        assert index.search(query, k) == found == [t for t, _ in index.scored(query, k)]  # the same query answers the same
    assert index.search(query, 0) == [] and index.search(query, -1) == []
    assert tools == CATALOGUE  # nothing changed


@pytest.mark.parametrize("query", QUERIES)
def test_allowed_filters_the_ranking_and_moves_nothing(cache, query):
    index = cache.index_for(CATALOGUE)
    full = [t["name"] for t in index.search(query, len(CATALOGUE))]
    allowed = {t["name"] for t in CATALOGUE[::2]}
    for k in (1, 2, len(CATALOGUE)):
        assert [t["name"] for t in index.search(query, k, allowed)] == [n for n in full if n in allowed][:k]
    assert index.search(query, 5, allowed=set()) == []


def test_an_empty_catalogue_finds_nothing(cache):
    assert cache.index_for([]).search("send money", 5) == []


@pytest.mark.parametrize(
    ("query", "name"),
    [("bank transfer", "bank__transfer"), ("read inbox", "mail__read_inbox"), ("delete file", "fs__delete_file"), ("create issue", "github__create_issue")],
)
def test_a_query_that_says_a_tools_name_finds_it_first(cache, query, name):
    assert cache.index_for(CATALOGUE).search(query, 1)[0]["name"] == name
