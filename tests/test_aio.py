"""memworth.aio: every awaitable twin answers as the sync method does, on SQLite and PostgreSQL,
without blocking the event loop, without overlapping calls on a store, and with no half-done write."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import math
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memworth import HashingEncoder, MemoryStore, Sidecar
from memworth.aio import AsyncMemoryStore, AsyncSidecar
from memworth.errors import (
    DuplicateError,
    ErasedMemoryError,
    StoreError,
    UnknownEpisodeError,
    UnknownMemoryError,
    ValidationError,
)
from tests.store.conftest import NO_DISK_WAIT, POSTGRES, drop, with_query

KINDS = ["sqlite", "postgres"]
NOW = 1_700_000_000.0

# Public MemoryStore methods with no async twin: opening and closing are the async store's
# own (open, aclose), and these compute from arguments or from the store object's memory.
# transaction is a block of sync calls on one thread and one store object (issue 18), not a
# database call: the async store's awaited calls may each run on another of its objects.
# outcomes_until_govern reads the store object's own count (the server's group commit).
NOT_TWINNED = {
    "open", "close", "choose", "score", "increments_of", "holdout_episode", "transaction", "outcomes_until_govern"
}
POOL_WIDE = {"configure", "set_policy"}


def clock() -> float:
    return NOW


def url_of(kind: str, tmp_path: Path, name: str = "store") -> str:
    if kind == "postgres":
        return with_query(POSTGRES, schema=f"t_{uuid.uuid4().hex[:16]}", pool_size="2", options=NO_DISK_WAIT)
    return f"sqlite:///{tmp_path / name}.db"


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def opened() -> Iterator[list[MemoryStore]]:
    """Store objects a test opened; closed (a PostgreSQL one's schema dropped) after it."""
    stores: list[MemoryStore] = []
    yield stores
    for store in stores:
        try:
            drop(store)
        except Exception:  # closed by the test already
            pass


def open_store(kind: str, tmp_path: Path, opened: list[MemoryStore], name: str = "store", **kw: Any) -> MemoryStore:
    store = MemoryStore.open(url_of(kind, tmp_path, name), encoder=HashingEncoder(), seed=3, clock=clock, **kw)
    opened.append(store)
    return store


# -- one twin per method ----------------------------------------------------------------------


def test_every_database_method_has_a_twin_with_its_signature_and_docstring() -> None:
    public = {n for n, v in inspect.getmembers(MemoryStore, inspect.isfunction) if not n.startswith("_")}
    public |= {n for n, v in vars(MemoryStore).items() if isinstance(v, classmethod)}
    twinned = public - NOT_TWINNED
    assert {"add", "recall", "record", "govern", "replay", "configure"} <= twinned
    asynced = AsyncMemoryStore(MemoryStore.open("memory://", encoder=HashingEncoder()))
    for name in sorted(twinned):
        sync = getattr(MemoryStore, name)
        twin = getattr(AsyncMemoryStore, name)
        if name in POOL_WIDE:  # written out: they change every store object of a pool
            assert f":meth:`memworth.MemoryStore.{name}`" in twin.__doc__, name
        else:
            assert twin.__doc__ == sync.__doc__, name
        bound = getattr(asynced, name)
        assert inspect.iscoroutinefunction(bound), name
        sig = inspect.signature(sync)
        assert inspect.signature(bound) == sig.replace(parameters=list(sig.parameters.values())[1:]), name
    asyncio.run(asynced.aclose())
    sidecar_public = {n for n, _ in inspect.getmembers(Sidecar, inspect.isfunction) if not n.startswith("_")}
    asidecar = AsyncSidecar(Sidecar.open("memory://"))
    for name in sorted(sidecar_public - {"open", "close"}):
        sync, bound = getattr(Sidecar, name), getattr(asidecar, name)
        assert inspect.iscoroutinefunction(bound) and bound.__doc__ == sync.__doc__, name
        sig = inspect.signature(sync)
        assert inspect.signature(bound) == sig.replace(parameters=list(sig.parameters.values())[1:]), name
    asyncio.run(asidecar.aclose())


# -- the same answers ---------------------------------------------------------------------------


def script() -> list[tuple[str, tuple[Any, ...], dict[str, Any]]]:
    """Calls that touch every part of the store, in an order where each can answer."""
    texts = [
        "reverse a list with [::-1]",
        "Prague is in Czechia",
        "tea at 80 C",
        "coffee at 93 C",
        "sort with sorted()",
    ]
    calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
        ("add", (texts[0],), {"id": "m0", "metadata": {"topic": "python"}}),
        ("add_many", ([{"text": t, "id": f"m{i}"} for i, t in enumerate(texts) if i],), {}),
        ("get", ("m1",), {}),
        ("list", (), {}),
        ("list_page", (), {"limit": 2}),
    ]
    for i in range(24):
        calls.append(("recall", (texts[i % 5], 2), {"episode_id": f"e{i}"}))
        calls.append(("record", (f"e{i}", i % 3 != 0), {}))
    calls += [
        ("recall", ("tea", 2), {"episode_id": "v0"}),
        ("record_many", ([("v0", True)],), {"source": "implicit"}),
        ("recall", ("coffee", 2), {"episode_id": "v1"}),
        ("verify", ("v1", True), {}),
        ("report", ("m2",), {}),
        ("reports", (), {}),
        ("proposals", (), {}),
        ("source_reliability", (), {}),
        ("outcome_streams", (), {}),
        ("recent_counts", (), {}),
        ("burst_alerts", (), {}),
        ("episode_stats", (), {}),
        ("holdout_report", (), {}),
        ("holdout_guard", (), {}),
        ("may_consolidate", ("m3",), {}),
        ("govern", (), {}),
        ("govern", (), {"apply": True}),
        ("queue", (), {}),
        ("set_status", ("m4", "suppressed"), {"reason": "wrong"}),
        ("set_standing", ("m3", "re-verify"), {"reason": "check it"}),
        ("resolve", ("m3", "confirmed"), {"reason": "still true"}),
        ("pin", ("m1",), {"reason": "keep"}),
        ("unpin", ("m1",), {"reason": "let go"}),
        ("restore", (1,), {}),
        ("edit", ("m2", "tea at 75 C"), {"reason": "colder", "new_id": "m2b"}),
        ("delete", ("m0",), {"reason": "asked to forget"}),
        ("set_ttl", (3600.0,), {}),
        ("ttl", (), {}),
        ("expired", (), {}),
        ("purge_expired", (), {}),
        ("audit", (), {}),
        ("audit_page", (), {"limit": 3}),
        ("outcome_page", (), {"limit": 5}),
        ("configure", ({"recall.exploration": 0.0},), {"actor": "test"}),
        ("config", (), {}),
        ("settings_record", (), {}),
        ("settings_history", (), {}),
        ("policy_record", (), {}),
        ("policy_history", (), {}),
        ("hot_tier", (), {}),
        ("replay", (), {}),
        ("list", (), {"status": "active"}),
    ]
    return calls


