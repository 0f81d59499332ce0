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
from hopline.layers.capability.toolmodes.roles import (
    READ,
    WRITE,
    main_verb,
    mood,
    read,
    tool_actions,
    tool_moods,
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
        ("list open PRs and their IDs", ["list", "open", "prs", "and", "their", "ids"]),  # a plural acronym is one word
    ],
)
def test_words_split_identifiers(text, expected):
    assert words(text) == expected


def test_tokens_drop_stopwords_and_fold_word_forms():
    assert tokens("Please list the files in my folder") == tokens("listing file folders")
    assert "the" not in tokens("the") and tokens("") == []
    assert tokens("block children") == tokens("child blocks")[::-1] and tokens("people") == tokens("person")  # irregular plurals


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
        ("take a look at assets/logo.png", "image"),  # an image file, by its extension
        ("give the message a :tada:", "emoji"),
        ("use the test server to add 17 and 25", "sum"),
        ("SELECT the top customers from the orders table", "sql"),  # SQL said in words, not a browser's select
        ("make a configmap called app-settings", "name"),
        ("set the browser to 375x812", "dimensions"),  # a width and height
        ("play /home/me/voice-memo.mp3", "audio"),  # an audio file, by its extension
        ("add a to-do to the page", "todo"),  # one word, not "to" and "do"
        ("cache this under weather:nyc", "key"),  # a namespaced key
        ("delete lock:job:17", "key"),
    ],
)
def test_a_span_shaped_like_a_name_is_read_as_what_it_names(query, word):
    own = [terms for slot in query_slots(query) for terms, weight in slot if weight == 1.0]
    assert tokens(word)[0] in {t for terms in own for t in terms}
    assert ("note",) not in own and ("example",) not in own and ("general",) not in own


@pytest.mark.parametrize(
    ("query", "kept", "gone"),
    [
        ("fork kubernetes/kubernetes on github", ["fork", "github"], ["kubernetes"]),  # an owner/repo is a value
        ("post 'Crash on save' to the channel", ["post", "channel"], ["crash", "save"]),  # so is a quoted one
        ("make a configmap with LOG_LEVEL=debug", ["configmap"], ["log", "level", "debug"]),  # and KEY=value
        ("forget everything you have stored", ["forget", "stored"], ["everything"]),  # a pronoun is no word …
        ("ask the everything server", ["everything", "server"], []),  # … unless a server follows
        ("make a new page", ["make", "page"], ["new"]),  # "new" after a create word adds nothing
    ],
)
def test_values_and_empty_words_are_no_words_of_the_request(query, kept, gone):
    own = {t for slot in query_slots(query) for terms, weight in slot if weight == 1.0 for t in terms}
    assert {tokens(k)[0] for k in kept} <= own and not {tokens(g)[0] for g in gone} & own


def test_a_backend_said_as_a_pronoun_or_inside_a_value_is_not_named():
    tools = [
        tool("everything__echo", "Echoes back the input"),
        tool("everything__get-env", "Returns the environment"),
        tool("memory__delete_entities", "Delete multiple entities and their associated relations from the knowledge graph"),
        tool("memory__read_graph", "Read the entire knowledge graph"),
    ]
    index = IndexCache().index_for(tools)
    assert [t["name"] for t in index.search("forget everything you have stored about Acme", 3)] == ["memory__delete_entities", "memory__read_graph"]
    assert index.search("echo hello from the everything server", 1)[0]["name"] == "everything__echo"
    tools = [tool("github__fork_repository", "Fork a GitHub repository to your account or organization"), tool("kubernetes__kubectl_patch", "Update field(s) of a Kubernetes resource")]
    assert IndexCache().index_for(tools).search("I want my own copy of kubernetes/kubernetes on GitHub to carry patches", 1)[0]["name"] == "github__fork_repository"


def test_a_family_scores_at_its_own_idf_so_a_rare_synonym_does_not_win():
    # "add" is rarer than "create" here: as a synonym of "make" it must not count for more
    tools = [
        tool("gh__create_issue", "Create an issue"),
        tool("gh__add_issue_comment", "Add a comment to an issue"),
        tool("gh__create_branch", "Create a branch"),
        tool("gh__create_repository", "Create a repository"),
        tool("gh__list_commits", "List commits"),
    ]
    assert IndexCache().index_for(tools).search("make an issue", 1)[0]["name"] == "gh__create_issue"
    # a word the table marks as having other senses ("~open") is no better evidence said outright
    tools = [tool("mem__open_nodes", "Open nodes in the graph by name"), tool("fs__read_file", "Read a file", path="string")]
    assert IndexCache().index_for(tools).search("open notes.txt and show me what's in it", 1)[0]["name"] == "fs__read_file"


