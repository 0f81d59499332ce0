"""The tool search index behind Search and Code mode (Layer 7 progressive disclosure).

In: the tool definitions one caller may see (``ToolHost.visible_tools()``: namespaced,
policy-filtered). Out: exact lookup by exposed name and BM25-ranked search over each
tool's name (split on the namespace delimiter, ``snake_case``, ``kebab-case`` and
``camelCase``; counted three times), backend id, description and argument names,
stemmed (Snowball if installed, else a light suffix stripper). Queries add a small
table of general synonyms (``make`` → ``create``, ``folder`` → ``directory``…).
With an encoder (``embed.py``), the ranking is hybrid: 0.3 × BM25 (scaled to the best
hit) + 0.7 × cosine similarity of MiniLM sentence vectors.

One index exists per *catalogue version* — the exact set of tool definitions a caller
sees — and an :class:`IndexCache` shares it between every session and request that
sees the same set (callers with the same policy share one index). A change to one
tool builds a new index that re-tokenises only that tool: the per-definition token
lists are cached by content digest and the BM25 matrix over a few hundred short
documents costs about a millisecond. Because an index only ever holds what its
callers may see, a hidden tool cannot appear in a result, nor shift the ranking of
visible ones through its term statistics; :meth:`ToolIndex.search` filters by the
caller's visible names again all the same.

Never does I/O; never mutates a tool definition it is given.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

# -- tokenisation ---------------------------------------------------------------------
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_WORD = re.compile(r"[^\W_]+")  # letters and digits; `_`, `-`, `__`, `.`, `/` all split

# English function words, plus what people put around a request ("can you please …").
# Words that name an action or object ("all", "get", "list", "new") are kept: they
# tell tools apart.
STOPWORDS = frozenset(
    ["a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this", "to", "was", "will", "with", "i", "me", "my", "we", "our", "us", "you", "your", "please", "want", "need", "would", "like", "could", "can", "should", "do", "does", "did", "let", "some", "so", "just", "which", "what", "how", "its", "also"]
)


# Query words people use for what tool catalogues name otherwise: CRUD verbs and a few
# nouns every developer tool list spells its own way. A query word adds these terms
# (documents are never expanded). General vocabulary, not tuned to one catalogue.
SYNONYMS: dict[str, tuple[str, ...]] = {
    "make": ("create",), "new": ("create",), "add": ("create",), "start": ("create",), "setup": ("create",),
    "remove": ("delete",), "drop": ("delete",), "erase": ("delete",), "forget": ("delete",), "destroy": ("delete",),
    "show": ("get", "list"), "view": ("get",), "see": ("get",), "fetch": ("get",), "retrieve": ("get",), "load": ("read",),
    "which": ("list",), "all": ("list",), "every": ("list",),
    "change": ("update", "edit"), "modify": ("update", "edit"), "set": ("update",),
    "find": ("search",), "look": ("search",), "lookup": ("search",), "locate": ("search",),
    "folder": ("directory",), "dir": ("directory",), "repo": ("repository",), "repos": ("repository",),
    "pr": ("pull", "request"), "prs": ("pull", "request"), "mr": ("merge", "request"),
    "picture": ("image",), "photo": ("image",), "drawing": ("image",), "draw": ("generate", "image"),
    "remember": ("memory", "create"), "recall": ("memory", "search"), "memorize": ("memory", "create"),
    "execute": ("run",), "exec": ("run",), "launch": ("run",),
    "ticket": ("issue",), "bug": ("issue",), "say": ("message",), "send": ("post", "message"),
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


def query_tokens(text: str) -> list[str]:
    """A query's tokens plus the :data:`SYNONYMS` of its words."""
    out = []
    for word in words(text):
        if word not in STOPWORDS:
            out.append(_stemmed(word))
        out.extend(_stemmed(extra) for extra in SYNONYMS.get(word, ()))
    return out


@dataclass(frozen=True, slots=True)
class Weights:
    """How often each field of a tool counts in its document (BM25F by repetition)."""

    name: int = 3  # the tool's own name (after the namespace prefix)
    prefix: int = 1  # the backend id in ``{backend}__{name}``
    description: int = 1
    arguments: int = 1  # argument (property) names
    argument_text: int = 0  # argument descriptions (off: long, generic, and noisy)