def same(a: Any, b: Any) -> bool:
    """Equal answers: arrays and objects compared by value, NaN equal to NaN."""
    if isinstance(a, np.ndarray):
        return bool(np.array_equal(a, b))
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        fields = [f.name for f in dataclasses.fields(a)]
        return type(a) is type(b) and all(same(getattr(a, f), getattr(b, f)) for f in fields)
    if type(a).__eq__ is object.__eq__ and hasattr(a, "__dict__"):  # compares by identity: compare the state
        return type(a) is type(b) and same(vars(a), vars(b))
    return bool(a == b)


def test_every_twin_answers_as_the_sync_method(kind: str, tmp_path: Path, opened: list[MemoryStore]) -> None:
    sync = open_store(kind, tmp_path, opened, "sync")
    wrapped = open_store(kind, tmp_path, opened, "async")
    asynced = AsyncMemoryStore(wrapped)

    async def run_all() -> list[Any]:
        return [await getattr(asynced, name)(*args, **kwargs) for name, args, kwargs in script()]

    answers = asyncio.run(run_all())
    for (name, args, kwargs), answer in zip(script(), answers, strict=True):
        expected = getattr(sync, name)(*args, **kwargs)
        if name == "recall":  # diagnostics carry the time each stage took
            expected, answer = (expected.episode, expected.results), (answer.episode, answer.results)
        assert same(answer, expected), (name, args, answer, expected)
    assert sync.replay().consistent and wrapped.replay().consistent


