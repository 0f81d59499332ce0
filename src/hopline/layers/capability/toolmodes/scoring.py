"""How the search index scores tools for a request (``index.py`` holds the index itself).

* **BM25F over slots** (:func:`bm25f`). Each slot of a request (``words.py``) scores its
  best alternative, times the slot's weight (words of the request's topic, "about my
  kubernetes plans", and of a purpose clause, "so I can check …", count less). A word's family members are one
  *concept*: they share the IDF of
  every tool that says any of them (as Lucene's synonym query does), so a rare synonym
  never outweighs a common one ("open a ticket": ``add_…`` no longer beats
  ``create_…`` because "add" is rarer), while the word the request says keeps its own
  IDF — unless the table marks it ``~`` (several senses: "open" the word is no better
  evidence than "open" the family).
* **Priors** (:class:`Priors`), factors on that score, each from one general signal:

  - *name*: the share of a tool's own name words the request says (``NAME_BONUS``);
  - *backend*: how well the request matches the tool's backend as a whole
    (``BACKEND_BONUS``, one merged document per backend);
  - *named backend*: a request that names a backend by its id ("in notion"; an id
    word no other backend's tool says), or by a word no tool says whose family the id
    heads ("k8s", "kubectl"; not "db", a word of the family headed by "sql", for
    postgres), ranks the tools of every other backend down (``NAMED_PENALTY``);
  - *pairs*: two words the request says side by side that a tool also says side by
    side ("knowledge base", "place id": ``PAIR_BONUS`` each, at most ``PAIR_CAP``);
  - *fills*: a value named by its shape fills one of the tool's arguments
    (``FILL_BONUS``: coordinates → ``latitude``; ``notes.md`` → ``path``; ``375x812`` →
    ``width``; ``session:abc`` → ``key``; a Kubernetes kind, "pods" → ``resourceType``),
    and so do two words said side by side that name an argument ("this place ID" →
    ``place_id``: the request has the value that argument asks for; ``ARGUMENT_PAIRS``);
  - *verb roles*: the tool's name verb says the other mood than the request's main
    verb ("list all pods" vs ``exec_in_pod``: ``CLASH_PENALTY``; ``roles.py``); or it is
    of the family of a main verb that changes things ("get rid of the deployment" →
    ``kubectl_delete``, "file a ticket" → ``create_issue``: ``ROLE_BONUS``; read verbs
    are left out, as "get"/"list" name too many tools to tell them apart; but a request
    that reads about a topic, "what do you know about X", ranks search tools up: a
    ``TOPIC_ACTION``); or it undoes what the main verb does ("record that …" vs
    ``delete_relations``: ``OPPOSITE_PENALTY``);
  - *topic*: a backend said in the topic ("what do you remember about my kubernetes
    plans") is not named (no ``NAMED_PENALTY`` for the others).

Pure NumPy over arrays built once per index (imported when first used: the gateway
imports tool modes whether or not one is configured).
"""

from __future__ import annotations

import math
from itertools import pairwise
from typing import Any

from hopline.layers.capability.toolmodes.roles import (
    READ,
    WRITE,
    Request,
    tool_actions,
    tool_moods,
)
from hopline.layers.capability.toolmodes.vocabulary import FAMILIES, READS
from hopline.layers.capability.toolmodes.words import LOOSE, Slot, tokens

NAME_BONUS = 0.5  # × (1 + 0.5 × share of the tool's own name words the query says)
BACKEND_BONUS = 1.0  # × (1 + 1.0 × the backend's score / the best backend's)
NAMED_PENALTY = 0.5  # × 0.5 for a tool of another backend than the one(s) the request names
PAIR_BONUS = 0.3  # × (1 + 0.3 × word pairs the tool says side by side too)
PAIR_CAP = 2
PAIR_FIELDS = ("name", "description", "arguments")
FILL_BONUS = 0.4  # × 1.4 for a tool with an argument the request's shaped value fills
ARGUMENT_PAIRS = True  # two words said side by side that name an argument fill it as a value does
CLASH_PENALTY = 0.6  # × 0.6 for a tool whose name verb says the other mood
ROLE_BONUS = 0.2  # × 1.2 for a tool whose name verb is of the family of the request's main verb
ROLE_SKIP = READS  # … unless that verb reads
OPPOSITE_PENALTY = 0.7  # × 0.7 for a tool whose name verb undoes what the request's main verb does
OPPOSITES = {"create": "delete", "save": "delete", "delete": "create"}  # keep/record/add ↔ remove
TOPIC_ACTION = "search"  # a request that reads about a topic ranks search tools up as above

Posting = tuple[Any, Any, float]  # document positions, saturated pseudo-frequency in each, IDF