def test_an_article_decides_whether_open_creates():
    slots = {t for slot in query_slots("open a ticket") for terms, _w in slot for t in terms}
    assert tokens("create")[0] in slots and tokens("read")[0] not in slots
    slots = {t for slot in query_slots("open the ticket") for terms, _w in slot for t in terms}
    assert tokens("create")[0] not in slots and tokens("read")[0] in slots
    tools = [tool("gh__get_issue", "Get an issue"), tool("gh__create_issue", "Create an issue"), tool("gh__list_commits", "List commits")]
    index = IndexCache().index_for(tools)
    assert index.search("open a bug on github", 1)[0]["name"] == "gh__create_issue"
    assert index.search("open issue 12", 1)[0]["name"] == "gh__get_issue"


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("list all pods", READ),
        ("what's in PR 12?", READ),  # a question reads
        ("how do I create a branch", WRITE),  # … but not one about how to do something
        ("send me the tiny logo", READ),  # a giving verb with the caller as object
        ("please delete the old branch", WRITE),
        ("open a ticket", WRITE),  # "open" + article: create
        ("open the file and show me what's in it", READ),  # "open" alone decides nothing; "show" does
        ("rename draft.txt", WRITE),  # two families, both change things
        ("click the button", None),  # an action that neither reads nor changes
        ("right-click the row in the file list", None),  # … and is the main verb: "list" comes too late
        ("pizza near me", None),
        ("get rid of the old deployment", WRITE),  # a phrase before its first word ("get")
        ("file a ticket about the login bug", WRITE),  # "file" + article: create
        ("the file chooser is open - attach resume.pdf", WRITE),  # "is" in the middle asks nothing
        ("give me the rundown on PR 912", READ),  # a giving verb, though a stopword
    ],
)
def test_the_main_verb_of_a_request_reads_or_writes(query, expected):
    assert mood(words(query)) == expected


def test_a_host_and_port_or_an_image_tag_is_no_key():
    for query in ("forward localhost:5432", "set the image to nginx:latest", "a std::vector"):
        assert tokens("key")[0] not in {t for slot in query_slots(query) for terms, _w in slot for t in terms}, query


def test_a_verb_after_a_determiner_or_a_be_verb_names_a_thing_or_a_state():
    def reached(query):
        return {t for slot in query_slots(query) for terms, _w in slot for t in terms}

    assert tokens("save")[0] in reached("cache this JSON in redis")  # a verb …
    assert tokens("save")[0] not in reached("the value of the cache key")  # … a thing
    assert tokens("retrieve")[0] not in reached("tacos that are open late")  # … a state
    assert tokens("retrieve")[0] in reached("open notes and show them")
    assert read("list the open PRs").action == {"list"}


def test_words_about_a_topic_name_no_backend_and_count_less():
    request = read("What do you remember about my kubernetes upgrade plans?")
    assert tokens("kubernetes")[0] in request.topic and tokens("remember")[0] not in request.topic
    assert read("what have you stored that relates to the migration").topic == {tokens("migration")[0]}
    assert read("find messages about the outage in slack").topic == {tokens("outage")[0]}  # "in …" says where, not what
    assert not read("list the pods about to be evicted").topic  # "about to": no topic
    tools = [
        tool("memory__search_nodes", "Search for nodes in the knowledge graph based on a query", query="string"),
        tool("memory__read_graph", "Read the entire knowledge graph"),
        tool("kubernetes__kubectl_reconnect", "Reconnect to the Kubernetes API server. Use this after cluster upgrades"),
        tool("kubernetes__upgrade_helm_chart", "Upgrade a Helm chart"),
    ]
    index = IndexCache().index_for(tools)
    assert index.search("What do you remember about my kubernetes upgrade plans?", 1)[0]["name"] == "memory__search_nodes"
    assert index.search("reconnect to kubernetes after the upgrade", 1)[0]["name"] == "kubernetes__kubectl_reconnect"


