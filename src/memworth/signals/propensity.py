"""Inverse-propensity weighted worth, from the inclusion probabilities recall logs.

When retrieval follows worth, a memory is retrieved in some stretches of time far more
than in others, and Memory Worth averages its outcomes in proportion. Weighting each
retrieval by one over the probability that the policy would include the memory
(its propensity, logged by :func:`memworth.ranking.select`) gives every stretch of the
log the same say: the estimate of the memory's success rate had it been retrieved in
every episode.

The estimator is self-normalised (Hajek): hits+ and hits- accumulate
``credit / propensity`` instead of ``credit``, and the worth is still
hits+ / (hits+ + hits-). The weights' scale cancels, so the estimate stays in [0, 1] and
equals the paper's MW when a memory's propensity never changes. (The Horvitz-Thompson
form, sum of ``credit * y / propensity`` over the number of episodes, is unbiased but
unbounded and needs the episode count; it is not used.) ``max_weight`` clips
``1 / propensity`` from above, trading bias for variance when some propensities are tiny;
``None`` (default) leaves the weights exact. Validity needs every memory to keep a
propensity above 0 (an exploration floor) and the propensity to be computed from what
was known before the outcome.

Which propensity to log. When the policy draws more than the exploration slots (a
softmax ranking, say), the propensity to log is the chance over *all* of the policy's
draws, not the chance given its own ranking draw. Both are valid, but the conditional one
has a far larger variance: a memory the softmax usually ranks in the greedy slots is
logged at propensity 1 in those episodes and at the floor's ~0.01 in the few where the
draw ranked it lower, so its estimate rests on those few outcomes
(:func:`softmax_inclusion` estimates the marginal chance). A clip of ``N / k`` (the
weight every retrieval has under uniform retrieval) keeps the correction where it
matters, stretches in which the policy favoured a memory above uniform, and stops it
from resting the estimate on a few rare picks.

:class:`PropensityCounts` accumulates the weighted hits of many memories (vectorised);
:func:`inclusion_by_rank` gives the exact propensities of ``select``'s policy when every
candidate may be explored, by rank, for simulations; :func:`softmax_inclusion` the
propensities of the same floor under a softmax (Plackett-Luce) ranking.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from memworth.counts import CountsTable
from memworth.errors import ValidationError

__all__ = ["InversePropensity", "PropensityCounts", "inclusion_by_rank", "softmax_inclusion"]


@dataclass(frozen=True)
class InversePropensity:
    """Settings of inverse-propensity weighting: the clip on ``1 / propensity``.

    Examples
    --------
    >>> import numpy as np
    >>> InversePropensity().weights(np.array([0.25, 0.25]), np.array([1.0, 0.1]))
    array([0.25, 2.5 ])
    >>> InversePropensity(max_weight=5).weights(np.array([0.25]), np.array([0.01]))
    array([1.25])
    """

    max_weight: float | None = None

    def weights(self, credit: np.ndarray, propensity: np.ndarray) -> np.ndarray:
        """``credit / propensity``, with ``1 / propensity`` clipped at ``max_weight``."""
        c = np.asarray(credit, dtype=float)
        p = np.asarray(propensity, dtype=float)
        if c.shape != p.shape:
            raise ValidationError("propensity", f"must have the shape of credit {c.shape}, got {p.shape}")
        if not np.all(np.isfinite(c)) or np.any(c < 0):
            raise ValidationError("credit", "must be finite and >= 0")
        if not np.all(np.isfinite(p)) or np.any(p <= 0) or np.any(p > 1):
            raise ValidationError("propensity", "must be within (0, 1]: a memory that could not be picked was not")
        inverse = 1.0 / p
        if self.max_weight is not None:
            m = self.max_weight
            if isinstance(m, bool) or not isinstance(m, (int, float)) or not math.isfinite(m) or m < 1:
                raise ValidationError("max_weight", f"must be a number >= 1 or None, got {m!r}")
            inverse = np.minimum(inverse, float(m))
        return np.asarray(c * inverse)


@dataclass
class PropensityCounts:
    """Inverse-propensity weighted hits of many memories (rows), plus their retrieval counts.

    Examples
    --------
    Memory 0 is retrieved in both episodes, once when it was sure to be (propensity 1)
    and once when it had a one-in-four chance; the second outcome stands for four:

    >>> import numpy as np
    >>> from memworth import RawWorth
    >>> ipw = PropensityCounts.empty(2)
    >>> ipw.add(np.array([[0, 1]]), np.array([True]), np.full((1, 2), 0.5), np.array([[1.0, 1.0]]))
    >>> ipw.add(np.array([[0, 1]]), np.array([False]), np.full((1, 2), 0.5), np.array([[0.25, 1.0]]))
    >>> RawWorth().value(ipw.table())
    array([0.2, 0.5])
    """

    success: np.ndarray
    failure: np.ndarray
    n: np.ndarray
    settings: InversePropensity = InversePropensity()

    @classmethod
    def empty(cls, size: int, settings: InversePropensity | None = None) -> PropensityCounts:
        """No evidence for ``size`` memories."""
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 0:
            raise ValidationError("size", f"must be an integer >= 0, got {size!r}")
        z = np.zeros(int(size))
        return cls(z, z.copy(), z.copy(), settings if settings is not None else InversePropensity())

    def add(self, rows: np.ndarray, success: np.ndarray, credit: np.ndarray, propensity: np.ndarray) -> None:
        """Add episodes: ``rows`` (episodes, k) retrieved, ``success`` (episodes,), and per
        retrieved memory its ``credit`` and ``propensity`` (episodes, k). Nothing changes if refused."""
        r = np.asarray(rows)
        if r.ndim != 2 or not np.issubdtype(r.dtype, np.integer):
            raise ValidationError("rows", f"must be a 2-D integer array (episodes, k), got shape {r.shape}")
        if r.size and (r.min() < 0 or r.max() >= self.n.size):
            raise ValidationError("rows", f"must index the {self.n.size} memories")
        y = np.asarray(success)
        if y.shape != (r.shape[0],) or y.dtype != bool:
            raise ValidationError("success", f"must be {r.shape[0]} booleans, one per episode")
        c = np.asarray(credit, dtype=float)
        if c.shape != r.shape:
            raise ValidationError("credit", f"must have the shape of rows {r.shape}, got {c.shape}")
        w = self.settings.weights(c, np.asarray(propensity, dtype=float))
        flat = r.ravel()
        hit = np.repeat(y, r.shape[1])
        np.add.at(self.success, flat[hit], w.ravel()[hit])
        np.add.at(self.failure, flat[~hit], w.ravel()[~hit])
        np.add.at(self.n, flat, 1.0)

    def table(self) -> CountsTable:
        """The weighted hits as counts: ``RawWorth().value(table)`` is the IPW worth."""
        return CountsTable(self.success.copy(), self.failure.copy(), self.n.copy())


def inclusion_by_rank(n: int, k: int, exploration: float) -> np.ndarray:
    """Exact chance that :func:`memworth.ranking.select` picks the candidate ranked ``r``
    (0 = best score), for every ``r``, when all ``n`` candidates may be explored.

    ``j ~ Binomial(k, exploration)`` slots explore uniformly among the ``n - (k - j)``
    candidates the other slots did not take, so the candidate ranked ``r`` is picked with
    chance ``sum_j P(j) * (1 if r < k - j else j / (n - k + j))``.

    Examples
    --------
    >>> inclusion_by_rank(4, 2, 0.0).tolist()
    [1.0, 1.0, 0.0, 0.0]
    >>> inclusion_by_rank(4, 2, 0.5).round(4).tolist()
    [0.875, 0.5417, 0.2917, 0.2917]
    """
    for name, v in (("n", n), ("k", k)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise ValidationError(name, f"must be an integer >= 0, got {v!r}")
    if isinstance(exploration, bool) or not 0.0 <= float(exploration) <= 1.0:
        raise ValidationError("exploration", f"must be within [0, 1], got {exploration!r}")
    k = min(int(k), int(n))
    rank = np.arange(int(n))
    out = np.zeros(int(n))
    for j in range(k + 1):
        pj = math.comb(k, j) * exploration**j * (1 - exploration) ** (k - j)
        if pj == 0:
            continue
        greedy = k - j
        rest = n - greedy
        out += pj * np.where(rank < greedy, 1.0, j / rest if rest else 0.0)
    return out


def softmax_inclusion(
    scores: np.ndarray, temperature: float, k: int, exploration: float, noise: np.ndarray
) -> np.ndarray:
    """Chance that each memory is picked when the ranking is a softmax draw and the slots
    are filled as :func:`memworth.ranking.select` fills them, averaged over ``noise``.

    The policy ranks the memories by ``scores / temperature`` plus standard Gumbel noise
    (a Plackett-Luce draw from ``softmax(scores / temperature)``), then fills the ``k``
    slots from that ranking with ``select``'s exploration floor. Given a ranking, the
    memory ranked ``r`` is picked with chance ``inclusion_by_rank(n, k, exploration)[r]``;
    this averages that chance over the Gumbel draws in ``noise`` (shape
    ``(..., draws, n)`` for ``scores`` of shape ``(..., n)``), so the result is an
    unbiased estimate of the policy's inclusion probabilities, never below the floor's
    ``inclusion_by_rank(...)[-1]``, and it sums to ``k``. The caller draws the noise
    (``rng.gumbel(size=...)``), independently of the draw that ranks the episode.

    Examples
    --------
    Without noise the ranking is the scores' order (one slot, explored half the time):

    >>> import numpy as np
    >>> softmax_inclusion(np.array([0.9, 0.5, 0.1]), 0.05, 1, 0.5, np.zeros((1, 3))).round(4).tolist()
    [0.6667, 0.1667, 0.1667]
    >>> rng = np.random.default_rng(0)
    >>> p = softmax_inclusion(np.array([0.9, 0.5, 0.1]), 0.5, 1, 0.5, rng.gumbel(size=(4000, 3)))
    >>> p.round(2).tolist(), round(float(p.sum()), 6)
    ([0.46, 0.31, 0.23], 1.0)
    """
    s = np.asarray(scores, dtype=float)
    g = np.asarray(noise, dtype=float)
    if s.ndim < 1 or not np.all(np.isfinite(s)):
        raise ValidationError("scores", "must be a finite array with the memories on the last axis")
    if g.shape[:-2] != s.shape[:-1] or g.ndim != s.ndim + 1 or g.shape[-1] != s.shape[-1] or g.shape[-2] < 1:
        raise ValidationError("noise", f"must have shape (..., draws, {s.shape[-1]}) matching scores {s.shape}")
    if not np.all(np.isfinite(g)):
        raise ValidationError("noise", "must be finite")
    t = temperature
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t <= 0:
        raise ValidationError("temperature", f"must be a number > 0, got {t!r}")
    n = s.shape[-1]
    by_rank = inclusion_by_rank(n, k, exploration)
    keys = s[..., None, :] / float(t) + g
    rank = np.empty(keys.shape, dtype=np.int64)
    np.put_along_axis(rank, np.argsort(-keys, axis=-1), np.broadcast_to(np.arange(n), keys.shape), axis=-1)
    return np.asarray(by_rank[rank].mean(axis=-2))
