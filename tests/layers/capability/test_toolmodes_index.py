"""The search index: tokenisation, ranking, catalogue versions and the shared cache."""

from __future__ import annotations

import pytest

from hopline.layers.capability.toolmodes.index import (
    FAMILIES,
    SYNONYMS,
    IndexCache,
    Weights,
    fields,
    query_slots,
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


def test_a_tool_is_split_into_fields_weighted_name_over_backend_over_arguments():
    parts = fields(tool("github__create_issue", "Open a ticket", owner="string", issue_number="integer"))
    assert parts["name"] == tokens("create issue") and parts["prefix"] == ["github"]
    assert parts["description"] == tokens("Open a ticket") and parts["arguments"] == tokens("owner issue number")
    weights = Weights()
    assert weights.name > weights.prefix > weights.description > weights.arguments > 0


def test_a_word_in_the_name_outranks_the_same_word_in_a_description():
    tools = [tool("a__list_items", "Shows what there is, including every issue"), tool("a__issue", "Shows one item")]
    assert IndexCache().index_for(tools).search("issue", 2)[0]["name"] == "a__issue"


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


def test_families_are_symmetric_and_a_word_scores_its_best_alternative_once():
    tools = [tool("kb__retrieve_report", "Retrieve a report"), tool("kb__fetch_report", "Fetch a report"), tool("kb__delete_report", "Delete a report")]
    index = IndexCache().index_for(tools)
    assert index.search("fetch the report", 1)[0]["name"] == "kb__fetch_report"  # its own word first
    assert index.search("retrieve the report", 1)[0]["name"] == "kb__retrieve_report"
    assert [t["name"] for t in index.search("get the report", 2)] in (["kb__retrieve_report", "kb__fetch_report"], ["kb__fetch_report", "kb__retrieve_report"])
    # a tool saying three synonyms of one query word gains no more than a tool saying one
    many = [tool("x__a", "get fetch retrieve the data"), tool("x__b", "get the data")]
    scores = IndexCache().index_for(many).lexical("get data")
    assert scores[0] <= scores[1] * 1.001


def test_phrases_stand_for_their_family_and_marked_words_only_reach_out():
    slots = query_slots("a shop close to the office")
    assert all(("close",) not in [terms for terms, _w in slot] for slot in slots)  # "close to" is not about closing
    tools = [tool("ui__browser_close", "Close the page"), tool("maps__search_places", "Search for places")]
    assert IndexCache().index_for(tools).search("a dentist close to the office", 1)[0]["name"] == "maps__search_places"
    # "open" is a create word in "open a ticket", but "new" does not reach a tool named open
    tools = [tool("gh__create_issue", "Create an issue"), tool("mem__open_nodes", "Open nodes by name")]
    index = IndexCache().index_for(tools)
    assert index.search("open a ticket", 1)[0]["name"] == "gh__create_issue"
    assert [t["name"] for t in index.search("new ticket", 2)] == ["gh__create_issue"]


def test_only_a_plural_is_folded_before_the_table_is_read():
    def reached(query):
        return {t for slot in query_slots(query) for terms, _w in slot for t in terms}

    assert tokens("directory")[0] in reached("two folders")
    assert tokens("create")[0] not in reached("latest news")  # "news" is not "new"
    assert tokens("update")[0] not in reached("last modified")  # a state, not a request to modify
    assert tokens("update")[0] in reached("modify it")


@pytest.mark.parametrize(
    ("query", "word"),
    [
        ("open notes/todo.md", "file"),
        ("print /etc/app/settings.ini", "file"),
        ("find every .log file", "file"),
        ("list /var/app", "path"),
        ("open https://example.com/pricing", "url"),
        ("load news.ycombinator.com", "url"),
        ("last messages in #general", "channel"),
        ("ping @dana", "user"),
    ],
)
def test_a_span_shaped_like_a_name_is_read_as_what_it_names(query, word):
    own = [terms for slot in query_slots(query) for terms, weight in slot if weight == 1.0]
    assert (tokens(word)[0],) in own
    assert ("note",) not in own and ("example",) not in own and ("general",) not in own


def test_the_backend_a_request_is_about_lifts_all_its_tools():
    tools = [
        tool("k8s__kubectl_get", "Get or list resources by type, name and namespace"),
        tool("k8s__exec_in_pod", "Execute a command in a pod"),
        tool("k8s__kubectl_logs", "Get logs from pods, deployments or jobs"),
        tool("fs__list_directory", "List the files of a directory"),
        tool("fs__read_file", "Read a file"),
    ]
    ranked = [t["name"] for t in IndexCache().index_for(tools).search("list everything in the staging namespace", 5)]
    assert ranked[0] == "k8s__kubectl_get"


def test_the_synonym_table_is_general_vocabulary_well_formed():
    for family in FAMILIES:
        members = family.split("|")
        assert len(members) >= 2 and len(set(members)) == len(members), family
        for m in members:
            word = m.lstrip("~")
            assert word == word.lower() and word.strip() == word and tokens(word.replace("_", " ")), m
        assert any(not m.startswith("~") and " " not in m for m in members), family  # something to reach
    for word, phrases in SYNONYMS.items():
        assert " " not in word and all(tokens(p) for p in phrases)


def test_queries_stay_cheap_on_a_large_catalogue():
    import time

    verbs = ["create", "get", "list", "update", "delete", "search", "run", "send"]
    nouns = ["issue", "file", "page", "user", "message", "pod", "key", "image", "branch", "record", "channel", "node"]
    tools = [tool(f"b{i % 40}__{verbs[i % 8]}_{nouns[(i // 8) % 12]}_{i}", f"{verbs[(i * 3) % 8]} the {nouns[i % 12]} of a backend {i}", path="string", owner="string") for i in range(2000)]
    index = IndexCache().index_for(tools)
    index.search("warm up", 3)
    started = time.perf_counter()
    for _ in range(20):
        index.search("show me all the open issues about the login page in b7", 5)
    assert (time.perf_counter() - started) / 20 < 0.05  # ~2 ms here; generous for shared CI cores


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


# -- the disclosure benchmark's data (bench/disclosure) -------------------------------------
BENCH = __import__("pathlib").Path(__file__).resolve().parents[3] / "bench" / "disclosure"


def _bench(name):
    import json

    if name == "catalogue":
        tools = []
        for path in sorted((BENCH / "catalogue").glob("*.json")):
            data = json.loads(path.read_text())
            tools += [{**t, "name": f"{data['backend']}__{t['name']}"} for t in data["tools"]]
        return tools
    return [json.loads(line) for line in (BENCH / f"{name}.jsonl").read_text().splitlines() if line.strip()]


def test_the_blind_task_set_is_well_formed_and_covers_the_catalogue():
    """Only its shape: its hit rates are the benchmark's headline and are never a test
    target (a floor here would invite tuning on it)."""
    names = {t["name"] for t in _bench("catalogue")}
    blind = _bench("tasks_blind")
    assert len(blind) >= 100 and len({t["task"] for t in blind}) == len(blind)
    assert all(t["expected"] and set(t["expected"]) <= names for t in blind)
    assert {e for t in blind for e in t["expected"]} == names  # every tool is somebody's answer


def test_the_tuning_task_sets_stay_above_a_floor():
    """A regression guard on the sets the ranker was tuned on (tasks, tasks_heldout: 187
    requests). Measured 85.0 % hit@1 and 94.1 % hit@3 when written."""
    index = IndexCache().index_for(_bench("catalogue"))
    tasks = _bench("tasks") + _bench("tasks_heldout")
    hits1 = hits3 = 0
    for task in tasks:
        got = [t["name"] for t in index.search(task["task"], 3)]
        hits1 += bool(got) and got[0] in task["expected"]
        hits3 += any(g in task["expected"] for g in got)
    assert hits1 / len(tasks) >= 0.82 and hits3 / len(tasks) >= 0.92
