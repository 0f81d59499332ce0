"""The words of tools and queries, for the search index (``index.py``): tokenising
(``snake_case``, ``kebab-case``, ``camelCase``, the namespace delimiter), stemming
(Snowball if installed, else a light suffix stripper), stopwords, the word families a
query word may stand for (:data:`FAMILIES`, at ``SYNONYM_WEIGHT``), and the *slots* a
query is read as (each slot scores its best alternative once; spans that name something
by their shape — a URL, a path, ``#channel`` — are one word). Pure functions and data.
"""

from __future__ import annotations

import re
from collections.abc import Callable

# -- tokenisation ---------------------------------------------------------------------
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_WORD = re.compile(r"[^\W_]+")  # letters and digits; `_`, `-`, `__`, `.`, `/` all split

# English function words, plus what people put around a request ("can you please …").
# Words that name an action or object ("all", "get", "list", "new") are kept: they
# tell tools apart.
STOPWORDS = frozenset(
    ["a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this", "to", "was", "will", "with", "i", "me", "my", "we", "our", "us", "you", "your", "please", "want", "need", "would", "like", "could", "can", "should", "do", "does", "did", "let", "some", "so", "just", "which", "what", "how", "its", "also",
     "s", "t", "d", "ll", "m", "re", "ve"]  # what is left of "what's", "don't", "I'd", "we'll"…
)


# Words that stand for one another in requests and in tool lists, one family a line:
# a query word (or phrase) may match any other member of its families, at a discount
# (SYNONYM_WEIGHT), as if the tool had used the query's word. Symmetric by
# construction: "fetch" reaches a tool that says "retrieve" and "retrieve" one that says
# "fetch". A member with spaces is a phrase a request may say ("look up") but no tool
# is searched for; one joined by ``_`` is a compound both may use ("pull_request"). A
# member marked ``~`` has other meanings too: said in a request it reaches its family,
# but a tool using it is not reached by the family ("open a ticket" reaches
# ``create_issue``; "new" does not reach ``open_nodes``).
# General English and developer vocabulary, not one catalogue's tool names.
FAMILIES: tuple[str, ...] = (
    # what the caller wants done (the CRUD verbs first)
    "create|make|new|add|generate|build|set up|setup|insert|init|initialize|register|spawn|~open|~start",
    "get|retrieve|fetch|read|show|view|see|display|~open|load|print|~return|inspect|~check|pull up|dump|look at",
    "list|enumerate|~all|~every|browse|index|overview",
    "update|edit|modify|change|~set|patch|alter|amend|adjust|replace|rewrite|overwrite|rename|tweak",
    "delete|remove|drop|erase|destroy|purge|~clear|discard|uninstall|unset|wipe|forget|get rid of|clean up|cleanup",
    "search|find|look for|look up|lookup|locate|query|seek|grep|discover|hunt|~match",
    "run|execute|exec|launch|invoke|evaluate|eval|~call|trigger|~start|kick off|perform",
    "send|~post|publish|say|tell|notify|announce|share",
    "reply|respond|answer",
    "stop|cancel|kill|halt|terminate|~end|abort|quit|~close|disable|turn off",
    "navigate|~go|visit|browse|~open|load|go to",
    "~back|previous|prior",
    "move|rename|relocate|transfer",
    "copy|duplicate|clone|fork",
    "merge|combine|squash",
    "upgrade|update|bump",
    "compress|zip|gzip|archive|pack",
    "wait|until|pause|sleep|await|appear|show up",
    "type|~enter|input|fill|key in",
    "click|press|tap|~hit",
    "hover|mouse over|mouseover|point at",
    "select|choose|~pick",
    "upload|attach",
    "screenshot|screen_shot|screen grab|~capture",
    "toggle|enable|disable|~switch|turn on|turn off",
    "scale|resize",
    "explain|describe|documentation|docs|details|detail|info|information|metadata",
    "approve|review|request changes|lgtm",
    "commit|push",
    "save|~store|write|~put|set|persist|~keep|~record|note down",
    "remember|memory|memorize|recall|memories|knowledge",
    "think|thought|thinking|reason|reasoning|reflect|step by step|problem solving",
    "research|investigate|study|deep dive|analyze|analyse",
    # what it is done to
    "directory|folder|dir|subdirectory|subfolder",
    "repository|repo|project|codebase",
    "issue|ticket|bug",
    "pull_request|pr|merge_request|mr",
    "image|picture|photo|drawing|illustration|artwork|~art|~logo|~icon|graphic",
    "media|image|audio|video",
    "message|msg|~text|chat|~post",
    "comment|remark|feedback",
    "user|person|people|member|account|profile|~everyone|~who|teammate|colleague",
    "channel|room",
    "place|location|business|shop|~store|venue|~spot|restaurant|nearby|~near|~local|~around|close to",
    "coordinates|latitude|longitude|lat|lng|geocode|gps",
    "elevation|altitude|height|~high|sea_level",
    "directions|route|drive|driving|walk|walking|get to",
    "distance|~far|~travel|how long|duration|commute",
    "~key|keyboard|keystroke",
    "log|logs|logging",
    "entity|~node|~thing",
    "relation|relationship|~link|connection",
    "observation|fact|~note|~attribute",
    "page|doc|document|wiki",
    "database|db|data_source|datasource|~table|collection",
    "sql|database|db|~table|rows|postgres|postgresql",
    "size|~space|~big|~large|bytes|largest|biggest|disk usage",
    "environment|env|variables|vars",
    "sum|~add|plus|total|addition",
    "kubernetes|k8s|kube|kubectl|cluster",
    "pod|container",
    "helm|~chart|~release",
    "port|forward|tunnel|expose|localhost",
    "url|website|~site|webpage|~link",
    "browser|chrome|headless|~window",
    "dialog|popup|alert|confirm|modal|prompt",
    "form|~field|fields|textbox|~box",
    "~web|internet|online|~google",
    "news|article|articles|headlines|blog",
    "dark_mode|light_mode|color_scheme|colour_scheme|theme",
    "console|devtools",
    "network|requests|api call|xhr|traffic",
    "javascript|js|script|~code|snippet|~expression",
    "accessibility|a11y|aria|dom",
    "history|recent|latest|~past",
    "emoji|reaction|~react|thumbs up",
    "thread|conversation|replies",
    "status|checks|ci|~passing|~failing",
    "tree|recursive|nested|hierarchy|~structure",
    "echo|repeat|parrot|send back",
    "~test|demo|~sample|~example|simulate|simulated|~fake|~mock",
)

