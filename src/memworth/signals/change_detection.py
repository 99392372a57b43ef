"""Change detection on a memory's outcome stream: has its success rate broken?

A memory that used to work and has stopped (the paper's staleness, section 6) shows as a
fall in the success rate of the episodes that retrieve it. Its worth shows the fall
slowly, since every old success still counts; :class:`BernoulliCusum` (Page's CUSUM for
Bernoulli observations) raises an alarm after a few failures that its own history makes
unlikely.

The stream. Each retrieval of a memory is one observation ``y`` (1: the episode
succeeded) with a weight ``w`` in [0, 1] (the outcome's confidence; 1 in the
experiments), and optionally a ``reference``: the success rate of all episodes at that
time (:func:`reference_rates`).

The test. Before a change, the log-odds of success are ``logit(reference) + lift``,
where ``lift`` is the memory's own log-odds lift over the reference, estimated from its
whole history so far (successes and the reference rate summed over its observations,
each with ``prior`` pseudo-counts; without a reference the baseline is simply its own
smoothed success rate). The alternative: the odds of success are ``odds_ratio`` times
that (0.05: twenty times lower, the memory stopped working). After the memory has
``min_history`` observations, each one adds ``w`` times its log-likelihood ratio to the
statistic, floored at 0; the alarm sounds when it reaches ``threshold``. The change
point estimate is the first observation of the current excursion (the last time the
statistic left 0).

Why a reference: a shift in the task mix moves every memory's success rate (in
Experiment 5 every memory's rate falls when harder tasks arrive); measured against the
rate of all episodes, a memory that merely shares the harder tasks keeps its lift and
only one that fails where others succeed raises the alarm.

Validity. With the pre-change probabilities known, Wald's inequality gives an average
run length of at least ``exp(threshold)`` observations between false alarms; a weight
``w <= 1`` keeps that, since ``E[L ** w] <= E[L] ** w = 1`` for a likelihood ratio
``L`` (Jensen). With the baseline estimated from the memory's history (as here), the
bound is approximate: the experiment ``memworth reproduce staleness`` measures the
false alarms.

A mixture of alternatives (``odds_ratios``, with ``weights`` summing to 1; off by
default). One alternative suits one size of fall: odds 20 times lower (0.05) catches a
memory that stopped working within a few failures but gathers almost no evidence from a
fall to half the odds. The mixture keeps one CUSUM ``S_k`` per alternative and alarms on

    statistic = log(sum_k weight_k * exp(S_k)),

the *sum* (not the max) form of the e-detector of Shin, Ramdas and Rinaldo (2023,
"E-detectors: a nonparametric framework for sequential change detection"). Claim: under
no change, with the pre-change rates known, the expected number of observations before
``statistic >= threshold`` is at least ``exp(threshold) - 1``. Proof: ``exp(S_k)`` is the
largest of 1 and, over the change points ``j <= t``, the likelihood ratio ``L_k(j..t)`` of
the observations since ``j`` (the floor at 0 is the empty product), so
``exp(statistic) <= 1 + R_t`` with ``R_t := sum_j sum_k weight_k L_k(j..t)``, the
Shiryaev-Roberts statistic of the mixture. Each ``sum_k weight_k L_k(j..t)`` is a mean-1
martingale from ``j`` (a fixed-weight mixture of likelihood ratios, each of mean 1;
weighted observations keep mean at most 1 by Jensen as above), so ``E[R_T] <= E[T]`` for
a stopping time ``T``. For the alarm time (if ``E[T] < inf``; else there is nothing to
prove), ``E[T] >= E[R_T] >= E[exp(statistic_T)] - 1 >= exp(threshold) - 1``. The same
bound gives ``P(alarm within n observations) <= (n + 1) / exp(threshold)`` and makes
``exp(statistic) / (n + 1)`` an e-value at any fixed reading after ``n`` watched
observations, ``n`` counting each observation once whatever its weight (the sum ``R_t``
has one term per change point; a weight below 1 shrinks a term's mean, not their number:
``CusumState.watched``, not the weighted ``observations``). (The policy's e-value for e-BH,
:meth:`memworth.governance.GovernancePolicy.change_evalues`, divides by ``n``, as it did
for one alternative: at most ``(n + 1) / n`` too large, which matters only for the first
few observations, where the threshold bars an alarm anyway.) Against one alternative the
mixture pays at most ``log(1 / weight_k)`` (1.1 for three equal weights) in the
threshold: it alarms on a sharp fall a failure or two later, and on a moderate one that
the single alternative never sees. As for one alternative, the baseline is estimated in
use, so the guarantees are approximate there (tested in simulation,
``tests/test_change_mixture.py``).

A prior for short histories (``history_prior``, 0 by default). A memory is watched after
``min_history`` observations of its own, because its lift over the reference is learned
from them; one retrieved only a handful of times before it broke (a code recipe before a
library upgrade) is then never watched in time. ``history_prior`` pseudo-observations at
the current reference rate are added to both its successes and its expected successes:
its lift shrinks toward 0 (its baseline toward the reference) while its history is
short, and it is watched after ``min_history - history_prior`` observations. The cost:
a memory better than the namespace that has had few retrievals is judged against the
namespace's rate, which makes a fall harder to see (the baseline is lower), not a false
alarm more likely; a memory worse than the namespace starts with a baseline above its own
rate, which is the false-alarm risk the experiments measure.

:class:`CusumState` holds the learned state of many memories as arrays (one row each);
:meth:`BernoulliCusum.update` advances the rows one episode retrieved, vectorised.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from memworth.errors import ValidationError

__all__ = [
    "BernoulliCusum",
    "ContextCheck",
    "CusumReading",
    "CusumState",
    "ExplainingAway",
    "OutcomeStream",
    "ReferenceRate",
    "SharedEvidence",
    "reference_rates",
    "scan_episodes",
]


_Moved = tuple[np.ndarray, np.ndarray | None, np.ndarray | None, np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""What :meth:`BernoulliCusum._moved` gives :meth:`BernoulliCusum._apply`."""

_FEW = 64
"""Observations up to which :meth:`BernoulliCusum.advance_many` finds repeated memories with a
Python set (a group commit's few outcomes) rather than a sort."""

_SMALL = 8
"""Rows up to which one step sets change points and first alarms row by row in Python (fewer
calls than NumPy's masks for the few memories of one episode)."""


