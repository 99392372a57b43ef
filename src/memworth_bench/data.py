"""Seeded benchmark data: retrieval episodes, embedding-shaped vectors, and an encoder over them."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from memworth.embed.encoders import check_texts
from memworth.errors import ValidationError

__all__ = ["VectorEncoder", "clustered_embeddings", "episodes", "memory_texts", "words"]


def episodes(rng: np.random.Generator, n_episodes: int, k: int, memories: int) -> tuple[np.ndarray, np.ndarray]:
    """``n_episodes`` rows of ``k`` distinct ids uniform in [0, memories), and Bernoulli(0.5) outcomes.

    Rows holding a duplicate are redrawn until none do, so each row is a uniform k-subset.

    Examples
    --------
    >>> ids, ok = episodes(np.random.default_rng(0), 5, 3, 10)
    >>> ids.shape, ok.shape, all(len(set(r)) == 3 for r in ids.tolist())
    ((5, 3), (5,), True)
    """
    ids = rng.integers(0, memories, size=(n_episodes, k), dtype=np.int64)
    while True:
        ordered = np.sort(ids, axis=1)
        bad = np.flatnonzero((ordered[:, 1:] == ordered[:, :-1]).any(axis=1))
        if bad.size == 0:
            break
        ids[bad] = rng.integers(0, memories, size=(bad.size, k), dtype=np.int64)
    return ids, rng.random(n_episodes) < 0.5


def clustered_embeddings(n: int, seed: int, dim: int = 384, intrinsic: int = 16, clusters: int = 200) -> np.ndarray:
    """``n`` unit float32 vectors shaped like sentence embeddings.

    Topic clusters on a ``intrinsic``-dimensional subspace of ``dim`` dimensions, plus
    isotropic noise. (Uniform random vectors would make every graph index look broken,
    and no text embedding looks like them.) The subspace and the cluster centres are
    fixed; ``seed`` draws the points, so memories and queries share topics.

    Examples
    --------
    >>> x = clustered_embeddings(3, seed=1, dim=32)
    >>> x.shape, x.dtype, bool(np.allclose(np.linalg.norm(x, axis=1), 1, atol=1e-5))
    ((3, 32), dtype('float32'), True)
    """
    rng = np.random.default_rng(seed)
    basis = np.random.default_rng(99).standard_normal((intrinsic, dim)).astype(np.float32)
    centres = 2 * np.random.default_rng(98).standard_normal((clusters, intrinsic)).astype(np.float32)
    out = np.empty((n, dim), dtype=np.float32)
    for start in range(0, n, 100_000):
        m = min(100_000, n - start)
        z = centres[rng.integers(0, clusters, m)] + rng.standard_normal((m, intrinsic)).astype(np.float32)
        x = z @ basis + 0.5 * rng.standard_normal((m, dim)).astype(np.float32)
        out[start : start + m] = x / np.linalg.norm(x, axis=1, keepdims=True)
    return out


def words(count: int = 5000) -> list[str]:
    """A vocabulary of ``count`` made-up words (w0, w1, ...)."""
    return [f"w{i}" for i in range(count)]


def memory_texts(rng: np.random.Generator, n: int, length: int = 12) -> list[str]:
    """``n`` texts of ``length`` words drawn from :func:`words`."""
    vocab = np.array(words())
    picks = rng.integers(0, len(vocab), size=(n, length))
    return [" ".join(row) for row in vocab[picks].tolist()]


class VectorEncoder:
    """An encoder that looks vectors up instead of computing them: ``"m 12"`` is ``memories[12]``.

    Lets a store hold a million embedding-shaped vectors without running a model: the
    store under test does everything else (validation, storage, index, ranking, logging)
    as it would with a real encoder. Texts are ``"m <row>"`` for memories and
    ``"q <row>"`` for queries.

    Examples
    --------
    >>> enc = VectorEncoder(np.eye(3, dtype=np.float32), np.eye(3, dtype=np.float32)[::-1])
    >>> enc.encode(["m 0", "q 0"]).tolist()
    [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
    """

    def __init__(self, memories: np.ndarray, queries: np.ndarray) -> None:
        self._tables = {"m": memories, "q": queries}

    @property
    def name(self) -> str:
        return f"bench-vectors-{self.dimension}"

    @property
    def dimension(self) -> int:
        return int(self._tables["m"].shape[1])

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        items = check_texts(texts)
        out = np.zeros((len(items), self.dimension), dtype=np.float32)
        picks: dict[str, tuple[list[int], list[int]]] = {kind: ([], []) for kind in self._tables}
        for i, text in enumerate(items):
            kind, _, row = text.partition(" ")
            table = self._tables.get(kind)
            if table is None or not row.isdigit() or int(row) >= len(table):
                raise ValidationError("texts", f"expected 'm <row>' or 'q <row>' within range, got {text!r}")
            picks[kind][0].append(i)
            picks[kind][1].append(int(row))
        for kind, (at, rows) in picks.items():  # one gather per table
            if len(at) == len(items):
                return np.ascontiguousarray(self._tables[kind][rows], dtype=np.float32)
            if at:
                out[at] = self._tables[kind][rows]
        return out
