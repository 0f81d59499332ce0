"""How a request is read for ranking (:func:`read`), and the verb roles of tools.

A request is read once into a :class:`Request`: its slots (``words.py``), the argument
names that the values it names by shape fill, and its *main verb*: the first word or
phrase of an action family (``vocabulary.FAMILIES[:ACTIONS]``: "get rid of" before
"get") that says one mood — whether it asks to read something (``vocabulary.READS``)
or to change it (``WRITES``) — or that says neither ("click"). A request that opens
with a question word reads ("what's in PR 12", but "how do I create …" is read on; an
"is" later on, as in "the chooser is open", asks nothing), and so does a giving verb
with the caller as object ("tell me", "give me"); a word of several senses ("open":
create, get, navigate) decides nothing unless an article settles it ("open a ticket";
likewise "file a ticket", "drop a note"), and without one its create sense is dropped.
The verb's families are the request's *action*; a word after a determiner or a be-verb
("the open PRs", "still open") is no verb. The request also knows its topic words
("about my kubernetes plans") and each slot's weight (topic and purpose words count
less), and a Kubernetes kind it names ("pods") fills a resource argument.
A tool's actions and moods are those of the verbs in its own name — its first run of
action words: ``get_pull_request_reviews`` gets, and "reviews" there is a thing, no
"approve" (``NAME_VERBS_LEADING``); a plural a verb of several senses takes ("reports")
is read as that verb ("report") to settle its sense. A tool whose name
only says the other mood (``exec_in_pod`` for "list all pods") ranks down, and one whose
name says the request's action ("get rid of …" → ``kubectl_delete``) ranks up
(``scoring.py``). Pure functions and data.
"""

from __future__ import annotations

from dataclasses import dataclass

from hopline.layers.capability.toolmodes import words as w
from hopline.layers.capability.toolmodes.vocabulary import (
    ACTIONS,
    ARTICLES,
    DETERMINERS,
    FAMILIES,
    KINDS,
    QUESTIONS,
    READS,
    STOPWORDS,
    WRITES,
)

READ, WRITE, OTHER = "read", "write", "other"
CREATE = "create"  # the head of the first family
_POLITE = STOPWORDS - QUESTIONS  # skipped before the main verb


def _moods() -> tuple[dict[tuple[str, ...], frozenset[str]], dict[str, frozenset[str]]]:
    """(word or phrase as said → the heads of its action families, stemmed word of a tool
    name → the heads of the action families it is a plain member of)."""
    said: dict[tuple[str, ...], set[str]] = {}
    named: dict[str, set[str]] = {}
    for family in FAMILIES[:ACTIONS]:
        members = [m.strip() for m in family.split("|")]
        head = members[0].lstrip("~")
        for m in members:
            said.setdefault(tuple(w.words(m.lstrip("~"))), set()).add(head)
            if not m.startswith("~") and " " not in m and "_" not in m:
                for t in w.tokens(m):
                    named.setdefault(t, set()).add(head)
    return {k: frozenset(v) for k, v in said.items()}, {k: frozenset(v) for k, v in named.items()}


_SAID, _NAMED = _moods()
# a word marked ``~`` in an action family → the heads of those families (its verb senses)
_VERBAL = {
    m.strip()[1:]: frozenset(f.split("|")[0].lstrip("~") for f in FAMILIES[:ACTIONS] if m in f.split("|"))
    for f in FAMILIES[:ACTIONS]
    for m in f.split("|")
    if m.startswith("~") and " " not in m
}
_LONGEST = max(len(k) for k in _SAID)
# "tell me", "send me the logo": a giving verb with the caller as its object asks to read.
_GIVING = frozenset(m.lstrip("~") for f in FAMILIES if f.startswith("send|") for m in f.split("|") if " " not in m) | {
    "give",
    "bring",
    "hand",
}
_RECEIVERS = frozenset({"me", "us"})
_HOW_TO = frozenset({"do", "does", "can", "could", "should", "would", "to"})  # "how do I create …" asks to create


def _mood(heads: frozenset[str]) -> set[str]:
    return {READ if h in READS else WRITE if h in WRITES else OTHER for h in heads}


