"""The tool search index behind Search and Code mode (Layer 7 progressive disclosure).

In: the tool definitions one caller may see (``ToolHost.visible_tools()``: namespaced,
policy-filtered). Out: exact lookup by exposed name, and ranked search.

The default ranker is lexical and costs well under a millisecond a query:

* **Fields, BM25F.** Each tool is split into fields — its own name (split on the
  namespace delimiter, ``snake_case``, ``kebab-case`` and ``camelCase``), the backend
  id, title and description, argument names, the values arguments enumerate (a
  ``state`` of ``open``/``closed``) — stemmed (Snowball if installed, else a light
  suffix stripper; in prose a name such as "GitHub" stays one word). A term's frequency
  is normalised per field and weighted by field (:class:`Weights`: name 3, backend 2,
  description 1, argument names 0.5, enumerated values 0.1) before
  one BM25 saturation (Robertson & Zaragoza's BM25F), so a word in a tool's name counts
  more than the same word in a long description.
* **Word families** (``words.py``, ``vocabulary.py``). A query word may match the other
  members of its families (``fetch``/``retrieve``/``get``, ``folder``/``directory``,
  ``pr``/``pull request``…) at a discount (``SYNONYM_WEIGHT``) and at the IDF of the
  family as a whole. Each query word is one *slot* that scores its best alternative, so
  synonyms never pile up. Spans that name something by their shape (a URL,
  ``notes/todo.md``, ``#general``, coordinates) are read as the one word they stand for;
  values (``owner/repo``, a quoted title, ``KEY=value``) as none.
* **Priors** (``scoring.py``): the share of a tool's own name words the query says;
  how well the query matches the tool's backend as a whole, and whether it names a
  backend ("in notion", "k8s"); word pairs said side by side in both; a shaped value
  that fills one of the tool's arguments (or two words that name it, "place ID"); and verb roles (``roles.py``): a
  tool whose
  name verb only changes things ranks down for a request that asks to read, and the
  other way round ("list all pods" vs ``exec_in_pod``), and one whose name verb is of
  the family of the request's changing verb ranks up ("get rid of …" → ``…_delete``).

With an encoder (``embed.py``), the ranking is hybrid: 0.6 × the lexical score (scaled
to the best hit) + 0.4 × cosine similarity of MiniLM sentence vectors.

One index exists per *catalogue version* — the exact set of tool definitions a caller
sees — and an :class:`IndexCache` shares it between every session and request that
sees the same set (callers with the same policy share one index). A change to one
tool builds a new index that re-tokenises only that tool: the per-definition token
lists are cached by content digest and the postings over a few hundred short
documents cost a few milliseconds. Because an index only ever holds what its
callers may see, a hidden tool cannot appear in a result, nor shift the ranking of
visible ones through its term statistics; :meth:`ToolIndex.search` filters by the
caller's visible names again all the same.

Never does I/O; never mutates a tool definition it is given.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from hopline.layers.capability.toolmodes.roles import read
from hopline.layers.capability.toolmodes.scoring import (  # noqa: F401 (re-exported)
    BACKEND_BONUS,
    NAME_BONUS,
    Priors,
    bm25f,
    postings,
)

# The words themselves live in words.py and vocabulary.py; these names stay importable from here.
from hopline.layers.capability.toolmodes.vocabulary import FAMILIES, STOPWORDS, SYNONYMS  # noqa: F401 (re-exported)
from hopline.layers.capability.toolmodes.words import (  # noqa: F401 (re-exported)
    STEMMER_NAME,
    SYNONYM_WEIGHT,
    Slot,
    query_slots,
    query_tokens,
    tokens,
    words,
)

# -- documents ------------------------------------------------------------------------
FIELDS = ("name", "prefix", "description", "arguments", "argument_text", "choices")


@dataclass(frozen=True, slots=True)
class Weights:
    """How much a term counts in each field of a tool (BM25F field weights)."""

    name: float = 3  # the tool's own name (after the namespace prefix)
    prefix: float = 2  # the backend id in ``{backend}__{name}``
    description: float = 1  # title and description
    arguments: float = 0.5  # argument (property) names
    argument_text: float = 0  # argument descriptions (off: long, generic, and noisy)
    choices: float = 0.1  # the values an argument enumerates ("state": open, closed, all)


@dataclass(frozen=True, slots=True)
class Params:
    """BM25F: field weights, per-field length normalisation ``b``, one saturation ``k1``."""

    weights: Weights = Weights()
    k1: float = 1.2
    b: float = 0.75


def fields(tool: dict[str, Any], delimiter: str = "__") -> dict[str, list[str]]:
    """The tokens of each of one tool's :data:`FIELDS`."""
    name = str(tool.get("name", ""))
    prefix, sep, own = name.partition(delimiter)
    if not sep:
        prefix, own = "", name
    out: dict[str, list[str]] = {f: [] for f in FIELDS}
    out["name"] = tokens(own)
    out["prefix"] = tokens(prefix)
    for key in ("title", "description"):
        if isinstance(tool.get(key), str):
            out["description"] += tokens(tool[key], prose=True)
    schema = tool.get("inputSchema")
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if isinstance(properties, dict):
        for arg, spec in properties.items():
            out["arguments"] += tokens(str(arg))
            if isinstance(spec, dict):
                out["choices"] += [t for value in _choices(spec) for t in tokens(value)]
                if isinstance(spec.get("description"), str):
                    out["argument_text"] += tokens(spec["description"])
    return out


