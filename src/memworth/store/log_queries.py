"""What the outcome log says: recent counts, episode statistics, outcome streams and
the change alarms they raise, burst alerts, the holdout lift, policy replay, and the
replay that rebuilds every counter from the log.
"""

from __future__ import annotations

import builtins
import logging
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import numpy as np

from memworth.counts import Counts
from memworth.errors import StoreError, ValidationError
from memworth.governance.replay import ReplaySettings
from memworth.progress import Progress
from memworth.progress import bar as progress_bar
from memworth.signals.change_detection import CusumState, OutcomeStream
from memworth.signals.context_adjusted import EpisodeStats
from memworth.signals.coretrieval import AlarmSplitter
from memworth.signals.holdout import Lift
from memworth.signals.outcome_streams import NamespaceScan, NamespaceStreams
from memworth.signals.sources import BurstAlert
from memworth.store import checkpoint, outcome_log
from memworth.store.alarms import LiveAlarms
from memworth.store.backend import Increment, shareable
from memworth.store.followed import Followed
from memworth.store.outcome_log import PolicyReplayReport
from memworth.store.records import AuditEntry, Episode, Memory, OutcomeRow
from memworth.store.state import StoreState
from memworth.validation import check_flag, check_memory_id, check_name

__all__ = ["FOLLOW_BUDGET", "Followed", "LogMixin", "ReplayReport"]

logger = logging.getLogger(__name__)

_SETTLED = threading.local()
"""Per thread, the (store object, namespace) pairs read in the current settled call."""


FOLLOW_BUDGET = 2_000_000
"""Most outcomes a store object keeps in memory across the namespaces it follows (about 300
bytes each with episodes of 8 memories, columns, row index and detectors together; 2.4 KB as
the backend's rows): past it, the namespaces read least recently
are forgotten (read again when next governed, from their checkpoint); the namespace being
read is kept whatever its size."""


@dataclass(frozen=True)
class ReplayReport:
    """Counters rebuilt from the outcome log, and where they differ from the live ones."""

    outcomes: int
    rebuilt: dict[tuple[str, str], Counts]
    mismatches: list[tuple[str, str, Counts, Counts]] = field(default_factory=list)
    applied: bool = False

    @property
    def consistent(self) -> bool:
        return not self.mismatches