def test_the_values_an_argument_enumerates_are_indexed():
    lister = {"name": "gh__list_pull_requests", "description": "List pull requests", "inputSchema": {"type": "object", "properties": {"state": {"type": "string", "enum": ["open", "closed", "all"]}}}}
    media = {"name": "pw__emulate_media", "description": "Emulate CSS media features", "inputSchema": {"type": "object", "properties": {"motion": {"anyOf": [{"enum": ["reduce", "no-preference"]}, {"type": "null"}]}}}}
    assert fields(lister)["choices"] == tokens("open closed all") and fields(media)["choices"] == tokens("reduce no preference")
    assert Weights().choices < Weights().arguments  # a value is weaker evidence than a name
    index = IndexCache().index_for([tool("gh__get_pull_request", "Get a pull request"), lister])
    assert index.search("which pull requests are closed", 1)[0]["name"] == "gh__list_pull_requests"


def test_a_tool_whose_name_verb_undoes_the_requests_ranks_down():
    tools = [
        tool("memory__delete_relations", "Delete multiple relations from the knowledge graph"),
        tool("memory__create_relations", "Create multiple new relations between entities in the knowledge graph"),
    ]
    index = IndexCache().index_for(tools)
    assert read("record that Alice reports to Bob").action == {"save"}
    assert index.search("record in the knowledge graph that Alice works at Acme", 1)[0]["name"] == "memory__create_relations"
    reached = {t for slot in query_slots("Priya reports to Marco") for terms, _w in slot for t in terms}
    assert tokens("relation")[0] in reached  # a relationship said as a phrase


def test_a_kubernetes_kind_fills_a_resource_argument():
    assert tokens("resource")[0] in read("list pods in the payments namespace").fills
    assert not read("list the files in /tmp").fills & set(tokens("resource"))
    tools = [
        tool("k8s__list_api_resources", "List the API resources available in the cluster", apiGroup="string"),
        tool("k8s__kubectl_get", "Get or list Kubernetes resources by resource type", resourceType="string", namespace="string"),
    ]
    assert IndexCache().index_for(tools).search("list all pods in the staging namespace", 1)[0]["name"] == "k8s__kubectl_get"


def test_a_purpose_clause_counts_less():
    request = read("mark worker-3 unschedulable so nothing new lands on it")
    weights = {slot[0][0]: weight for slot, weight in zip(request.slots, request.weights)}
    assert weights[(tokens("unschedulable")[0],)] == 1.0 and weights[(tokens("lands")[0],)] < 1.0


def test_a_name_with_a_capital_inside_is_one_word_in_prose():
    assert words("GitHub CronJob", prose=True) == ["github", "cronjob"]
    assert words("getFileContents GitHub") == ["get", "file", "contents", "git", "hub"]  # identifiers split
    assert fields(tool("gh__get_me", "Get the GitHub user"))["description"] == tokens("get the github user")
    assert tokens("github")[0] in {t for slot in read("Leave a note on GitHub issue 118").slots for t in slot[0][0]}


def test_an_object_pronoun_does_not_split_a_phrasal_verb():
    assert read("look it up online").mood == READ and read("shut it down").action == {"stop"}
    reached = {t for slot in query_slots("clean them up") for terms, _w in slot for t in terms}
    assert tokens("delete")[0] in reached


@pytest.mark.parametrize(
    ("query", "action"),
    [
        ("get rid of the old deployment", {"delete"}),
        ("nuke every canary pod", {"delete"}),
        ("file a ticket", {"create"}),
        ("drop a note on issue 55", {"create"}),  # "drop" + article: create …
        ("drop that fact", {"delete"}),  # … else its own sense
        ("restart the nginx deployment", set()),  # "restart" is a rollout, no action family
        ("reassign the issue to dana", {"update"}),
        ("open the file", {"get", "navigate"}),  # no article: not create
    ],
)
def test_the_main_verb_says_an_action_family(query, action):
    assert main_verb(words(query))[1] == action


def test_a_tool_whose_name_verb_is_the_requests_action_ranks_up(monkeypatch):
    from hopline.layers.capability.toolmodes import scoring

    assert tool_actions(tokens("kubectl delete")) == {"delete"} and tool_actions(tokens("create or update file")) == {"create", "update", "upgrade"}
    tools = [tool("k8s__kubectl_delete", "Delete resources"), tool("k8s__kubectl_scale", "Scale a deployment"), tool("k8s__get_logs", "Get logs of a deployment")]
    queries = ("get rid of the old deployment", "get the logs")
    with_role = [IndexCache().index_for(tools).lexical(q) for q in queries]
    assert with_role[0].argmax() == 0
    monkeypatch.setattr(scoring, "ROLE_BONUS", 0.0)
    without = [IndexCache().index_for(tools).lexical(q) for q in queries]
    assert with_role[0][0] == pytest.approx(without[0][0] * 1.2) and with_role[0][1] == pytest.approx(without[0][1])
    assert with_role[1][2] == pytest.approx(without[1][2])  # a read verb ("get") names too many tools to lift them


