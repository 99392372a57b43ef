"""Nearest-neighbour search over unit vectors: exact, or HNSW (faiss) for large stores.

Both index positions ``0 .. len - 1`` in the order vectors were added, and return the
``n`` positions of highest cosine similarity (inner product of unit vectors) with their
similarities. Exact search is one matrix-vector product: about 15 ms at 100k memories of
384 dimensions on one core, and filtering or re-scoring its results is trivial. HNSW
(faiss ``IndexHNSWFlat``, inner product) answers in well under a millisecond at a million
vectors, with recall@10 near 1 on clustered data; it needs the ``index`` extra
(``faiss-cpu``).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from memworth.errors import MemworthError, ValidationError

__all__ = ["ExactIndex", "HNSWIndex", "VectorIndex", "faiss_available"]


@runtime_checkable
class VectorIndex(Protocol):
    """What the store needs from a vector index."""

    def __len__(self) -> int: ...

    def add(self, vectors: np.ndarray) -> None:
        """Append vectors (rows, unit length)."""
        ...

    def search(self, query: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Positions and similarities of the ``n`` nearest vectors, best first."""
        ...


def _rows(vectors: np.ndarray, dimension: int) -> np.ndarray:
    arr = np.ascontiguousarray(vectors, dtype=np.float32)
    if arr.ndim != 2 or arr.shape[1] != dimension:
        raise ValidationError("vectors", f"must have shape (rows, {dimension}), got {arr.shape}")
    return arr


class ExactIndex:
    """All vectors in one contiguous float32 matrix; search is a matrix-vector product.

    Examples
    --------
    >>> import numpy as np
    >>> index = ExactIndex(2)
    >>> index.add(np.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]]))
    >>> positions, sims = index.search(np.array([0.0, 1.0]), 2)
    >>> positions.tolist(), [round(float(x), 2) for x in sims]
    ([1, 2], [1.0, 0.8])
    """

    def __init__(self, dimension: int) -> None:
        self.dimension = dimension
        self._matrix = np.zeros((0, dimension), dtype=np.float32)
        self._size = 0

    def __len__(self) -> int:
        return self._size

    @property
    def matrix(self) -> np.ndarray:
        return self._matrix[: self._size]

    def add(self, vectors: np.ndarray) -> None:
        rows = _rows(vectors, self.dimension)
        need = self._size + rows.shape[0]
        if need > self._matrix.shape[0]:
            grown = np.zeros((max(need, 2 * self._matrix.shape[0], 64), self.dimension), dtype=np.float32)
            grown[: self._size] = self._matrix[: self._size]
            self._matrix = grown
        self._matrix[self._size : need] = rows
        self._size = need

    def search(self, query: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        if self._size == 0 or n <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        sims = self.matrix @ np.asarray(query, dtype=np.float32)
        n = min(n, self._size)
        top = np.argpartition(-sims, n - 1)[:n] if n < self._size else np.arange(self._size)
        order = top[np.argsort(-sims[top], kind="stable")]
        return order.astype(np.int64), sims[order]


def faiss_available() -> bool:
    try:
        import faiss  # noqa: F401
    except ImportError:
        return False
    return True


class HNSWIndex:
    """A faiss HNSW graph on inner product (cosine for unit vectors).

    Parameters
    ----------
    dimension
        Vector length.
    neighbours
        Graph degree M (32: faiss's common choice for 384-d text embeddings).
    ef_search
        Candidates explored per query; higher is slower and more exact.
    ef_construction
        Candidates explored while inserting.
    """

    def __init__(self, dimension: int, neighbours: int = 32, ef_search: int = 128, ef_construction: int = 80) -> None:
        try:
            import faiss
        except ImportError:
            raise MemworthError("the HNSW index needs faiss: pip install 'memworth[index]'") from None
        self.dimension = dimension
        self._index = faiss.IndexHNSWFlat(dimension, neighbours, faiss.METRIC_INNER_PRODUCT)
        self._index.hnsw.efConstruction = ef_construction
        self._index.hnsw.efSearch = ef_search

    def __len__(self) -> int:
        return int(self._index.ntotal)

    def add(self, vectors: np.ndarray) -> None:
        rows = _rows(vectors, self.dimension)
        if rows.shape[0]:
            self._index.add(rows)

    def search(self, query: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        if len(self) == 0 or n <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        n = min(n, len(self))
        self._index.hnsw.efSearch = max(self._index.hnsw.efSearch, n)
        sims, positions = self._index.search(np.asarray(query, dtype=np.float32)[None, :], n)
        keep = positions[0] >= 0
        return positions[0][keep].astype(np.int64), sims[0][keep]
