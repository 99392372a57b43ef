"""Recall ranking: scores that blend similarity with worth, and selection with an exploration floor.

Pure functions of arrays; the store feeds them candidates and logs what they return.

Scores (``ScoreRule``):

* :class:`Blend` - the paper's Experiment 5: ``0.6 * similarity + 0.4 * worth``;
* :class:`CosineRecencyWorth` - note 003: ``similarity * recency * worth``;
* :class:`LowerBoundBlend` - the blend on a lower bound of worth (cautious at low evidence).

Standing feeds every rule the same way (:func:`with_standing`): note 003's "boost
activation" and "lower activation", conditioned on the query.

* A ``promoted`` memory gains up to the rule's ``promoted_boost`` (default 0.1), in full
  when it matches the query as well as the best candidate does, fading linearly with the
  similarity gap to that best match, and not at all once the gap reaches
  ``promoted_margin`` (default 0.05). Promotion reorders the memories that already match
  a query; it does not push a memory into recalls for queries it does not match (a
  flat boost did: on the live upgrade world promoted recipes crowded other tasks'
  recipes out of recall).
* A ``demoted`` memory loses ``demoted_penalty`` (default 0.1) on every query: lowering
  a score can crowd nothing out, and a demoted memory that is the best match must still
  lose ground.
* A memory under ``re-verify`` is quarantined by the store instead (served only as a
  probe, ranked by its score without any boost).

Selection (:func:`select`) fills k slots by score, except that each slot is, with
probability ``exploration``, given to a low-evidence candidate drawn uniformly: the
exploration floor that keeps assumption A2 true. It returns each pick's exact inclusion
probability under that policy, so later analysis can weight by inverse propensity.
:func:`drop` takes one pick out again (a budgeted ablation, :mod:`memworth.signals.coretrieval`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from memworth.counts import CountsTable
from memworth.errors import ValidationError
from memworth.estimators import RawWorth, WilsonBound

__all__ = [
    "Blend",
    "CosineRecencyWorth",
    "LowerBoundBlend",
    "ScoreRule",
    "Selection",
    "at_face_value",
    "drop",
    "select",
    "with_standing",
]


def _weights(similarity: float, worth: float) -> None:
    for name, v in (("similarity", similarity), ("worth", worth)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(float(v)) or v < 0:
            raise ValidationError(name, f"must be a finite weight >= 0, got {v!r}")


def _boosts(rule: object) -> None:
    for name in ("promoted_boost", "demoted_penalty", "promoted_margin"):
        v = getattr(rule, name)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(float(v)) or v < 0:
            raise ValidationError(name, f"must be a finite number >= 0, got {v!r}")


@dataclass(frozen=True)
class Blend:
    """``similarity * sim + worth * MW`` (the paper's Experiment 5 uses 0.6 and 0.4).

    Examples
    --------
    >>> import numpy as np
    >>> from memworth import CountsTable
    >>> t = CountsTable(np.array([9.0, 0.0]), np.array([1.0, 0.0]), np.array([10.0, 0.0]))
    >>> Blend().score(np.array([0.5, 0.5]), t, np.zeros(2)).round(2)
    array([0.66, 0.5 ])
    """

    similarity: float = 0.6
    worth: float = 0.4
    estimator: RawWorth | WilsonBound = field(default_factory=RawWorth)
    promoted_boost: float = 0.1
    demoted_penalty: float = 0.1
    promoted_margin: float = 0.05

    def validate(self) -> None:
        """Refuse weights that are not finite and >= 0 (and boosts likewise)."""
        _weights(self.similarity, self.worth)
        _boosts(self)

    def score(self, similarity: np.ndarray, counts: CountsTable, age_seconds: np.ndarray) -> np.ndarray:
        _weights(self.similarity, self.worth)
        return self.similarity * similarity + self.worth * np.asarray(self.estimator.value(counts))


@dataclass(frozen=True)
class LowerBoundBlend(Blend):
    """The blend on the Wilson lower bound: unproven memories rank below proven ones."""

    estimator: RawWorth | WilsonBound = field(default_factory=WilsonBound)


@dataclass(frozen=True)
class CosineRecencyWorth:
    """Note 003: ``max(similarity, 0) * 2 ** (-age / half_life) * MW``.

    Examples
    --------
    >>> import numpy as np
    >>> from memworth import CountsTable
    >>> t = CountsTable(np.array([1.0, 1.0]), np.array([1.0, 1.0]), np.array([2.0, 2.0]))
    >>> day = 86400.0
    >>> CosineRecencyWorth(half_life_days=1).score(np.array([0.8, 0.8]), t, np.array([0.0, day]))
    array([0.4, 0.2])
    """

    half_life_days: float = 30.0
    estimator: RawWorth | WilsonBound = field(default_factory=RawWorth)
    promoted_boost: float = 0.1
    demoted_penalty: float = 0.1
    promoted_margin: float = 0.05

    def validate(self) -> None:
        """Refuse a half-life that is not a finite number > 0 (and boosts that are not >= 0)."""
        h = self.half_life_days
        if isinstance(h, bool) or not isinstance(h, (int, float)) or not np.isfinite(float(h)) or h <= 0:
            raise ValidationError("half_life_days", f"must be a finite number > 0, got {h!r}")
        _boosts(self)

    def score(self, similarity: np.ndarray, counts: CountsTable, age_seconds: np.ndarray) -> np.ndarray:
        self.validate()
        h = self.half_life_days
        recency = np.exp2(-np.maximum(age_seconds, 0.0) / (h * 86400.0))
        return np.maximum(similarity, 0.0) * recency * np.asarray(self.estimator.value(counts))


ScoreRule = Blend | LowerBoundBlend | CosineRecencyWorth


def at_face_value(rule: ScoreRule) -> ScoreRule:
    """``rule`` reading worth as its point estimate (:class:`memworth.estimators.RawWorth`)
    where it reads a Wilson lower bound: the rule under which a memory with no evidence
    ranks as the paper's 0.5 rather than as 0. A quarantined memory competes for its probes
    with the score it would have unproven (:meth:`memworth.MemoryStore.choose`); under a
    lower-bound rule that score would be the lowest of all, and it would never be probed.

    Examples
    --------
    >>> at_face_value(LowerBoundBlend()).estimator
    RawWorth(no_evidence=0.5)
    >>> at_face_value(Blend()) == Blend()
    True
    """
    if isinstance(rule.estimator, WilsonBound):
        return dataclasses.replace(rule, estimator=RawWorth())
    return rule


def with_standing(rule: ScoreRule, scores: np.ndarray, standing: object, similarity: object) -> np.ndarray:
    """``scores`` with each memory's standing applied, relative to the query's best match.

    A promoted memory gains ``rule.promoted_boost * max(0, 1 - gap / rule.promoted_margin)``,
    where ``gap`` is how far its ``similarity`` falls below the highest similarity among
    these candidates (a margin of 0: only the best match gains); a demoted memory loses
    ``rule.demoted_penalty`` whatever the query; others are unchanged.

    Examples
    --------
    Three equally similar memories: the promoted one rises, the demoted one falls.

    >>> import numpy as np
    >>> sims = np.array([0.8, 0.8, 0.8])
    >>> with_standing(Blend(), np.array([0.5, 0.5, 0.5]), ["promoted", "normal", "demoted"], sims).round(3)
    array([0.6, 0.5, 0.4])

    A promoted memory 0.025 below the best match gains half the boost; one 0.3 below, nothing.

    >>> with_standing(Blend(), np.array([0.5, 0.5, 0.5]), ["normal", "promoted", "promoted"],
    ...               np.array([0.8, 0.775, 0.5])).round(3)
    array([0.5 , 0.55, 0.5 ])
    """
    scores = np.asarray(scores, dtype=float)
    if standing is None:
        return scores
    _boosts(rule)
    marks = np.asarray(standing, dtype=object)
    if marks.shape != scores.shape:
        raise ValidationError("standing", f"has {marks.size} entries for {scores.size} scores")
    sims = np.asarray(similarity, dtype=float)
    if sims.shape != scores.shape:
        raise ValidationError("similarity", f"has {sims.size} entries for {scores.size} scores")
    promoted = marks == "promoted"
    if promoted.any():
        gap = np.max(sims) - sims
        margin = float(rule.promoted_margin)
        with np.errstate(over="ignore"):  # a tiny margin: a gap / margin past float's range is a gap past it
            near = (gap <= 0.0) if margin == 0 else np.clip(1.0 - gap / margin, 0.0, 1.0)
        scores = scores + rule.promoted_boost * near * promoted
    return scores - rule.demoted_penalty * (marks == "demoted")


@dataclass(frozen=True)
class Selection:
    """Indices picked (best first), whether each came from exploration, and its inclusion probability."""

    picked: np.ndarray
    explored: np.ndarray
    propensity: np.ndarray


def select(
    scores: np.ndarray, explorable: np.ndarray, k: int, exploration: float, rng: np.random.Generator
) -> Selection:
    """Pick ``k`` of the candidates: best scores, with an exploration floor.

    The number of exploration slots is Binomial(k, ``exploration``); the other slots take
    the best scores; exploration slots draw uniformly from the ``explorable`` candidates
    not already taken (when there are too few, the next best scores fill in).

    Examples
    --------
    >>> import numpy as np
    >>> s = select(np.array([0.9, 0.8, 0.1, 0.2]), np.array([False, False, True, True]), 2, 0.0,
    ...            np.random.default_rng(0))
    >>> s.picked.tolist(), s.propensity.tolist()
    ([0, 1], [1.0, 1.0])
    """
    scores = np.asarray(scores, dtype=float)
    explorable = np.asarray(explorable, dtype=bool)
    if isinstance(exploration, bool) or not 0.0 <= float(exploration) <= 1.0:
        raise ValidationError("exploration", f"must be within [0, 1], got {exploration!r}")
    n = scores.size
    k = min(int(k), n)
    order = np.argsort(-scores, kind="stable")
    if k == 0:
        empty = np.zeros(0, dtype=np.int64)
        return Selection(empty, np.zeros(0, dtype=bool), np.zeros(0))
    j = int(rng.binomial(k, exploration)) if exploration > 0 else 0
    greedy = order[: k - j]
    rest = order[k - j :]
    pool = rest[explorable[rest]]
    drawn = rng.choice(pool, size=min(j, pool.size), replace=False) if j and pool.size else np.zeros(0, np.int64)
    filler = rest[~explorable[rest]][: j - drawn.size] if j > drawn.size else np.zeros(0, np.int64)
    picked = np.concatenate([greedy, drawn, filler]).astype(np.int64)
    explored = np.zeros(picked.size, dtype=bool)
    explored[greedy.size : greedy.size + drawn.size] = True
    return Selection(picked, explored, inclusion_probabilities(order, explorable, k, exploration)[picked])


def inclusion_probabilities(order: np.ndarray, explorable: np.ndarray, k: int, exploration: float) -> np.ndarray:
    """Exact probability that :func:`select` picks each candidate (indexed like ``explorable``).

    Summed over the number ``j`` of exploration slots (Binomial(k, ``exploration``)): with
    ``j`` of them, the ``k - j`` best ranks are picked for sure; each explorable candidate
    ranked below them is drawn with chance ``min(j, pool) / pool`` (``pool``: how many such
    candidates there are); when the pool is short, the best plain candidates below the
    greedy ones fill the rest. One row per ``j``, all at once; the rows are added in order
    of ``j`` (a running sum), so the answer is the same to the bit as adding them one by one.
    """
    n = order.size
    if n == 0:
        return np.zeros(0)
    ex = np.asarray(explorable, dtype=bool)[order]  # by rank: whether the candidate ranked r is explorable
    ex_from = np.cumsum(ex[::-1])[::-1]  # explorable candidates ranked at or after r
    plain_before = np.cumsum(~ex) - ~ex  # plain candidates ranked before r
    js = np.arange(k + 1 if exploration > 0 else 1)
    greedy = np.minimum(k - js, n)  # the ranks below this are picked for sure, per j
    if exploration > 0:
        chance = [math.comb(k, j) * exploration**j * (1 - exploration) ** (k - j) for j in js.tolist()]
    else:
        chance = [1.0]
    pool = np.append(ex_from, 0)[greedy]  # explorable candidates ranked at or after the greedy ones
    drawn = np.minimum(js, pool)
    share = (drawn / np.maximum(pool, 1))[:, None]  # each such candidate's chance to be drawn
    # Slots the pool cannot fill go to the next plain ranks: those fewer than ``j - drawn`` after the greedy ones.
    fill = plain_before[None, :] - np.append(plain_before, n - ex_from[:1])[greedy][:, None] < (js - drawn)[:, None]
    ranks = np.arange(n)
    p = np.where(ranks[None, :] < greedy[:, None], 1.0, np.where(ex[None, :], share, fill))
    out = np.empty(n)
    out[order] = np.cumsum(np.asarray(chance)[:, None] * p, axis=0)[-1]
    return np.clip(out, 0.0, 1.0)


def drop(
    selection: Selection, position: int, scores: np.ndarray, explorable: np.ndarray, exploration: float
) -> Selection:
    """``selection`` without its pick at ``position``; the best-scored candidate not picked takes the slot.

    The stand-in's propensity is its inclusion probability under :func:`select`'s policy
    (the ablation itself is logged by whoever asked for it). With no candidate left, the
    selection shrinks by one.

    Examples
    --------
    >>> import numpy as np
    >>> s = select(np.array([0.9, 0.8, 0.5, 0.1]), np.zeros(4, dtype=bool), 2, 0.0, np.random.default_rng(0))
    >>> d = drop(s, 0, np.array([0.9, 0.8, 0.5, 0.1]), np.zeros(4, dtype=bool), 0.0)
    >>> d.picked.tolist(), d.explored.tolist(), d.propensity.tolist()
    ([1, 2], [False, False], [1.0, 0.0])
    """
    scores = np.asarray(scores, dtype=float)
    k = selection.picked.size
    if isinstance(position, bool) or not isinstance(position, (int, np.integer)) or not 0 <= position < k:
        raise ValidationError("position", f"must index one of the {k} picks, got {position!r}")
    keep = np.arange(k) != position
    order = np.argsort(-scores, kind="stable")
    free = order[~np.isin(order, selection.picked)]
    picked, explored, propensity = selection.picked[keep], selection.explored[keep], selection.propensity[keep]
    if free.size:
        stand_in = free[:1]
        p = inclusion_probabilities(order, np.asarray(explorable, dtype=bool), k, exploration)[stand_in]
        picked = np.concatenate([picked, stand_in])
        explored = np.concatenate([explored, [False]])
        propensity = np.concatenate([propensity, p])
    return Selection(picked.astype(np.int64), explored, propensity)
