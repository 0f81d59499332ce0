"""The words of tools and queries, for the search index (``index.py``): tokenising
(``snake_case``, ``kebab-case``, ``camelCase``, the namespace delimiter), stemming
(Snowball if installed, else a light suffix stripper; a few irregular plurals first),
the word families a query word may stand for (``vocabulary.py``, at
``SYNONYM_WEIGHT``), and the *slots* a query is read as (each slot scores its best
alternative once; spans that name something by their shape — a URL, a path,
``#channel``, ``40.71, -74.00``, ``375x812``, ``session:abc``, ``owner/repo``, a
quoted value — are one word or none, and the value fills an argument: ``shapes.py``;
a pronoun that names no thing, "anything", is no word of the request unless a "server"
follows it, and "everything" is "all" ("tear down everything it created");
a word that is also a verb names a thing or a state after a determiner or "is"/"still"
— "the cache key", "open late" — and brings no verb family), and the words a request
names as its topic ("about …", "relates to …") or its purpose ("so I can …"). In prose,
a name with a capital inside ("GitHub", "CronJob") is one word.
Pure functions; the word lists themselves are in ``vocabulary.py``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from hopline.layers.capability.toolmodes.shapes import read_shapes
from hopline.layers.capability.toolmodes.vocabulary import (
    ACTIONS,
    ARTICLES,
    DETERMINERS,
    FAMILIES,
    FILLS,
    PRONOUNS,
    SERVERS,
    STOPWORDS,
    SYNONYMS,
)

# -- tokenisation ---------------------------------------------------------------------
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z]{2})")  # "PRs", "IDs": one word
_WORD = re.compile(r"[^\W_]+")  # letters and digits; `_`, `-`, `__`, `.`, `/` all split
# Plurals no stemmer folds: "child blocks" and "block children" are the same words.
_IRREGULAR = {
    "children": "child",
    "people": "person",
    "men": "man",
    "women": "woman",
    "indices": "index",
    "vertices": "vertex",
    "matrices": "matrix",
    "analyses": "analysis",
    "mice": "mouse",
    "feet": "foot",
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


# In prose, a capitalised word with a capital inside is a name ("GitHub", "CronJob",
# "JavaScript"), one word; in an identifier ("getFileContents") every hump is a word.
_NAME = re.compile(r"(?<![\w-])[A-Z][a-z]+(?:[A-Z][a-z]+)+(?![\w-])")


def words(text: str, prose: bool = False) -> list[str]:
    """Lower-cased words of ``text``: identifiers split at every case and separator change
    (in ``prose``, a name such as "GitHub" is kept whole)."""
    if prose and _NAME.search(text):
        text = _NAME.sub(lambda m: m.group().lower(), text)
    return [w.lower() for w in _WORD.findall(_CAMEL.sub(" ", text))]


def stemmed(word: str) -> str:
    """One lower-cased word, stemmed (cached)."""
    stem = _stem_cache.get(word)
    if stem is None:
        if len(_stem_cache) > 50_000:
            _stem_cache.clear()
        stem = _stem_cache[word] = _stem(_IRREGULAR.get(word, word))
    return stem


def tokens(text: str, prose: bool = False) -> list[str]:
    """Stemmed words of ``text`` without stopwords (what documents are made of)."""
    return [stemmed(word) for word in words(text, prose) if word not in STOPWORDS]


# -- the family table -----------------------------------------------------------------
SYNONYM_WEIGHT = 0.8  # a family member counts this much of the word the query says

Key = tuple[str, ...]  # words as a request says them (lower-cased, not stemmed)
Slot = list[tuple[tuple[str, ...], float]]  # (stemmed tokens, weight) alternatives


def plural(word: str) -> str:
    """A word with a plural ``-s`` folded ("folders" → "folder", "entries" → "entry"), and
    nothing else: families are looked up by the words a request says, and "modified" or
    "stored" there describe a state, not the action that "modify" or "store" ask for."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 2 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def _members(family: str) -> list[str]:
    return [m.strip() for m in family.split("|")]


