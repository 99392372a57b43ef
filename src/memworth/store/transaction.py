"""A unit of work: the store's writes inside a block kept together, or undone together.

A face that answers a write (an HTTP route, an MCP tool) must not acknowledge less than it
wrote, nor keep a write it could not answer for. So it builds its whole answer (the
rendered JSON) inside :meth:`TransactionMixin.transaction`; the writes commit only after
that, and an exception anywhere in the block (a check after the store call, an answer
that does not validate or encode, a memory whose report cannot be rendered) rolls back
every one of them. Once the block has exited the change is committed, whatever happens to
the connection the answer goes out on (a client that went away gets nothing, and the
change stays, as for any acknowledged write whose acknowledgement was lost).

Why a block around the work, not an ``answer=`` callback evaluated before the commit: a
callback would have to be threaded through every write method of the store (add, edit,
erase, record, govern, restore, configure ...) and through the backends' methods, each
taking it at the right place inside its own transaction; a block leaves every method as
it is, takes any number of calls (an edit and the read of its new version, say), and
puts the face in charge of what is inside, which is what the face knows.

What rolls back, besides the database rows (the backend's
:meth:`memworth.store.backend.Backend.transaction`: one SQLite or PostgreSQL transaction,
or the in-process backend's undo log), is everything this store object derived from them
during the block:

* the candidate indexes (:mod:`memworth.store.recall`), the followed history and change
  detectors (:mod:`memworth.store.followed`), the live alarms
  (:mod:`memworth.store.alarms`) and an AlarmSplitter's statistics: what was unchanged is
  kept, what changed is dropped (rebuilt from the database at its next use, as after a
  restart), the splitter's statistics are set back;
* the settings in force (a ``configure`` inside the block), the counts towards continuous
  governance, the learned source agreement, provenance and expiry caches;
* the Redis hot tier: its writes wait for the commit (and never happen on a rollback); one
  that then fails marks the namespace's mirror stale, as it would have outside a block.

What a block costs: the locks its writes take are held until it ends, SQLite's write lock
from the first write inside (not before: embedding and reading hold none), PostgreSQL's row
locks likewise; so a block should hold a change and its answer, nothing slow. A govern with
a verifier holds them through the verifier's calls. On PostgreSQL two blocks of several
writes each can wait for one another; PostgreSQL ends such a deadlock by failing one, which
is rolled back whole (:class:`memworth.errors.UnavailableError`: try again). Since schema 7
each namespace's writes lock its own generation row, so two blocks that write to the same
two namespaces in opposite orders are such a case: touch namespaces in one order (by name)
in blocks that write to several. The first
memory a pgvector store holds adds its vector column, which readers wait for until the block
that added it ends.

Transactions do not nest, and a store object has at most one open: opening another (on
the same thread or another) raises :class:`memworth.errors.TransactionError`. Another
thread's plain call on the same store object waits for the end (SQLite, ``memory://``) or
sees the state before it (PostgreSQL); a store object is used by one thread at a time in
any case (:mod:`memworth.server.pool`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

from memworth.errors import StoreError, TransactionError
from memworth.signals.coretrieval import AlarmSplitter
from memworth.store.alarms import LiveAlarms
from memworth.store.followed import Followed
from memworth.store.hot import HotMemory, HotTier
from memworth.store.state import StoreState

__all__ = ["TransactionMixin"]

K = TypeVar("K")
V = TypeVar("V")


class TransactionMixin(StoreState):
    """The unit-of-work part of :class:`memworth.store.MemoryStore`: :meth:`transaction`."""

    _unit: _Unit | None = None

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Keep the store's writes inside the block together: committed when it exits
        cleanly, rolled back whole on any exception, which goes on.

        Rolled back: the database rows (memories, outcomes, audit entries, settings
        versions, checkpoints), this store object's state derived from them during the
        block (candidate index, followed history, live alarms, settings in force,
        counters) and the Redis hot tier, whose writes wait for the commit. A face renders
        its answer inside the block, so a change is never kept without its answer; see
        :mod:`memworth.store.transaction`. Raises
        :class:`memworth.errors.TransactionError` if one is open on this store object.

        Examples
        --------
        >>> from memworth import MemoryStore, HashingEncoder
        >>> store = MemoryStore.open("memory://", encoder=HashingEncoder())
        >>> try:
        ...     with store.transaction():
        ...         _ = store.add("kept only with its answer", id="a")
        ...         raise RuntimeError("the answer could not be rendered")
        ... except RuntimeError:
        ...     pass
        >>> [m.id for m in store.list()]
        []
        """
        if self._unit is not None:
            raise TransactionError(
                "a transaction is open on this store object already: transactions do not nest, and a store"
                " object takes one at a time (finish it first, or use another store object)"
            )
        unit = self._unit = _Unit(self)
        hot = self.hot
        if hot is not None:
            self.hot = _AfterCommit(hot, unit.after_commit)
        try:
            with self.backend.transaction():
                yield
        except BaseException:
            self.hot = hot
            unit.undo(self)
            raise
        finally:
            self.hot = hot
            self._unit = None
        unit.committed(self)

    def _in_transaction(self) -> bool:
        """Whether a :meth:`transaction` is open on this store object."""
        return self._unit is not None

    def _watch(self, statistics: Mapping[Hashable, float]) -> None:
        """Give the store's AlarmSplitter new statistics; inside a transaction, the ones they
        replace are kept first, to be set back if it rolls back."""
        splitter = self.ablation
        if not isinstance(splitter, AlarmSplitter):
            return
        if self._unit is not None:
            self._unit.before_watch(splitter, statistics)
        splitter.watch(statistics)


