"""Context-adjusted worth: a memory's outcomes measured against its contexts' base rates.

Global MW blames a memory for the difficulty of the tasks that retrieve it (the paper's
Experiment 2: specialists retrieved only on hard tasks rank below useless generalists).
Two estimators remove that, both reading :class:`EpisodeStats`:

=====================  ================================================================
``StratifiedWorth``    within-stratum normalisation: the memory's successes minus its
                       contexts' base rates, pooled over its contexts, shrunk toward the
                       overall rate at low evidence (section 5.3.1's "future work")
``RegressionWorth``    ridge regression of outcomes on retrieval indicators with one
                       intercept per context: also separates memories retrieved together,
                       once some episodes retrieve one without the other
=====================  ================================================================

Both report on the MW scale: the overall success rate plus the memory's own effect, i.e.
roughly the MW the memory would have with average company in an average context.
Contexts come from caller labels or from :class:`memworth.signals.query_clusters.QueryClusters`.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from memworth._index import check_key
from memworth.counts import Counts, CountsTable
from memworth.errors import ValidationError
from memworth.outcome import as_outcome, as_outcomes
from memworth.signals.coretrieval import CoRetrieval, check_id_matrix, check_ids

__all__ = ["EpisodeStats", "RegressionWorth", "StratifiedWorth"]

DENSE_LIMIT = 2000
"""Largest regression (memories + contexts) solved as a dense system; larger ones are sparse."""


def _check_context(context: object, field: str = "context") -> Hashable:
    if context is None:
        return None
    return check_key(context.item() if isinstance(context, np.generic) else context, field)


class EpisodeStats:
    """Running statistics of episodes and outcomes, per context: what both estimators read.

    For every context: episodes and successes; for every memory in every context:
    episodes that retrieved it and how many succeeded (indicator counts, not credit
    weights); and co-retrievals (``pairs``, a :class:`CoRetrieval`). ``None`` is the
    context of unlabelled episodes. ``a + b`` merges shards exactly.

    Examples
    --------
    >>> stats = EpisodeStats()
    >>> stats.update(["a", "b"], success=True, context="easy")
    >>> stats.update(["a", "c"], success=False, context="hard")
    >>> stats.base_rate("easy"), stats.overall
    (1.0, 0.5)
    >>> stats.table("hard")
    CountsTable(success=array([0., 0., 0.]), failure=array([1., 0., 1.]), n=array([1., 0., 1.]))
    """

    def __init__(self) -> None:
        self.pairs = CoRetrieval()
        self._labels: list[Hashable] = []
        self._cols: dict[Hashable, int] = {}
        self._n = np.zeros((0, 0))
        self._s = np.zeros((0, 0))
        self._episodes = np.zeros(0)
        self._successes = np.zeros(0)

    # -- writing ----------------------------------------------------------------------

    def update(self, ids: Sequence[Hashable], success: object, context: Hashable | None = None) -> None:
        """Count one episode: the memories it retrieved, its outcome, its context."""
        check_ids(ids)
        ok = float(as_outcome(success))
        label = _check_context(context)
        rows = self.pairs.observe(ids)
        self._add(rows[None, :], np.array([ok]), np.array([self._col(label)]))

    def update_batch(
        self, ids: np.ndarray, success: np.ndarray, contexts: Sequence[Hashable | None] | np.ndarray | None = None
    ) -> None:
        """Count many episodes: ids (episodes, k) integers, outcomes, one context per episode."""
        arr = check_id_matrix(ids)
        ok = as_outcomes(success, arr.shape[0]).astype(float)
        if contexts is None:
            uniq: list[Hashable] = [None]
            inverse = np.zeros(arr.shape[0], dtype=np.int64)
        else:
            if isinstance(contexts, np.ndarray) and contexts.ndim == 1 and contexts.dtype.kind in "iuU":
                found, inverse = np.unique(contexts, return_inverse=True)  # labels checked once each
                uniq = [_check_context(c, "contexts") for c in found.tolist()]
            else:
                uniq, inverse = [], np.empty(len(contexts), dtype=np.int64)
                where: dict[Hashable, int] = {}
                for e, c in enumerate(contexts):
                    label = _check_context(c, "contexts")
                    inverse[e] = where.setdefault(label, len(uniq))
                    if inverse[e] == len(uniq):
                        uniq.append(label)
            if inverse.size != arr.shape[0]:
                raise ValidationError(
                    "contexts", f"expected {arr.shape[0]} labels, one per episode, got {inverse.size}"
                )
        rows = self.pairs.observe_batch(arr)
        cols = np.array([self._col(label) for label in uniq], dtype=np.int64)
        self._add(rows, ok, cols[inverse])

    def _col(self, label: Hashable) -> int:
        col = self._cols.get(label)
        if col is None:
            col = self._cols[label] = len(self._labels)
            self._labels.append(label)
        return col

    def _reserve(self, rows: int, cols: int) -> None:
        have_r, have_c = self._n.shape
        if rows <= have_r and cols <= have_c:
            return
        r = max(rows, 2 * have_r, 16) if rows > have_r else have_r
        c = max(cols, have_c)
        for name in ("_n", "_s"):
            grid = np.zeros((r, c))
            grid[:have_r, :have_c] = getattr(self, name)
            setattr(self, name, grid)
        for name in ("_episodes", "_successes"):
            old = getattr(self, name)
            line = np.zeros(c)
            line[: old.size] = old
            setattr(self, name, line)

    def _add(self, rows: np.ndarray, ok: np.ndarray, cols: np.ndarray) -> None:
        self._reserve(len(self.pairs._index), len(self._labels))
        grid = np.broadcast_to(cols[:, None], rows.shape)
        np.add.at(self._n, (rows.ravel(), grid.ravel()), 1.0)
        np.add.at(self._s, (rows.ravel(), grid.ravel()), np.broadcast_to(ok[:, None], rows.shape).ravel())
        np.add.at(self._episodes, cols, 1.0)
        np.add.at(self._successes, cols, ok)

    def __add__(self, other: object) -> EpisodeStats:
        if not isinstance(other, EpisodeStats):
            return NotImplemented
        out = EpisodeStats()
        out.pairs = self.pairs + other.pairs
        for part in (self, other):
            rows = out.pairs._index.rows(part.ids(), create=False)
            cols = np.array([out._col(label) for label in part._labels], dtype=np.int64)
            out._reserve(len(out.pairs._index), len(out._labels))
            if rows.size and cols.size:
                out._n[np.ix_(rows, cols)] += part._n[: rows.size, : cols.size]
                out._s[np.ix_(rows, cols)] += part._s[: rows.size, : cols.size]
            out._episodes[cols] += part._episodes[: cols.size]
            out._successes[cols] += part._successes[: cols.size]
        return out

    # -- reading ----------------------------------------------------------------------

    def ids(self) -> list[Hashable]:
        """Every memory seen, in the order first seen (the order of every array read here)."""
        return self.pairs.ids()

    def contexts(self) -> list[Hashable]:
        """Every context seen (``None``: unlabelled episodes), in the order first seen."""
        return list(self._labels)

    @property
    def episodes(self) -> int:
        return int(self._episodes.sum())

    @property
    def overall(self) -> float:
        """Success rate over every episode (0.5 before any)."""
        total = self._episodes.sum()
        return float(self._successes.sum() / total) if total else 0.5

    def base_rate(self, context: Hashable | None) -> float:
        """Success rate of the episodes of ``context``."""
        col = self._cols.get(_check_context(context))
        if col is None:
            raise ValidationError("context", f"no episodes in context {context!r}")
        return float(self._successes[col] / self._episodes[col])

    def table(self, context: Hashable | None) -> CountsTable:
        """Each memory's counts within ``context`` (successes, failures, retrievals)."""
        col = self._cols.get(_check_context(context))
        rows = len(self.ids())
        if col is None:
            z = np.zeros(rows)
            return CountsTable(z, z.copy(), z.copy())
        n, s = self._n[:rows, col].copy(), self._s[:rows, col].copy()
        return CountsTable(s, n - s, n)

    def totals(self) -> CountsTable:
        """Each memory's counts over every context."""
        rows, cols = len(self.ids()), len(self._labels)
        n, s = self._n[:rows, :cols].sum(axis=1), self._s[:rows, :cols].sum(axis=1)
        return CountsTable(s, n - s, n)

    def _select(self, values: np.ndarray, ids: Iterable[Hashable] | None) -> np.ndarray:
        if ids is None:
            return values
        keys = [check_key(k.item() if isinstance(k, np.generic) else k, "ids") for k in ids]
        return values[self.pairs._index.rows(keys, create=False)]