ENUM_VALUES = 12  # an argument's first enum values are indexed


def _choices(spec: dict[str, Any]) -> list[str]:
    """The string values an argument's schema enumerates (``enum``, or one in ``anyOf``/``oneOf``)."""
    values = [v for v in spec.get("enum", ()) if isinstance(v, str)]
    for key in ("anyOf", "oneOf"):
        for option in spec.get(key, ()) if isinstance(spec.get(key), list) else ():
            if isinstance(option, dict):
                values += [v for v in option.get("enum", ()) if isinstance(v, str)]
    return values[:ENUM_VALUES]


def digest(tool: dict[str, Any]) -> bytes:
    """Content digest of one definition: what decides whether it must be re-tokenised."""
    return hashlib.blake2b(orjson.dumps(tool, option=orjson.OPT_SORT_KEYS), digest_size=16).digest()


# -- one index ------------------------------------------------------------------------
HYBRID_BM25_WEIGHT = 0.6  # hybrid score: 0.6 × lexical (scaled to the best hit) + 0.4 × cosine
MIN_COSINE = 0.1  # a hybrid hit must beat this much semantic similarity (or some lexical match)


@dataclass(eq=False)
class ToolIndex:
    """The lexical index (and optionally embeddings) of one catalogue version. Built by
    :class:`IndexCache`, read-only after."""

    tools: list[dict[str, Any]]
    documents: list[dict[str, list[str]]]  # fields() of each tool
    vectors: Any = None  # (n, d) L2-normalised tool vectors, or None for the lexical ranker alone
    encoder: Any = field(default=None, repr=False)
    expand: bool = True  # word families and shapes in queries
    params: Params = Params()
    by_name: dict[str, dict[str, Any]] = field(init=False)

    def __post_init__(self) -> None:
        self.by_name = {t["name"]: t for t in self.tools}
        weights, k1, b = self.params.weights, self.params.k1, self.params.b
        self._postings = postings(self.documents, weights, k1, b)
        self._priors = Priors(self.documents, weights, k1, b)

    def __repr__(self) -> str:
        ranker = "hybrid" if self.vectors is not None else "bm25f"
        return f"<ToolIndex {len(self.tools)} tools, {len(self._postings)} terms, {ranker}>"

    @property
    def hybrid(self) -> bool:
        return self.vectors is not None and self.encoder is not None

    def names(self) -> list[str]:
        return [t["name"] for t in self.tools]

    def lookup(self, name: str, allowed: Collection[str] | None = None) -> dict[str, Any] | None:
        tool = self.by_name.get(name)
        return tool if tool is not None and (allowed is None or name in allowed) else None

    def search(self, query: str, k: int, allowed: Collection[str] | None = None) -> list[dict[str, Any]]:
        """The ``k`` best tools for ``query``, best first; ties keep catalogue order."""
        return [tool for tool, _score in self.scored(query, k, allowed)]

    def lexical(self, query: str) -> Any:
        """The lexical score of every tool for ``query``: BM25F over the query's slots ×
        the priors of ``scoring.py`` (name words said, backend, pairs, fills, verb roles)."""
        request = read(query, self.expand)
        scores = bm25f(request.slots, self._postings, len(self.tools), request.weights)
        if not request.slots or not scores.any():
            return scores
        return self._priors.apply(scores, request, self._postings)

    def scored(self, query: str, k: int, allowed: Collection[str] | None = None) -> list[tuple[dict[str, Any], float]]:
        if not self.tools or k <= 0:
            return []
        scores = self.lexical(query)
        if self.hybrid:
            if not query.strip():
                return []
            best = float(scores.max()) if len(scores) else 0.0
            lexical = scores / best if best > 0 else scores
            semantic = self.vectors @ self.encoder.encode([query])[0]
            scores = HYBRID_BM25_WEIGHT * lexical + (1 - HYBRID_BM25_WEIGHT) * semantic
            floor = MIN_COSINE * (1 - HYBRID_BM25_WEIGHT)
        else:
            floor = 0.0
        order = sorted(range(len(self.tools)), key=lambda i: -scores[i])  # stable: catalogue order on ties
        out: list[tuple[dict[str, Any], float]] = []
        for i in order:
            if scores[i] <= floor or len(out) >= k:
                break
            tool = self.tools[i]
            if allowed is None or tool["name"] in allowed:
                out.append((tool, float(scores[i])))
        return out