def test_a_tool_whose_name_verb_clashes_with_the_request_ranks_down():
    assert tool_moods(tokens("exec in pod")) == {WRITE} and tool_moods(tokens("get")) == {READ}
    assert tool_moods(tokens("create or update file")) == {WRITE} and tool_moods(tokens("node management")) == set()
    tools = [
        tool("k8s__kubectl_get", "Get or list resources by type, name and namespace"),
        tool("k8s__exec_in_pod", "Execute a command in a pod"),
        tool("k8s__kubectl_logs", "Get logs from pods"),
    ]
    index = IndexCache().index_for(tools)
    assert index.search("list all the pods", 1)[0]["name"] == "k8s__kubectl_get"
    assert index.search("run ls in the pod", 1)[0]["name"] == "k8s__exec_in_pod"


def test_a_request_that_names_a_backend_ranks_the_others_down():
    tools = [
        tool("slack__slack_get_users", "Get a list of all users in the workspace with their basic profile information"),
        tool("slack__slack_post_message", "Post a new message to a channel in the workspace"),
        tool("notion__API-get-users", "Notion | List all users"),
        tool("notion__API-post-page", "Notion | Create a page"),
    ]
    index = IndexCache().index_for(tools)
    assert [t["name"] for t in index.search("list everyone in our notion workspace", 2)] == ["notion__API-get-users", "notion__API-post-page"]
    assert index.search("list everyone in our slack workspace", 1)[0]["name"] == "slack__slack_get_users"
    # a family member names a backend only for a word no tool says ("remember" → memory), not "knowledge"
    tools = [tool("memory__read_graph", "Read the whole knowledge graph"), tool("kb__retrieve", "Retrieve passages from the knowledge base"), tool("fs__read_file", "Read a file")]
    index = IndexCache().index_for(tools)
    assert index.search("read what you remember", 1)[0]["name"] == "memory__read_graph"
    assert index.search("read passages from the knowledge base", 1)[0]["name"] == "kb__retrieve"
    # an id that other backends' tools say too ("search") names nothing
    tools = [tool("search__query", "Query the index"), tool("fs__search_files", "Search for files"), tool("notion__get_page", "Get a page")]
    assert set(IndexCache().index_for(tools)._priors.prefixes) == {tokens("fs")[0], tokens("notion")[0]}


def test_only_another_name_of_the_id_itself_names_a_backend():
    tools = [
        tool("postgres__query", "Run a read-only SQL query"),
        tool("slack__post_message", "Post a message to a channel"),
        tool("kubernetes__kubectl_get", "Get resources"),
    ]
    index = IndexCache().index_for(tools)

    def named(query):
        groups = index._priors._named(read(query).slots, index._postings).tolist()
        return {index.tools[int(i)]["name"].split("__")[0] for i, g in enumerate(index._priors.group) if g in groups}

    assert named("get the pods in k8s") == {"kubernetes"}  # the family kubernetes heads
    assert named("let the channel know the db failover is starting") == set()  # "db": the family of "sql", not of postgres
    assert named("query postgres") == {"postgres"}


def test_words_said_side_by_side_in_both_count_more():
    tools = [tool("a__retrieve", "Retrieve passages from a base of knowledge"), tool("b__retrieve", "Retrieve passages from the knowledge base")]
    assert IndexCache().index_for(tools).search("knowledge base passages", 1)[0]["name"] == "b__retrieve"


def test_a_value_named_by_its_shape_favours_the_tool_it_fills():
    request = read("what address is at 40.7128, -74.0060")
    assert tokens("latitude")[0] in request.fills and (tokens("coordinates")[0],) in [terms for slot in request.slots for terms, _w in slot]
    tools = [tool("geo__forward", "From an address to coordinates", address="string"), tool("geo__reverse", "From coordinates to an address", latitude="number", longitude="number")]
    assert IndexCache().index_for(tools).search("what is at 40.7128, -74.0060", 1)[0]["name"] == "geo__reverse"  # a tie but for the fill
    assert (tokens("multiple")[0],) in [terms for slot in query_slots("read a.txt, b.txt and c.txt") for terms, _w in slot]


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
    """Its shape (its hit rates are in the floor below)."""
    names = {t["name"] for t in _bench("catalogue")}
    blind = _bench("tasks_blind")
    assert len(blind) >= 100 and len({t["task"] for t in blind}) == len(blind)
    assert all(t["expected"] and set(t["expected"]) <= names for t in blind)
    assert {e for t in blind for e in t["expected"]} == names  # every tool is somebody's answer