def test_the_sidecar_twins_answer_as_the_sync_ones(tmp_path: Path) -> None:
    sync = Sidecar.open(f"sqlite:///{tmp_path}/s.db", exploration=0.0, seed=1, clock=clock)
    candidates = [("d1", 0.9), ("d2", 0.8), ("d3", 0.4)]

    async def run() -> tuple[Any, ...]:
        async with await AsyncSidecar.open(f"sqlite:///{tmp_path}/a.db", exploration=0.0, seed=1, clock=clock) as sc:
            new = await sc.register(["d1", "d2"])
            picked = await sc.retrieve(candidates, 2)
            await sc.record(picked.episode, False)
            logged = await sc.retrieved(["d3"])
            await sc.record(logged, True)
            return (
                new,
                picked.ids,
                await sc.rerank(candidates),
                await sc.worth_many(["d1", "d3"]),
                await sc.filter(["d1", "d2", "d3"]),
                await sc.suggestions(),
                (await sc.replay()).consistent,
            )

    new = sync.register(["d1", "d2"])
    picked = sync.retrieve(candidates, 2)
    sync.record(picked.episode, False)
    sync.record(sync.retrieved(["d3"]), True)
    expected = (
        new,
        picked.ids,
        sync.rerank(candidates),
        sync.worth_many(["d1", "d3"]),
        sync.filter(["d1", "d2", "d3"]),
        sync.suggestions(),
        sync.replay().consistent,
    )
    sync.close()
    assert same(asyncio.run(run()), expected)


# -- the event loop stays free ----------------------------------------------------------------


def test_the_event_loop_keeps_ticking_while_govern_reads_thousands_of_outcomes() -> None:
    with Sidecar.open("memory://") as warm:  # the first govern in a process imports scipy
        warm.record(warm.retrieved(["x"]), True)
        warm.govern()
    # 3000 outcomes over 300 memories, logged through the sidecar (no embedding, no ranking: quick
    # to make); half the memories fail more often, so govern has change detectors and proposals to run.
    sidecar = Sidecar.open("memory://", seed=1)
    ids = [f"m{i}" for i in range(300)]
    sidecar.register(ids)
    episodes = [sidecar.retrieved([ids[(i * 7 + j * 13) % 300] for j in range(4)]) for i in range(3000)]
    sidecar.store.record_many([(e, i % 3 != 0 if i % 300 < 150 else i % 5 == 0) for i, e in enumerate(episodes)])
    store = sidecar.store
    real = store.govern

    def slow_govern(**kwargs: Any) -> Any:
        """CPU-bound Python work first (as a larger log would need), so that the call lasts
        whatever the machine's speed (govern of 3000 outcomes alone can take 0.2 s)."""
        until = time.perf_counter() + 0.4
        while time.perf_counter() < until:
            pass
        return real(**kwargs)

    store.govern = slow_govern  # type: ignore[method-assign]

    async def run() -> tuple[float, float, list[float]]:
        async with AsyncMemoryStore(store) as asynced:  # its first govern reads the whole log
            ticks: list[float] = []
            done = asyncio.Event()

            async def heartbeat() -> None:
                while not done.is_set():
                    await asyncio.sleep(0.005)
                    ticks.append(time.perf_counter())

            ticking = asyncio.create_task(heartbeat())
            await asyncio.sleep(0.02)
            start = time.perf_counter()
            report = await asynced.govern()
            end = time.perf_counter()
            done.set()
            await ticking
            assert report.proposals  # it did the work
            return start, end, ticks

    # The loop ran while govern did: a tick landed between its start and its end, and more than
    # one. Had govern run on the loop, no tick could (the loop would be inside the call). Counted
    # in ticks, not in a share of the call's time, which a loaded machine's scheduler decides.
    start, end, ticks = asyncio.run(run())
    during = [t for t in ticks if start < t < end]
    assert len(during) >= 3, (len(during), end - start)


# -- many calls at once ---------------------------------------------------------------------


