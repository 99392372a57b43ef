"""Contexts learned online from query embeddings, for when callers give no task labels.

The paper's section 6 names "learned query clusters from embedding similarity" as the
label-free way to condition Memory Worth on context. :class:`QueryClusters` is the
simplest online version: leader clustering on cosine similarity with running-mean
centroids. Each query joins the most similar centroid if it is at least ``threshold``
similar, otherwise it opens a new cluster (up to ``max_clusters``; then it joins the
nearest). One pass, no stored queries, deterministic given the order of the queries.
"""

from __future__ import annotations

import numpy as np

from memworth.errors import ValidationError

__all__ = ["QueryClusters"]


class QueryClusters:
    """Online leader clustering of query embeddings by cosine similarity.

    Parameters
    ----------
    threshold
        Least cosine similarity to a centroid for a query to join it, in [-1, 1].
    max_clusters
        Most clusters; once reached, every query joins its nearest centroid.

    Examples
    --------
    >>> import numpy as np
    >>> clusters = QueryClusters(threshold=0.8)
    >>> clusters.assign(np.array([1.0, 0.0])), clusters.assign(np.array([0.0, 2.0]))
    (0, 1)
    >>> clusters.assign(np.array([0.9, 0.1]))
    0
    >>> clusters.sizes.tolist()
    [2, 1]
    """

    def __init__(self, threshold: float = 0.5, max_clusters: int = 64) -> None:
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not -1 <= threshold <= 1:
            raise ValidationError("threshold", f"must be a cosine similarity in [-1, 1], got {threshold!r}")
        if isinstance(max_clusters, bool) or not isinstance(max_clusters, int) or max_clusters < 1:
            raise ValidationError("max_clusters", f"must be an integer >= 1, got {max_clusters!r}")
        self.threshold = float(threshold)
        self.max_clusters = max_clusters
        self._sums = np.zeros((0, 0))  # running sum of the unit vectors of each cluster (capacity rows)
        self._units = np.zeros((0, 0))  # the same, scaled to unit length: the centroids
        self._sizes: list[int] = []

    @property
    def centroids(self) -> np.ndarray:
        """Unit-length centroid of every cluster, one row each."""
        return self._units[: len(self._sizes)].copy()

    @property
    def sizes(self) -> np.ndarray:
        """Queries assigned to each cluster so far."""
        return np.array(self._sizes, dtype=np.int64)

    def __len__(self) -> int:
        return len(self._sizes)

    def _unit(self, vectors: np.ndarray) -> np.ndarray:
        try:
            arr = np.asarray(vectors, dtype=float)
        except (TypeError, ValueError):
            raise ValidationError("vector", "must be numbers") from None
        if arr.ndim != 2 or arr.shape[1] == 0:
            raise ValidationError("vector", f"must be a non-empty 1-D vector (or one per row), got shape {arr.shape}")
        if self._sums.size and arr.shape[1] != self._sums.shape[1]:
            raise ValidationError("vector", f"has dimension {arr.shape[1]}; earlier queries had {self._sums.shape[1]}")
        if not np.isfinite(arr).all():
            raise ValidationError("vector", "must be finite")
        norms = np.linalg.norm(arr, axis=1, keepdims=True)
        if (norms == 0).any():
            raise ValidationError("vector", "must not be all zeros (a zero vector has no direction)")
        return arr / norms

    def assign(self, vector: np.ndarray) -> int:
        """The cluster of one query embedding (opening a new cluster if none is close)."""
        return int(self.assign_many(np.asarray(vector)[None, :] if np.ndim(vector) == 1 else vector)[0])

    def _grow(self, dimension: int, capacity: int) -> None:
        for name in ("_sums", "_units"):
            grown = np.zeros((capacity, dimension))
            old = getattr(self, name)
            if old.size:
                grown[: len(old)] = old
            setattr(self, name, grown)

    def assign_many(self, vectors: np.ndarray) -> np.ndarray:
        """The clusters of many query embeddings (one per row), in order, as one pass would give."""
        units = self._unit(vectors)
        if not self._sums.size:
            self._grow(units.shape[1], min(self.max_clusters, 16))
        out = np.empty(units.shape[0], dtype=np.int64)
        sizes = self._sizes
        for t, u in enumerate(units):
            count = len(sizes)
            label = count
            if count:
                sims = self._units[:count] @ u
                best = int(sims.argmax())
                if sims[best] >= self.threshold or count >= self.max_clusters:
                    label = best
            if label == count:
                if count == len(self._sums):
                    self._grow(units.shape[1], min(self.max_clusters, 2 * count))
                sizes.append(0)
            total = self._sums[label]
            total += u
            norm = np.sqrt(total @ total)
            self._units[label] = total / norm if norm > 0 else u  # opposite queries can cancel out
            sizes[label] += 1
            out[t] = label
        return out