# -- the shared cache -----------------------------------------------------------------
class IndexCache:
    """Catalogue version → :class:`ToolIndex`, shared by every session of a gateway.

    ``index_for(tools)`` returns the index of exactly that set of definitions,
    building it on first sight; token lists (and vectors) of definitions seen before
    are reused, so a change to one tool re-tokenises one tool. Least recently used
    indexes and documents are dropped beyond the bounds. ``cached(tools)`` answers
    without building, so a caller on an event loop can build in a thread.
    """

    def __init__(
        self,
        *,
        delimiter: str = "__",
        params: Params = Params(),
        encoder: Any = None,
        expand: bool = True,
        max_indexes: int = 64,
        max_documents: int = 20_000,
    ) -> None:
        self.delimiter = delimiter
        self.expand = expand
        self.params = params
        self.encoder = encoder  # an embed.Encoder for the hybrid ranker, or None
        self.max_indexes = max_indexes
        self.max_documents = max_documents
        self._indexes: OrderedDict[bytes, ToolIndex] = OrderedDict()
        self._documents: OrderedDict[bytes, tuple[dict[str, list[str]], Any]] = OrderedDict()
        self._lock = threading.Lock()
        self.builds = 0  # indexes built (for tests and metrics)
        self.tokenised = 0  # definitions tokenised

    def __repr__(self) -> str:
        return f"<IndexCache {len(self._indexes)} indexes, {len(self._documents)} documents, {self.builds} builds>"

    @staticmethod
    def version(tools: Iterable[dict[str, Any]]) -> tuple[bytes, list[dict[str, Any]], list[bytes]]:
        """(catalogue version key, usable definitions, their digests)."""
        usable = [t for t in tools if isinstance(t, dict) and isinstance(t.get("name"), str)]
        digests = [digest(t) for t in usable]
        return hashlib.blake2b(b"".join(digests), digest_size=16).digest(), usable, digests

    def cached(self, key: bytes) -> ToolIndex | None:
        with self._lock:
            index = self._indexes.get(key)
            if index is not None:
                self._indexes.move_to_end(key)
            return index

    def index_for(self, tools: Iterable[dict[str, Any]]) -> ToolIndex:
        key, usable, digests = self.version(tools)
        return self.cached(key) or self.build(key, usable, digests)

    def build(self, key: bytes, tools: list[dict[str, Any]], digests: list[bytes]) -> ToolIndex:
        """Build (or find, if another thread just built it) the index of ``tools``."""
        with self._lock:
            index = self._indexes.get(key)
            if index is not None:
                return index
            fresh = [(d, t) for d, t in zip(digests, tools) if d not in self._documents]
            texts = [fields(t, self.delimiter) for _d, t in fresh]
            vectors = self._encode([t for _d, t in fresh])
            for i, (d, _t) in enumerate(fresh):
                self._documents[d] = (texts[i], None if vectors is None else vectors[i])
            self.tokenised += len(fresh)
            entries = [self._documents[d] for d in digests]
            for d in digests:
                self._documents.move_to_end(d)
            while len(self._documents) > self.max_documents:
                self._documents.popitem(last=False)
            matrix = None
            if self.encoder is not None and entries:
                import numpy as np

                matrix = np.stack([vector for _doc, vector in entries])
            index = ToolIndex(
                tools,
                [doc for doc, _vector in entries],
                vectors=matrix,
                encoder=self.encoder,
                expand=self.expand,
                params=self.params,
            )
            self.builds += 1
            self._indexes[key] = index
            while len(self._indexes) > self.max_indexes:
                self._indexes.popitem(last=False)
            return index

    def _encode(self, tools: list[dict[str, Any]]) -> Any:
        if self.encoder is None or not tools:
            return None
        from hopline.layers.capability.toolmodes.embed import tool_text

        return self.encoder.encode([tool_text(t, self.delimiter) for t in tools])
