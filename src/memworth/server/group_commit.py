"""Group commit: outcomes that arrive together for one tenant share one transaction.

An outcome is acknowledged only once it is on disk, so each ``POST
/v1/episodes/{id}/outcome`` pays a commit (SQLite ``synchronous=FULL``: an fsync;
PostgreSQL: a WAL flush). A tenant's calls run one at a time on its store object
(:class:`memworth.server.pool.StorePool`), so under concurrent requests each one waits
for the commits of those before it. :class:`GroupCommit` lets them share the wait: the
requests queued behind the store object's lock when it comes free are recorded by one
:meth:`memworth.MemoryStore.record_many` call, in the order they arrived, and each is
answered when that transaction has committed. The promise to the client is unchanged: a
200 means the outcome is durable.

What a batch changes, and what it does not:

* Each request gets its own answer. ``record_many`` is all or none; when it refuses a
  batch (an unknown or repeated episode, an outcome beyond a source's limit, any error),
  the batch's outcomes are recorded again one by one, in order, so each request gets the
  answer (or error) it would have had alone, and the others are kept.
* One batch holds outcomes of one source and confidence (the arguments ``record_many``
  takes once); a change of either starts the next batch.
* Continuous governance (``govern_every``) runs after exactly as many outcomes as
  without batching: a batch never crosses the count at which the store governs.
* The outcomes of a batch carry one timestamp (the store's clock read once), as
  ``record_many`` does.

A request is never held for later work: the thread that writes a batch writes only the
one holding its own outcome, then hands the queue to the next waiting request's thread.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from memworth.server.pool import StorePool
from memworth.store import MemoryStore

__all__ = ["MAX_BATCH", "GroupCommit"]

MAX_BATCH = 256
"""Most outcomes one transaction takes (a bound on the answer time of the batch's first request)."""


@dataclass(eq=False)
class _Waiting:
    """One request's outcome, waiting for the transaction that records it."""

    episode: str
    success: bool
    source: str
    confidence: float | None
    answer: Callable[[], Any]
    used: Sequence[str] | None = None
    done: threading.Event = field(default_factory=threading.Event)
    lead: bool = False  # this request's thread writes the next batch
    recorded: bool = False  # committed
    answered: bool = False  # its fate is known (recorded, or error set)
    error: BaseException | None = None
    result: Any = None


class GroupCommit:
    """Record outcomes on a :class:`StorePool`, batching those that wait for the same tenant.

    Parameters
    ----------
    pool
        The store objects; a tenant's batch runs on its object, under its lock
        (:meth:`StorePool.run`).
    max_batch
        Most outcomes in one transaction.

    Examples
    --------
    >>> from memworth import MemoryStore, HashingEncoder
    >>> store = MemoryStore.open("memory://", encoder=HashingEncoder(), exploration=0.0)
    >>> _ = store.add("Prague is the capital of the Czech Republic.", id="prague")
    >>> ep = store.recall("capital of the czech republic", k=1).episode
    >>> GroupCommit(StorePool(store)).record("default", ep.id, True, answer=lambda: "recorded")
    'recorded'
    >>> store.get("prague").counts.success
    1.0
    """

    def __init__(self, pool: StorePool, max_batch: int = MAX_BATCH) -> None:
        self.pool = pool
        self.max_batch = max_batch
        self._queues: dict[str, deque[_Waiting]] = {}
        self._guard = threading.Lock()

    def record(
        self,
        namespace: str,
        episode: str,
        success: bool,
        *,
        source: str = "explicit",
        confidence: float | None = None,
        used: Sequence[str] | None = None,
        answer: Callable[[], Any] = lambda: None,
    ) -> Any:
        """:meth:`memworth.MemoryStore.record` of one outcome in ``namespace``, committed (perhaps
        with others) before it returns; raises what that call would raise for it alone.

        ``answer()`` builds the request's answer inside the transaction that records the outcome
        (:meth:`memworth.MemoryStore.transaction`): if it fails, nothing of that transaction is
        kept (the batch's other outcomes are then recorded one by one) and its error is raised
        here. Returns what it returned."""
        item = _Waiting(episode, success, source, confidence, answer, used)
        with self._guard:
            queue = self._queues.setdefault(namespace, deque())
            queue.append(item)
            item.lead = len(queue) == 1  # nobody is writing for this tenant: this thread does
        if not item.lead:
            item.done.wait()  # set when a batch recorded it, or when it is this thread's turn to lead
        if item.lead:
            try:
                self.pool.run(namespace, lambda store: self._write(store, namespace))
            finally:
                if not item.answered:  # the batch was never written (the pool refused the call)
                    self._hand_on(namespace, [item], RuntimeError("the outcome was not recorded"))
        if item.error is not None:
            raise item.error
        return item.result

    def _write(self, store: MemoryStore, namespace: str) -> None:
        """Record the batch at the head of the tenant's queue (it starts with the leading
        request's own outcome), answer its requests, and hand the queue on."""
        limit = self.max_batch
        left = store.outcomes_until_govern(namespace)
        if left is not None:
            limit = max(1, min(limit, left))
        with self._guard:
            queue = self._queues[namespace]
            head = queue[0]
            batch: list[_Waiting] = []
            for item in queue:
                if len(batch) == limit or (item.source, item.confidence) != (head.source, head.confidence):
                    break
                batch.append(item)
        try:
            _record(store, namespace, batch)
        except BaseException as exc:
            self._hand_on(namespace, batch, exc)
            raise
        self._hand_on(namespace, batch, None)

    def _hand_on(self, namespace: str, batch: list[_Waiting], failure: BaseException | None) -> None:
        """Answer ``batch`` (the head of the tenant's queue; ``failure`` for any item whose
        fate is unknown), and wake the next request in the queue to lead, if any."""
        with self._guard:
            queue = self._queues[namespace]
            for item in batch:
                item.answered = True
                if failure is not None and not item.recorded and item.error is None:
                    item.error = failure
                queue.popleft()
            if queue:
                queue[0].lead = True
                queue[0].done.set()
            else:
                del self._queues[namespace]
        for item in batch[1:]:  # the first is the leading thread's own
            item.done.set()


def _record(store: MemoryStore, namespace: str, batch: list[_Waiting]) -> None:
    """Record ``batch`` and build its answers in one transaction, or, if that fails, each
    outcome in a transaction of its own; each item's answer or error is kept on it."""
    head = batch[0]
    if len(batch) > 1:
        try:
            with store.transaction():
                store.record_many(
                    [(item.episode, item.success, item.used) for item in batch],
                    source=head.source,
                    confidence=head.confidence,
                    namespace=namespace,
                )
                results = [item.answer() for item in batch]
        except Exception:  # each outcome again, alone: it gets its own answer
            pass
        else:
            for item, result in zip(batch, results, strict=True):
                item.result, item.recorded = result, True
            return
    for item in batch:
        try:
            with store.transaction():
                store.record(
                    item.episode,
                    item.success,
                    source=item.source,
                    confidence=item.confidence,
                    namespace=namespace,
                    used=item.used,
                )
                item.result = item.answer()
            item.recorded = True
        except Exception as exc:  # raised in the request's own thread
            item.error = exc
