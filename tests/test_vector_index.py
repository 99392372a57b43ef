"""Vector indexes: exact search is exact; HNSW finds the true neighbours of clustered embeddings."""

from __future__ import annotations

import numpy as np
import pytest

from memworth import ValidationError
from memworth.embed.vector_index import ExactIndex, HNSWIndex


def clustered(n: int, dim: int, clusters: int, seed: int, intrinsic: int = 16) -> np.ndarray:
    """Unit vectors shaped like sentence embeddings: topic clusters on a low-dimensional
    subspace (intrinsic dimension 16) embedded in ``dim`` dimensions, plus isotropic noise.

    Uniform random vectors would be the wrong test: in 384 dimensions every point is
    almost equally far from every other, and any graph index scores below 0.25 there.
    """
    rng = np.random.default_rng(seed)
    basis = np.random.default_rng(99).standard_normal((intrinsic, dim))
    centres = 2 * np.random.default_rng(98).standard_normal((clusters, intrinsic))
    z = centres[rng.integers(0, clusters, n)] + rng.standard_normal((n, intrinsic))
    x = z @ basis + 0.5 * rng.standard_normal((n, dim))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def test_exact_search_matches_a_full_sort() -> None:
    data = clustered(3000, 64, 20, 0)
    index = ExactIndex(64)
    index.add(data[:1000])
    index.add(data[1000:])  # grows
    q = clustered(1, 64, 20, 1)[0]
    positions, sims = index.search(q, 10)
    truth = np.argsort(-(data @ q), kind="stable")[:10]
    assert positions.tolist() == truth.tolist()
    np.testing.assert_allclose(sims, (data @ q)[truth], rtol=1e-6)
    assert len(index) == 3000 and index.search(q, 0)[0].size == 0


def test_hnsw_recall_at_10_on_clustered_embeddings() -> None:
    data = clustered(20_000, 384, 50, 2)
    queries = clustered(200, 384, 50, 3)
    index = HNSWIndex(384)
    index.add(data)
    hits = 0
    for q in queries:
        found, _ = index.search(q, 10)
        truth = set(np.argsort(-(data @ q))[:10].tolist())
        hits += len(truth & set(found.tolist()))
    recall = hits / (10 * len(queries))
    assert recall >= 0.95, recall


@pytest.mark.parametrize("make", [ExactIndex, HNSWIndex])
def test_wrong_dimension_is_refused(make: type) -> None:
    index = make(8)
    with pytest.raises(ValidationError):
        index.add(np.zeros((2, 9), dtype=np.float32))
