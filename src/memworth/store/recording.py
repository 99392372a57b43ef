"""Recording outcomes: credit an episode's memories and log the outcome, atomically.

An outcome's source sets its confidence (fixed, or learned from verified outcomes);
per-source limits refuse floods before anything is written; credit flows to a
memory's provenance (note 003's TD-lambda) under the settings the outcome is logged
with, so replay rebuilds exactly what was done. Recording also advances the live
change statistics an AlarmSplitter reads, and continuous governance (``govern_every``).
"""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import TypeGuard

from memworth.credit import share_among_used
from memworth.errors import (
    ChangedError,
    DuplicateError,
    RateLimitError,
    UnknownEpisodeError,
    UnknownMemoryError,
    ValidationError,
)
from memworth.outcome import as_outcome
from memworth.signals.coretrieval import AlarmSplitter
from memworth.signals.sources import Agreement, Reliability
from memworth.store.backend import Increment
from memworth.store.governing import AUTOMATIC
from memworth.store.outcome_log import SourceReport
from memworth.store.recall import Recall
from memworth.store.records import Episode, EpisodeItem, Memory, OutcomeRow, Recalled, Verification
from memworth.store.state import StoreState
from memworth.store.steps import Blocking, Call, Steps, run
from memworth.validation import check_confidence, check_name, check_storable

__all__ = [
    "DEFAULT_SOURCES",
    "VERIFIED",
    "RecordingMixin",
    "check_used",
    "credit_increments",
    "governed_at_key",
    "governed_key",
    "with_used",
]


def governed_key(namespace: str) -> str:
    """The ``meta`` key holding ``namespace``'s outcome count when continuous governance
    (``govern_every``) last ran there."""
    return f"auto-governed:{namespace}"


def governed_at_key(namespace: str) -> str:
    """The ``meta`` key holding the time (of the store's clock) continuous governance last
    ran in ``namespace`` (``govern_every_seconds``), written with :func:`governed_key`'s mark."""
    return f"auto-governed-at:{namespace}"


DEFAULT_SOURCES = {"explicit": 1.0, "implicit": 0.5, "heuristic": 0.2, "verified": 1.0}
"""Outcome sources and their confidence (note 003): an outcome adds ``weight x confidence``
to hits. Explicit signals (a user's verdict, a test result) count fully; heuristic ones
(a keyword match, a guess from the transcript) count a fifth, so it takes about five
times as many of them (note 003: 25 against 5) to move worth as far. ``verified`` is the
reference the other sources' reliability is learned against (:meth:`MemoryStore.verify`)."""


VERIFIED = "verified"

Used = Sequence["str | Recalled | Memory"]
"""Which recalled memories the agent used: their ids (or the :class:`Recalled` / :class:`Memory`)."""

Outcome = tuple["Recall | Episode | str", object] | tuple["Recall | Episode | str", object, "Used | None"]
"""One outcome of :meth:`MemoryStore.record_many`: ``(episode, success)`` or ``(episode, success, used)``."""


def check_used(used: object, field: str = "used") -> tuple[str, ...]:
    """``used`` as a tuple of memory ids, or a :class:`ValidationError` naming ``field``:
    it must be a non-empty list of distinct ids (or recalled memories)."""
    if isinstance(used, (str, bytes, dict)) or not isinstance(used, Iterable):
        raise ValidationError(field, f"must be a list of recalled memory ids, got {type(used).__name__}")
    ids = []
    for i, u in enumerate(used):
        mid = u.memory.id if isinstance(u, Recalled) else u.id if isinstance(u, Memory) else u
        if not isinstance(mid, str):
            raise ValidationError(field, f"must hold memory ids, got {type(mid).__name__} at position {i}")
        ids.append(check_storable(mid, field))
    if not ids:
        raise ValidationError(field, "must name at least one recalled memory (leave it out to credit them all)")
    twice = next((mid for j, mid in enumerate(ids) if mid in ids[:j]), None)
    if twice is not None:
        raise ValidationError(field, f"names memory {twice!r} twice")
    return tuple(ids)


