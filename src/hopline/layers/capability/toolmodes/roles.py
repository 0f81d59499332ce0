"""How a request is read for ranking (:func:`read`), and the verb roles of tools.

A request is read once into a :class:`Request`: its slots (``words.py``), the argument
names that the values it names by shape fill, and the *mood* of its main verb — whether
it asks to read something or to change it. The main verb is the first word of an
action family (``vocabulary.READS``/``WRITES``) that says one of the two; a request that
opens with a question word reads ("what's in PR 12", but "how do I create …" is read on),
and so does a giving verb with the caller as object ("tell me", "send me"); a word of
both kinds ("open": create, get, navigate) decides nothing unless an article settles it
("open a ticket").
A tool's moods are those of the verbs in its own name: a tool whose name only says the
other mood (``exec_in_pod`` for "list all pods") is ranked down (``scoring.py``).
Pure functions and data.
"""

from __future__ import annotations

from dataclasses import dataclass

from hopline.layers.capability.toolmodes import words as w
from hopline.layers.capability.toolmodes.vocabulary import (
    ARTICLES,
    FAMILIES,
    QUESTIONS,
    READS,
    STOPWORDS,
    WRITES,
)

READ, WRITE, OTHER = "read", "write", "other"
_POLITE = STOPWORDS - QUESTIONS  # skipped before the main verb


def _moods() -> tuple[dict[str, frozenset[str]], dict[str, frozenset[str]]]:
    """(word as said → the moods of its families, stemmed word of a tool name → the moods
    of the families it is a plain member of)."""
    said: dict[str, set[str]] = {}
    named: dict[str, set[str]] = {}
    for family in FAMILIES:
        members = [m.strip() for m in family.split("|")]
        head = members[0].lstrip("~")
        mood = READ if head in READS else WRITE if head in WRITES else OTHER
        for m in members:
            if " " in m or "_" in m:
                continue
            said.setdefault(m.lstrip("~"), set()).add(mood)
            if not m.startswith("~") and mood != OTHER:
                for t in w.tokens(m):
                    named.setdefault(t, set()).add(mood)
    return {k: frozenset(v) for k, v in said.items()}, {k: frozenset(v) for k, v in named.items()}


_SAID, _NAMED = _moods()
# "tell me", "send me the logo": a giving verb with the caller as its object asks to read.
_GIVING = frozenset(m.lstrip("~") for f in FAMILIES if f.startswith("send|") for m in f.split("|") if " " not in m)
_RECEIVERS = frozenset({"me", "us"})
_HOW_TO = frozenset({"do", "does", "can", "could", "should", "would", "to"})  # "how do I create …" asks to create


def mood(raw: list[str]) -> str | None:
    """``READ`` or ``WRITE`` for a request's words (as said), or None if its main verb says
    neither clearly."""
    for i, word in enumerate(raw):
        if word in _POLITE:
            continue
        if word in QUESTIONS:
            if word == "how" and i + 1 < len(raw) and raw[i + 1] in _HOW_TO:
                continue
            return READ
        if word in _GIVING and i + 1 < len(raw) and raw[i + 1] in _RECEIVERS:
            return READ
        if (word,) in w.MAKING and i + 1 < len(raw) and raw[i + 1] in ARTICLES:
            return WRITE
        moods = _SAID.get(word) or _SAID.get(w.plural(word))
        if not moods:
            continue
        if len(moods) == 1 and OTHER not in moods:
            return next(iter(moods))
        # a word of several moods: read on for one that decides
    return None


def tool_moods(name: list[str]) -> frozenset[str]:
    """The moods of the verbs a tool's own (stemmed) name words say."""
    out: frozenset[str] = frozenset()
    for t in name:
        out |= _NAMED.get(t, frozenset())
    return out


@dataclass(frozen=True, slots=True)
class Request:
    """A query as the ranker reads it."""

    slots: list[w.Slot]
    fills: frozenset[str]  # stemmed argument names its shaped values fill
    mood: str | None


def read(query: str, expand: bool = True) -> Request:
    """Read ``query`` once. Without ``expand``: its words alone, no families, shapes or mood."""
    if not expand:
        return Request([[((t,), 1.0)] for t in w.tokens(query)], frozenset(), None)
    text, shapes = w.read_shapes(query)
    raw = w.words(text)
    return Request(w.slots(raw), w.fills(shapes), mood(raw))