def watch_overlap(store: MemoryStore, names: tuple[str, ...], seen: dict[str, int]) -> None:
    """Wrap ``store``'s methods ``names`` to count the calls on it running at once (at most ``seen["most"]``)."""
    lock = threading.Lock()

    def wrap(method: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            with lock:
                seen["now"] += 1
                seen["most"] = max(seen["most"], seen["now"])
                seen["calls"] += 1
            try:
                return method(*args, **kwargs)
            finally:
                with lock:
                    seen["now"] -= 1

        return call

    def wrap_steps(method: Callable[..., Any]) -> Callable[..., Any]:
        def steps(*args: Any, **kwargs: Any) -> Any:  # from its first step to its last
            with lock:
                seen["now"] += 1
                seen["most"] = max(seen["most"], seen["now"])
                seen["calls"] += 1
            try:
                return (yield from method(*args, **kwargs))
            finally:
                with lock:
                    seen["now"] -= 1

        return steps

    for name in names:
        method = getattr(store, name)
        setattr(store, name, wrap_steps(method) if inspect.isgeneratorfunction(method) else wrap(method))


@pytest.mark.parametrize(("kind", "workers"), [("sqlite", 1), ("postgres", 1), ("postgres", 3)])
def test_fifty_concurrent_recalls_and_records_keep_the_counters_exact(
    kind: str, workers: int, tmp_path: Path, opened: list[MemoryStore]
) -> None:
    url = url_of(kind, tmp_path)

    async def run() -> tuple[Any, list[Any], list[dict[str, int]]]:
        asynced = await AsyncMemoryStore.open(url, encoder=HashingEncoder(), seed=5, workers=workers)
        opened.extend(asynced._targets)  # dropped (schema and all) after the test
        seen = [{"now": 0, "most": 0, "calls": 0} for _ in range(workers)]
        # a native store runs the calls' steps on the event loop (PostgreSQL), a threaded one the methods
        names = ("_recall_steps", "_record_steps_one") if asynced.native else ("recall", "record")
        assert asynced.native == (kind == "postgres")
        for store, counts in zip(asynced._targets, seen, strict=True):
            watch_overlap(store, names, counts)
        await asynced.add_many([{"text": f"note {i} on subject {i % 7}", "id": f"n{i}"} for i in range(30)])

        async def one(i: int) -> Any:
            recall = await asynced.recall(f"subject {i % 7}", k=3)
            await asynced.record(recall.episode, i % 4 != 0)
            return recall

        recalls = await asyncio.gather(*(one(i) for i in range(50)))
        replay = await asynced.replay()
        memories = await asynced.list()
        return replay, [recalls, memories], seen

    replay, (recalls, memories), seen = asyncio.run(run())
    assert len({r.episode.id for r in recalls}) == 50
    assert replay.consistent and replay.outcomes == 50
    assert all(len(r) == 3 for r in recalls)
    assert sum(m.counts.n for m in memories) == pytest.approx(150.0)  # each outcome counted once per memory
    credited = sum(item.weight for i, r in enumerate(recalls) if i % 4 != 0 for item in r.episode.items)
    assert sum(m.counts.success for m in memories) == pytest.approx(credited)
    assert all(s["most"] == 1 for s in seen)  # never two calls at once on one store object
    assert sum(s["calls"] for s in seen) == 100
    if workers > 1:
        assert sum(1 for s in seen if s["calls"]) > 1  # the pool shared the work


def test_a_pool_configures_every_store_object_under_one_version(tmp_path: Path, opened: list[MemoryStore]) -> None:
    async def run() -> None:
        asynced = await AsyncMemoryStore.open(url_of("postgres", tmp_path), encoder=HashingEncoder(), workers=2)
        opened.extend(asynced._targets)
        before = (await asynced.config())["version"]
        version = await asynced.configure({"recall.exploration": 0.0, "governance.theta_low": 0.3}, actor="ops")
        assert version == before + 1
        assert [s.exploration for s in asynced._targets] == [0.0, 0.0]
        assert [s.policy.theta_low for s in asynced._targets] == [0.3, 0.3]
        assert len(await asynced.settings_history()) == version
        await asynced.aclose()

    asyncio.run(run())


def test_a_second_worker_is_refused_on_sqlite_and_memory(tmp_path: Path) -> None:
    for url in (f"sqlite:///{tmp_path}/x.db", "memory://"):
        with pytest.raises(ValidationError) as err:
            asyncio.run(AsyncMemoryStore.open(url, workers=2))
        assert err.value.field == "workers" and "SQLite" in err.value.reason
    with pytest.raises(ValidationError) as err:
        asyncio.run(AsyncMemoryStore.open("memory://", workers=0))
    assert err.value.field == "workers"
    assert not (tmp_path / "x.db").exists()  # refused before anything was opened
    with pytest.raises(ValidationError) as err:
        AsyncMemoryStore()
    assert err.value.field == "stores"


# -- errors -------------------------------------------------------------------------------------


def test_errors_come_back_as_the_same_memworth_exceptions(kind: str, tmp_path: Path, opened: list[MemoryStore]) -> None:
    sync = open_store(kind, tmp_path, opened, "sync")
    wrapped = open_store(kind, tmp_path, opened, "async")
    calls: list[tuple[str, tuple[Any, ...], dict[str, Any], type[Exception]]] = [
        ("add", ("kept",), {"id": "a"}, type(None)),
        ("get", ("nope",), {}, UnknownMemoryError),
        ("add", ("",), {}, ValidationError),
        ("add", ("again",), {"id": "a"}, DuplicateError),
        ("record", ("no-such-episode", True), {}, UnknownEpisodeError),
        ("recall", ("q",), {"k": 0}, ValidationError),
        ("delete", ("a",), {"reason": "forget"}, type(None)),
        ("get", ("a",), {}, ErasedMemoryError),
    ]

    def outcome(fn: Callable[[], Any]) -> tuple[type, str]:
        try:
            fn()
        except Exception as exc:
            return type(exc), str(exc)
        return type(None), ""

    async def run() -> list[tuple[type, str]]:
        asynced = AsyncMemoryStore(wrapped)
        out = []
        for name, args, kwargs, _ in calls:
            try:
                await getattr(asynced, name)(*args, **kwargs)
                out.append((type(None), ""))
            except Exception as exc:
                out.append((type(exc), str(exc)))
        return out

    got = asyncio.run(run())
    for (name, args, kwargs, expected), answer in zip(calls, got, strict=True):
        assert answer == outcome(lambda: getattr(sync, name)(*args, **kwargs)), name  # noqa: B023
        assert answer[0] is expected, name


def test_a_closed_async_store_refuses_calls_and_closed_its_store(tmp_path: Path) -> None:
    async def run() -> MemoryStore:
        asynced = await AsyncMemoryStore.open(f"sqlite:///{tmp_path}/c.db", encoder=HashingEncoder())
        await asynced.add("x", id="x")
        await asynced.aclose()
        await asynced.aclose()  # twice is fine
        with pytest.raises(StoreError, match="closed"):
            await asynced.get("x")
        return asynced.store

    store = asyncio.run(run())
    with pytest.raises(Exception):  # noqa: B017 -- the store's own refusal, whatever the backend raises
        store.get("x")
    with MemoryStore.open(f"sqlite:///{tmp_path}/c.db", encoder=HashingEncoder()) as again:
        assert again.get("x").text == "x"


# -- cancellation -------------------------------------------------------------------------------


class GatedEncoder:
    """HashingEncoder that, once armed, signals ``entered`` and waits for ``release`` before encoding."""

    def __init__(self) -> None:
        self.inner = HashingEncoder()
        self.name, self.dimension = self.inner.name, self.inner.dimension
        self.armed = False
        self.entered, self.release = threading.Event(), threading.Event()

    def encode(self, texts: Any) -> Any:
        if self.armed:
            self.entered.set()
            assert self.release.wait(10)
        return self.inner.encode(texts)


def test_a_cancelled_write_is_whole_or_absent_never_half_done(
    kind: str, tmp_path: Path, opened: list[MemoryStore]
) -> None:
    encoder = GatedEncoder()
    store = MemoryStore.open(url_of(kind, tmp_path), encoder=encoder, clock=clock)
    opened.append(store)

    async def run() -> tuple[BaseException | None, BaseException | None, list[str]]:
        asynced = AsyncMemoryStore(store)
        encoder.armed = True
        running = asyncio.create_task(asynced.add_many([{"text": f"t{i}", "id": f"r{i}"} for i in range(20)]))
        await asyncio.to_thread(encoder.entered.wait, 10)  # the thread is inside the write
        waiting = asyncio.create_task(asynced.add("never", id="never"))  # queued behind it
        await asyncio.sleep(0.01)
        running.cancel()
        waiting.cancel()
        results = await asyncio.gather(running, waiting, return_exceptions=True)
        encoder.armed = False
        encoder.release.set()
        ids = [m.id for m in await asynced.list()]  # runs after the cancelled write finished
        return results[0], results[1], ids

    first, second, ids = asyncio.run(run())
    assert isinstance(first, asyncio.CancelledError) and isinstance(second, asyncio.CancelledError)
    assert sorted(ids) == sorted(f"r{i}" for i in range(20))  # begun: made whole, answer dropped
    assert "never" not in ids  # not begun: never made
    assert store.replay().consistent


def test_an_open_cancelled_midway_leaves_nothing_open(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    entered, release = threading.Event(), threading.Event()
    made: list[MemoryStore] = []
    real_open = MemoryStore.open

    def slow_open(url: str, **settings: Any) -> MemoryStore:
        entered.set()
        assert release.wait(10)
        made.append(real_open(url, **settings))
        return made[-1]

    monkeypatch.setattr(MemoryStore, "open", slow_open)

    async def run() -> None:
        opening = asyncio.create_task(AsyncMemoryStore.open(f"sqlite:///{tmp_path}/o.db", encoder=HashingEncoder()))
        await asyncio.to_thread(entered.wait, 10)
        opening.cancel()
        with pytest.raises(asyncio.CancelledError):
            await opening
        release.set()

    asyncio.run(run())

    def closed(store: MemoryStore) -> bool:
        try:
            store.list()
        except Exception:
            return True
        return False

    for _ in range(500):  # the thread finishes opening, then closes what it opened
        if made and closed(made[0]):
            break
        time.sleep(0.01)
    assert made and closed(made[0])