def postings(documents: list[dict[str, list[str]]], weights: Any, k1: float, b: float) -> dict[str, Posting]:
    """term → (document positions, its saturated BM25F pseudo-frequency in each, its IDF).

    BM25F (Robertson & Zaragoza): a term's pseudo-frequency in a document is the sum
    over fields of weight × count / (1 − b + b × field length / mean field length), then
    saturated once with ``k1``; the score is that × the term's IDF over documents."""
    import numpy as np

    n = len(documents)
    if not n:
        return {}
    names = list(documents[0])
    mean = {f: (sum(len(d[f]) for d in documents) / n) or 1.0 for f in names}
    pseudo: dict[str, dict[int, float]] = {}
    for i, doc in enumerate(documents):
        for f in names:
            weight = getattr(weights, f, 0)
            if not weight or not doc[f]:
                continue
            norm = weight / (1 - b + b * len(doc[f]) / mean[f])
            for term in doc[f]:
                row = pseudo.setdefault(term, {})
                row[i] = row.get(i, 0.0) + norm
    out = {}
    for term, row in pseudo.items():
        positions = np.fromiter(row.keys(), dtype=np.int32, count=len(row))
        tf = np.fromiter(row.values(), dtype=np.float32, count=len(row))
        out[term] = (positions, tf * (k1 + 1) / (k1 + tf), _idf(n, len(row)))
    return out


def _idf(n: int, df: int) -> float:
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def bm25f(slots: list[Slot], index: dict[str, Posting], n: int, weights: tuple[float, ...] = ()) -> Any:
    """The score of each of ``n`` documents: per slot, its best weighted alternative (a
    family's members at their concept's IDF; one of several tokens scores their sum),
    summed over slots."""
    import numpy as np

    scores = np.zeros(n, dtype=np.float32)
    for s, slot in enumerate(slots):
        best = concept = hit = own = None
        for terms, weight in slot:
            found = [index[t] for t in terms if t in index]
            if not found:
                continue
            if len(terms) > 1:  # a phrase or compound: the sum of its tokens
                alternative = np.zeros(n, dtype=np.float32)
                for positions, sat, idf in found:
                    alternative[positions] += idf * sat
                alternative *= weight
                best = alternative if best is None else np.maximum(best, alternative)
                continue
            positions, sat, idf = found[0]
            if concept is None:
                concept, hit = np.zeros(n, dtype=np.float32), np.zeros(n, dtype=bool)
            concept[positions] = np.maximum(concept[positions], weight * sat)
            hit[positions] = True
            if weight == 1.0 and terms[0] not in LOOSE:
                own = (positions, idf * sat)
        if concept is not None:
            concept *= _idf(n, int(np.count_nonzero(hit)))
            if own is not None:
                concept[own[0]] = np.maximum(concept[own[0]], own[1])
            best = concept if best is None else np.maximum(best, concept)
        if best is not None:
            scores += best * (weights[s] if weights else 1.0)
    return scores


def _inverted(rows: list[set[Any]]) -> dict[Any, Any]:
    import numpy as np

    out: dict[Any, list[int]] = {}
    for i, row in enumerate(rows):
        for key in row:
            out.setdefault(key, []).append(i)
    return {k: np.array(v, dtype=np.int32) for k, v in out.items()}