class _Unit:
    """What one open transaction must be able to set back: this store object's state as it
    was at the start (cheap: a reference and a few numbers per namespace), the statistics an
    AlarmSplitter had before the block changed them, and the hot-tier writes waiting for the commit."""

    def __init__(self, store: TransactionMixin) -> None:
        self.settings = store.settings
        self.settings_version = store._settings_version
        self.settings_seen = store._settings_seen
        self.ablation = store.ablation
        self.spaces = _marked(store._spaces, _space_mark)
        with store._follow_lock:
            self.followed = _marked(store._followed, _followed_mark)
        with store._live_lock:
            self.live = _marked(store._live, _live_mark)
        self.parents = dict(store._parents)
        self.next_expiry = dict(store._next_expiry)
        self.since_govern = dict(store._outcomes_since_govern)
        self.governed_at = dict(store._governed_at)
        self.agreement = dict(store._agreement)
        self.verified_seq = store._verified_seq
        self.hot_stale = set(store._hot_stale)
        self.watched: dict[int, tuple[AlarmSplitter, dict[Hashable, float | None]]] = {}
        self.after_commit: list[tuple[str, Callable[[], None]]] = []

    def before_watch(self, splitter: AlarmSplitter, statistics: Mapping[Hashable, float]) -> None:
        _, saved = self.watched.setdefault(id(splitter), (splitter, {}))
        fresh = [key for key in statistics if key not in saved]
        saved.update(splitter.watched(fresh))

    def undo(self, store: TransactionMixin) -> None:
        """Set the store object back to the start of the transaction (the database rolled back)."""
        if store.settings is not self.settings:
            store._adopt(self.settings, self.settings_version)
        store._settings_version = self.settings_version  # also when a newer version kept the same settings
        store._settings_seen = self.settings_seen
        object.__setattr__(store, "ablation", self.ablation)  # as it was: not a new assignment to validate and adopt
        for splitter, saved in self.watched.values():
            splitter.rewatch(saved)
        store._spaces = _unchanged(self.spaces, _space_mark)
        with store._follow_lock:
            store._followed = _unchanged(self.followed, _followed_mark)
        with store._live_lock:
            store._live = _unchanged(self.live, _live_mark)
        store._parents = self.parents
        store._next_expiry = self.next_expiry
        store._outcomes_since_govern = self.since_govern
        store._governed_at = self.governed_at
        store._agreement = self.agreement
        store._verified_seq = self.verified_seq
        store._hot_stale = self.hot_stale
        store._filters.clear()  # answers about memories that may no longer exist

    def committed(self, store: TransactionMixin) -> None:
        """The writes are kept: make the hot-tier writes that waited for them. One that fails
        (Redis down) marks its namespace's mirror stale: hot recall rebuilds it before use."""
        for namespace, write in self.after_commit:
            try:
                write()
            except StoreError:
                store._hot_stale.add(namespace)


class _AfterCommit(HotTier):
    """The store's hot tier while a transaction is open: reads go to Redis, writes wait in
    ``pending`` for the commit (the mirror never shows a change that was rolled back)."""

    def __init__(self, hot: HotTier, pending: list[tuple[str, Callable[[], None]]]) -> None:
        # Not HotTier.__init__: no new client, the open one is used.
        self.url, self.prefix, self._errors, self._client = hot.url, hot.prefix, hot._errors, hot._client
        self._hot = hot
        self._pending = pending

    def replace(self, namespace: str, memories: list[HotMemory]) -> None:
        self._pending.append((namespace, lambda: self._hot.replace(namespace, memories)))

    def remove(self, namespace: str, memory_id: str) -> None:
        self._pending.append((namespace, lambda: self._hot.remove(namespace, memory_id)))

    def clear(self, namespace: str) -> None:
        self._pending.append((namespace, lambda: self._hot.clear(namespace)))

    def close(self) -> None:
        self._hot.close()


def _marked(table: dict[K, V], mark: Callable[[V], tuple[Any, ...]]) -> list[tuple[K, V, tuple[Any, ...]]]:
    """Each entry of ``table`` in order, with what it looks like now."""
    return [(key, value, mark(value)) for key, value in table.items()]


def _unchanged(saved: list[tuple[K, V, tuple[Any, ...]]], mark: Callable[[V], tuple[Any, ...]]) -> dict[K, V]:
    """The saved entries that still look as they did (in their order); the others are dropped,
    to be rebuilt from the database, as are entries made since."""
    return {key: value for key, value, was in saved if mark(value) == was}


def _space_mark(space: Any) -> tuple[Any, ...]:
    return (space.generation, space.last_seq, len(space.ids), id(space.index), space.erased, id(space.inactive))


def _followed_mark(followed: Followed) -> tuple[Any, ...]:
    return (len(followed), followed.last_seq, followed.saved, followed.scanned, id(followed.scan))


def _live_mark(live: LiveAlarms) -> tuple[Any, ...]:
    return (live.logged, len(live.names), id(live.state))