def _check_nonneg(value: object, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValidationError(field, f"must be a number, got {type(value).__name__}")
    v = float(value)
    if not np.isfinite(v) or v < 0:
        raise ValidationError(field, f"must be finite and >= 0, got {value!r}")
    return v


@dataclass(frozen=True)
class StratifiedWorth:
    """Within-stratum normalised worth, pooled over contexts and shrunk toward the overall rate.

    ``overall + sum_c (hits+_c - rate_c x V_c) / (sum_c V_c + strength)``, clipped to
    [0, 1]: in each context the memory's successes beyond what the context's base rate
    predicts, pooled over its contexts, on the MW scale. With no evidence it is the
    overall rate; with one context and ``strength = 0`` it is the memory's raw MW.

    Parameters
    ----------
    strength
        Pseudo-evidence at the overall rate (how far low evidence is shrunk).

    Examples
    --------
    A specialist retrieved only on hard tasks (base rate 0.3) that succeeds 40% of the
    time beats a generalist that succeeds 70% on easy tasks (base rate 0.8):

    >>> est = StratifiedWorth(strength=0)
    >>> rates, overall = {"easy": 0.8, "hard": 0.3}, 0.55
    >>> round(est.value({"hard": Counts(4.0, 6.0, 10)}, rates, overall), 3)
    0.65
    >>> round(est.value({"easy": Counts(7.0, 3.0, 10)}, rates, overall), 3)
    0.45
    >>> StratifiedWorth().value({}, rates, overall)
    0.55
    """

    strength: float = 10.0

    def value(
        self,
        per_context: Mapping[Hashable, Counts | CountsTable],
        rates: Mapping[Hashable, float],
        overall: float,
    ) -> float | np.ndarray:
        """Worth from each context's counts, the contexts' base ``rates`` and the ``overall`` rate."""
        strength = _check_nonneg(self.strength, "strength")
        overall_rate = _check_nonneg(overall, "overall")
        excess: float | np.ndarray = 0.0
        evidence: float | np.ndarray = 0.0
        for context, counts in per_context.items():
            if context not in rates:
                raise ValidationError("rates", f"no base rate for context {context!r}")
            rate = _check_nonneg(rates[context], "rates")
            s = np.asarray(counts.success, dtype=float)
            v = s + np.asarray(counts.failure, dtype=float)
            excess = excess + (s - rate * v)
            evidence = evidence + v
        total = np.asarray(evidence, dtype=float) + strength
        with np.errstate(invalid="ignore", divide="ignore"):
            shift = np.where(total > 0, np.asarray(excess, dtype=float) / np.where(total > 0, total, 1.0), 0.0)
        out = np.clip(overall_rate + shift, 0.0, 1.0)
        return float(out) if out.ndim == 0 else out

    def values(self, stats: EpisodeStats, ids: Iterable[Hashable] | None = None) -> np.ndarray:
        """Worth of every memory of ``stats`` (in :meth:`EpisodeStats.ids` order), or of ``ids``."""
        contexts = stats.contexts()
        per_context = {c: stats.table(c) for c in contexts}
        rates = {c: stats.base_rate(c) for c in contexts}
        values = np.atleast_1d(np.asarray(self.value(per_context, rates, stats.overall), dtype=float))
        if values.size != len(stats.ids()):  # no contexts yet: every memory at the overall rate
            values = np.full(len(stats.ids()), stats.overall)
        return stats._select(values, ids)


@dataclass(frozen=True)
class RegressionWorth:
    """Ridge regression of outcomes on retrieval indicators, one intercept per context.

    Fits ``P(success) = alpha_context + sum of beta_m over the retrieved memories`` by
    least squares with penalty ``ridge x sum beta_m^2`` (intercepts unpenalised), from
    the sufficient statistics in :class:`EpisodeStats`; reports
    ``overall + beta_m - mean beta`` (the mean weighted by retrievals), the MW the memory
    would have with average company in an average context. Memories always retrieved
    together get the same effect (the ridge splits it evenly) until episodes that
    retrieve one without the other tell them apart.

    Parameters
    ----------
    ridge
        Pseudo-episodes of evidence that a memory is average (shrinks low evidence).

    Examples
    --------
    Two memories always retrieved together, until a few episodes drop one of them:

    >>> stats = EpisodeStats()
    >>> for t in range(40):
    ...     stats.update(["anchor", "hitchhiker"], success=t % 2 == 0)
    >>> RegressionWorth().values(stats).round(3).tolist()
    [0.5, 0.5]
    >>> for t in range(10):
    ...     stats.update(["anchor", "other"], success=True)
    ...     stats.update(["hitchhiker", "other"], success=False)
    >>> anchor, hitchhiker, other = RegressionWorth().values(stats)
    >>> bool(anchor > other > hitchhiker)
    True
    """

    ridge: float = 1.0

    def effects(self, stats: EpisodeStats) -> tuple[np.ndarray, np.ndarray]:
        """The fitted ``(beta per memory, alpha per context)`` in the order of ids() and contexts()."""
        ridge = _check_nonneg(self.ridge, "ridge")
        if ridge == 0:
            raise ValidationError("ridge", "must be > 0: memories retrieved together need it to be identified")
        rows, cols = len(stats.ids()), len(stats.contexts())
        if rows == 0:
            return np.zeros(0), np.zeros(cols)
        n, s = stats._n[:rows, :cols], stats._s[:rows, :cols]
        a, b, together = stats.pairs.pair_arrays()
        size = rows + cols
        diag = np.concatenate([n.sum(axis=1) + ridge, stats._episodes[:cols]])
        mc_r, mc_c = np.nonzero(n)
        i = np.concatenate([np.arange(size), a, b, mc_r, rows + mc_c])
        j = np.concatenate([np.arange(size), b, a, rows + mc_c, mc_r])
        v = np.concatenate([diag, together, together, n[mc_r, mc_c], n[mc_r, mc_c]])
        rhs = np.concatenate([s.sum(axis=1), stats._successes[:cols]])
        if size <= DENSE_LIMIT:
            system = np.zeros((size, size))
            system[i, j] = v  # every (i, j) appears once
            from scipy.linalg import solve

            theta = solve(system, rhs, assume_a="pos")
        else:
            from scipy import sparse
            from scipy.sparse.linalg import spsolve

            theta = np.atleast_1d(spsolve(sparse.csc_matrix((v, (i, j)), shape=(size, size)), rhs))
        return theta[:rows], theta[rows:]

    def values(self, stats: EpisodeStats, ids: Iterable[Hashable] | None = None) -> np.ndarray:
        """Adjusted worth of every memory of ``stats`` (in :meth:`EpisodeStats.ids` order), or of ``ids``."""
        beta, _ = self.effects(stats)
        n = stats.totals().n
        mean = float(n @ beta / n.sum()) if n.sum() else 0.0
        values = np.clip(stats.overall + beta - mean, 0.0, 1.0)
        return stats._select(values, ids)

    def worth(self, stats: EpisodeStats) -> dict[Hashable, float]:
        """Adjusted worth by memory id (what :func:`memworth.signals.coretrieval.confounds` reads)."""
        return dict(zip(stats.ids(), self.values(stats).tolist(), strict=True))