def _table() -> tuple[dict[Key, list[tuple[str, ...]]], set[Key], set[str]]:
    """(word or phrase → the stemmed tokens it may also be written as, the compounds,
    the stems of words marked ``~``)."""
    table: dict[Key, list[tuple[str, ...]]] = {}

    def add(key: Key, target: tuple[str, ...]) -> None:
        if key and target and target not in table.setdefault(key, []):
            table[key].append(target)

    for word, phrases in SYNONYMS.items():  # one way
        for phrase in phrases:
            add(tuple(words(word)), tuple(tokens(phrase)))
    compounds, loose = set(), set()
    for family in FAMILIES:  # both ways: every member → every other member
        members = _members(family)
        for m in members:
            if "_" in m:
                compounds.add(tuple(words(m)))
            if m.startswith("~") and " " not in m:
                loose.update(tokens(m[1:]))
            for other in members:
                if other != m and " " not in other and not other.startswith("~"):  # said, never searched for
                    add(tuple(words(m.lstrip("~"))), tuple(tokens(other)))
    return table, compounds, loose


_ALTERNATIVES, _COMPOUNDS, LOOSE = _table()
_LONGEST = max(len(k) for k in _ALTERNATIVES)


def _making() -> dict[Key, frozenset[tuple[str, ...]]]:
    """The create family's words that have other senses too ("~open", "~start") → the
    alternatives only their create sense brings."""
    others: dict[Key, set[tuple[str, ...]]] = {}
    for family in FAMILIES[1:]:
        members = _members(family)
        for m in members:
            others.setdefault(tuple(words(m.lstrip("~"))), set()).update(
                tuple(tokens(o)) for o in members if o != m and " " not in o and not o.startswith("~")
            )
    return {
        key: frozenset(t for t in _ALTERNATIVES[key] if t not in others.get(key, ()))
        for key in (tuple(words(m[1:])) for m in _members(FAMILIES[0]) if m.startswith("~"))
    }


MAKING = _making()


def _acting() -> dict[Key, frozenset[tuple[str, ...]]]:
    """A word marked ``~`` in an action family ("~cache", "~log", "~open") → the
    alternatives only its verb senses bring: after a determiner ("the cache key", "the
    open PRs", "a log file") the word names a thing or a state, and they are dropped."""
    verbal: dict[Key, set[tuple[str, ...]]] = {}
    other: dict[Key, set[tuple[str, ...]]] = {}
    for n, family in enumerate(FAMILIES):
        members = _members(family)
        for m in members:
            key = tuple(words(m.lstrip("~")))
            into = verbal if n < ACTIONS and m.startswith("~") else other
            into.setdefault(key, set()).update(
                tuple(tokens(o)) for o in members if o != m and " " not in o and not o.startswith("~")
            )
    return {key: frozenset(t - other.get(key, set())) for key, t in verbal.items()}


ACTING = _acting()
_CREATE = tuple(tokens(_members(FAMILIES[0])[0]))


# -- shapes (``shapes.py``) -------------------------------------------------------------
def fills(shapes: set[str]) -> frozenset[str]:
    """The stemmed argument names the values of these shapes fill."""
    return frozenset(t for shape in shapes for t in tokens(FILLS.get(shape, shape)))


# -- queries --------------------------------------------------------------------------
EVERY = {"everything": "all"}  # "delete everything it created": all of them (not "the everything server")


