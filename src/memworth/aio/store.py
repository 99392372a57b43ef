"""AsyncMemoryStore: every database method of :class:`memworth.MemoryStore`, awaitable."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from memworth.aio._worker import Runner, Worker, retire, twin, worker_for
from memworth.errors import ValidationError
from memworth.governance import GovernancePolicy
from memworth.settings import Settings
from memworth.store import MemoryStore
from memworth.store.configuring import FOLLOWING

__all__ = ["MAX_WORKERS", "AsyncMemoryStore", "check_pool"]

MAX_WORKERS = 32
"""Most store objects one :class:`AsyncMemoryStore` keeps over a PostgreSQL database."""

_POSTGRES = ("postgresql:", "postgres:")


def check_workers(workers: object, url: str) -> int:
    """``workers`` if it is a number of store objects ``url`` can have, else ValidationError."""
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= MAX_WORKERS:
        raise ValidationError("workers", f"must be an integer from 1 to {MAX_WORKERS}, got {workers!r}")
    if workers > 1 and not (isinstance(url, str) and url.startswith(_POSTGRES)):
        raise ValidationError(
            "workers",
            "only a PostgreSQL store can have more than one worker: SQLite lets one writer in at a time "
            "(a second store object would wait on its lock) and memory:// lives in one store object",
        )
    return workers


def check_native(native: object, url: str) -> bool:
    """Whether a store opened at ``url`` awaits its database natively: ``native`` (None: on PostgreSQL)."""
    postgres = isinstance(url, str) and url.startswith(_POSTGRES)
    if native is None:
        return postgres
    if not isinstance(native, bool):
        raise ValidationError("native", f"must be True, False or None, got {native!r}")
    if native and not postgres:
        raise ValidationError(
            "native",
            "only a PostgreSQL store awaits its database natively (psycopg's async pool); SQLite and memory://"
            " run their calls on a worker thread",
        )
    return native


def check_pool(stores: tuple[MemoryStore, ...]) -> None:
    """Several store objects may share one AsyncMemoryStore only over one PostgreSQL database."""
    if not stores:
        raise ValidationError("stores", "give at least one MemoryStore")
    for s in stores:
        if not isinstance(s, MemoryStore):
            raise ValidationError("stores", f"must be MemoryStore objects, got {type(s).__name__}")
    if len(stores) > 1:
        url = stores[0].backend.url
        check_workers(len(stores), url)
        if any(s.backend.url != url for s in stores) or len({id(s) for s in stores}) != len(stores):
            raise ValidationError("stores", "a pool is distinct store objects over one database URL")


class AsyncMemoryStore(Runner[MemoryStore]):
    """A :class:`memworth.MemoryStore` whose database methods are awaitable and never block
    the event loop; see :mod:`memworth.aio`.

    Parameters
    ----------
    stores
        The store object to wrap, or several over one PostgreSQL database (a pool: see
        :meth:`open` ``workers``). The async store owns them: :meth:`aclose` closes them.

    Every twin takes the sync method's arguments and gives its answer and its errors.
    Properties and pure helpers (``settings``, ``taxonomy``, ``score``) are read on the
    sync store, :attr:`store`.
    """

    NATIVE: ClassVar[dict[str, str]] = {
        "add": "_add_steps",
        "add_many": "_add_many_steps",
        "get": "_get_steps",
        "list": "_list_steps",
        "recall": "_recall_steps",
        "record": "_record_steps_one",
        "record_many": "_record_many_steps",
        "report": "_report_steps",
        "reports": "_reports_steps",
    }
    FOLLOWING: ClassVar[frozenset[str]] = frozenset(FOLLOWING)

    def __init__(self, *stores: MemoryStore) -> None:
        check_pool(stores)
        super().__init__(stores, stores)

    @classmethod
    async def open(
        cls, url: str = "sqlite:///memworth.db", *, workers: int = 1, native: bool | None = None, **settings: Any
    ) -> AsyncMemoryStore:
        """Open (creating if needed) the store at ``url`` on its worker thread, as
        :meth:`memworth.MemoryStore.open` does with ``settings``.

        ``workers`` (PostgreSQL only): how many store objects to open over the database, so
        that that many calls run at once, each store object in its own turn. With a
        ``seed``, store object ``i`` draws from ``seed + i`` (the same draws in every
        object would explore the same memories).

        ``native`` (default: on PostgreSQL): await the database on psycopg's async pool
        (``?pool_size=`` connections, shared by the store objects) for the hot path (add,
        add_many, get, list, recall, record, record_many, report, reports), with no thread
        hand-off; ``False`` runs every call on the worker thread, as SQLite does.
        """
        check_workers(workers, url)
        go_native = check_native(native, url)
        stores: list[MemoryStore] = []
        try:
            for i in range(workers):
                options = dict(settings)
                if i and isinstance(options.get("seed"), int):
                    options["seed"] += i
                stores.append(await Worker().open(MemoryStore.open, url, **options))
            opened = cls(*stores)
            if go_native:
                from memworth.store.postgres_async import open_async_pool

                opened._go_native(await open_async_pool(url))
            return opened
        except BaseException:
            for store in stores:
                await worker_for(store).call(store.close)
                retire(store)
            raise

    async def __aenter__(self) -> AsyncMemoryStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    @property
    def store(self) -> MemoryStore:
        """The (first) sync store object: for properties; call its database methods only
        through this object, which keeps them on the store's thread."""
        return self._targets[0]

    @property
    def workers(self) -> int:
        """How many store objects (and threads) run calls."""
        return len(self._targets)

    # -- settings: every store object of a pool works under the same ones ---------------

    async def configure(self, changes: Settings | Mapping[str, object], *, actor: str = "python") -> int:
        """:meth:`memworth.MemoryStore.configure`, on every store object of the pool: the first
        keeps the new version, the others adopt it."""
        version = await self._workers[0].call(_configure, self._targets[0], changes, actor)
        await self._others_follow()
        return version

    async def set_policy(self, policy: GovernancePolicy) -> int:
        """:meth:`memworth.MemoryStore.set_policy`, on every store object of the pool."""
        version = await self._workers[0].call(MemoryStore.set_policy, self._targets[0], policy)
        await self._others_follow()
        return version

    async def _others_follow(self) -> None:
        """The other store objects of a pool work under the newest kept version: the one the
        first just kept, or one another process kept since (never the one before it)."""
        for worker, store in zip(self._workers[1:], self._targets[1:], strict=True):
            await worker.call(_follow, store)

    # -- memories ------------------------------------------------------------------------
    add = twin(MemoryStore.add)
    add_many = twin(MemoryStore.add_many)
    get = twin(MemoryStore.get)
    list = twin(MemoryStore.list)
    list_page = twin(MemoryStore.list_page)
    # -- recall and outcomes ---------------------------------------------------------------
    recall = twin(MemoryStore.recall)
    record = twin(MemoryStore.record)
    record_many = twin(MemoryStore.record_many)
    verify = twin(MemoryStore.verify)
    source_reliability = twin(MemoryStore.source_reliability)
    # -- governance ------------------------------------------------------------------------
    govern = twin(MemoryStore.govern)
    approve = twin(MemoryStore.approve)
    report = twin(MemoryStore.report)
    reports = twin(MemoryStore.reports)
    proposals = twin(MemoryStore.proposals)
    may_consolidate = twin(MemoryStore.may_consolidate)
    holdout_guard = twin(MemoryStore.holdout_guard)
    restore = twin(MemoryStore.restore)
    set_status = twin(MemoryStore.set_status)
    set_standing = twin(MemoryStore.set_standing)
    # -- review ----------------------------------------------------------------------------
    queue = twin(MemoryStore.queue)
    resolve = twin(MemoryStore.resolve)
    pin = twin(MemoryStore.pin)
    unpin = twin(MemoryStore.unpin)
    # -- forgetting ------------------------------------------------------------------------
    delete = twin(MemoryStore.delete)
    edit = twin(MemoryStore.edit)
    expired = twin(MemoryStore.expired)
    purge_expired = twin(MemoryStore.purge_expired)
    set_ttl = twin(MemoryStore.set_ttl)
    ttl = twin(MemoryStore.ttl)
    # -- the log ---------------------------------------------------------------------------
    audit = twin(MemoryStore.audit)
    audit_page = twin(MemoryStore.audit_page)
    outcome_page = twin(MemoryStore.outcome_page)
    outcome_streams = twin(MemoryStore.outcome_streams)
    recent_counts = twin(MemoryStore.recent_counts)
    burst_alerts = twin(MemoryStore.burst_alerts)
    episode_stats = twin(MemoryStore.episode_stats)
    holdout_report = twin(MemoryStore.holdout_report)
    replay = twin(MemoryStore.replay)
    replay_policy = twin(MemoryStore.replay_policy)
    # -- settings as kept ------------------------------------------------------------------
    config = twin(MemoryStore.config)
    follow_settings = twin(MemoryStore.follow_settings)
    settings_record = twin(MemoryStore.settings_record)
    settings_history = twin(MemoryStore.settings_history)
    policy_record = twin(MemoryStore.policy_record)
    policy_history = twin(MemoryStore.policy_history)
    # -- hot tier --------------------------------------------------------------------------
    hot_tier = twin(MemoryStore.hot_tier)
    rebuild_hot_tier = twin(MemoryStore.rebuild_hot_tier)
    check_hot_tier = twin(MemoryStore.check_hot_tier)


def _configure(store: MemoryStore, changes: Settings | Mapping[str, object], actor: str) -> int:
    return store.configure(changes, actor=actor)


def _follow(store: MemoryStore) -> bool:
    return store.follow_settings(now=True)
