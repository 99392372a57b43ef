"""Policy replay: run governance again over a recorded outcome log, under other settings.

The store logs every episode and outcome, so governance can be re-run after the fact
with other thresholds, another evidence half-life or another estimator, and compared
with what the current settings decide on the same evidence. Governance rounds are
simulated every ``every`` outcomes: each memory's counts so far (decayed when
``half_life`` is set), read through the estimator, go through
:meth:`memworth.governance.GovernancePolicy.propose`, and the proposals are applied to a
simulated status and standing (promote / demote under the policy's daily cap, measured
on the outcomes' own timestamps).

What a replay cannot show: how the log itself would have changed. A memory suppressed
earlier would not have been retrieved afterwards, and its neighbours would have been
retrieved instead; the replay keeps every logged outcome, so it answers "which memories
would these settings have suppressed, deprecated or promoted, and when, given the
evidence that was collected", not "what would the agent have done".

Pure: :meth:`memworth.MemoryStore.replay_policy` turns the log into
:class:`LoggedOutcome` steps and calls :func:`replay_governance` and :func:`compare`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from memworth.counts import Counts
from memworth.errors import ValidationError
from memworth.estimators import BetaMean, RawWorth, WilsonBound
from memworth.governance import GovernancePolicy

__all__ = ["Credit", "Difference", "LoggedOutcome", "PolicyRun", "ReplaySettings", "compare", "replay_governance"]

ESTIMATORS: dict[str, RawWorth | BetaMean | WilsonBound] = {
    "raw": RawWorth(),
    "beta": BetaMean(),
    "wilson-lower": WilsonBound("lower", evidence="retrievals"),
    "wilson-upper": WilsonBound("upper", evidence="retrievals"),
}
"""Estimators a replay can read worth through: the paper's ratio, the Beta(1, 1) posterior
mean, and either end of the Wilson interval over retrievals (the lower end promotes
cautiously; the upper end suppresses cautiously)."""

RATE_LIMITED = ("promote", "demote")


@dataclass(frozen=True)
class Credit:
    """What one outcome added to one memory (``n`` = 1 for a retrieval, 0 for propagated credit)."""

    memory_id: str
    success: float
    failure: float
    n: float


@dataclass(frozen=True)
class LoggedOutcome:
    """One outcome of the log: when it was recorded and the credit it gave."""

    at: float
    credits: tuple[Credit, ...]


@dataclass(frozen=True)
class ReplaySettings:
    """The governance settings of one replay.

    Parameters
    ----------
    name
        A label for reports.
    policy
        Thresholds and limits (:class:`memworth.governance.GovernancePolicy`).
    half_life
        Evidence half-life in outcomes of the log (``None``: no decay, the paper's MW).
    estimator
        How worth is read from counts: a name in :data:`ESTIMATORS`.
    every
        Outcomes between governance rounds (a round also closes the log).
    """

    name: str = "current"
    policy: GovernancePolicy = field(default_factory=GovernancePolicy)
    half_life: float | None = None
    estimator: str = "raw"
    every: int = 100

    def validate(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValidationError("name", f"must be a non-empty string, got {self.name!r}")
        if not isinstance(self.policy, GovernancePolicy):
            raise ValidationError("policy", f"must be a GovernancePolicy, got {type(self.policy).__name__}")
        hl = self.half_life
        if hl is not None and (isinstance(hl, bool) or not isinstance(hl, (int, float)) or not 0 < hl < float("inf")):
            raise ValidationError("half_life", f"must be a positive number of outcomes or None, got {hl!r}")
        if self.estimator not in ESTIMATORS:
            raise ValidationError("estimator", f"must be one of {', '.join(ESTIMATORS)}, got {self.estimator!r}")
        if isinstance(self.every, bool) or not isinstance(self.every, int) or self.every < 1:
            raise ValidationError("every", f"must be a positive integer, got {self.every!r}")

    def describe(self) -> dict[str, Any]:
        default = GovernancePolicy().flat_settings()
        changed = {k: v for k, v in self.policy.flat_settings().items() if v != default[k]}
        return {"name": self.name, "half_life": self.half_life, "estimator": self.estimator, "every": self.every} | {
            "policy": changed
        }


@dataclass(frozen=True)
class Event:
    """A change the replay applied: at which outcome (1-based), to what, why."""

    step: int
    memory_id: str
    action: str
    field: str
    old: str
    new: str
    reason: str


@dataclass
class PolicyRun:
    """The outcome of one replay: final standing of every memory and the changes on the way."""

    settings: ReplaySettings
    outcomes: int
    status: dict[str, str]
    standing: dict[str, str]
    events: list[Event]

    def first(self, memory_id: str, action: str) -> int | None:
        """Outcome number at which ``action`` first hit ``memory_id``, or ``None``."""
        return next((e.step for e in self.events if e.memory_id == memory_id and e.action == action), None)

    def tally(self) -> dict[str, int]:
        """How many memories each action hit at least once."""
        out: dict[str, set[str]] = {}
        for e in self.events:
            out.setdefault(e.action, set()).add(e.memory_id)
        return {k: len(v) for k, v in sorted(out.items())}


@dataclass(frozen=True)
class Difference:
    """One memory that ends differently (or gets the same action at another time) under two settings."""

    memory_id: str
    baseline: str
    alternative: str
    baseline_actions: dict[str, int]
    alternative_actions: dict[str, int]

    def describe(self) -> str:
        def acts(d: dict[str, int]) -> str:
            return ", ".join(f"{a}@{s}" for a, s in d.items()) or "no action"

        return (
            f"{self.memory_id}: {self.baseline} ({acts(self.baseline_actions)}) -> "
            f"{self.alternative} ({acts(self.alternative_actions)})"
        )


def _view(counts: Counts, estimator: str) -> Counts:
    """Counts whose MW ratio is the estimator's value, with the same evidence and retrievals."""
    if estimator == "raw" or counts.evidence <= 0:
        return counts
    v = float(ESTIMATORS[estimator].value(counts))
    return Counts(v * counts.evidence, (1.0 - v) * counts.evidence, counts.n)


def replay_governance(
    log: Iterable[LoggedOutcome], settings: ReplaySettings, memory_ids: Sequence[str] = ()
) -> PolicyRun:
    """Run governance over ``log`` under ``settings``; every memory starts active and normal.

    Examples
    --------
    >>> log = [LoggedOutcome(float(t), (Credit("good", 1.0, 0.0, 1), Credit("bad", 0.0, 1.0, 1)))
    ...        for t in range(30)]
    >>> run = replay_governance(log, ReplaySettings(every=10))
    >>> run.status, run.standing
    ({'good': 'active', 'bad': 'deprecated'}, {'good': 'promoted', 'bad': 'demoted'})
    >>> [(e.step, e.memory_id, e.action) for e in run.events]
    [(10, 'good', 'promote'), (10, 'bad', 'demote'), (20, 'bad', 'deprecate')]
    >>> strict = replay_governance(log, ReplaySettings(policy=GovernancePolicy(deprecation="fixed", min_evidence=50), every=10))
    >>> strict.status["bad"], strict.standing["bad"]
    ('active', 'demoted')
    """
    settings.validate()
    policy = settings.policy
    decay = 0.5 ** (1.0 / settings.half_life) if settings.half_life is not None else 1.0
    window = int(policy.staleness.window)
    counts: dict[str, list[float]] = {m: [0.0, 0.0, 0.0] for m in memory_ids}
    touched: dict[str, int] = {m: 0 for m in memory_ids}  # step of the last decay applied
    recent: dict[str, deque[tuple[float, float]]] = {}
    status = {m: "active" for m in memory_ids}
    standing = {m: "normal" for m in memory_ids}
    changes: dict[str, list[float]] = {}
    events: list[Event] = []
    step = 0
    at = 0.0

    def decayed(mid: str) -> list[float]:
        acc = counts[mid]
        if decay != 1.0 and touched[mid] != step:
            factor = decay ** (step - touched[mid])
            acc[0] *= factor
            acc[1] *= factor
            acc[2] *= factor
            touched[mid] = step
        return acc

    def govern() -> None:
        views = {}
        for mid in counts:
            acc = decayed(mid)
            if acc[2] <= 0 and acc[0] + acc[1] <= 0:
                continue
            views[mid] = _view(Counts(*acc), settings.estimator)
        active = [mid for mid in views if status[mid] == "active"]  # tested together, as the store does
        flags = dict(zip(active, policy.worth_flags([views[mid] for mid in active]), strict=True))
        for mid, view in views.items():
            window_counts = None
            r = recent.get(mid)
            if r is not None and len(r) >= window:
                window_counts = Counts(sum(s for s, _ in r), sum(f for _, f in r), float(len(r)))
            p = policy.propose(mid, view, status[mid], standing[mid], window_counts, worth_flag=flags.get(mid))
            if p is None:
                continue
            if p.action in RATE_LIMITED:
                times = [t for t in changes.get(mid, []) if t >= at - 86400]
                if len(times) >= policy.limits.max_changes_per_day:
                    continue
                changes.setdefault(mid, []).append(at)
            if p.field == "status":
                status[mid] = p.new
            else:
                standing[mid] = p.new
            events.append(Event(step, mid, p.action, p.field, p.old, p.new, p.reason))

    for outcome in log:
        step += 1
        at = outcome.at
        for c in outcome.credits:
            if c.memory_id not in counts:
                counts[c.memory_id] = [0.0, 0.0, 0.0]
                touched[c.memory_id] = step
                status[c.memory_id] = "active"
                standing[c.memory_id] = "normal"
            acc = decayed(c.memory_id)
            acc[0] += c.success
            acc[1] += c.failure
            acc[2] += c.n
            if c.n > 0:
                r = recent.setdefault(c.memory_id, deque(maxlen=window))
                r.append((c.success, c.failure))
        if step % settings.every == 0:
            govern()
    if step % settings.every != 0:
        govern()
    return PolicyRun(settings, step, status, standing, events)


def _final(run: PolicyRun, mid: str) -> str:
    return f"{run.status.get(mid, 'active')}/{run.standing.get(mid, 'normal')}"


def _actions(run: PolicyRun, mid: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for e in run.events:
        if e.memory_id == mid and e.action not in out:
            out[e.action] = e.step
    return out


def compare(baseline: PolicyRun, alternative: PolicyRun) -> list[Difference]:
    """Memories whose final status/standing, or the set of actions they got, differ between two runs.

    Examples
    --------
    >>> log = [LoggedOutcome(float(t), (Credit("m", 0.15, 0.85, 1),)) for t in range(40)]
    >>> base = replay_governance(log, ReplaySettings(every=10))
    >>> softer = GovernancePolicy(theta_low=0.3, deprecate_below=0.2, demote_below=0.2)
    >>> lenient = replay_governance(log, ReplaySettings("lenient", softer, every=10))
    >>> [d.describe() for d in compare(base, lenient)]
    ['m: suppressed/demoted (demote@10, suppress@40) -> active/demoted (demote@10)']
    """
    ids = list(dict.fromkeys([*baseline.status, *alternative.status]))
    out = []
    for mid in ids:
        a, b = _actions(baseline, mid), _actions(alternative, mid)
        fa, fb = _final(baseline, mid), _final(alternative, mid)
        if fa != fb or set(a) != set(b):
            out.append(Difference(mid, fa, fb, a, b))
    return out