class Priors:
    """The per-index arrays the priors read, and :meth:`apply`."""

    def __init__(self, documents: list[dict[str, list[str]]], weights: Any, k1: float, b: float) -> None:
        import numpy as np

        n = len(documents)
        self.names = _inverted([set(d["name"]) for d in documents])  # name word → tools
        self.name_sizes = np.array([max(len(set(d["name"])), 1) for d in documents], dtype=np.float32)
        self.pairs = _inverted([{p for f in PAIR_FIELDS for p in pairwise(d[f])} for d in documents])
        self.arguments = _inverted([set(d["arguments"]) for d in documents])
        self.named_arguments = _inverted([set(pairwise(d["arguments"])) for d in documents])  # ("place", "id")
        moods = [tool_moods(d["name"]) for d in documents]
        self.actions = _inverted([tool_actions(d["name"]) for d in documents])  # action head → tools
        self.clash = {
            READ: np.array([WRITE in m and READ not in m for m in moods], dtype=bool),
            WRITE: np.array([READ in m and WRITE not in m for m in moods], dtype=bool),
        }
        groups: dict[tuple[str, ...], int] = {}  # one document per backend, all its tools' fields
        self.group = np.array([groups.setdefault(tuple(d["prefix"]), len(groups)) for d in documents], dtype=np.int32)
        merged: list[dict[str, list[str]]] = [{f: [] for f in documents[0]} for _ in groups] if n else []
        for g, doc in zip(self.group, documents):
            for f, terms in doc.items():
                merged[g][f] += terms
        self.backends = postings(merged, weights, k1, b) if len(groups) > 1 else {}
        said: dict[str, set[int]] = {}  # word → the backends whose tools say it
        for g, doc in zip(self.group.tolist(), documents):
            for f in ("name", "description", "arguments"):
                for t in doc[f]:
                    said.setdefault(t, set()).add(g)
        # backend id word → its backend, if no other backend's tool says the word too
        self.prefixes = _inverted([{t for t in key if said.get(t, set()) <= {g}} for g, key in enumerate(groups)])

    def apply(self, scores: Any, request: Request, known: dict[str, Posting]) -> Any:
        """``scores`` (BM25F) × every prior, for ``request``; ``known``: the tools' terms."""
        import numpy as np

        slots = request.slots
        said: dict[str, float] = {}
        for s, slot in enumerate(slots):
            scale = request.weights[s] if request.weights else 1.0
            for terms, weight in slot:
                for t in terms:
                    said[t] = max(said.get(t, 0.0), weight * scale)
        cover = np.zeros(len(scores), dtype=np.float32)
        for t, weight in said.items():
            if (positions := self.names.get(t)) is not None:
                cover[positions] += weight
        scores *= 1 + NAME_BONUS * cover / self.name_sizes
        if self.backends:
            backend = bm25f(slots, self.backends, int(self.group.max()) + 1, request.weights)
            if (best := float(backend.max())) > 0:
                scores *= 1 + BACKEND_BONUS * (backend / best)[self.group]
            named = self._named([s for s in slots if not set(s[0][0]) <= request.topic], known)
            if named.size:
                scores[~np.isin(self.group, named)] *= NAMED_PENALTY
        owns = [slot[0][0][0] for slot in slots if slot[0][1] == 1.0 and len(slot[0][0]) == 1]
        pairs = np.zeros(len(scores), dtype=np.float32)
        for pair in set(pairwise(owns)):
            if (positions := self.pairs.get(pair)) is not None:
                pairs[positions] += 1
        scores *= 1 + PAIR_BONUS * np.minimum(pairs, PAIR_CAP)
        fit = [p for t in request.fills if (p := self.arguments.get(t)) is not None]
        if ARGUMENT_PAIRS:  # "this place ID": the request has what an argument (place_id) asks for
            fit += [p for pair in set(pairwise(owns)) if (p := self.named_arguments.get(pair)) is not None]
        if fit:
            scores[np.unique(np.concatenate(fit))] *= 1 + FILL_BONUS
        if request.mood is not None:
            scores[self.clash[request.mood]] *= CLASH_PENALTY
        heads = set(request.action) - ROLE_SKIP
        if TOPIC_ACTION and request.topic and request.mood == READ:  # "what do you know about X": a search for X
            heads.add(TOPIC_ACTION)
        acting = [p for h in heads if (p := self.actions.get(h)) is not None]
        if acting:
            scores[np.unique(np.concatenate(acting))] *= 1 + ROLE_BONUS
        undoing = {OPPOSITES[h] for h in request.action if h in OPPOSITES} - set(request.action)
        against = [p for h in undoing if (p := self.actions.get(h)) is not None]
        if against:
            scores[np.unique(np.concatenate(against))] *= OPPOSITE_PENALTY
        return scores

    def _named(self, slots: list[Slot], known: dict[str, Posting]) -> Any:
        """The backends the request names by id: a word it says, or one no tool says that
        the table has as another name of the id ("k8s", "kubectl" → kubernetes: the id
        heads their family; not "db" → postgres, nor "knowledge" → memory)."""
        import numpy as np

        named: list[Any] = []
        for slot in slots:
            own = slot[0][0] if slot[0][1] == 1.0 else ()
            unknown = not any(t in known for t in own)
            for t in own:
                for id_ in (t, *(_ALIASES.get(t, ()) if unknown else ())):
                    if (p := self.prefixes.get(id_)) is not None:
                        named.append(p)
        return np.unique(np.concatenate(named)) if named else np.zeros(0, dtype=np.int32)


def _aliases() -> dict[str, frozenset[str]]:
    """Stemmed one-word family member → the stemmed heads of its families."""
    out: dict[str, set[str]] = {}
    for family in FAMILIES:
        head, *members = (tokens(m.strip().lstrip("~")) for m in family.split("|"))
        for m in members:
            if len(m) == 1 and len(head) == 1:
                out.setdefault(m[0], set()).add(head[0])
    return {k: frozenset(v) for k, v in out.items()}


_ALIASES = _aliases()