def slots(raw: list[str]) -> list[Slot]:
    """A query's words (as said, shapes read) as slots, one per word or table phrase: its
    own tokens (weight 1) and the other members of its families (``SYNONYM_WEIGHT``). A
    tool scores the best alternative of each slot, so a word's synonyms never add up;
    an alternative that the query says outright, or that an earlier word brought, is
    left out. A phrase of the table ("close to", "look up") stands for its family, not
    for its words; a compound ("pull request") for both. A create word with other senses
    ("open") means create before "a"/"new" and its other senses elsewhere; "new" after a
    create word ("make a new page") adds nothing. A pronoun (``PRONOUNS``) is no word
    unless a server word follows ("the everything server"); "everything" is "all"
    (``EVERY``: "delete everything you created" is a clean-up of all of it)."""
    named = [i + 1 < len(raw) and raw[i + 1] in SERVERS for i in range(len(raw))]  # "the everything server"
    raw = [
        w if w not in PRONOUNS or named[i] else EVERY[w]
        for i, w in enumerate(raw)
        if w not in PRONOUNS or named[i] or w in EVERY
    ]
    stems = [stemmed(w) for w in raw]
    folded = [plural(w) for w in raw]
    direct = {stem for w, stem in zip(raw, stems) if w not in STOPWORDS}

    def entry(i: int, n: int) -> Key | None:  # the table's key for raw[i:i+n]: as said, else plural folded
        for key in (tuple(raw[i : i + n]), tuple(folded[i : i + n])):
            if key in _ALTERNATIVES:
                return key
        return None

    seen: set[tuple[str, ...]] = set()
    out = []
    i = 0
    while i < len(raw):
        n, key = next(
            ((n, k) for n in range(min(_LONGEST, len(raw) - i), 1, -1) if (k := entry(i, n))), (1, entry(i, 1))
        )
        own = tuple(stems[j] for j in range(i, i + n) if raw[j] not in STOPWORDS)
        if (
            n == 1 and raw[i] in ARTICLES and out and any(terms == _CREATE for terms, _w in out[-1])
        ):  # "make a new page": "new" adds nothing
            i += 1
            continue
        slot: Slot = [(own, 1.0)] if own and (n == 1 or key in _COMPOUNDS) else []
        targets = _ALTERNATIVES.get(key, []) if key else []
        if key in MAKING:  # "open a ticket" makes one; "open the file" does not
            making = i + n < len(raw) and raw[i + n] in ARTICLES
            targets = [t for t in targets if (t in MAKING[key]) == making]
        if key in ACTING and i and raw[i - 1] in DETERMINERS:  # "the cache key": a thing, no verb
            targets = [t for t in targets if t not in ACTING[key]]
        for target in targets:
            if target not in seen and not set(target) <= direct:
                seen.add(target)
                slot.append((target, SYNONYM_WEIGHT))
        if slot:
            out.append(slot)
        i += n
    return out


_OBJECTS = frozenset({"it", "them", "this", "that", "these", "those", "everything"})


def phrasal(raw: list[str]) -> list[str]:
    """A request's words with an object pronoun moved out of a phrase of the table it
    splits ("look it up" → "look up it", "shut them down")."""
    out = list(raw)
    for i in range(len(out) - 2):
        if out[i + 1] in _OBJECTS and (out[i], out[i + 2]) in _ALTERNATIVES:
            out[i + 1], out[i + 2] = out[i + 2], out[i + 1]
    return out


# "what do you remember about my kubernetes plans", "news about the Postgres release": the
# words after a topic preposition say what the request is about, not which tool serves it
# (up to a clause break or a preposition that says where: "about pods in kubernetes").
_TOPIC = re.compile(
    r"\b(?:about|regarding|concerning|relat(?:es|ed|ing) to|on the (?:subject|topic) of)\s+([^.?!,;:()]*)",
    re.IGNORECASE,
)
_WHERE = frozenset({"in", "on", "from", "with", "using", "via", "through", "into", "inside", "to", "for", "at"})
TOPIC_WEIGHT = 0.6  # a topic word counts this much of a word that says what to do it with
_INTRO = re.compile(r"\b(?:relat(?:es|ed|ing) to|on the (?:subject|topic) of)\b", re.IGNORECASE)


# "… so I can check the mobile layout", "… so nothing new lands on it": a purpose clause
# says why, not what.
_PURPOSE = re.compile(
    r"\bso (?:that |(?=(?:i|you|we|they|it|he|she|nothing|the|our|my|your|this|that|its|their)\b))([^.?!;:()]*)",
    re.IGNORECASE,
)
PURPOSE_WEIGHT = 0.75  # a word of a purpose clause counts this much


def purposes(text: str) -> frozenset[str]:
    """The stems of the words of a request's purpose clauses ("so I can …")."""
    return frozenset(
        stemmed(word)
        for match in _PURPOSE.finditer(text)
        for word in words(match.group(1), prose=True)
        if word not in STOPWORDS
    )


def topics(text: str) -> tuple[str, frozenset[str]]:
    """(``text`` with "relates to" and the like said as "about", the stems of the words it
    names as its topic: after "about", "regarding"…)."""
    text = _INTRO.sub(" about ", text)
    out: set[str] = set()
    for match in _TOPIC.finditer(text):
        for word in words(match.group(1), prose=True):
            if word in _WHERE:
                break
            if word not in STOPWORDS:
                out.add(stemmed(word))
    return text, frozenset(out)


def query_slots(text: str) -> list[Slot]:
    """The slots of a request (:func:`slots` of its words, shapes read)."""
    return slots(phrasal(words(topics(read_shapes(text)[0])[0], prose=True)))


def query_tokens(text: str) -> list[str]:
    """Every token a query may match: its own and its alternatives'."""
    return [t for slot in query_slots(text) for terms, _w in slot for t in terms]