def with_used(episode: Episode, used: Sequence[str], rule: str, w_min: float, field: str = "used") -> Episode:
    """``episode`` with its credit weights shared among the ``used`` memories only
    (:func:`memworth.credit.share_among_used`); a ``used`` id the episode did not recall is
    refused (:class:`ValidationError` naming ``field``).

    Examples
    --------
    >>> from memworth.store import Episode, EpisodeItem
    >>> ep = Episode("e", "default", "q", None, 0.0, (EpisodeItem("a", 0.5, 1.0, 0), EpisodeItem("b", 0.5, 1.0, 1)))
    >>> [it.weight for it in with_used(ep, ["b"], "uniform", 0.0).items]
    [0.0, 1.0]
    """
    recalled = [it.memory_id for it in episode.items]
    missing = [mid for mid in used if mid not in recalled]
    if missing:
        raise ValidationError(
            field,
            f"memory {missing[0]!r} was not recalled in episode {episode.id!r}"
            f" (it recalled: {', '.join(dict.fromkeys(recalled)) or 'nothing'})",
        )
    weights = share_among_used([it.weight for it in episode.items], [m in used for m in recalled], rule=rule, w_min=w_min)
    items = tuple(dataclasses.replace(it, weight=float(w)) for it, w in zip(episode.items, weights, strict=True))
    return dataclasses.replace(episode, items=items)


def credit_increments(
    episode: Episode,
    success: bool,
    confidence: float,
    parents: dict[str, list[str]] | None = None,
    propagation: float = 0.0,
    max_hops: int = 0,
) -> list[Increment]:
    """The counter increments one outcome causes, in a fixed order.

    Each retrieved memory gets ``weight x confidence`` on hits+ (success) or hits- and 1
    on n. With ``propagation`` > 0, credit also flows to the memories it was derived
    from (``parents``), ``propagation ** hops`` of it at each hop up to ``max_hops``,
    breadth first, each ancestor once per retrieved memory (so cycles are harmless);
    propagated credit adds no retrieval to n.

    Examples
    --------
    >>> from memworth.store import Episode, EpisodeItem
    >>> ep = Episode("e", "default", "q", None, 0.0, (EpisodeItem("strategy", 1.0, 1.0, 0),))
    >>> parents = {"strategy": ["decision"], "decision": ["fact", "strategy"]}
    >>> [(i.memory_id, round(i.success, 2), i.n) for i in credit_increments(ep, True, 1.0, parents, 0.7, 3)]
    [('strategy', 1.0, 1.0), ('decision', 0.7, 0.0), ('fact', 0.49, 0.0)]
    """
    ns = episode.namespace
    if not parents or propagation <= 0:  # the common case, on every outcome: one increment per item
        if success:
            return [Increment(ns, it.memory_id, it.weight * confidence, 0.0, 1.0) for it in episode.items]
        return [Increment(ns, it.memory_id, 0.0, it.weight * confidence, 1.0) for it in episode.items]
    out = []
    for item in episode.items:
        mass = item.weight * confidence
        out.append(Increment(ns, item.memory_id, mass if success else 0.0, 0.0 if success else mass, 1.0))
        seen = {item.memory_id}
        frontier = [item.memory_id]
        share = mass
        for _hop in range(max_hops):
            share *= propagation
            nxt = []
            for node in frontier:
                for parent in parents.get(node, ()):
                    if parent not in seen:
                        seen.add(parent)
                        nxt.append(parent)
                        credit = (share, 0.0) if success else (0.0, share)
                        out.append(Increment(ns, parent, credit[0], credit[1], 0.0))
            frontier = nxt
            if not frontier:
                break
    return out


def _plain_items(episode: object) -> TypeGuard[Episode]:
    """Whether ``episode`` is in the form a read gives and every backend compares as it is: an
    :class:`Episode` with a namespace (a name, :func:`check_name`) and at least one item, with storable str
    memory ids (:func:`check_storable`), float weights and int positions rising strictly, from 0
    up, below 2**31. Exact types throughout (a tuple of :class:`EpisodeItem`, no subclass), so
    the episode cannot change between its credit and the write's check of it: a list of items
    (the dataclass is frozen, a list in it is not) is read back instead."""
    if type(episode) is not Episode or type(episode.items) is not tuple or not episode.items:
        return False
    if type(episode.namespace) is not str or not _passes(check_name, episode.namespace):
        return False
    last = -1
    for it in episode.items:
        if type(it) is not EpisodeItem or type(it.position) is not int or not last < it.position < 2**31:
            return False
        if type(it.memory_id) is not str or type(it.weight) is not float or not _passes(check_storable, it.memory_id):
            return False
        last = it.position
    return True