def _verb(raw: list[str], i: int) -> tuple[int, frozenset[str]]:
    """(words, action heads) of the longest action word or phrase at ``raw[i]``; (1, ∅)."""
    for n in range(min(_LONGEST, len(raw) - i), 0, -1):
        key = tuple(raw[i : i + n])
        folded = key[:-1] + (w.plural(key[-1]),)
        heads = _SAID.get(key) or (_SAID.get(folded) if n == 1 else None)
        if heads:
            if n == 1 and (
                key in w.MAKING or folded in w.MAKING
            ):  # "file a ticket" creates; "the file", "reports to" do not
                heads = frozenset({CREATE}) if i + 1 < len(raw) and raw[i + 1] in ARTICLES else heads - {CREATE}
            return n, heads
    return 1, frozenset()


def main_verb(raw: list[str]) -> tuple[str | None, frozenset[str]]:
    """(``READ``/``WRITE`` or None, the action heads) of a request's main verb: the first
    action word or phrase ("get rid of" before "get") that says one mood, or says
    neither ("click"); one of several moods ("open") is read on from. A request that
    opens with a question word reads, and so does a giving verb to the caller."""
    action: frozenset[str] = frozenset()
    i = opening = 0
    while i < len(raw):
        word = raw[i]
        if word in _GIVING and i + 1 < len(raw) and raw[i + 1] in _RECEIVERS:
            return READ, action or frozenset({"get"})
        if word in _POLITE:
            i += 1
            opening += opening == i - 1
            continue
        if word in QUESTIONS and i == opening:  # "what's in PR 12", not "the chooser is open"
            if word == "how" and i + 1 < len(raw) and raw[i + 1] in _HOW_TO:
                i += 1
                continue
            return READ, action
        n, heads = _verb(raw, i)
        if n == 1 and i and raw[i - 1] in DETERMINERS and (raw[i],) in w.ACTING:  # "the open PRs": no verb
            heads = heads - _VERBAL.get(raw[i], frozenset())
        i += n
        if not heads:
            continue
        moods = _mood(heads)
        if moods == {OTHER}:  # "click", "navigate": the main verb, of neither mood
            return None, heads
        if len(moods) == 1 and OTHER not in moods:
            return next(iter(moods)), heads
        action = action or heads
        # a word of several moods: read on for one that decides
    return None, action


def mood(raw: list[str]) -> str | None:
    """``READ`` or ``WRITE`` for a request's words (as said), or None if its main verb says
    neither clearly."""
    return main_verb(raw)[0]


NAME_VERBS_LEADING = True  # a tool's name verbs: its first run of action words, not nouns after them


def tool_actions(name: list[str]) -> frozenset[str]:
    """The action heads of the verbs a tool's own (stemmed) name words say: the first run
    of action words (``get_pull_request_reviews`` gets; "reviews" there is a thing)."""
    out: frozenset[str] = frozenset()
    for t in name:
        heads = _NAMED.get(t, frozenset())
        if NAME_VERBS_LEADING and out and not heads:
            break
        out |= heads
    return out


def tool_moods(name: list[str]) -> frozenset[str]:
    """The moods of the verbs a tool's own (stemmed) name words say."""
    return frozenset(_mood(tool_actions(name)) - {OTHER})


@dataclass(frozen=True, slots=True)
class Request:
    """A query as the ranker reads it."""

    slots: list[w.Slot]
    fills: frozenset[str]  # stemmed argument names its shaped values fill
    mood: str | None
    action: frozenset[str] = frozenset()  # the action family heads of its main verb
    topic: frozenset[str] = frozenset()  # stems of the words it names as its topic ("about …")
    weights: tuple[float, ...] = ()  # per slot (none: all 1): topic words count less


def read(query: str, expand: bool = True) -> Request:
    """Read ``query`` once. Without ``expand``: its words alone, no families, shapes or mood."""
    if not expand:
        return Request([[((t,), 1.0)] for t in w.tokens(query)], frozenset(), None)
    text, shapes = w.read_shapes(query)
    text, topic = w.topics(text)
    raw = w.phrasal(w.words(text, prose=True))
    slots = w.slots(raw)
    verb_mood, action = main_verb(raw)
    aside = w.purposes(text)
    weights = tuple(
        w.TOPIC_WEIGHT if set(s[0][0]) <= topic else w.PURPOSE_WEIGHT if set(s[0][0]) <= aside else 1.0 for s in slots
    )
    if any(word in KINDS or w.plural(word) in KINDS for word in raw):  # "list the pods": a resource kind
        shapes = shapes | {"kind"}
    return Request(slots, w.fills(shapes), verb_mood, action, topic, weights)