def document(tool: dict[str, Any], delimiter: str = "__", weights: Weights = Weights()) -> list[str]:
    """The token list one tool contributes to the index."""
    name = str(tool.get("name", ""))
    prefix, sep, own = name.partition(delimiter)
    if not sep:
        prefix, own = "", name
    doc = tokens(own) * weights.name + tokens(prefix) * weights.prefix
    title = tool.get("title")
    if isinstance(title, str):
        doc += tokens(title)
    description = tool.get("description")
    if isinstance(description, str):
        doc += tokens(description) * weights.description
    schema = tool.get("inputSchema")
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if isinstance(properties, dict):
        for arg, spec in properties.items():
            doc += tokens(str(arg)) * weights.arguments
            if weights.argument_text and isinstance(spec, dict) and isinstance(spec.get("description"), str):
                doc += tokens(spec["description"]) * weights.argument_text
    return doc


def digest(tool: dict[str, Any]) -> bytes:
    """Content digest of one definition: what decides whether it must be re-tokenised."""
    return hashlib.blake2b(orjson.dumps(tool, option=orjson.OPT_SORT_KEYS), digest_size=16).digest()


# -- one index ------------------------------------------------------------------------
HYBRID_BM25_WEIGHT = 0.3  # hybrid score: 0.3 × BM25 (scaled to the best hit) + 0.7 × cosine


@dataclass(eq=False)
class ToolIndex:
    """BM25 (and optionally embeddings) over one catalogue version. Built by
    :class:`IndexCache`, read-only after."""

    tools: list[dict[str, Any]]
    documents: list[list[str]]
    vectors: Any = None  # (n, d) L2-normalised tool vectors, or None for BM25 alone
    encoder: Any = field(default=None, repr=False)
    expand: bool = True  # add SYNONYMS to queries
    k1: float = 1.2
    b: float = 0.75
    by_name: dict[str, dict[str, Any]] = field(init=False)
    _bm25: Any = field(init=False, repr=False)

    def __post_init__(self) -> None:
        import bm25s  # numpy/scipy: only paid for when a Search or Code mode is configured

        self.by_name = {t["name"]: t for t in self.tools}
        self._bm25 = bm25s.BM25(k1=self.k1, b=self.b)
        self._bm25.index([d or ["\x00"] for d in self.documents] or [["\x00"]], show_progress=False)
        self._vocab = self._bm25.vocab_dict

    def __repr__(self) -> str:
        ranker = "hybrid" if self.vectors is not None else "bm25"
        return f"<ToolIndex {len(self.tools)} tools, {len(self._vocab)} terms, {ranker}>"

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

    def scored(self, query: str, k: int, allowed: Collection[str] | None = None) -> list[tuple[dict[str, Any], float]]:
        if not self.tools or k <= 0:
            return []
        import numpy as np

        terms = [t for t in (query_tokens(query) if self.expand else tokens(query)) if t in self._vocab]
        scores = self._bm25.get_scores(terms) if terms else np.zeros(len(self.tools), dtype=np.float32)
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


MIN_COSINE = 0.1  # a hybrid hit must beat this much semantic similarity (or some BM25 match)


# -- the shared cache -----------------------------------------------------------------
class IndexCache:
    """Catalogue version → :class:`ToolIndex`, shared by every session of a gateway.

    ``index_for(tools)`` returns the index of exactly that set of definitions,
    building it on first sight; token lists (and vectors) of definitions seen before
    are reused, so a change to one tool re-tokenises one tool. Least recently used
    indexes and documents are dropped beyond the bounds. ``cached(tools)`` answers
    without building, so a caller on an event loop can build in a thread.
    """

    def __init__(self, *, delimiter: str = "__", weights: Weights = Weights(), encoder: Any = None, expand: bool = True, max_indexes: int = 64, max_documents: int = 20_000) -> None:
        self.delimiter = delimiter
        self.expand = expand
        self.weights = weights
        self.encoder = encoder  # an embed.Encoder for the hybrid ranker, or None
        self.max_indexes = max_indexes
        self.max_documents = max_documents
        self._indexes: OrderedDict[bytes, ToolIndex] = OrderedDict()
        self._documents: OrderedDict[bytes, tuple[list[str], Any]] = OrderedDict()
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
            texts = [document(t, self.delimiter, self.weights) for _d, t in fresh]
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
            index = ToolIndex(tools, [doc for doc, _vector in entries], vectors=matrix, encoder=self.encoder, expand=self.expand)
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