def _hit_rates(tasks):
    index = IndexCache().index_for(_bench("catalogue"))
    hits1 = hits3 = 0
    for task in tasks:
        got = [t["name"] for t in index.search(task["task"], 3)]
        hits1 += bool(got) and got[0] in task["expected"]
        hits3 += any(g in task["expected"] for g in got)
    return hits1 / len(tasks), hits3 / len(tasks)


def test_the_tuning_task_sets_stay_above_a_floor():
    """A regression guard on the sets the ranker was tuned on (tasks, tasks_heldout,
    tasks_blind: 373 requests). Measured 93.0 % hit@1 and 99.5 % hit@3 (third round), 94.6 %
    and 99.5 % (fourth), 95.7 % and 99.5 % (fifth)."""
    hit1, hit3 = _hit_rates(_bench("tasks") + _bench("tasks_heldout") + _bench("tasks_blind"))
    assert hit1 >= 0.94 and hit3 >= 0.98


def test_the_second_blind_set_stays_above_a_floor():
    """tasks_blind2 (218 requests) was blind for the second round and a diagnostic set for
    the third, which read its misses for classes of failure (not for single requests):
    62.8 % hit@1 and 77.5 % hit@3 before, 76.6 % and 91.7 % after, 83.0 % and 95.9 % after
    the fourth, 84.4 % and 96.8 % after the fifth."""
    hit1, hit3 = _hit_rates(_bench("tasks_blind2"))
    assert hit1 >= 0.82 and hit3 >= 0.95


def test_the_third_blind_set_stays_above_a_floor():
    """tasks_blind3 (200 requests, half agent-style queries) was blind for the third round
    (81.5 % hit@1, 93.0 % hit@3) and a diagnostic set for the fourth, which read its misses
    for classes of failure: 88.5 % and 96.5 % after, 90.0 % and 97.0 % after the fifth."""
    hit1, hit3 = _hit_rates(_bench("tasks_blind3"))
    assert hit1 >= 0.88 and hit3 >= 0.95


def test_the_fourth_blind_set_stays_above_a_floor():
    """tasks_blind4 (200 requests, half agent-style queries) was blind for the fourth round
    (82.5 % hit@1, 94.0 % hit@3) and a diagnostic set for the fifth, which read its misses
    for classes of failure, each change kept only if leave-one-set-out over the six sets
    chose it: 86.5 % and 95.0 % after."""
    hit1, hit3 = _hit_rates(_bench("tasks_blind4"))
    assert hit1 >= 0.85 and hit3 >= 0.94


# -- fifth round: classes of failure read from the fourth blind set ---------------------------
def test_a_tool_names_its_verb_first_and_later_action_words_are_things():
    assert tool_actions(tokens("get pull request reviews")) == {"get"} and tool_moods(tokens("get pull request reviews")) == {READ}
    assert tool_actions(tokens("create pull request review")) == {"create"}
    tools = [
        tool("gh__create_pull_request_review", "Create a review on a pull request", pull_number="number", event="string"),
        tool("gh__get_pull_request_reviews", "Get the reviews on a pull request", pull_number="number"),
    ]
    index = IndexCache().index_for(tools)
    assert index.search("approve pull request 55", 1)[0]["name"] == "gh__create_pull_request_review"  # "reviews" is no "approve"


def test_a_plural_settles_the_sense_of_its_verb_as_the_verb_does():
    assert main_verb(words("Priya no longer reports to Tom - drop that link"))[1] == {"delete"}  # "reports" no create
    assert main_verb(words("report a bug"))[1] == {"create"}


def test_everything_is_all_unless_a_server_follows():
    said = [slot[0][0] for slot in query_slots("tear down everything you created")]
    assert (tokens("all")[0],) in said
    assert (tokens("everything")[0],) in [slot[0][0] for slot in query_slots("echo hi on the everything server")]
    assert not query_slots("is anything there")
    tools = [tool("k8s__cleanup", "Cleanup all managed resources"), tool("k8s__kubectl_delete", "Delete Kubernetes resources by resource type, name, labels", resourceType="string", labelSelector="string")]
    assert IndexCache().index_for(tools).search("tear down everything the kubernetes server created", 1)[0]["name"] == "k8s__cleanup"