def _passes(check: Callable[[str, str], object], text: str) -> bool:
    """Whether ``text`` passes ``check`` (:func:`check_name` for a namespace, :func:`check_storable`
    for a memory id): a copy of an episode whose namespace or memory ids do not can be logged by
    no backend, and PostgreSQL's driver would refuse it before the write's check could
    (StoreError, UnicodeEncodeError), where a read credits what is logged."""
    try:
        check(text, "episode")
    except ValidationError:
        return False
    return True


class RecordingMixin(StoreState):
    """The recording part of :class:`memworth.store.MemoryStore`: :meth:`record`, :meth:`verify`, sources and credit."""

    def record(
        self,
        episode: Recall | Episode | str,
        success: object,
        *,
        source: str = "explicit",
        confidence: float | None = None,
        namespace: str | None = None,
        used: Used | None = None,
    ) -> None:
        """Record the outcome of one recalled episode: credit its memories and log it, atomically.

        ``episode``: the :class:`Recall` that :meth:`recall` returned, its ``episode``, or the episode's id.

        ``used``: which of the recalled memories the agent actually used (ids, or the
        :class:`Recalled` results), e.g. the recipe it ran or the note whose answer it
        gave. The used memories share the episode's credit under the store's credit rule
        (``uniform``: equally; ``score``: in proportion to their recall weights, floored at
        ``w_min``), and the others get none: no hits, no observation in their outcome
        streams (change detection, recent counts); their retrieval still counts in ``n``
        (recall did show them; the exploration floor reads it). The episode's logged
        weights become these shares, in the same transaction as the outcome, so replay
        rebuilds the counters exactly. Left out (``None``), every recalled memory is
        credited. Refused, with nothing written: an empty list, an id named twice, an id
        the episode did not recall.
        """
        self._record([(episode, success) if used is None else (episode, success, used)], source, confidence, namespace)

    def _record_steps_one(
        self,
        episode: Recall | Episode | str,
        success: object,
        *,
        source: str = "explicit",
        confidence: float | None = None,
        namespace: str | None = None,
        used: Used | None = None,
    ) -> Steps[None]:
        """:meth:`record` as steps (:mod:`memworth.store.steps`)."""
        outcome: Outcome = (episode, success) if used is None else (episode, success, used)
        yield from self._record_steps([outcome], source, confidence, namespace)

    def _record_many_steps(
        self,
        outcomes: Iterable[Outcome],
        *,
        source: str = "explicit",
        confidence: float | None = None,
        namespace: str | None = None,
    ) -> Steps[None]:
        """:meth:`record_many` as steps."""
        yield from self._record_steps(outcomes, source, confidence, namespace, many=True)

    def record_many(
        self,
        outcomes: Iterable[Outcome],
        *,
        source: str = "explicit",
        confidence: float | None = None,
        namespace: str | None = None,
    ) -> None:
        """Record many ``(episode, success)`` outcomes in one transaction (all or none).

        An outcome may also be ``(episode, success, used)``: ``used`` as :meth:`record` takes it
        (``None``: credit every recalled memory).

        Refused, with nothing written: an unknown episode, an episode from another
        ``namespace`` (when given), an episode already recorded (here or earlier), an
        outcome that is not success/failure, a bad ``used`` (:meth:`record`), an unknown source, an outcome beyond the
        source's quota or rate limit (``limits``).

        With ``reliability`` set, an outcome is credited with the source's learned
        confidence (a ``confidence`` given here can lower it, never raise it).
        ``source="verified"`` is :meth:`verify`.

        A refused item is named by its position: the error's field (or, for an episode
        recorded already, its reason) says ``outcomes[i]``.
        """
        self._record(outcomes, source, confidence, namespace, many=True)

    def verify(self, episode: Recall | Episode | str, success: object, *, namespace: str | None = None) -> Verification:
        """Record the verified outcome of an episode: the reference source reliability is learned from.

        If the episode has no outcome yet, the verified one becomes its outcome (source
        ``verified``, full confidence). If another source reported it already, nothing is
        credited again; that source scores one agreement or disagreement, which moves its
        learned confidence (:meth:`source_reliability`). An episode is verified once.

        Examples
        --------
        >>> from memworth import MemoryStore, HashingEncoder
        >>> store = MemoryStore.open("memory://", encoder=HashingEncoder(), exploration=0.0)
        >>> _ = store.add("Prague is the capital of the Czech Republic.", id="prague")
        >>> ep = store.recall("capital of the czech republic", k=1).episode
        >>> store.record(ep, success=True, source="heuristic")
        >>> store.verify(ep, success=False).agreed           # the heuristic got it wrong
        False
        >>> store.source_reliability()["heuristic"].agreement
        Agreement(agree=0.0, disagree=1.0)
        """
        return self._record([(episode, success)], VERIFIED, None, namespace)[0]

    def outcomes_until_govern(self, namespace: str = "default") -> int | None:
        """How many more outcomes in ``namespace`` until continuous governance (``govern_every``)
        runs; ``None`` when it is off. A batch of exactly that many triggers it."""
        if self.govern_every is None:
            return None
        return max(1, self.govern_every - self._outcomes_since_govern.get(namespace, 0))

    def _record(
        self,
        outcomes: Iterable[Outcome],
        source: str,
        confidence: float | None,
        namespace: str | None,
        *,
        many: bool = False,
    ) -> builtins.list[Verification]:
        """Check, credit and log outcomes in one backend write; with ``many``, errors name the item."""
        return run(self._record_steps(outcomes, source, confidence, namespace, many=many), self.backend)

    def _record_steps(
        self,
        outcomes: Iterable[Outcome],
        source: str,
        confidence: float | None,
        namespace: str | None,
        *,
        many: bool = False,
        read: bool = False,
    ) -> Steps[builtins.list[Verification]]:
        """:meth:`_record` as steps: what the sync and the async store run. ``read``: read every
        episode back, even those given as held (:meth:`_as_given`: the write refused one)."""

        def where(i: int, name: str) -> str:
            return f"outcomes[{i}].{name}" if many else name

        if not isinstance(source, str) or source not in self.sources:
            raise ValidationError("source", f"unknown source {source!r}; known: {', '.join(sorted(self.sources))}")
        given = None if confidence is None else check_confidence(confidence)
        if namespace is not None:
            check_name(namespace, "namespace")
        if isinstance(outcomes, (str, bytes, dict)) or not isinstance(outcomes, Iterable):
            raise ValidationError(
                "outcomes", f"must be a list of (episode, success) pairs, got {type(outcomes).__name__}"
            )
        pairs = list(outcomes)
        if not pairs:
            raise ValidationError("outcomes", "nothing to record")
        ids = []
        useds: builtins.list[tuple[str, ...] | None] = []
        for i, pair in enumerate(pairs):
            if not isinstance(pair, tuple) or len(pair) not in (2, 3):
                raise ValidationError(f"outcomes[{i}]", "must be an (episode, success) pair or (episode, success, used)")
            useds.append(None if len(pair) == 2 or pair[2] is None else check_used(pair[2], where(i, "used")))
            ref = (
                pair[0].episode.id
                if isinstance(pair[0], Recall)
                else pair[0].id
                if isinstance(pair[0], Episode)
                else pair[0]
            )
            if not isinstance(ref, str):
                kind = type(ref).__name__
                raise ValidationError(where(i, "episode"), f"must be a Recall, an Episode or its id, got {kind}")
            ids.append(check_storable(ref, where(i, "episode")))
        first: dict[str, int] = {}
        for i, eid in enumerate(ids):
            j = first.setdefault(eid, i)
            if j != i:
                raise ValidationError(
                    where(i, "episode"), f"the same episode appears twice in one call (outcomes[{j}] and outcomes[{i}])"
                )
        results = [as_outcome(p[1], where(i, "success")) for i, p in enumerate(pairs)]
        if namespace is None:  # a Recall or Episode names its namespace; a bare id does not
            carried = {
                p[0].episode.namespace if isinstance(p[0], Recall) else p[0].namespace
                for p in pairs
                if isinstance(p[0], (Recall, Episode))
            }
            if len(carried) == 1 and all(isinstance(p[0], (Recall, Episode)) for p in pairs):
                namespace = carried.pop()
        held = None if read else self._as_given(pairs, useds, source, namespace)
        if held is not None:  # credited as held; the write checks they are logged so
            known, generation = {ep.id: ep for ep in held}, None
        else:
            known, generation = yield Call("episodes_at", (ids,), {"namespace": namespace})  # named: one shard
        now = self.clock()
        episodes = []
        for i, eid in enumerate(ids):
            ep = known.get(eid)
            if ep is None or (namespace is not None and ep.namespace != namespace):
                raise UnknownEpisodeError(eid, where(i, "episode") if many else None)
            used = useds[i]
            episodes.append(ep if used is None else with_used(ep, used, self.credit, self.w_min, where(i, "used")))
        try:
            yield from self._check_limits_steps(source, episodes, now)
        except RateLimitError:  # "retry later" must not be said of an episode that can never be recorded
            if source != VERIFIED:
                yield from self._name_recorded_steps(ids, namespace, many)
            raise
        if self.reliability is not None and source != VERIFIED:
            yield from self._refresh_agreement_steps()
        earlier = (yield Call("outcomes_of", (ids,), {"namespace": namespace})) if source == VERIFIED else {}
        parents = {}
        generations = None  # with episodes held: {namespace: generation} of the provenance credited along
        propagates = self.propagation > 0 and self.max_hops > 0
        for ns in {ep.namespace for ep in episodes}:  # one read per call
            cached = self._parents.get(ns) if held is not None and propagates else None
            if cached is not None:  # as cached (_as_given): the write checks it is current
                generations, parents[ns] = generations or {}, cached[1]
                generations[ns] = cached[0]
            else:  # read (an add by another thread may have forgotten the cached one since _as_given)
                parents[ns] = yield from self._parents_of_steps(ns, generation if ns == namespace else None)
        if self._live_to_start({ep.namespace for ep in episodes}):  # a scan of the log: in a thread
            yield Blocking(self._start_live, ({ep.namespace for ep in episodes},))
        rows, increments, checks, reweighted = [], [], [], []
        credited: builtins.list[tuple[Episode, bool, float]] = []
        for ep, ok, used in zip(episodes, results, useds, strict=True):
            if source == VERIFIED:
                before = earlier.get(ep.id)
                reported = (None, None) if before is None else (before.source, before.success)
                checks.append(Verification(ep.id, ep.namespace, ok, reported[0], reported[1], now))
                if before is not None:
                    continue
            conf = self._weight(source, ep.namespace, given)
            row = OutcomeRow(
                ep.id, ok, source, conf, now, 0, ep.namespace, self.propagation, self.max_hops, self._settings_version
            )
            rows.append(row)
            if used is not None:  # its logged weights become the shares: replay credits what was credited
                reweighted.append(ep)
            increments += self.increments_of(row, ep, parents[ep.namespace])
            credited.append((ep, ok, conf))
        try:
            yield from self._append_steps(source, checks, rows, increments, reweighted, held or (), generations)
        except (UnknownEpisodeError, ChangedError):
            if held is None:
                raise
            # an episode held is not logged so (or at all), or the provenance moved: nothing was
            # written; read them back, and record (or refuse) as a read says
            return (yield from self._record_steps(pairs, source, confidence, namespace, many=many, read=True))
        except DuplicateError:
            if not many or source == VERIFIED or len(ids) < 2:
                raise
            yield from self._name_recorded_steps(ids, namespace, many)
            raise
        self._advance_live(credited)
        if self.govern_every is not None or self.govern_every_seconds is not None:
            for ns in sorted({ep.namespace for ep in episodes}):
                due, seen = False, 0
                if self.govern_every is not None:
                    if ns in self._outcomes_since_govern:
                        seen = self._outcomes_since_govern[ns] + sum(1 for ep in episodes if ep.namespace == ns)
                    else:  # this object's first outcome here: what every face logged since the last automatic govern
                        seen = yield Blocking(self._logged_since_govern, (ns,))
                    due = seen >= self.govern_every
                if not due and self.govern_every_seconds is not None:
                    due = yield Blocking(self._interval_passed, (ns,))
                if due:
                    seen = yield Blocking(self._govern_by_itself, (ns,))
                if self.govern_every is not None:
                    self._outcomes_since_govern[ns] = seen
        return checks

    def _logged_since_govern(self, namespace: str) -> int:
        """Outcomes logged in ``namespace`` (this batch included) since continuous governance
        last ran there, by any store object: a store object that records a few outcomes and
        closes (``memworth record``, a short-lived worker) counts the others' too."""
        mark = self.backend.get_meta(governed_key(namespace))
        return max(0, self.backend.outcome_count(namespace) - int(mark or 0))

    def _interval_passed(self, namespace: str) -> bool:
        """Whether ``govern_every_seconds`` have passed since the last automatic round in
        ``namespace``. The store's time mark is read only when this object's copy of it says
        so (at most once per interval, plus once per round another object ran); the first
        outcome a store sees starts the clock (writes the mark, governs nothing)."""
        interval = self.govern_every_seconds
        if interval is None:
            return False
        now = self.clock()
        last = self._governed_at.get(namespace)
        if last is not None and now - last < interval:
            return False
        key = governed_at_key(namespace)
        stored = self.backend.get_meta(key)
        if stored is None:  # never governed by itself here: the interval starts now
            if not self.backend.set_meta_if(key, None, repr(float(now))):
                stored = self.backend.get_meta(key)  # another object started it first
            self._governed_at[namespace] = now if stored is None else float(stored)
            return False
        self._governed_at[namespace] = float(stored)
        return now - float(stored) >= interval

    def _govern_by_itself(self, namespace: str) -> int:
        """Continuous governance's round (:data:`AUTOMATIC` actions), once per ``govern_every``
        outcomes whichever store objects logged them, or at the first outcome once
        ``govern_every_seconds`` have passed since the last round: the round is claimed by
        moving the store's outcome mark (compare and set), with the time mark beside it in
        the same write, before governing, so of two objects that reach the same round (each
        from its own outcomes or clock, or both at once, by either trigger) one governs; the
        other finds a mark moved and counts from it. Returns the outcomes counted since the mark."""
        key, at_key = governed_key(namespace), governed_at_key(namespace)
        mark = self.backend.get_meta(key)
        stored_at = self.backend.get_meta(at_key)  # read after the mark: a round claimed since shows here
        logged = self.backend.outcome_count(namespace)
        since = max(0, logged - int(mark or 0))
        now = self.clock()
        by_count = self.govern_every is not None and since >= self.govern_every
        interval = self.govern_every_seconds
        by_time = interval is not None and stored_at is not None and now - float(stored_at) >= interval
        if not (by_count or by_time):  # another store object governed since this one looked
            if stored_at is not None:
                self._governed_at[namespace] = float(stored_at)
            return since
        if self.backend.set_meta_if(key, mark, str(logged), {at_key: repr(float(now))}):
            self._governed_at[namespace] = now
            self._govern(namespace, AUTOMATIC)
        return 0

    def _append_steps(
        self,
        source: str,
        checks: builtins.list[Verification],
        rows: builtins.list[OutcomeRow],
        increments: builtins.list[Increment],
        reweighted: Sequence[Episode] = (),
        given: Sequence[Episode] = (),
        generations: dict[str, int] | None = None,
    ) -> Steps[None]:
        """The backend write of a record call; if an episode retrieved a memory erased since (the
        write refused, nothing written), written again crediting the other memories only."""
        try:
            yield self._append_call(source, checks, rows, increments, reweighted, given, generations)
        except UnknownMemoryError:
            erased = set()
            for ns in {i.namespace for i in increments}:
                gone = yield Call("erased", (ns, [i.memory_id for i in increments if i.namespace == ns]))
                erased |= {(ns, mid) for mid in gone}
            if not erased:
                raise
            kept = [i for i in increments if (i.namespace, i.memory_id) not in erased]
            yield self._append_call(source, checks, rows, kept, reweighted, given, generations)

    def _append_call(
        self,
        source: str,
        checks: builtins.list[Verification],
        rows: builtins.list[OutcomeRow],
        increments: builtins.list[Increment],
        reweighted: Sequence[Episode] = (),
        given: Sequence[Episode] = (),
        generations: dict[str, int] | None = None,
    ) -> Call:
        """The one backend write of a record call (``reweighted``: the episodes whose weights
        ``used`` set, written with it; ``given``: the episodes credited as held, and
        ``generations``, those of the provenance credited along, both checked by the write;
        each argument left out when there are none)."""
        extra: dict[str, object] = {"reweighted": reweighted} if reweighted else {}
        if given:
            extra["given"] = given
        if generations:
            extra["generations"] = generations
        if source == VERIFIED:
            return Call("append_verifications", (checks, rows, increments), extra)
        return Call("append_outcomes", (rows, increments), extra)

    def _as_given(
        self,
        pairs: Sequence[tuple[object, ...]],
        useds: Sequence[tuple[str, ...] | None],
        source: str,
        namespace: str | None,
    ) -> builtins.list[Episode] | None:
        """The outcomes' episodes as the caller holds them (each a :class:`Recall` or an
        :class:`Episode`), to credit without reading them back, or None to read them.

        An episode's items change only with its outcome (``used``), so one the caller holds is
        credited as its logged copy would be when they match; the write checks that they do
        (``append_outcomes(..., given=...)``, :func:`memworth.store.backend.logged_as_given`)
        and, if not, writes nothing, and the call reads them back. Read instead when more than
        the items is needed before the write: a verification, a source with limits (they count
        logged items), ``used``, credit propagation along provenance not read yet by this store
        object (the write checks the namespace's generation is still the one it was read at);
        or when an episode is not in plain form (:func:`_plain_items`)."""
        if source == VERIFIED or self.limits.get(source) is not None:
            return None
        propagates = self.propagation > 0 and self.max_hops > 0
        given = []
        for pair, used in zip(pairs, useds, strict=True):
            ep = pair[0].episode if isinstance(pair[0], Recall) else pair[0]
            if used is not None or not _plain_items(ep) or (namespace is not None and ep.namespace != namespace):
                return None
            if propagates and ep.namespace not in self._parents:
                return None
            given.append(ep)
        return given

    def _live_to_start(self, namespaces: set[str]) -> bool:
        """Whether :meth:`_start_live` has a namespace to scan (else it does nothing)."""
        if not isinstance(self.ablation, AlarmSplitter) or not self.policy.change.enabled:
            return False
        return any(ns not in self._live for ns in namespaces)

    def _start_live(self, namespaces: set[str]) -> None:
        """Scan the namespaces an AlarmSplitter has no live statistics for yet (before new outcomes land).

        The scan reads the namespace's log from its checkpoint on (the whole log without one)
        and then saves a checkpoint when enough was new (:func:`checkpoint.due`, as govern
        does): a process that only records, such as each ``memworth record`` or a restarted
        server that never governs, would otherwise read the whole log at its first record,
        every time."""
        if not isinstance(self.ablation, AlarmSplitter) or not self.policy.change.enabled:
            return
        for ns in sorted(namespaces):
            if ns not in self._live:
                self._start_live_scan(ns)
                self._checkpoint(ns)

    def _advance_live(self, credited: builtins.list[tuple[Episode, bool, float]]) -> None:
        """Advance the live change statistics with outcomes just logged; tell the splitter."""
        if not isinstance(self.ablation, AlarmSplitter):
            return
        by_namespace: dict[str, builtins.list[tuple[builtins.list[str], bool, float]]] = {}
        for ep, ok, conf in credited:  # log order kept within each namespace
            used = [item.memory_id for item in ep.items if item.weight > 0]  # as Followed.extend reads the log
            by_namespace.setdefault(ep.namespace, []).append((used, ok, conf))
        with self._live_lock:
            for ns, outcomes in by_namespace.items():
                live = self._live.get(ns)
                if live is not None:
                    moved = live.advance(*outcomes[0]) if len(outcomes) == 1 else live.advance_many(outcomes)
                    self._watch({(ns, mid): stat for mid, stat in moved.items()})

    def _weight(self, source: str, namespace: str, given: float | None) -> float:
        """The confidence an outcome of ``source`` is credited with."""
        fixed = self.sources[source]
        if self.reliability is None or source == VERIFIED:
            return fixed if given is None else given
        learned = self.reliability.weight(self._agreement.get((namespace, source), Agreement()), fixed)
        return learned if given is None else min(given, learned)

    def _refresh_agreement(self) -> None:
        """Fold verifications logged since the last call into each source's agreement tally."""
        run(self._refresh_agreement_steps(), self.backend)

    def _refresh_agreement_steps(self) -> Steps[None]:
        """:meth:`_refresh_agreement` as steps."""
        for v in (yield Call("verifications", (), {"after": self._verified_seq})):
            if v.source is not None and v.reported is not None:
                key = (v.namespace, v.source)
                self._agreement[key] = self._agreement.get(key, Agreement()).add(v.reported == v.success)
            self._verified_seq = max(self._verified_seq, v.seq)

    def _name_recorded_steps(self, ids: Sequence[str], namespace: str | None, many: bool) -> Steps[None]:
        """Raise DuplicateError naming the first of ``ids`` recorded already (``outcomes[i]`` in a
        batch), if any. Read only once a write or a limit refused the call (nothing written), not
        before every call (a read of all its ids)."""
        done = yield Call("outcomes_of", (list(ids),), {"namespace": namespace})
        for i, eid in enumerate(ids):
            if eid in done:
                raise DuplicateError(f"episode {eid!r} already has an outcome" + (f" (outcomes[{i}])" if many else "")) from None

    def _check_limits_steps(self, source: str, episodes: builtins.list[Episode], now: float) -> Steps[None]:
        """Refuse (ValidationError, nothing written) outcomes beyond the source's quota or rate limit."""
        limit = self.limits.get(source)
        if limit is None:
            return
        for ns in sorted({ep.namespace for ep in episodes}):  # per namespace: one shard, and an id
            # another namespace logged too (PostgreSQL, schema 7) names a different episode
            recent = yield Call("outcomes_since", (now - limit.window, source), {"namespace": ns})
            logged = yield Call("episodes", ([o.episode_id for o in recent],), {"namespace": ns})
            # a quota counts the memories an outcome credited: those a ``used`` left out (weight 0) saw none
            before = [
                (o.recorded, [it.memory_id for it in logged[o.episode_id].items if it.weight > 0])
                for o in recent
                if o.episode_id in logged
            ]
            new = [[it.memory_id for it in ep.items if it.weight > 0] for ep in episodes if ep.namespace == ns]
            reason = limit.check(source, before, new, now)
            if reason is not None:
                raise RateLimitError(f"source: {reason}; nothing recorded")

    def source_reliability(self, namespace: str = "default") -> dict[str, SourceReport]:
        """Each source's fixed confidence, verified agreement, learned confidence and limit."""
        check_name(namespace, "namespace")
        self._refresh_agreement()
        rel = self.reliability if self.reliability is not None else Reliability()
        out = {}
        for name, fixed in sorted(self.sources.items()):
            stats = self._agreement.get((namespace, name), Agreement())
            learned = fixed if name == VERIFIED else rel.weight(stats, fixed)
            used = learned if self.reliability is not None else fixed
            out[name] = SourceReport(
                name,
                fixed,
                stats,
                rel.agreement(stats, fixed),
                rel.interval(stats),
                learned,
                used,
                self.limits.get(name),
            )
        return out

    def increments_of(
        self, outcome: OutcomeRow, episode: Episode, parents: dict[str, builtins.list[str]] | None = None
    ) -> builtins.list[Increment]:
        """The counter increments ``outcome`` caused, under the credit settings it was recorded
        with (its ``propagation`` and ``max_hops``, the settings version its ``settings_version``
        names; an outcome logged before they were kept uses this store's). Recording, replay, burst alerts, policy replay and the
        dashboard all credit through here, so a replay rebuilds what was done, whoever
        replays. ``parents`` (the namespace's provenance) is read when needed and not given."""
        propagation = self.propagation if outcome.propagation is None else outcome.propagation
        hops = self.max_hops if outcome.max_hops is None else outcome.max_hops
        if parents is None:
            parents = self._provenance(episode.namespace) if propagation > 0 and hops > 0 else {}
        return credit_increments(episode, outcome.success, outcome.confidence, parents, propagation, hops)

    def _parents_of_steps(
        self, namespace: str, generation: int | None = None
    ) -> Steps[dict[str, builtins.list[str]]]:
        """The provenance credit propagates along: none when propagation is off. ``generation``:
        the namespace's, read already (else it is read here)."""
        if self.propagation > 0 and self.max_hops > 0:
            parents = yield from self._provenance_steps(namespace, generation)
            return parents
        return {}

    def _provenance(self, namespace: str) -> dict[str, builtins.list[str]]:
        return run(self._provenance_steps(namespace), self.backend)

    def _provenance_steps(
        self, namespace: str, generation: int | None = None
    ) -> Steps[dict[str, builtins.list[str]]]:
        """:meth:`_provenance` as steps; ``generation``: the namespace's, read already (else read here)."""
        if generation is None:
            generation = yield Call("generation", (namespace,))
        cached = self._parents.get(namespace)
        if cached is None or cached[0] != generation:
            parents: dict[str, builtins.list[str]] = {}
            for src, dst, _kind in sorted((yield Call("edges", (namespace,)))):
                parents.setdefault(src, []).append(dst)
            self._parents[namespace] = cached = (generation, parents)
        return cached[1]