# One-way: a query word that implies a phrase of tool words it is not a synonym of.
SYNONYMS: dict[str, tuple[str, ...]] = {
    "which": ("list",), "draw": ("generate image",), "remember": ("memory create",), "recall": ("memory search",),
}


def _light_stem(word: str) -> str:
    """A small suffix stripper for when no Snowball stemmer is installed: folds the
    plural and verb forms that tool descriptions and requests mix most."""
    if len(word) <= 3:
        return word
    for suffix, repl in (("ies", "y"), ("sses", "ss"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            if suffix == "s" and word.endswith(("ss", "us", "is")):
                return word
            if suffix == "es" and not word.endswith(("ches", "shes", "xes", "zes", "ses")):
                return word[:-1]  # "files" → "file", "boxes" → "box"
            stem = word[: -len(suffix)] + repl
            if suffix in ("ing", "ed") and len(stem) >= 4 and stem[-1] == stem[-2] and stem[-1] not in "lsz":
                stem = stem[:-1]  # "running" → "run"
            return stem
    return word


def _stemmer() -> tuple[str, Callable[[str], str]]:
    """The best English stemmer installed: PyStemmer, then snowballstemmer (both
    Snowball "english"), then the light fallback above."""
    try:
        import Stemmer  # type: ignore[import-not-found]

        snowball = Stemmer.Stemmer("english")
        return "snowball (PyStemmer)", snowball.stemWord
    except ImportError:
        pass
    try:
        import snowballstemmer  # type: ignore[import-not-found]

        pure = snowballstemmer.stemmer("english")
        return "snowball (snowballstemmer)", pure.stemWord
    except ImportError:
        return "light (built-in)", _light_stem


STEMMER_NAME, _stem = _stemmer()
_stem_cache: dict[str, str] = {}


def words(text: str) -> list[str]:
    """Lower-cased words of ``text``: identifiers split at every case and separator change."""
    return [w.lower() for w in _WORD.findall(_CAMEL.sub(" ", text))]


def _stemmed(word: str) -> str:
    stem = _stem_cache.get(word)
    if stem is None:
        if len(_stem_cache) > 50_000:
            _stem_cache.clear()
        stem = _stem_cache[word] = _stem(word)
    return stem


def tokens(text: str) -> list[str]:
    """Stemmed words of ``text`` without stopwords (what documents are made of)."""
    return [_stemmed(word) for word in words(text) if word not in STOPWORDS]


# -- queries --------------------------------------------------------------------------
SYNONYM_WEIGHT = 0.8  # a family member counts this much of the word the query says

Key = tuple[str, ...]  # words as a request says them (lower-cased, not stemmed)
Slot = list[tuple[tuple[str, ...], float]]  # (stemmed tokens, weight) alternatives


def _plural(word: str) -> str:
    """A word with a plural ``-s`` folded ("folders" → "folder", "entries" → "entry"), and
    nothing else: families are looked up by the words a request says, and "modified" or
    "stored" there describe a state, not the action that "modify" or "store" ask for."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def _table() -> tuple[dict[Key, list[tuple[str, ...]]], set[Key]]:
    """(word or phrase → the stemmed tokens it may also be written as, the compounds)."""
    table: dict[Key, list[tuple[str, ...]]] = {}

    def add(key: Key, target: tuple[str, ...]) -> None:
        if key and target and target not in table.setdefault(key, []):
            table[key].append(target)

    for word, phrases in SYNONYMS.items():  # one way
        for phrase in phrases:
            add(tuple(words(word)), tuple(tokens(phrase)))
    compounds = set()
    for family in FAMILIES:  # both ways: every member → every other member
        members = [m.strip() for m in family.split("|")]
        for m in members:
            if "_" in m:
                compounds.add(tuple(words(m)))
            for other in members:
                if other != m and " " not in other and not other.startswith("~"):  # said, never searched for
                    add(tuple(words(m.lstrip("~"))), tuple(tokens(other)))
    return table, compounds


_ALTERNATIVES, _COMPOUNDS = _table()
_LONGEST = max(len(k) for k in _ALTERNATIVES)

# What a request names by its shape rather than its words: a URL, a file name, a path,
# a #channel or an @user. The words inside ("notes/todo.md", "example.com") are names,
# not what the request is about, so the span is read as the one word it stands for.
_SHAPES = (
    (re.compile(r"\b(?:https?|ftp)://\S+|\bwww\.\S+|(?<![\w@/.])[\w-]+(?:\.[\w-]+)*\.(?:com|org|net|io|dev|ai|app|co|edu|gov)(?:/\S*)?(?![\w.])", re.IGNORECASE), " url "),
    (re.compile(r"(?<![\w@])(?:~|\.{1,2})?(?:/?[\w*~-]+)*/?[\w*-]*[\w*]\.[A-Za-z][A-Za-z0-9]{0,3}(?![\w.])"), " file "),
    (re.compile(r"(?<![\w.])\.[A-Za-z][A-Za-z0-9]{0,3}(?![\w.])"), " file "),  # ".log", as in "every .log file"
    (re.compile(r"(?<![\w])(?:~|\.{1,2})?/[\w.*-]+(?:/[\w.*-]*)*"), " path "),
    (re.compile(r"(?<![\w&])#[A-Za-z][\w-]*"), " channel "),
    (re.compile(r"(?<![\w])@[A-Za-z][\w.-]*"), " user "),
)


def _read_shapes(text: str) -> str:
    for pattern, word in _SHAPES:
        text = pattern.sub(word, text)
    return text


def query_slots(text: str) -> list[Slot]:
    """A query as slots, one per word or table phrase: its own tokens (weight 1) and
    the other members of its families (``SYNONYM_WEIGHT``). A tool scores the best
    alternative of each slot, so a word's synonyms never add up; an alternative that the
    query says outright, or that an earlier word brought, is left out. A phrase of the
    table ("close to", "look up") stands for its family, not for its words; a compound
    ("pull request") for both."""
    raw = words(_read_shapes(text))
    stems = [_stemmed(w) for w in raw]
    folded = [_plural(w) for w in raw]
    direct = {stem for w, stem in zip(raw, stems) if w not in STOPWORDS}

    def entry(i: int, n: int) -> Key | None:  # the table's key for raw[i:i+n]: as said, else plural folded
        for key in (tuple(raw[i : i + n]), tuple(folded[i : i + n])):
            if key in _ALTERNATIVES:
                return key
        return None

    seen: set[tuple[str, ...]] = set()
    slots = []
    i = 0
    while i < len(raw):
        n, key = next(((n, k) for n in range(min(_LONGEST, len(raw) - i), 1, -1) if (k := entry(i, n))), (1, entry(i, 1)))
        own = tuple(stems[j] for j in range(i, i + n) if raw[j] not in STOPWORDS)
        slot: Slot = [(own, 1.0)] if own and (n == 1 or key in _COMPOUNDS) else []
        for target in _ALTERNATIVES.get(key, ()) if key else ():
            if target not in seen and not set(target) <= direct:
                seen.add(target)
                slot.append((target, SYNONYM_WEIGHT))
        if slot:
            slots.append(slot)
        i += n
    return slots


def query_tokens(text: str) -> list[str]:
    """Every token a query may match: its own and its alternatives'."""
    return [t for slot in query_slots(text) for terms, _w in slot for t in terms]