def _number(value: object, name: str, *, low: float, high: float = math.inf, open_low: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValidationError(name, f"must be a number, got {type(value).__name__}")
    v = float(value)
    ok = math.isfinite(v) and (v > low if open_low else v >= low) and v <= high
    if not ok:
        bound = f"> {low:g}" if open_low else f">= {low:g}"
        raise ValidationError(name, f"must be finite, {bound} and <= {high:g}, got {value!r}")
    return v


def _log_sigmoid(z: np.ndarray) -> np.ndarray:
    return -np.logaddexp(0.0, -z)


def _logit(p: np.ndarray) -> np.ndarray:
    return np.log(p) - np.log1p(-p)


def _log_likelihood_ratio(success: np.ndarray, p0: np.ndarray, shift: float | np.ndarray) -> np.ndarray:
    """log Pr[y | odds x exp(shift)] - log Pr[y | p0] for each observation (the CUSUM step);
    ``shift`` is the alternative's log odds ratio (an array broadcasts: one per alternative)."""
    if not isinstance(shift, np.ndarray):  # a scalar p0 spreads over the observations, as the formula broadcasts
        return _step_ratio(success, np.array(np.broadcast_to(p0, np.broadcast(success, p0).shape), dtype=float), shift)
    z0 = _logit(np.clip(p0, 1e-12, 1 - 1e-12))
    return np.asarray(
        np.where(success, _log_sigmoid(z0 + shift) - _log_sigmoid(z0), _log_sigmoid(-z0 - shift) - _log_sigmoid(-z0))
    )


def _step_ratio(success: bool | np.ndarray, p0: np.ndarray, shift: float) -> np.ndarray:
    """:func:`_log_likelihood_ratio` against one alternative, in fewer NumPy calls, bit for bit.

    ``p0`` is a float array this function may change (clipped in place); ``success`` one
    boolean for every observation or one per observation. Each element goes through the
    same IEEE operations as the formula ``where(y, ls(z0 + s) - ls(z0), ls(-z0 - s) - ls(-z0))``
    with ``ls(z) = -logaddexp(0, -z)`` and ``z0 = logit(clip(p0))``:

    * ``(-A) - (-B)`` is ``B - A`` exactly (IEEE subtraction adds the negation; addition
      commutes), so the step is ``logaddexp(0, u2) - logaddexp(0, u1)`` with, on a success,
      ``u1 = -(z0 + s)`` and ``u2 = -z0``, on a failure ``u1 = -((-z0) - s)`` and
      ``u2 = -(-z0) = z0``;
    * ``(-z0) - s`` is ``-(z0 + s)`` exactly (round to nearest is symmetric), so on a failure
      ``u1 = z0 + s`` (when ``z0 + s`` is 0 the sign of the zero differs, which
      ``logaddexp(0, +-0)`` does not see: ``log 2`` either way);
    * a success multiplies both by -1.0 and a failure by 1.0, both exact;
    * both logaddexp arguments go through one call, and ``np.clip`` is its maximum then
      minimum (the same values for finite input). NumPy's elementwise functions give an
      element the same result whatever array it sits in (checked by the tests over random
      inputs); ``tests/test_change_step.py`` holds the formula above and compares bit for bit.
    """
    np.maximum(p0, 1e-12, out=p0)
    np.minimum(p0, 1 - 1e-12, out=p0)
    z0 = np.log(p0)
    z0 -= np.log1p(-p0)
    args = np.empty((2, *z0.shape))
    if isinstance(success, (bool, np.bool_)):
        if success:
            np.add(z0, shift, out=args[0])
            np.negative(args[0], out=args[0])
            np.negative(z0, out=args[1])
        else:
            np.add(z0, shift, out=args[0])
            args[1] = z0
    else:
        sign = np.where(success, -1.0, 1.0)
        np.add(z0, shift, out=args[0])
        np.multiply(args[0], sign, out=args[0])
        np.multiply(z0, sign, out=args[1])
    both = np.logaddexp(0.0, args)
    return np.asarray(both[1] - both[0])


def _baseline_of(
    n: np.ndarray, successes: np.ndarray, expected: np.ndarray, ref: float | np.ndarray | None, a: float, k: float
) -> np.ndarray:
    """The pre-change success probability of memories whose ``n`` observations, ``successes``
    and ``expected`` (fresh arrays, one element per memory) were read from a state, given
    the reference rate ``ref`` (one for all, one per memory, or ``None``), the prior ``a``
    and ``k`` history-prior pseudo-observations: :meth:`BernoulliCusum.baseline`.

    Every element takes the operations of the formula in the same order (``(s + a [+ k q])
    / (n + 2 a [+ k])``, ``logit(p) = log(p) - log1p(-p)``, ``1 / (1 + exp(-(logit(ref) +
    own - other)))``); the three logits (own rate, expected rate, reference) go through one
    ``log`` and one ``log1p`` call, the reference once when it is one for all."""
    m = n.size
    den = n + 2 * a
    kq: float | np.ndarray = 0.0
    if k > 0:
        den += k
        kq = k * (0.5 if ref is None else ref)
    if ref is None:
        p = successes + a
        if k > 0:
            p += kq
        p /= den
        own = np.log(p)
        own -= np.log1p(-p)
        np.negative(own, out=own)
        e = np.exp(own)
        e += 1.0
        return np.asarray(1.0 / e)
    one = not isinstance(ref, np.ndarray)  # one rate for every memory: its logit once
    buf = np.empty(2 * m + (1 if one else m))
    rates = buf[: 2 * m].reshape(2, m)
    rates[0] = successes
    rates[1] = expected
    rates += a
    if k > 0:
        rates += kq
    rates /= den
    buf[2 * m :] = ref
    logits = np.log(buf)
    logits -= np.log1p(-buf)
    lift = logits[:m] - logits[m : 2 * m]
    lift += logits[2 * m :]
    np.negative(lift, out=lift)
    e = np.exp(lift)
    e += 1.0
    return np.asarray(1.0 / e)


def _mixed(parts: np.ndarray, log_weights: np.ndarray) -> np.ndarray:
    """The mixture statistic ``log sum_k weight_k exp(parts_k)`` of each row of CUSUMs, 0
    exactly when every one is 0 (so an excursion ends where all of its alternatives' do)."""
    top = parts.max(axis=1)
    total = top + np.log(np.exp(parts - top[:, None] + log_weights[None, :]).sum(axis=1))
    return np.asarray(np.where(top > 0, np.maximum(total, 0.0), 0.0))


def mixture_of(odds_ratios: object, weights: object) -> tuple[np.ndarray, np.ndarray]:
    """The alternatives of a mixture detector, checked: their log odds ratios and log weights
    (normalised to sum to 1; equal weights when ``weights`` is empty).

    ``odds_ratios``: a sequence of distinct numbers in (0, 1) (empty: no mixture);
    ``weights``: as many positive numbers, or none. ValidationError naming the field.

    Examples
    --------
    >>> shifts, log_w = mixture_of((0.05, 0.5), (3, 1))
    >>> np.exp(log_w).round(2).tolist()
    [0.75, 0.25]
    """
    ratios = [_number(v, "odds_ratios", low=0.0, high=1.0, open_low=True) for v in _sequence(odds_ratios, "odds_ratios")]
    if any(v >= 1.0 for v in ratios):
        raise ValidationError("odds_ratios", f"each must be below 1 (a fall), got {ratios!r}")
    if len(set(ratios)) != len(ratios):
        raise ValidationError("odds_ratios", f"must be distinct, got {ratios!r}")
    given = [_number(v, "weights", low=0.0, open_low=True) for v in _sequence(weights, "weights")]
    if given and len(given) != len(ratios):
        raise ValidationError("weights", f"must be one per odds ratio ({len(ratios)}), got {len(given)}")
    w = np.array(given, dtype=float) if given else np.ones(len(ratios))
    if w.size:  # scaled by the largest first: finite weights near the float limit would sum to inf
        w = w / w.max()
    shifts = np.log(np.array(ratios, dtype=float))
    return shifts, (np.log(w / w.sum()) if w.size else w)


def _sequence(value: object, name: str) -> tuple[object, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, np.ndarray)):
        raise ValidationError(name, f"must be a sequence of numbers, got {type(value).__name__}")
    return tuple(value)