class LogMixin(StoreState):
    """The log-reading part of :class:`memworth.store.MemoryStore`."""

    def _history(self, namespace: str) -> Followed:
        """The namespace's outcomes as columns, oldest first: what this store object read
        before (or the namespace's checkpoint, the first time) and the outcomes logged since
        (one indexed read of the new ones). Call under ``_follow_lock`` or read it through
        methods that take it.

        The log is append-only; a reader that follows it by sequence number could still miss
        an outcome that committed after one with a later number (PostgreSQL's sequences do
        not order commits), so the count of the namespace's outcomes is checked, and a
        mismatch reads the history again from the start (a checkpoint is checked alike).
        """
        with self._follow_lock:
            settled = getattr(_SETTLED, "keys", None)
            if settled is not None and (id(self), namespace) in settled and namespace in self._followed:
                return self._followed[namespace]  # read once already in this call (see _settled_reads)
            followed = self._followed.pop(namespace, None)
            if followed is None:
                followed = self._resume(namespace)
            self._followed[namespace] = followed  # the most recently read last
            tail = self.backend.history(namespace, followed.last_seq)
            if len(followed) + len(tail) != self.backend.outcome_count(namespace):
                followed = self._followed[namespace] = Followed()
                tail = self.backend.history(namespace)
            followed.extend(tail)
            held = sum(len(f) for f in self._followed.values())
            for other in [ns for ns in self._followed if ns != namespace]:  # least recently read first
                if held <= FOLLOW_BUDGET:
                    break
                held -= len(self._followed.pop(other))
            if settled is not None:
                settled.add((id(self), namespace))
            return followed

    @contextmanager
    def _settled_reads(self) -> Iterator[None]:
        """Within it, this thread reads each namespace's log once: its later reads of the
        history answer from that read (one call, such as :meth:`govern`, decides from one
        state of the log, and checks the log's count of outcomes once, not at every part)."""
        if getattr(_SETTLED, "keys", None) is not None:  # an outer call holds the reads
            yield
            return
        _SETTLED.keys = set()
        try:
            yield
        finally:
            _SETTLED.keys = None

    def _resume(self, namespace: str) -> Followed:
        """The namespace's checkpoint, if it is intact (else nothing: the history is read in full)."""
        data = self.backend.load_checkpoint(namespace)
        if data is None:
            return Followed()
        try:
            return checkpoint.decode(namespace, data, self.policy, self._follow_lock)
        except ValueError as exc:
            logger.warning("checkpoint of namespace %r not used (%s): reading its whole history", namespace, exc)
            return Followed()

    def _checkpoint(self, namespace: str) -> None:
        """Save the namespace's followed history and detectors when enough is new (:func:`checkpoint.due`).

        A checkpoint only saves work: when the backend cannot keep it, govern goes on (a
        warning is logged) and the next govern tries again. A database no other store object
        can open (``memory://``, SQLite ``:memory:``) gets none: nothing could resume from it."""
        if not shareable(self.backend.url):
            return
        with self._follow_lock:
            followed = self._followed.get(namespace)
            if followed is None or not checkpoint.due(len(followed), followed.saved):
                return
            data = checkpoint.encode(
                namespace, followed, recent=self.policy.staleness.window, tail_from=self._burst_start(followed)
            )
            before, followed.saved = followed.saved, len(followed)
        try:
            self.backend.save_checkpoint(namespace, data)
        except StoreError as exc:
            logger.warning("checkpoint of namespace %r not saved: %s", namespace, exc)
            followed.saved = before

    def _burst_start(self, followed: Followed) -> int:
        """Where the burst check's window begins now that the last outcome is the latest
        (a checkpoint's head keeps the outcomes from there on: a later govern reads no earlier)."""
        if self.burst is None or not len(followed):
            return len(followed)
        return outcome_log.window_start(followed.recorded, followed.recorded[-1] - self.burst.window)

    def _forget_followed(self, namespace: str | None = None) -> None:
        """Drop the followed history and checkpoint of ``namespace`` (None: of every namespace):
        the next read rebuilds them from the log. Erasure and ``replay(apply=True)`` call it:
        neither changes the log, but no state derived before an operation meant to remove or
        repair data should outlive it."""
        with self._follow_lock:
            if namespace is None:
                self._followed.clear()
            else:
                self._followed.pop(namespace, None)
        self.backend.drop_checkpoints(namespace)

    def _namespace_scan(self, namespace: str) -> NamespaceStreams:
        """The namespace's change detectors over its whole history, advanced from where this
        store object last left them (run again from the start when the policy changed)."""
        with self._follow_lock:
            return self._advanced_scan(namespace).read()

    def _advanced_scan(self, namespace: str) -> NamespaceScan:
        """The namespace's scan, advanced over every outcome of its history (held: the follow lock)."""
        followed = self._history(namespace)
        if followed.scan is None or followed.scan.policy != self.policy or followed.scanned > len(followed):
            followed.whole()  # a new scan reads every outcome
            followed.scan = NamespaceScan(self.policy, columns=followed, lock=self._follow_lock)
        followed.scan.catch_up()  # advances over the outcomes it has not read
        followed.scanned = len(followed)
        return followed.scan

    def _start_live_scan(self, namespace: str) -> None:
        """Start the AlarmSplitter's live statistics of ``namespace`` from its detectors advanced
        over the log: what :meth:`outcome_streams` gives it, without reading every memory's
        stream (its CUSUM reading, a baseline per memory: half the first record's time on a
        log of 600 outcomes), which recording does not need."""
        with self._follow_lock:
            scan = self._advanced_scan(namespace)
            live = _live_alarms(scan, scan.state if scan.episodes else None, scan.columns.ids)
        self._go_live(namespace, live)

    def recent_counts(self, namespace: str = "default", window: int | None = None) -> dict[str, Counts]:
        """Each memory's counts over its last ``window`` direct retrievals with an outcome."""
        check_name(namespace, "namespace")
        if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
            raise ValidationError("window", f"must be a positive integer or None, got {window!r}")
        size = self.policy.staleness.window if window is None else window
        with self._follow_lock:
            return self._history(namespace).recent(size)

    def episode_stats(self, namespace: str = "default") -> EpisodeStats:
        """The namespace's episodes with an outcome, as :class:`memworth.signals.context_adjusted.EpisodeStats`.

        Each episode counts the set recall returned (after any ablation), its outcome and
        its ``context`` label. Adjusted worth and confound flags read it::

            stats = store.episode_stats()
            flags = confounds(stats.pairs, RegressionWorth().worth(stats))
        """
        check_name(namespace, "namespace")
        stats = EpisodeStats()
        with self._follow_lock:
            followed = self._history(namespace)
            followed.whole()
            for i in range(len(followed)):
                ids = followed.memory_ids(i)
                if ids:
                    stats.update(ids, bool(followed.won[i]), context=followed.context_of(i))
        return stats

    def outcome_streams(self, namespace: str = "default") -> dict[str, OutcomeStream]:
        """Each memory's direct retrievals with an outcome, oldest first, for change detection.

        One observation per retrieval: success, the outcome's confidence as its weight,
        the success rate of all the namespace's episodes just before it (exponentially
        weighted, half-life ``policy.change_reference_half_life``) and the outcome's
        position in the namespace's log (from 1).
        """
        check_name(namespace, "namespace")
        return self._streams(namespace)

    def _streams(self, namespace: str) -> dict[str, OutcomeStream]:
        """The outcome streams of :meth:`outcome_streams` (:class:`memworth.signals.outcome_streams.NamespaceScan`
        over the namespace's history, as ``memworth score`` reads a log).

        An :class:`memworth.signals.coretrieval.AlarmSplitter` as the store's ablation planner is
        given the statistics found here (it splits suspects until the next scan)."""
        found = self._namespace_scan(namespace)
        if isinstance(self.ablation, AlarmSplitter):
            with self._follow_lock:
                scan = self._followed[namespace].scan
                assert scan is not None
                live = _live_alarms(scan, found.state, found.ids)
            self._go_live(namespace, live)
        return found.streams

    def _go_live(self, namespace: str, live: LiveAlarms) -> None:
        """Give the AlarmSplitter ``live``, the live statistics of ``namespace``."""
        with self._live_lock:
            self._live[namespace] = live
            self._watch({(namespace, mid): stat for mid, stat in live.statistics().items()})

    def burst_alerts(self, *, namespace: str = "default") -> builtins.list[BurstAlert]:
        """Memories whose worth the outcomes of the last ``burst.window`` seconds moved further
        than their earlier evidence allows (also in :meth:`govern`'s report)."""
        check_name(namespace, "namespace")
        return self._bursts(namespace, self.backend.memories(namespace))

    def _bursts(self, namespace: str, memories: builtins.list[Memory]) -> builtins.list[BurstAlert]:
        if self.burst is None:
            return []
        now = self.clock()
        with self._follow_lock:
            followed = self._history(namespace)
            start = outcome_log.window_start(followed.recorded, now - self.burst.window)
            tail = followed.credited(start, namespace)
        parents = self._provenance(namespace)  # read once, not once an outcome

        def increments(o: OutcomeRow, ep: Episode) -> builtins.list[Increment]:
            return self.increments_of(o, ep, parents)

        return outcome_log.burst_alerts(tail, self.burst, now, memories, increments)

    def holdout_report(self, *, namespace: str = "default", level: float = 0.95, method: str = "newcombe") -> Lift:
        """Success rate of governed episodes against holdout ones, from the log, with the lift's interval.

        Examples
        --------
        >>> from memworth import MemoryStore, HashingEncoder
        >>> store = MemoryStore.open("memory://", encoder=HashingEncoder(), holdout=0.5, seed=0)
        >>> _ = store.add("Prague is the capital of the Czech Republic.", id="prague")
        >>> for i in range(40):
        ...     ep = store.recall("capital of the czech republic", k=1, episode_id=f"task-{i}").episode
        ...     store.record(ep, success=not ep.holdout)
        >>> report = store.holdout_report()
        >>> report.governed_n + report.holdout_n, report.lift
        (40, 1.0)
        """
        check_name(namespace, "namespace")
        with self._follow_lock:
            followed = self._history(namespace)
            held, won = np.array(followed.held, dtype=bool), np.array(followed.won, dtype=bool)
        return outcome_log.holdout_lift(held, won, level, method)

    def replay_policy(
        self, *alternatives: ReplaySettings, namespace: str = "default", every: int = 100
    ) -> PolicyReplayReport:
        """Re-run governance over the namespace's log under the store's policy and each alternative.

        See :mod:`memworth.governance.replay` for what a replay can and cannot tell.

        Examples
        --------
        >>> from memworth import MemoryStore, HashingEncoder
        >>> from memworth.governance import GovernancePolicy
        >>> from memworth.governance.replay import ReplaySettings
        >>> store = MemoryStore.open("memory://", encoder=HashingEncoder(), exploration=0.0)
        >>> _ = store.add("Prague was the capital of Czechoslovakia.", id="cz")
        >>> for i in range(40):
        ...     store.record(store.recall("capital of czechoslovakia", k=1).episode, success=i % 7 == 0)
        >>> softer = GovernancePolicy(theta_low=0.3, deprecate_below=0.2, demote_below=0.2)
        >>> report = store.replay_policy(ReplaySettings("lenient", softer), every=10)
        >>> [d.describe() for d in report.differences["lenient"]]
        ['cz: suppressed/demoted (demote@10, suppress@40) -> active/demoted (demote@40)']
        """
        check_name(namespace, "namespace")
        baseline = ReplaySettings("current", self.policy, every=every)
        return outcome_log.replay_policy(self.backend, namespace, baseline, alternatives, self.increments_of)

    def audit(self, memory_id: str | None = None, *, namespace: str = "default") -> builtins.list[AuditEntry]:
        """The audit log of a namespace (or of one memory), oldest first."""
        check_name(namespace, "namespace")
        if memory_id is not None:
            check_memory_id(memory_id, "memory_id")
        return self.backend.audit_log(namespace, memory_id)

    def replay(self, *, apply: bool = False, progress: Progress = False) -> ReplayReport:
        """Rebuild every counter from the outcome log; report (and with ``apply``, fix) differences.

        The log and the live counters are read in one snapshot (:meth:`Backend.snapshot
        <memworth.store.backend.Backend.snapshot>`): an outcome another writer commits meanwhile
        is in both or in neither, so it is never reported as a mismatch. With ``apply``, when
        that read finds a difference, the log is replayed again in a snapshot that writes, and
        the fixes are made there, only if no other write landed on them since it was taken:
        SQLite and the memory backend hold other writers off until the fixes commit; on
        PostgreSQL a fix to a counter another writer changed meanwhile fails with
        :class:`memworth.errors.UnavailableError` and nothing is written (call it again). A
        store with nothing to fix is read once and holds no writer off. Inside the store object's
        open :meth:`transaction <memworth.MemoryStore.transaction>` it reads as that transaction
        does and its fixes are writes of it, kept or rolled back with it.

        ``progress``: a bar over the outcomes replayed (:mod:`memworth.progress`), twice when
        there is something to fix."""
        check_flag(apply, "apply")
        if self._in_transaction():  # read as the caller's open transaction reads; fixed in it (undone with it)
            report = self._replayed(progress)
            if not apply or report.consistent:
                return report
            self._fix(report)
        else:
            with self.backend.snapshot():
                report = self._replayed(progress)
            if not apply or report.consistent:
                return report
            with self.backend.snapshot(write=True):
                report = self._replayed(progress)  # again: the fixes come from the state they are written on
                self._fix(report)
            if report.consistent:  # a writer's outcome had closed the gap meanwhile
                return report
        self._forget_followed()  # committed (or, in a transaction, set back if it rolls back)
        return replace(report, applied=True)

    def _fix(self, report: ReplayReport) -> None:
        """Write each counter ``report`` found wrong as the log rebuilds it (call in the
        snapshot or transaction it was read in)."""
        by_ns: dict[str, dict[str, Counts]] = {}
        for ns, mid, _live, want in report.mismatches:
            by_ns.setdefault(ns, {})[mid] = want
        for ns, fixes in by_ns.items():
            self.backend.write_counts(ns, fixes)

    def _replayed(self, progress: Progress) -> ReplayReport:
        """The counters the log rebuilds and where the live ones differ (call in one snapshot)."""
        rebuilt: dict[tuple[str, str], list[float]] = {}
        log = list(self.backend.outcome_log())
        shown = progress_bar(len(log), "outcomes replayed", progress)
        episodes = outcome_log.episodes_of(self.backend, log)
        parents: dict[str, dict[str, builtins.list[str]]] = {}  # one provenance read per namespace
        with shown:
            for o in log:
                ep = episodes[(o.namespace, o.episode_id)]
                if ep.namespace not in parents:
                    parents[ep.namespace] = self._provenance(ep.namespace)
                for inc in self.increments_of(o, ep, parents[ep.namespace]):
                    acc = rebuilt.setdefault((inc.namespace, inc.memory_id), [0.0, 0.0, 0.0])
                    acc[0] += inc.success
                    acc[1] += inc.failure
                    acc[2] += inc.n
                shown.update(1)
        counts = {key: Counts(*v) for key, v in rebuilt.items()}
        mismatches = []
        for ns in self.backend.namespaces():
            for m in self.backend.memories(ns):
                live, want = m.counts, counts.get((ns, m.id), Counts())
                if (live.success, live.failure, live.n) != (want.success, want.failure, want.n):
                    mismatches.append((ns, m.id, live, want))
        return ReplayReport(len(log), counts, mismatches)


def _live_alarms(scan: NamespaceScan, state: CusumState | None, ids: Sequence[str]) -> LiveAlarms:
    """Live statistics starting where ``scan`` stands: its CUSUM ``state`` (None: no outcome yet)
    over the memories ``ids``, copied with its reference rate."""
    start = state if state is not None else scan.detector.start(0)
    return LiveAlarms(scan.detector, ids, start.copy(), scan.reference.copy(), scan.episodes)