def test_two_words_that_name_an_argument_fill_it(monkeypatch):
    from hopline.layers.capability.toolmodes import scoring

    tools = [
        tool("web__local_search", "Search local businesses: addresses, reviews, phone numbers, opening hours", query="string"),
        tool("maps__place_details", "Get detailed information about a specific place", place_id="string"),
    ]
    query = "opening hours and reviews for this place ID"
    assert IndexCache().index_for(tools).search(query, 1)[0]["name"] == "maps__place_details"
    monkeypatch.setattr(scoring, "ARGUMENT_PAIRS", False)
    assert IndexCache().index_for(tools).search(query, 1)[0]["name"] == "web__local_search"


def test_a_file_name_at_the_end_of_a_sentence_is_a_file():
    from hopline.layers.capability.toolmodes.shapes import read_shapes

    assert read_shapes("Show me what's in /home/me/notes/todo.md.")[1] == {"file"}
    assert read_shapes("read config.yaml. Then stop")[1] == {"file"}


def test_describing_an_instance_is_not_explaining_a_kind():
    reached = {t for slot in query_slots("show me its full description") for terms, _w in slot for t in terms}
    assert tokens("describe")[0] in reached and tokens("explain")[0] not in reached
    assert main_verb(words("describe the pod"))[0] == READ
    tools = [
        tool("k8s__explain_resource", "Get documentation for a Kubernetes resource or field", resource="string"),
        tool("k8s__kubectl_describe", "Describe Kubernetes resources by resource type, name, and optionally namespace", resourceType="string", namespace="string"),
    ]
    assert IndexCache().index_for(tools).search("pod api-7d9f: show me its full description and recent events", 1)[0]["name"] == "k8s__kubectl_describe"


def test_counting_is_a_query_and_online_is_the_web():
    reached = {t for slot in query_slots("how many users signed up last month") for terms, _w in slot for t in terms}
    assert tokens("sql")[0] in reached
    reached = {t for slot in query_slots("what are people saying online") for terms, _w in slot for t in terms}
    assert tokens("web")[0] in reached


def test_the_fifth_blind_set_stays_above_a_floor():
    """tasks_blind5 (200 requests, half agent-style queries) was blind for the fifth round
    (84.5 % hit@1, 94.5 % hit@3) and a diagnostic set for the sixth, which read its misses
    for classes of failure, each change kept only if leave-one-set-out over the seven sets
    chose it: 86.0 % and 95.5 % after."""
    hit1, hit3 = _hit_rates(_bench("tasks_blind5"))
    assert hit1 >= 0.85 and hit3 >= 0.945


# -- sixth round: classes of failure read from the fifth blind set ----------------------------
def test_typing_into_a_box_is_typing_not_filling_a_form():
    reached = {t for slot in query_slots("type hello into the search box") for terms, _w in slot for t in terms}
    assert tokens("fill")[0] not in reached
    tools = [
        tool("pw__browser_fill_form", "Fill multiple form fields", fields="array"),
        tool("pw__browser_type", "Type text into editable element", element="string", ref="string", text="string"),
    ]
    index = IndexCache().index_for(tools)
    assert index.search("type 'wireless headphones' into the site's search box and submit", 1)[0]["name"] == "pw__browser_type"
    assert index.search("fill in the signup form", 1)[0]["name"] == "pw__browser_fill_form"


def test_what_a_server_may_touch_is_what_it_is_allowed():
    tools = [
        tool("fs__list_directory", "Get a detailed listing of all files and directories in a specified path", path="string"),
        tool("fs__list_allowed_directories", "Returns the list of directories that this server is allowed to access"),
    ]
    assert IndexCache().index_for(tools).search("which paths may the file server touch", 1)[0]["name"] == "fs__list_allowed_directories"


def test_a_verb_that_relates_two_things_is_a_relation():
    reached = {t for slot in query_slots("record that Alice manages Atlas") for terms, _w in slot for t in terms}
    assert tokens("relation")[0] in reached
    reached = {t for slot in query_slots("the parser depends on the lexer") for terms, _w in slot for t in terms}
    assert tokens("relation")[0] in reached


def test_element_refs_and_page_structure_are_a_snapshot():
    tools = [
        tool("pw__browser_click", "Perform click on a web page", element="string", ref="string"),
        tool("pw__browser_snapshot", "Capture accessibility snapshot of the current page, this is better than screenshot"),
    ]
    index = IndexCache().index_for(tools)
    assert index.search("Get the page structure with element refs so you can decide what to click next.", 1)[0]["name"] == "pw__browser_snapshot"