@dataclass
class CusumState:
    """The learned state of a CUSUM for many memories, one row each (arrays, updated in place).

    ``statistic`` is the CUSUM now; ``observations`` and ``successes`` the memory's
    weighted history; ``expected`` the reference rate summed over it; ``since`` the index
    (``time``) of the first observation of the current excursion (-1 when the statistic
    is 0); ``first_alarm`` the time of the first alarm (-1: none yet); ``watched`` how
    many observations the statistic has read since the memory was first watched (or since
    its last reset), each counted once whatever its weight: the number of change points
    the statistic maximises over, which its e-value divides by. ``components``: for
    a mixture detector (several ``odds_ratios``), one CUSUM per alternative (a row per
    memory, a column per alternative), of which ``statistic`` is the mixture; ``None`` for
    a detector with one alternative (its ``statistic`` is its only CUSUM). ``frozen``: for a
    detector with a frozen baseline (``BernoulliCusum(frozen_baseline=True)``), each row's
    ``observations``, ``successes`` and ``expected`` as they stood when its current
    excursion started (a row per memory, those three columns; equal to the live counts
    while the statistic is 0); ``None`` otherwise.
    """

    statistic: np.ndarray
    observations: np.ndarray
    successes: np.ndarray
    expected: np.ndarray
    since: np.ndarray
    first_alarm: np.ndarray
    watched: np.ndarray
    components: np.ndarray | None = None
    frozen: np.ndarray | None = None

    @classmethod
    def empty(cls, size: int, alternatives: int = 1, *, frozen: bool = False) -> CusumState:
        """State for ``size`` memories with no history (``alternatives``: the detector's
        number of alternatives; more than one keeps a CUSUM per alternative; ``frozen``:
        keep the counts at each excursion's start, for a frozen baseline)."""
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 0:
            raise ValidationError("size", f"must be an integer >= 0, got {size!r}")
        if isinstance(alternatives, bool) or not isinstance(alternatives, (int, np.integer)) or alternatives < 1:
            raise ValidationError("alternatives", f"must be an integer >= 1, got {alternatives!r}")
        z = np.zeros(int(size))
        minus = np.full(int(size), -1, dtype=np.int64)
        parts = np.zeros((int(size), int(alternatives))) if alternatives > 1 else None
        held = np.zeros((int(size), 3)) if frozen else None
        return cls(z, z.copy(), z.copy(), z.copy(), minus, minus.copy(), z.copy(), parts, held)

    @property
    def alternatives(self) -> int:
        """How many alternatives the state keeps a CUSUM for (1 without ``components``)."""
        return 1 if self.components is None else int(self.components.shape[1])

    def __len__(self) -> int:
        return int(self.statistic.size)

    def copy(self) -> CusumState:
        """An independent copy (its arrays copied)."""
        return CusumState(
            self.statistic.copy(),
            self.observations.copy(),
            self.successes.copy(),
            self.expected.copy(),
            self.since.copy(),
            self.first_alarm.copy(),
            self.watched.copy(),
            None if self.components is None else self.components.copy(),
            None if self.frozen is None else self.frozen.copy(),
        )

    def live_counts(self, rows: np.ndarray) -> np.ndarray:
        """The ``observations``, ``successes`` and ``expected`` of ``rows`` now, a row each
        (what ``frozen`` holds for a row whose statistic is 0)."""
        return np.stack([self.observations[rows], self.successes[rows], self.expected[rows]], axis=1)

    def hold_counts(self) -> np.ndarray:
        """``frozen``, made from the live counts when the state has none (a state saved
        without it: exact for every row whose statistic is 0; a row in an excursion takes its
        counts now as its excursion's start)."""
        if self.frozen is None:
            self.frozen = self.live_counts(np.arange(len(self)))
        return self.frozen

    def grow(self, size: int) -> None:
        """Make room for ``size`` memories (new rows have no history); never shrinks."""
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < len(self):
            raise ValidationError("size", f"must be an integer >= {len(self)}, got {size!r}")
        more = int(size) - len(self)
        if more == 0:
            return
        zeros, minus = np.zeros(more), np.full(more, -1, dtype=np.int64)
        for name in ("statistic", "observations", "successes", "expected", "watched"):
            setattr(self, name, np.concatenate([getattr(self, name), zeros]))
        self.since = np.concatenate([self.since, minus])
        self.first_alarm = np.concatenate([self.first_alarm, minus])
        if self.components is not None:
            self.components = np.concatenate([self.components, np.zeros((more, self.components.shape[1]))])
        if self.frozen is not None:
            self.frozen = np.concatenate([self.frozen, np.zeros((more, 3))])

    def reset(self, rows: np.ndarray | list[int], *, forget_history: bool = False) -> None:
        """Restart the statistic of ``rows`` (after a person re-verified them): its change
        points start again, so its count of ``watched`` observations does too.

        With ``forget_history`` the baseline is learned afresh too (the memory was edited).
        """
        r = np.asarray(rows, dtype=np.int64)
        self.statistic[r] = 0.0
        self.watched[r] = 0.0
        if self.components is not None:
            self.components[r] = 0.0
        self.since[r] = -1
        self.first_alarm[r] = -1
        if forget_history:
            self.observations[r] = 0.0
            self.successes[r] = 0.0
            self.expected[r] = 0.0
        if self.frozen is not None:  # at 0 the baseline learns from every observation again
            self.frozen[r] = self.live_counts(r)


@dataclass(frozen=True)
class OutcomeStream:
    """One memory's retrievals that have an outcome, oldest first (what :meth:`BernoulliCusum.scan` reads).

    ``success`` (booleans), ``weight`` (in [0, 1]: the outcome's confidence), ``reference``
    (the success rate of all episodes just before each, or ``None``) and ``episode`` (the
    position of each outcome in its namespace's log, counted from 1) are aligned arrays;
    ``explained_by`` names the co-retrieved memories that hold its alarm now
    (:meth:`ExplainingAway.holding`): its failures are better explained by them;
    ``context`` is each outcome's context label (its episode's, ``None`` for an episode
    without one) when any episode had one, else ``None`` (:class:`ContextCheck` reads it);
    ``window_explained_by`` names memories whose change alarm stands (not held) that came
    with at least half of the failures among its last retrievals (the window test's), or
    suspects that explain them (:func:`memworth.signals.window_test.explainers`): those failures are
    theirs. ``suspect`` says whether the memory itself looks broken now (its change alarm
    fired, held or not, or its window test fires): a probe of another memory that came
    with it tells nothing about that other memory. ``change_alarm`` says whether its
    change alarm stands after the namespace's error control (e-BH over every memory's
    e-value, :func:`memworth.signals.outcome_streams.namespace_streams`), with ``change_level`` the e-value
    that asked of it; ``None``: the stream was read alone, and the policy tests it alone.

    Examples
    --------
    >>> import numpy as np
    >>> s = OutcomeStream(np.array([True, False]), np.ones(2), None, np.array([3, 7]))
    >>> len(s)
    2
    """

    success: np.ndarray
    weight: np.ndarray
    reference: np.ndarray | None
    episode: np.ndarray
    explained_by: tuple[str, ...] = ()
    context: tuple[str | None, ...] | None = None
    window_explained_by: tuple[str, ...] = ()
    suspect: bool = False
    change_alarm: bool | None = None
    change_level: float | None = None
    reading: CusumReading | None = None
    """The CUSUM after the whole stream when a namespace scan computed it already (what
    :meth:`BernoulliCusum.scan` of this stream gives; ``None``: scan it)."""

    def __len__(self) -> int:
        return int(np.asarray(self.success).size)


@dataclass(frozen=True)
class CusumReading:
    """Where one memory's CUSUM stands after its stream: the numbers behind an alarm."""

    statistic: float
    threshold: float
    alarm: bool
    first_alarm: int | None
    change_point: int | None
    baseline: float
    observations: float
    watched: float
    """Observations the statistic has read since the memory was first watched (or last
    reset), each counted once: what its e-value divides by."""
    odds_ratio: float | None = None
    """For a mixture detector, the alternative that carries most of the statistic (the
    largest ``weight_k exp(S_k)``): the fall the evidence points to. ``None`` with one
    alternative (the detector's own ``odds_ratio``)."""


@dataclass(frozen=True)
class BernoulliCusum:
    """One-sided Bernoulli CUSUM for a fall in a memory's success rate (settings only).

    Parameters
    ----------
    odds_ratio
        The alternative: the odds of success fall by this factor (in (0, 1)).
    threshold
        The alarm level ``h`` of the statistic (about ``exp(h)`` observations between
        false alarms with a known baseline).
    min_history
        Weighted observations of the memory's own history (what its baseline is learned
        from) before it is watched.
    prior
        Pseudo-counts of success and of failure (and of the reference) that smooth the
        baseline (0.5: Jeffreys).
    odds_ratios
        A mixture of alternatives in place of ``odds_ratio`` (distinct, in (0, 1); empty:
        the single ``odds_ratio``; one: that one alone): one CUSUM per alternative, the
        statistic the log of their weighted sum (see the module docstring for its
        guarantee).
    weights
        The alternatives' weights (positive, normalised to sum to 1; empty: equal).
    history_prior
        Pseudo-observations at the reference rate that stand in for the memory's own
        history: they shrink its baseline toward the reference and count toward
        ``min_history``.
    frozen_baseline
        Estimate the pre-change rate from the observations before the current excursion
        only (off by default): while the statistic is above 0 the memory's lift over the
        reference stays where it was when the excursion started (the reference still
        moves), so the observations of a candidate change do not pull down the baseline
        they are tested against; at 0 it learns from every observation again, the
        excursion's included. A mixture freezes it over the mixture's one excursion (from
        the first alternative that leaves 0 until every one is back at 0), which is the
        excursion its change point names. The state keeps the counts at each excursion's
        start (``CusumState.frozen``).

    Examples
    --------
    A memory that worked 40 times and then failed ten times:

    >>> import numpy as np
    >>> y = np.array([True] * 40 + [False] * 10)
    >>> r = BernoulliCusum().scan(y)
    >>> r.alarm, r.first_alarm, r.change_point, round(r.statistic, 2)
    (True, 45, 40, 19.66)
    >>> BernoulliCusum().scan(np.array([True, False] * 40)).alarm
    False

    A fall from about 0.7 to 0.4 (odds 3.5 times lower): the single alternative misses it,
    a mixture that also holds odds 4 and 2 times lower catches it:

    >>> rng = np.random.default_rng(2)
    >>> y = np.r_[rng.random(300) < 0.7, rng.random(300) < 0.4]
    >>> BernoulliCusum().scan(y).alarm, BernoulliCusum(odds_ratios=(0.05, 0.25, 0.5)).scan(y).alarm
    (False, True)
    """

    odds_ratio: float = 0.05
    threshold: float = 12.0
    min_history: float = 10.0
    prior: float = 0.5
    odds_ratios: tuple[float, ...] = ()
    weights: tuple[float, ...] = ()
    history_prior: float = 0.0
    frozen_baseline: bool = field(default=False, repr=False)
    # left out of the repr (the logs engine names a saved scan's settings by it): off, a
    # detector reads as before; :func:`memworth.logs.detectors.settings_of` adds it when on.

    def _check(self) -> tuple[float, float, float, float]:
        checked: tuple[float, float, float, float] | None = self.__dict__.get("_checked")
        if checked is not None:  # settings are frozen: checked once, on first use
            return checked
        ratio = _number(self.odds_ratio, "odds_ratio", low=0.0, high=1.0, open_low=True)
        if ratio >= 1.0:
            raise ValidationError("odds_ratio", f"must be below 1 (a fall), got {self.odds_ratio!r}")
        h = _number(self.threshold, "threshold", low=0.0, open_low=True)
        n0 = _number(self.min_history, "min_history", low=0.0)
        a = _number(self.prior, "prior", low=0.0, open_low=True)
        shifts, log_weights = mixture_of(self.odds_ratios, self.weights)
        k = _number(self.history_prior, "history_prior", low=0.0)
        if not isinstance(self.frozen_baseline, (bool, np.bool_)):
            raise ValidationError("frozen_baseline", f"must be a bool, got {type(self.frozen_baseline).__name__}")
        object.__setattr__(self, "_mixture", None if shifts.size < 2 else (shifts, log_weights))
        object.__setattr__(self, "_shift", math.log(ratio) if shifts.size == 0 else float(shifts[0]))
        object.__setattr__(self, "_history", (k, max(n0 - k, 0.0)))
        object.__setattr__(self, "_checked", (ratio, h, n0, a))
        return ratio, h, n0, a

    @property
    def alternatives(self) -> int:
        """How many alternatives the detector mixes (1: a plain CUSUM)."""
        self._check()
        mix: tuple[np.ndarray, np.ndarray] | None = self.__dict__["_mixture"]
        return 1 if mix is None else int(mix[0].size)

    def leading_odds_ratio(self, state: CusumState, row: int) -> float | None:
        """The odds ratio of the alternative carrying most of row ``row``'s mixture statistic
        (``None`` for a one-alternative detector, or before any evidence).

        What a quarantined memory's probe test should take as its fallen rate: the mixture
        alarms on the sum, but the evidence points at one size of fall.
        """
        self._check()
        mix: tuple[np.ndarray, np.ndarray] | None = self.__dict__["_mixture"]
        if mix is None or state.components is None or not np.any(state.components[row] > 0.0):
            return None
        shifts, log_weights = mix
        return float(np.exp(shifts[int(np.argmax(log_weights + state.components[row]))]))

    def start(self, size: int) -> CusumState:
        """A fresh state for ``size`` memories."""
        self._check()
        return CusumState.empty(size, self.alternatives, frozen=bool(self.frozen_baseline))

    def fits(self, state: CusumState) -> bool:
        """Whether ``state`` keeps the CUSUMs this detector advances (one per alternative)."""
        return state.alternatives == self.alternatives

    def baseline(self, state: CusumState, rows: np.ndarray, reference: np.ndarray | None = None) -> np.ndarray:
        """The pre-change success probability of ``rows`` now (given the reference rate)."""
        r = np.asarray(rows, dtype=np.int64)
        return self._baseline(state, r, None if reference is None else _check_rates(reference, r.size, "reference"))

    def _baseline(self, state: CusumState, r: np.ndarray, ref: np.ndarray | None) -> np.ndarray:
        """:meth:`baseline` of int64 rows ``r`` and checked reference rates ``ref``."""
        _ratio, _h, _n0, a = self._check()
        # history_prior pseudo-observations at the reference rate (0.5 without one) stand in
        # for a short history: they pull the memory's lift over the reference toward 0.
        k, _start = self.__dict__["_history"]
        n, successes, expected = self._learned(state, r)
        return _baseline_of(n, successes, expected, ref, a, k)

    def _learned(self, state: CusumState, r: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The counts rows ``r``'s baseline is learned from (fresh arrays): the live ones, or
        with a frozen baseline those at the start of each row's current excursion."""
        if not self.frozen_baseline:
            return state.observations[r], state.successes[r], state.expected[r]
        held = state.hold_counts()[r]
        return held[:, 0], held[:, 1], held[:, 2]

    def update(
        self,
        state: CusumState,
        rows: np.ndarray | list[int],
        success: np.ndarray | list[bool] | bool,
        *,
        weight: np.ndarray | float = 1.0,
        reference: np.ndarray | float | None = None,
        time: int = 0,
    ) -> np.ndarray:
        """Add one observation to each of ``rows`` (distinct memories); return which are in alarm.

        ``success``, ``weight`` and ``reference`` are one per row or a scalar for all;
        ``time`` labels the observation (an episode number) for the change point and the
        first alarm. Nothing changes if an argument is refused.
        """
        if isinstance(time, bool) or not isinstance(time, (int, np.integer)):
            raise ValidationError("time", f"must be an integer, got {time!r}")
        r, y, w, ref = self._observations(state, rows, success, weight, reference)
        after = self._apply(state, r, y, w, ref, int(time), self._moved(state, r, y, w, ref))
        return np.asarray(after >= self._check()[1])

    def advance(
        self, state: CusumState, rows: np.ndarray, success: bool, weight: float, reference: float | None, time: int
    ) -> np.ndarray:
        """:meth:`update` for a scan that has checked its inputs: one episode's observation
        (one outcome, its confidence and reference rate) added to ``rows`` (distinct int64
        rows of ``state``). Returns the steps it took (what :meth:`steps` gives before it)."""
        return self.advance_one(state, rows, success, weight, reference, time)[0]

    def advance_one(
        self, state: CusumState, rows: np.ndarray, success: bool, weight: float, reference: float | None, time: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`advance`, returning the steps and the rows' statistics just after them.

        The outcome, its confidence and its reference rate stay scalars (one for every row):
        each row's arithmetic is the same as with them spread over the rows, in fewer NumPy
        calls (one branch of the step, the reference's logit once)."""
        ref = None if reference is None else float(reference)  # a float32 reference would narrow w * ref
        moved = self._moved(state, rows, bool(success), float(weight), ref)
        return moved[0], self._apply(state, rows, bool(success), float(weight), ref, time, moved)

    def advance_many(
        self, state: CusumState, rows: np.ndarray, success: np.ndarray, weight: np.ndarray, reference: np.ndarray, time: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`advance` for many episodes at once, for a caller that has checked its inputs:
        observation ``i`` (of row ``rows[i]``, with its outcome, confidence, reference rate and
        episode number ``time[i]``) in log order. Each memory's observations are taken in
        order, and different memories' together: a memory's CUSUM reads only its own state and
        its episode's reference rate, so this ends where one :meth:`advance` per episode ends,
        bit for bit, with one vectorised step per *repeat* of a memory instead of per episode.

        Returns, per observation, the step :meth:`advance` took and the statistic just after
        it (what an :class:`ExplainingAway` rule reads episode by episode)."""
        r = np.asarray(rows, dtype=np.int64)
        if not r.size:
            return np.zeros(0), np.zeros(0)
        if r.size <= _FEW and len(set(r.tolist())) == r.size:  # no memory twice: the loop's one round
            moved = self._moved(state, r, success, weight, reference)
            return moved[0], self._apply(state, r, success, weight, reference, time, moved)
        order = np.argsort(r, kind="stable")  # each memory's observations together, in log order
        ranked = r[order]
        first = np.empty(r.size, dtype=bool)
        first[0] = True
        np.not_equal(ranked[1:], ranked[:-1], out=first[1:])
        if first.all():  # no memory twice (a small batch, usually): the loop's one round, in log order
            moved = self._moved(state, r, success, weight, reference)
            return moved[0], self._apply(state, r, success, weight, reference, time, moved)
        starts = np.flatnonzero(first)
        repeat = np.empty(r.size, dtype=np.int64)
        repeat[order] = np.arange(r.size) - np.repeat(starts, np.diff(np.append(starts, r.size)))
        by_repeat = np.argsort(repeat, kind="stable")  # within a repeat, in log order
        bounds = np.searchsorted(repeat[by_repeat], np.arange(int(repeat.max()) + 2))
        steps, after = np.zeros(r.size), np.zeros(r.size)
        for j in range(bounds.size - 1):
            at = by_repeat[bounds[j] : bounds[j + 1]]  # the j-th observation of each memory: distinct rows
            rj, yj, wj, refj = r[at], success[at], weight[at], reference[at]
            moved = self._moved(state, rj, yj, wj, refj)
            steps[at], after[at] = moved[0], self._apply(state, rj, yj, wj, refj, time[at], moved)
        return steps, after

    def _apply(
        self,
        state: CusumState,
        r: np.ndarray,
        y: bool | np.ndarray,
        w: float | np.ndarray,
        ref: float | np.ndarray | None,
        time: int | np.ndarray,
        moved: _Moved,
    ) -> np.ndarray:
        """Take the move of each of rows ``r`` (:meth:`_moved`) and count its observation; the
        statistics after it. ``time``: the episode number, one for all rows or one per row;
        ``y``, ``w`` and ``ref`` one for all rows or one per row."""
        _ratio, h, _n0, _a = self._check()
        step, parts, mixed, n, successes, expected, watched = moved
        before = state.statistic[r]
        if parts is None or mixed is None:
            after = np.maximum(0.0, before + step)
        else:
            assert state.components is not None  # _moved checked it
            state.components[r] = parts
            after = mixed
        state.statistic[r] = after
        if r.size <= _SMALL:  # the change points and first alarms one by one: a few rows
            since, first_alarm = state.since, state.first_alarm
            times = time.tolist() if isinstance(time, np.ndarray) else None
            for i, (row, was, now) in enumerate(zip(r.tolist(), before.tolist(), after.tolist(), strict=True)):
                if now <= 0:
                    since[row] = -1
                elif was <= 0 and now > 0:
                    since[row] = time if times is None else times[i]
                if now >= h and first_alarm[row] < 0:
                    first_alarm[row] = time if times is None else times[i]
        else:
            started = (before <= 0) & (after > 0)
            state.since[r[started]] = time[started] if isinstance(time, np.ndarray) else time
            state.since[r[after <= 0]] = -1
            fresh = (after >= h) & (state.first_alarm[r] < 0)
            state.first_alarm[r[fresh]] = time[fresh] if isinstance(time, np.ndarray) else time
        state.watched[r] += watched  # as _moved read it: this observation took a step
        state.observations[r] = n + w
        state.successes[r] = successes + w * y
        state.expected[r] = expected + w * (0.5 if ref is None else ref)
        if self.frozen_baseline:  # back at 0: the baseline learns again, this observation included
            rest = r[after <= 0]
            state.hold_counts()[rest] = state.live_counts(rest)
        return np.asarray(after)

    def steps(
        self,
        state: CusumState,
        rows: np.ndarray | list[int],
        success: np.ndarray | list[bool] | bool,
        *,
        weight: np.ndarray | float = 1.0,
        reference: np.ndarray | float | None = None,
    ) -> np.ndarray:
        """What one observation would add to each of ``rows``' statistic, before the floor at 0.

        ``w`` times the log-likelihood ratio of the observation (0 for a memory not yet
        watched); :meth:`update` adds it. Changes nothing.
        """
        r, y, w, ref = self._observations(state, rows, success, weight, reference)
        return self._moved(state, r, y, w, ref)[0]

    def _observations(
        self,
        state: CusumState,
        rows: np.ndarray | list[int],
        success: np.ndarray | list[bool] | bool,
        weight: np.ndarray | float,
        reference: np.ndarray | float | None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        self._check()
        r = np.asarray(rows, dtype=np.int64).ravel()
        if r.size and (r.min() < 0 or r.max() >= len(state)):
            raise ValidationError("rows", f"must index the state's {len(state)} memories")
        if np.unique(r).size != r.size:
            raise ValidationError("rows", "a memory appears twice in one update")
        y = np.broadcast_to(np.asarray(success), r.shape)
        if y.dtype != bool:
            raise ValidationError("success", f"must be booleans, got dtype {y.dtype}")
        w = np.broadcast_to(np.asarray(weight, dtype=float), r.shape)
        if not np.all(np.isfinite(w)) or np.any(w < 0) or np.any(w > 1):
            raise ValidationError("weight", "must be within [0, 1]")
        ref = None if reference is None else np.broadcast_to(_check_rates(reference, None, "reference"), r.shape)
        return r, y, w, ref

    def _moved(self, state: CusumState, r: np.ndarray, y: bool | np.ndarray, w: float | np.ndarray, ref: float | np.ndarray | None) -> _Moved:
        """One observation of each of rows ``r``: the step of its statistic (before the floor
        at 0) and, for a mixture, each alternative's CUSUM after it and their mixture; then
        the rows' observations, successes and expected successes as read, and which of them
        the statistic watches (what :meth:`_apply` counts). ``y``, ``w`` and ``ref``: one for
        every row or one per row."""
        _ratio, _h, _n0, a = self._check()
        k, start = self.__dict__["_history"]
        mix: tuple[np.ndarray, np.ndarray] | None = self.__dict__["_mixture"]
        n, successes, expected = state.observations[r], state.successes[r], state.expected[r]
        watched = n >= start
        p0 = _baseline_of(*self._learned(state, r), ref, a, k) if self.frozen_baseline else _baseline_of(n, successes, expected, ref, a, k)
        if mix is None:
            llr = _step_ratio(y, p0, self.__dict__["_shift"])
            llr *= w
            return np.asarray(np.where(watched, llr, 0.0)), None, None, n, successes, expected, watched
        if state.components is None or state.components.shape[1] != mix[0].size:
            raise ValidationError(
                "state", f"keeps {state.alternatives} alternative(s), the detector mixes {mix[0].size}: start it afresh"
            )
        shifts, log_weights = mix
        ys = np.full(r.shape, y) if isinstance(y, (bool, np.bool_)) else y
        llr = _log_likelihood_ratio(ys[:, None], p0[:, None], shifts[None, :])
        parts = np.maximum(0.0, state.components[r] + np.where(watched, w, 0.0)[:, None] * llr)
        mixed = _mixed(parts, log_weights)
        return np.asarray(mixed - state.statistic[r]), parts, mixed, n, successes, expected, watched

    def run(self, success: np.ndarray, weight: np.ndarray, baseline: np.ndarray) -> float:
        """The statistic after a run of observations from 0 against given pre-change rates
        ``baseline`` (one per observation; every one watched), as :meth:`update` moves it:
        what :class:`ContextCheck` reads over an excursion."""
        self._check()
        mix: tuple[np.ndarray, np.ndarray] | None = self.__dict__["_mixture"]
        y, w, p0 = np.asarray(success), np.asarray(weight, dtype=float), np.asarray(baseline, dtype=float)
        if mix is None:
            stat = 0.0
            for step in (w * _log_likelihood_ratio(y, p0, self.__dict__["_shift"])).tolist():
                stat = max(0.0, stat + step)
            return stat
        shifts, log_weights = mix
        llr = w[:, None] * _log_likelihood_ratio(y[:, None], p0[:, None], shifts[None, :])
        parts = np.zeros(shifts.size)
        for row in llr:
            parts = np.maximum(0.0, parts + row)
        return float(_mixed(parts[None, :], log_weights)[0])

    def scan(
        self,
        success: np.ndarray,
        weight: np.ndarray | None = None,
        reference: np.ndarray | None = None,
        times: np.ndarray | None = None,
    ) -> CusumReading:
        """Run one memory's whole stream (oldest first) and read where the CUSUM stands.

        ``times`` labels each observation (default 0, 1, 2, ...).
        """
        y = np.asarray(success)
        if y.ndim != 1 or y.dtype != bool:
            raise ValidationError("success", "must be a 1-D array of booleans")
        n = y.size
        w = np.ones(n) if weight is None else np.asarray(weight, dtype=float)
        ref = None if reference is None else _check_rates(reference, n, "reference")
        t = np.arange(n) if times is None else np.asarray(times)
        if w.shape != (n,):
            raise ValidationError("weight", f"must have one value per observation ({n}), got shape {w.shape}")
        if t.shape != (n,) or not np.issubdtype(t.dtype, np.integer):
            raise ValidationError("times", f"must be {n} integers, one per observation")
        state = self.start(1)
        row = np.zeros(1, dtype=np.int64)
        for i in range(n):
            self.update(
                state, row, y[i : i + 1], weight=w[i : i + 1], reference=None if ref is None else ref[i], time=int(t[i])
            )
        _ratio, h, _n0, _a = self._check()
        last_ref = None if ref is None or n == 0 else np.asarray(ref[-1:])
        stat = float(state.statistic[0])
        return CusumReading(
            statistic=stat,
            threshold=h,
            alarm=stat >= h,
            first_alarm=int(state.first_alarm[0]) if state.first_alarm[0] >= 0 else None,
            change_point=int(state.since[0]) if state.since[0] >= 0 else None,
            baseline=float(self.baseline(state, row, last_ref)[0]),
            observations=float(state.observations[0]),
            watched=float(state.watched[0]),
            odds_ratio=self.leading_odds_ratio(state, 0),
        )


@dataclass
class SharedEvidence:
    """Where each memory's current excursion gathered its evidence: per co-retrieved memory.

    ``shared[m][j]`` is the part of memory ``m``'s statistic (the sum of its steps since it
    last left 0) that came from episodes which also retrieved ``j``; so
    ``statistic[m] - shared[m][j]`` is the evidence against ``m`` from episodes without
    ``j``. Sparse: only memories retrieved together during the excursion have an entry.
    """

    shared: list[dict[int, float]]

    @classmethod
    def empty(cls, size: int) -> SharedEvidence:
        """No evidence for ``size`` memories."""
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 0:
            raise ValidationError("size", f"must be an integer >= 0, got {size!r}")
        return cls([{} for _ in range(int(size))])

    def __len__(self) -> int:
        return len(self.shared)


@dataclass(frozen=True)
class ExplainingAway:
    """Hold a memory's alarm while a co-retrieved memory explains its failures better.

    A memory retrieved in the same episodes as a stale one fails with it: its own CUSUM
    rises although nothing is wrong with it (the co-retrieval confound of the paper's
    Experiment 4). Two memories ``m`` and ``j`` retrieved together are told apart only by
    the episodes that retrieved one without the other; the evidence against ``m`` from
    episodes without ``j`` is ``statistic[m] - shared[m][j]`` (:class:`SharedEvidence`).
    ``j`` *explains* ``m`` when ``j`` was retrieved with ``m`` during ``m``'s current
    excursion, ``j``'s statistic is at least ``suspect``, and ``j``'s evidence from
    episodes without ``m`` exceeds ``m``'s evidence from episodes without ``j`` by more
    than ``margin``. A memory is *flagged* when its CUSUM is in alarm and no other memory
    explains it. Two memories always retrieved together explain neither: both are flagged.

    Just after a change the co-retrieved memories have had few episodes apart, so the
    first to alarm may not be the one that broke. A flag is therefore held while another
    memory comes within ``tie`` of explaining it (its evidence from episodes without the
    flagged one, plus ``tie``, exceeds the flagged one's from episodes without it), until
    the statistic is ``hold`` above the threshold; then only a memory that explains it
    outright holds it.

    The comparison above reads each memory's *own* excursion: a memory whose statistic fell
    back to 0 (a stale note also retrieved, harmlessly, for tasks it does not mislead, whose
    successes there pull its CUSUM down) has no evidence left and explains no one, however
    many of the flagged memory's failures it came with. ``apart`` (0, off, by default) adds
    a test over the flagged memory's excursion instead (:meth:`failing_apart`): ``j`` holds
    ``m``'s flag when ``j`` came with at least half of ``m``'s failures since ``m``'s change
    point, was retrieved at least ``apart`` times without ``m`` since then, and failed more
    often without ``m`` than ``m`` failed without ``j``. It reads success rates, not either
    memory's CUSUM, so it holds for a companion whatever its own statistic.

    The statistics themselves are unchanged (each memory's false-alarm rate is still its
    CUSUM's); the rule only withholds flags, so it cannot add false ones.

    Parameters
    ----------
    margin
        How much more evidence from the episodes without the other the explaining memory
        needs (in log-likelihood-ratio units).
    suspect
        The least statistic of a memory that may explain another.
    tie
        How near explaining a co-retrieved memory must come to hold a fresh alarm.
    hold
        How far above the threshold the statistic must rise before a near tie stops
        holding the flag (0: never hold).
    apart
        The least retrievals without the flagged memory, since its change point, a
        co-retrieved memory needs to explain it by failing more often apart
        (:meth:`failing_apart`; an integer, 0: the test is off).

    Examples
    --------
    Memory 0 broke; memory 1 is retrieved with it in every episode and memory 0 also
    alone. Both CUSUMs alarm, but only memory 0 is flagged:

    >>> import numpy as np
    >>> det, rule = BernoulliCusum(), ExplainingAway()
    >>> sets = [[0, 1]] * 40 + [[0, 1], [0]] * 8
    >>> success = np.array([True] * 40 + [False] * 16)
    >>> state, shared = scan_episodes(det, rule, sets, success)
    >>> bool(state.statistic[0] >= 12), bool(state.statistic[1] >= 12)
    (True, True)
    >>> rule.flagged(shared, state, det).tolist()
    [True, False]
    >>> rule.explained_by(shared, state, 1)
    [0]
    """

    margin: float = 0.0
    suspect: float = 6.0
    tie: float = 2.0
    hold: float = 4.0
    apart: int = 0

    def _check(self) -> tuple[float, float]:
        if isinstance(self.apart, (bool, np.bool_)) or not isinstance(self.apart, (int, np.integer)) or self.apart < 0:
            raise ValidationError("apart", f"must be an integer >= 0, got {self.apart!r}")
        _number(self.tie, "tie", low=0.0)
        _number(self.hold, "hold", low=0.0)
        return (
            _number(self.margin, "margin", low=-math.inf),
            _number(self.suspect, "suspect", low=0.0),
        )

    def start(self, size: int) -> SharedEvidence:
        """Fresh shared evidence for ``size`` memories."""
        self._check()
        return SharedEvidence.empty(size)

    def update(
        self, shared: SharedEvidence, state: CusumState, rows: np.ndarray | list[int], steps: np.ndarray
    ) -> None:
        """Record one episode: ``rows`` were retrieved together and their CUSUMs moved by
        ``steps`` (:meth:`BernoulliCusum.steps`, taken before :meth:`BernoulliCusum.update`;
        ``state`` is after it)."""
        r = np.asarray(rows, dtype=np.int64).ravel()
        d = np.asarray(steps, dtype=float).ravel()
        if len(shared) != len(state):
            raise ValidationError("shared", f"has {len(shared)} memories, the CUSUM state {len(state)}")
        if d.shape != r.shape:
            raise ValidationError("steps", f"must have one value per row ({r.size}), got shape {d.shape}")
        self.record(shared, r.tolist(), d.tolist(), state.statistic[r].tolist())

    @staticmethod
    def record(shared: SharedEvidence, members: list[int], steps: list[float], after: list[float]) -> None:
        """:meth:`update` for a caller that has checked its inputs and read each member's
        statistic just after the episode (``after``), as a batched scan does
        (:meth:`BernoulliCusum.advance_many`)."""
        for m, step, now in zip(members, steps, after, strict=True):
            mine = shared.shared[m]
            if now <= 0:
                mine.clear()
                continue
            if step == 0.0:
                continue
            for j in members:
                if j != m:
                    mine[j] = mine.get(j, 0.0) + step

    def explained_by(self, shared: SharedEvidence, state: CusumState, memory: int) -> list[int]:
        """The memories that explain ``memory``'s statistic now (its row), strongest first."""
        margin, _suspect = self._check()
        return self._explainers(shared, state, memory, margin)

    def _explainers(self, shared: SharedEvidence, state: CusumState, memory: int, margin: float) -> list[int]:
        _margin, suspect = self._check()
        m = int(memory)
        if not 0 <= m < len(state):
            raise ValidationError("memory", f"must index the state's {len(state)} memories, got {memory!r}")
        own = float(state.statistic[m])
        found: list[tuple[float, int]] = []
        for j, with_j in shared.shared[m].items():
            other = float(state.statistic[j])
            if other < suspect:
                continue
            theirs = other - shared.shared[j].get(m, 0.0)
            if theirs > own - with_j + margin:
                found.append((theirs, j))
        return [j for _, j in sorted(found, key=lambda x: (-x[0], x[1]))]

    def failing_apart(
        self,
        memory: Hashable,
        own: Sequence[tuple[bool, Collection[Hashable]]],
        others: Mapping[Hashable, Sequence[tuple[bool, Collection[Hashable]]]],
    ) -> list[Hashable]:
        """The co-retrieved memories whose failures apart explain ``memory``'s alarm (``apart``).

        ``own``: ``memory``'s retrievals since its change point, oldest first, each as
        (success, the memories that episode retrieved); ``others``: the same for the memories
        retrieved with it, over the same episodes (one left out is not considered). ``j``
        explains ``memory`` when ``j`` came with at least half of its failures, ``j`` was
        retrieved at least ``apart`` times without it, and ``j``'s failure rate without it
        is above its failure rate without ``j`` (each rate with half a failure in one
        pseudo-retrieval, so that a handful of retrievals does not decide). Strongest
        (highest rate apart) first; ``[]`` when ``apart`` is 0.

        Examples
        --------
        Since the change, "helper" failed only with "stale"; "stale" failed without it too:

        >>> rule = ExplainingAway(apart=3)
        >>> helper = [(False, {"helper", "stale"})] * 6 + [(True, {"helper"})] * 3
        >>> stale = [(False, {"helper", "stale"})] * 6 + [(False, {"stale"})] * 3 + [(True, {"stale"})]
        >>> rule.failing_apart("helper", helper, {"stale": stale})
        ['stale']
        >>> rule.failing_apart("stale", stale, {"helper": helper})
        []
        """
        self._check()
        if not self.apart:
            return []
        failed = [seen for ok, seen in own if not ok]
        found: list[tuple[float, str, Hashable]] = []
        for j, theirs in others.items():
            if j == memory or 2 * sum(1 for seen in failed if j in seen) < max(len(failed), 1):
                continue
            alone = [ok for ok, seen in theirs if memory not in seen]
            if len(alone) < self.apart:
                continue
            mine = [ok for ok, seen in own if j not in seen]
            theirs_rate = (alone.count(False) + 0.5) / (len(alone) + 1.0)
            if theirs_rate > (mine.count(False) + 0.5) / (len(mine) + 1.0):
                found.append((theirs_rate, repr(j), j))
        return [j for _, _, j in sorted(found, key=lambda x: (-x[0], x[1]))]

    def _no_apart(self) -> None:
        if self.apart:
            raise ValidationError(
                "apart", "is applied over the episodes (NamespaceScan), not over these arrays: use a rule without it here"
            )

    def flagged(self, shared: SharedEvidence, state: CusumState, detector: BernoulliCusum) -> np.ndarray:
        """Which memories are flagged now: in alarm, explained by no other and not held.

        The statistic-based holds only: ``apart`` reads the episodes, which these arrays do
        not hold (:class:`memworth.signals.outcome_streams.NamespaceScan` applies it); a rule
        with ``apart`` set is refused here rather than answering without it.
        """
        self._no_apart()
        _ratio, h, _n0, _a = detector._check()
        alarm = state.statistic >= h
        out = alarm.copy()
        for m in np.flatnonzero(alarm).tolist():
            out[m] = not self.holding(shared, state, detector, m)
        return np.asarray(out)

    def holding(self, shared: SharedEvidence, state: CusumState, detector: BernoulliCusum, memory: int) -> list[int]:
        """The memories that hold ``memory``'s flag now: those that explain it, or, while
        its statistic is below the threshold plus ``hold``, come within ``tie`` of it (the
        statistic-based holds: ``apart`` reads the episodes, which
        :class:`memworth.signals.outcome_streams.NamespaceScan` adds for an alarm these leave)."""
        margin, _suspect = self._check()
        _ratio, h, _n0, _a = detector._check()
        found = self._explainers(shared, state, memory, margin)
        if not found and self.tie > 0 and state.statistic[int(memory)] < h + self.hold:
            found = self._explainers(shared, state, memory, margin - self.tie)
        return found


@dataclass(frozen=True)
class ContextCheck:
    """Hold an alarm whose failures came in contexts where the memory failed before.

    A memory's success rate can fall with nothing wrong with it: the task mix moved, and
    it is now retrieved mostly for tasks it never helped with (in the paper's Experiment 5
    setting, a memory about Everest that used to answer Everest questions and is now
    retrieved only for an unanswerable question about boiling on Everest). Its CUSUM,
    which compares it with its own history as a whole, sees a break.

    The check re-reads the alarm's excursion (the observations since the change point,
    ``since``) against the memory's own record *before* it, context by context: the
    baseline in context ``c`` is its weighted success rate there before the excursion,
    smoothed toward its overall rate before the excursion with ``strength``
    pseudo-observations (so a context it had no record in gets its overall rate). The
    excursion runs through the detector's CUSUM step (its ``odds_ratio``, each
    observation weighted by ``weight``); if the statistic stays below the detector's
    threshold, the failures are what the memory's record in those contexts predicts, and
    the alarm is held. Like :class:`ExplainingAway` it only withholds flags.
    :meth:`expected` gives the success rate the record predicts for the excursion (for
    a windowed test).

    Parameters
    ----------
    strength
        Pseudo-observations of the overall rate in each context's baseline (> 0; small:
        trust the memory's own record in a context).
    prior
        Pseudo-counts of success and failure in the overall rate (0.5: Jeffreys).

    Examples
    --------
    A memory that answered topic "a" and always failed topic "b" is retrieved only for
    "b" after its 40th retrieval: its failures are its record in "b", not a break. One
    that fails in a topic it never saw before is not held:

    >>> import numpy as np
    >>> det, check = BernoulliCusum(), ContextCheck()
    >>> times = np.arange(1, 61)
    >>> before = ["a", "a", "a", "b"] * 10
    >>> success = np.array([c == "a" for c in before] + [False] * 20)
    >>> check.holds(det, times, before + ["b"] * 20, success, since=41)
    True
    >>> check.holds(det, times, before + ["new"] * 20, success, since=41)
    False
    >>> round(check.expected(times, before + ["b"] * 20, success, since=41), 3)
    0.018
    """

    strength: float = 0.25
    prior: float = 0.5

    def _baselines(
        self,
        times: np.ndarray,
        contexts: Sequence[Hashable],
        success: np.ndarray,
        weight: np.ndarray | None,
        since: int,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The excursion's outcomes, weights and per-context baselines (checked inputs)."""
        k = _number(self.strength, "strength", low=0.0, open_low=True)
        a = _number(self.prior, "prior", low=0.0, open_low=True)
        y = np.asarray(success)
        if y.ndim != 1 or y.dtype != bool:
            raise ValidationError("success", "must be a 1-D array of booleans")
        t = np.asarray(times)
        if t.shape != y.shape or not np.issubdtype(t.dtype, np.integer):
            raise ValidationError("times", f"must be {y.size} integers, one per observation")
        if isinstance(contexts, (str, bytes)) or not isinstance(contexts, (Sequence, np.ndarray)):
            raise ValidationError("contexts", f"must be a sequence of labels, got {type(contexts).__name__}")
        if len(contexts) != y.size:
            raise ValidationError("contexts", f"must have one label per observation ({y.size}), got {len(contexts)}")
        labels = list(contexts)
        for label in labels:
            try:
                hash(label)
            except TypeError:
                raise ValidationError("contexts", f"a label must be hashable, got {type(label).__name__}") from None
        w = np.ones(y.size) if weight is None else np.asarray(weight, dtype=float)
        if w.shape != y.shape or not np.all(np.isfinite(w)) or np.any(w < 0) or np.any(w > 1):
            raise ValidationError("weight", f"must be {y.size} numbers within [0, 1], one per observation")
        if isinstance(since, (bool, np.bool_)) or not isinstance(since, (int, np.integer)):
            raise ValidationError("since", f"must be an integer, got {since!r}")
        pre = t < since
        overall = (float(np.sum(w[pre] * y[pre])) + a) / (float(np.sum(w[pre])) + 2 * a)
        wins: dict[Hashable, float] = {}
        seen: dict[Hashable, float] = {}
        for i in np.flatnonzero(pre).tolist():
            wins[labels[i]] = wins.get(labels[i], 0.0) + w[i] * y[i]
            seen[labels[i]] = seen.get(labels[i], 0.0) + w[i]
        after = np.flatnonzero(~pre)
        p0 = np.array(
            [(wins.get(labels[i], 0.0) + k * overall) / (seen.get(labels[i], 0.0) + k) for i in after.tolist()]
        )
        return y[after], w[after], p0

    def statistic(
        self,
        detector: BernoulliCusum,
        times: np.ndarray,
        contexts: Sequence[Hashable],
        success: np.ndarray,
        *,
        since: int,
        weight: np.ndarray | None = None,
    ) -> float:
        """The excursion's CUSUM (observations with ``times >= since``) against the
        memory's per-context record before ``since``."""
        y, w, p0 = self._baselines(times, contexts, success, weight, since)
        return detector.run(y, w, p0)

    def holds(
        self,
        detector: BernoulliCusum,
        times: np.ndarray,
        contexts: Sequence[Hashable],
        success: np.ndarray,
        *,
        since: int,
        weight: np.ndarray | None = None,
    ) -> bool:
        """Whether the memory's per-context record explains its excursion (the alarm is held)."""
        stat = self.statistic(detector, times, contexts, success, since=since, weight=weight)
        return stat < detector._check()[1]

    def expected(
        self,
        times: np.ndarray,
        contexts: Sequence[Hashable],
        success: np.ndarray,
        *,
        since: int,
        weight: np.ndarray | None = None,
    ) -> float:
        """The success rate the memory's per-context record before ``since`` predicts for
        its observations since then (weighted mean of their baselines; nan if none)."""
        _y, w, p0 = self._baselines(times, contexts, success, weight, since)
        total = float(w.sum())
        return float(np.sum(w * p0) / total) if total > 0 else float("nan")


def scan_episodes(
    detector: BernoulliCusum,
    rule: ExplainingAway,
    sets: list[list[int]] | list[np.ndarray],
    success: np.ndarray,
    weight: np.ndarray | None = None,
    reference: np.ndarray | None = None,
    *,
    size: int | None = None,
) -> tuple[CusumState, SharedEvidence]:
    """Run every memory's CUSUM over a log of episodes, with the shared evidence between them.

    ``sets[t]`` are the rows retrieved in episode ``t`` (one observation each), ``success[t]``
    its outcome, ``weight[t]`` its confidence and ``reference[t]`` the success rate of all
    episodes before it (or ``None``); episodes are labelled 1, 2, ... in the state. ``size``:
    the number of memories (default: the largest row + 1).
    """
    y = np.asarray(success)
    if y.ndim != 1 or y.dtype != bool:
        raise ValidationError("success", "must be a 1-D array of booleans")
    if len(sets) != y.size:
        raise ValidationError("sets", f"must have one set per outcome ({y.size}), got {len(sets)}")
    w = np.ones(y.size) if weight is None else np.asarray(weight, dtype=float)
    if w.shape != y.shape:
        raise ValidationError("weight", f"must have one value per outcome ({y.size}), got shape {w.shape}")
    ref = None if reference is None else _check_rates(reference, y.size, "reference")
    rows = [np.asarray(s, dtype=np.int64).ravel() for s in sets]
    biggest = max((int(r.max()) for r in rows if r.size), default=-1)
    n = biggest + 1 if size is None else size
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n <= biggest:
        raise ValidationError("size", f"must be an integer above every row ({biggest}), got {size!r}")
    if any(np.unique(r).size != r.size for r in rows):
        raise ValidationError("sets", "a memory appears twice in one episode")
    if any(r.size and r.min() < 0 for r in rows):
        raise ValidationError("sets", "rows must be >= 0")
    if not np.all(np.isfinite(w)) or np.any(w < 0) or np.any(w > 1):
        raise ValidationError("weight", "must be within [0, 1]")
    state, shared = detector.start(int(n)), rule.start(int(n))
    for t, r in enumerate(rows):
        if not r.size:
            continue
        steps = detector.advance(state, r, bool(y[t]), float(w[t]), None if ref is None else float(ref[t]), t + 1)
        rule.update(shared, state, r, steps)
    return state, shared


def _check_rates(values: object, size: int | None, name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if size is not None and arr.ndim > 0 and arr.shape != (size,):
        raise ValidationError(name, f"must have {size} values, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0) or np.any(arr >= 1):
        raise ValidationError(name, "must be rates strictly between 0 and 1")
    return arr


def reference_rates(success: np.ndarray, half_life: float = 50.0, prior: float = 0.5) -> np.ndarray:
    """The success rate of all episodes just before each one: an exponentially weighted mean.

    Episode ``t`` gets the rate of episodes ``0 .. t-1``, each weighted ``0.5 ** (age /
    half_life)``, with ``prior`` pseudo-counts of success and failure (so the first is 0.5
    and none is 0 or 1).

    Examples
    --------
    >>> import numpy as np
    >>> reference_rates(np.array([True, True, False]), half_life=1e9).round(3)
    array([0.5  , 0.75 , 0.833])
    """
    y = np.asarray(success)
    if y.ndim != 1 or y.dtype != bool:
        raise ValidationError("success", "must be a 1-D array of booleans")
    running = ReferenceRate(half_life, prior)
    out = np.empty(y.size)
    for i, ok in enumerate(y.tolist()):
        out[i] = running.rate
        running.add(ok)
    return out


class ReferenceRate:
    """The exponentially weighted success rate of all episodes so far, one outcome at a time.

    Each earlier outcome weighs ``0.5 ** (age / half_life)``; ``prior`` pseudo-counts of
    success and failure keep the rate off 0 and 1 (:func:`reference_rates` gives it before
    every episode of a log).

    Examples
    --------
    >>> running = ReferenceRate(half_life=1e9)
    >>> running.rate
    0.5
    >>> running.add(True); running.add(True); round(running.rate, 3)
    0.833
    """

    def __init__(self, half_life: float = 50.0, prior: float = 0.5) -> None:
        hl = _number(half_life, "half_life", low=0.0, open_low=True)
        a = _number(prior, "prior", low=0.0, open_low=True)
        self._keep = 0.5 ** (1.0 / hl)
        self._successes, self._weight = a, 2 * a

    def copy(self) -> ReferenceRate:
        """An independent copy, to advance apart."""
        twin = ReferenceRate.__new__(ReferenceRate)
        twin._keep, twin._successes, twin._weight = self._keep, self._successes, self._weight
        return twin

    def state(self) -> tuple[float, float, float]:
        """What the rate has learned: ``(keep, successes, weight)``, for :meth:`restore`."""
        return self._keep, self._successes, self._weight

    def restore(self, keep: float, successes: float, weight: float) -> None:
        """Take up a :meth:`state` saved before (ValidationError if it cannot be one)."""
        values = (keep, successes, weight)
        if not all(math.isfinite(v) for v in values) or not 0 < keep <= 1 or successes < 0 or weight <= successes:
            raise ValidationError("reference", f"not a saved reference rate: {values}")
        self._keep, self._successes, self._weight = (float(v) for v in values)

    @property
    def rate(self) -> float:
        """The rate now (before the next outcome)."""
        return self._successes / self._weight

    def add(self, success: bool) -> None:
        """Age every earlier outcome by one episode and count ``success``."""
        self._successes = self._keep * self._successes + bool(success)
        self._weight = self._keep * self._weight + 1.0
