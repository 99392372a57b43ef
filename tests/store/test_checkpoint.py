"""A namespace's followed history is saved (its checkpoint) so that a new store object reads
only the outcomes logged after it (issue 13 item 4). Whatever it loads, a store object's
answers equal those of one that reads the whole log from scratch, on every backend."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest

from memworth import HashingEncoder, MemoryStore, Sidecar
from memworth.counts import Counts
from memworth.governance import GovernancePolicy
from memworth.signals.coretrieval import AlarmSplitter
from memworth.signals.outcome_streams import NamespaceScan
from memworth.store import checkpoint
from memworth.store.followed import Followed
from tests.store.test_following import IDS, _feed, _same_streams


@pytest.fixture
def every_govern(monkeypatch: pytest.MonkeyPatch) -> None:
    """govern() writes a checkpoint whenever anything is new (the default waits for 1,000 outcomes)."""
    monkeypatch.setattr(checkpoint, "CHECKPOINT_EVERY", 1)
    monkeypatch.setattr(checkpoint, "CHECKPOINT_SHARE", 0.0)


def _reads(store: MemoryStore) -> list[int]:
    """Record the ``after`` of every history read the store's backend is asked for."""
    seen: list[int] = []
    read = store.backend.history

    def history(namespace: str, after: int = 0) -> Any:
        seen.append(after)
        return read(namespace, after)

    store.backend.history = history  # type: ignore[method-assign]
    return seen


def _answers(store: MemoryStore, namespace: str = "default") -> dict[str, Any]:
    """Everything governance reads of the followed history, as one store object answers it."""
    return {
        "streams": store.outcome_streams(namespace),
        "proposals": store.proposals(namespace=namespace),
        "recent": store.recent_counts(namespace),
        "recent_5": store.recent_counts(namespace, window=5),
        "guard": store.holdout_guard(namespace=namespace),
        "lift": store.holdout_report(namespace=namespace),
        "bursts": store.burst_alerts(namespace=namespace),
        "pairs": store.episode_stats(namespace).episodes,
        "live": dict(store._live[namespace].statistics()) if namespace in store._live else None,
    }


def _same(got: dict[str, Any], want: dict[str, Any]) -> None:
    _same_streams(got.pop("streams"), want.pop("streams"))
    assert got == want


@contextmanager
def _opened(url: str, **settings: Any) -> Iterator[MemoryStore]:
    store = MemoryStore.open(url, encoder=HashingEncoder(), **settings)  # the kept settings otherwise
    try:
        yield store
    finally:
        store.close()


def _scratch(url: str, namespace: str = "default", **settings: Any) -> dict[str, Any]:
    """The answers of a store object that ignores every checkpoint and reads the whole log."""
    with _opened(url, **settings) as store:
        store.backend.load_checkpoint = lambda namespace: None  # type: ignore[method-assign]
        reads = _reads(store)
        out = _answers(store, namespace)
        assert reads[0] == 0
        return out


def _filled(make_store: Callable[..., MemoryStore], backend_kind: str) -> MemoryStore:
    if backend_kind == "memory":
        pytest.skip("an in-memory store is one store object: nothing to resume")
    store = make_store(seed=0, exploration=0.0, holdout=0.2)
    store.add_many([{"id": mid, "text": f"memory {mid}"} for mid in IDS])
    rng = np.random.default_rng(11)
    _feed(store, "default", 150, rng, broken=False)
    _feed(store, "default", 100, rng, broken=True)
    assert store.govern(apply=True).applied  # standings change too; the checkpoint is written
    return store


@pytest.mark.usefixtures("every_govern")
def test_a_new_store_object_resumes_from_the_checkpoint(
    make_store: Callable[..., MemoryStore], backend_kind: str
) -> None:
    first = _filled(make_store, backend_kind)
    saved = first._followed["default"]
    assert saved.saved == len(saved) == 250 and first.backend.load_checkpoint("default") is not None
    url = _url(first)
    with _opened(url, ablation=AlarmSplitter(share=1.0, seed=0)) as second:
        reads = _reads(second)
        got = _answers(second)
        assert reads[0] == saved.last_seq  # only the outcomes after the checkpoint were asked for
        resumed = second._followed["default"]
        assert resumed.scan is not None and resumed.saved == 250  # the detectors came with it
    assert max(s.reading.statistic for s in got["streams"].values()) > 0 and max(got["live"].values()) > 0
    _same(got, _scratch(url, ablation=AlarmSplitter(share=1.0, seed=0)))


@pytest.mark.usefixtures("every_govern")
def test_outcomes_another_client_logged_after_the_checkpoint_are_read_as_a_tail(
    make_store: Callable[..., MemoryStore], backend_kind: str
) -> None:
    first = _filled(make_store, backend_kind)
    url = _url(first)
    last = first._followed["default"].last_seq
    with _opened(url) as other:
        _feed(other, "default", 70, np.random.default_rng(12), broken=True)
    with _opened(url) as third:
        reads = _reads(third)
        got = _answers(third)
        assert reads[0] == last and len(third._followed["default"]) == 320
    _same(got, _scratch(url))


@pytest.mark.usefixtures("every_govern")
def test_after_a_settings_change_the_detectors_run_again_over_the_saved_columns(
    make_store: Callable[..., MemoryStore], backend_kind: str
) -> None:
    first = _filled(make_store, backend_kind)
    url = _url(first)
    first.configure({"governance.change_threshold": 6.0})
    with _opened(url) as second:
        reads = _reads(second)
        got = _answers(second)
        assert reads[0] == first._followed["default"].last_seq  # the columns were used, the scan was not
        assert second.policy.change_threshold == 6.0
        assert got["streams"]["m0"].reading.threshold == 6.0
    _same(got, _scratch(url))


@pytest.mark.usefixtures("every_govern")
def test_a_damaged_checkpoint_is_not_used(make_store: Callable[..., MemoryStore], backend_kind: str) -> None:
    first = _filled(make_store, backend_kind)
    url = _url(first)
    data = bytearray(first.backend.load_checkpoint("default") or b"")
    data[len(data) // 2] ^= 0xFF
    first.backend.save_checkpoint("default", bytes(data))
    with _opened(url) as second:
        reads = _reads(second)
        got = _answers(second)
        assert reads[0] == 0  # read in full
    _same(got, _scratch(url))


@pytest.mark.usefixtures("every_govern")
def test_a_checkpoint_the_log_disagrees_with_is_not_used(
    make_store: Callable[..., MemoryStore], backend_kind: str
) -> None:
    """A checkpoint that missed an outcome (one that committed after a later-numbered one was
    read) holds fewer outcomes up to its last number than the log: the history is read again."""
    first = _filled(make_store, backend_kind)
    url = _url(first)
    rows = first.backend.history("default")
    followed = Followed()
    followed.extend(rows[:100] + rows[101:])  # outcome 101 committed after its successors were read
    with _opened(url) as other:  # before the bad checkpoint: a store object's first record saves a good one
        _feed(other, "default", 30, np.random.default_rng(13), broken=True)
    first.backend.save_checkpoint("default", checkpoint.encode("default", followed))
    with _opened(url) as second:
        reads = _reads(second)
        got = _answers(second)
        assert reads[:2] == [followed.last_seq, 0]
        assert len(second._followed["default"]) == 280
    _same(got, _scratch(url))


@pytest.mark.usefixtures("every_govern")
@pytest.mark.parametrize("operation", ["erase", "replay"])
def test_erasure_and_replay_apply_drop_the_checkpoint(
    make_store: Callable[..., MemoryStore], backend_kind: str, operation: str
) -> None:
    first = _filled(make_store, backend_kind)
    url = _url(first)
    if operation == "erase":
        first.delete("m3", reason="asked to")
    else:
        first.backend.write_counts("default", {"m1": Counts(1.0, 0.0, 1.0)})
        assert first.replay(apply=True).applied
    assert first.backend.load_checkpoint("default") is None and "default" not in first._followed
    with _opened(url) as second:
        reads = _reads(second)
        got = _answers(second)
        assert reads[0] == 0
    _same(got, _scratch(url))
    first.govern()
    assert first.backend.load_checkpoint("default") is not None  # written again from the log


def test_govern_writes_a_checkpoint_once_enough_is_new(
    store: MemoryStore, backend_kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(checkpoint, "CHECKPOINT_EVERY", 100)
    store.add_many([{"id": mid, "text": f"memory {mid}"} for mid in IDS])
    rng = np.random.default_rng(14)
    _feed(store, "default", 60, rng, broken=False)
    store.govern()
    assert store.backend.load_checkpoint("default") is None  # 60 new: not yet
    _feed(store, "default", 60, rng, broken=False)
    store.proposals()
    assert store.backend.load_checkpoint("default") is None  # only govern() writes
    store.govern()
    if backend_kind == "memory":  # one store object: nothing could resume, so nothing is written
        assert store._followed["default"].saved == 0 and store.backend.load_checkpoint("default") is None
        return
    assert store._followed["default"].saved == 120 and store.backend.load_checkpoint("default") is not None


def test_the_first_record_of_a_store_object_leaves_a_checkpoint_for_the_next(
    make_store: Callable[..., MemoryStore], backend_kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A process that records and never governs (each `memworth record`, an ingest worker)
    # scans the namespace's log at its first record to start the live change statistics;
    # without a checkpoint the next such process scans the whole log again.
    if backend_kind == "memory":
        pytest.skip("an in-memory store is one store object: nothing to resume")
    monkeypatch.setattr(checkpoint, "CHECKPOINT_EVERY", 100)
    first = make_store(seed=0, exploration=0.0)
    first.add_many([{"id": mid, "text": f"memory {mid}"} for mid in IDS])
    rng = np.random.default_rng(21)
    _feed(first, "default", 150, rng, broken=False)
    assert first.backend.load_checkpoint("default") is None  # its first record scanned an empty log
    with _opened(first.backend.url) as second:
        assert isinstance(second.ablation, AlarmSplitter)
        _feed(second, "default", 10, rng, broken=True)  # its first record scans 150 outcomes
        assert second.backend.load_checkpoint("default") is not None
        assert second._followed["default"].saved == 150  # what it read before its own outcomes
    with _opened(first.backend.url) as third:
        reads = _reads(third)
        _feed(third, "default", 5, rng, broken=True)
        assert reads and reads[0] > 0  # it resumed from the checkpoint: no read from the start
        _same(_answers(third), _scratch(first.backend.url))


@pytest.mark.usefixtures("every_govern")
def test_a_checkpoint_the_backend_cannot_save_does_not_fail_govern(
    store: MemoryStore, backend_kind: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from memworth.errors import UnavailableError

    if backend_kind == "memory":
        pytest.skip("an in-memory store writes no checkpoint (see the test above)")

    store.add_many([{"id": mid, "text": f"memory {mid}"} for mid in IDS])
    _feed(store, "default", 50, np.random.default_rng(18), broken=False)

    def down(namespace: str, data: bytes) -> None:
        raise UnavailableError("the database is down")

    with monkeypatch.context() as patched:
        patched.setattr(store.backend, "save_checkpoint", down)
        want = store.proposals()
        assert store.govern().proposals == [p for p in want.values() if p is not None]
        assert "not saved" in caplog.text and store._followed["default"].saved == 0  # tried again next time
    store.govern()
    assert store.backend.load_checkpoint("default") is not None


def test_the_rule_for_writing_keeps_the_cost_per_outcome_flat() -> None:
    assert not checkpoint.due(999, 0) and checkpoint.due(1000, 0)
    assert not checkpoint.due(150_000, 149_000) and checkpoint.due(200_000, 198_000)  # 1% of a long log


def _followed_of(store: MemoryStore) -> Followed:
    store.outcome_streams()
    return store._followed["default"]


def test_a_checkpoint_round_trips_and_refuses_damage() -> None:
    store = MemoryStore.open("memory://", encoder=HashingEncoder(), seed=0, exploration=0.0)
    store.add_many([{"id": mid, "text": f"memory {mid}"} for mid in IDS])
    _feed(store, "default", 120, np.random.default_rng(15), broken=True)
    helper = Sidecar(store)
    store.record(helper.retrieved(["m1", "m2", "m3"], weights=[0.5, 0.3, 0.2], query="weighted"), True)
    followed = _followed_of(store)
    data = checkpoint.encode("default", followed)
    back = checkpoint.decode("default", data, store.policy)
    assert back.partial  # the head holds no outcome in full: each is loaded when read
    assert back.ids == followed.ids and back.contexts == followed.contexts and back.credits == followed.credits
    for name, column in followed.columns().items():
        assert np.array_equal(back.columns()[name], column), name
    assert not back.partial and [list(a) for a in back.positions] == [list(a) for a in followed.positions]
    assert back.scan is not None and back.scanned == len(back) == len(followed)
    _same_streams(back.scan.read().streams, followed.scan.read().streams)  # type: ignore[union-attr]
    assert back.recent(5) == followed.recent(5)
    other = checkpoint.decode("default", data, GovernancePolicy(change_threshold=6.0))
    assert other.scan is None and other.scanned == 0  # another policy: the detectors run again
    damaged = [
        b"",
        b"not a checkpoint at all",
        data[:-10],
        data[:30] + bytes([data[30] ^ 1]) + data[31:],
        checkpoint.MAGIC + (checkpoint.FORMAT + 1).to_bytes(4, "big") + data[len(checkpoint.MAGIC) + 4 :],
    ]
    for bad in damaged:
        with pytest.raises(ValueError):
            checkpoint.decode("default", bad, store.policy)
    with pytest.raises(ValueError, match="namespace"):
        checkpoint.decode("elsewhere", data, store.policy)


@pytest.mark.parametrize("outcomes", [0, 1, 40])
def test_a_checkpoint_without_contexts_or_outcomes_round_trips(outcomes: int) -> None:
    store = MemoryStore.open("memory://", encoder=HashingEncoder(), seed=0, exploration=0.0)
    store.add_many([{"id": mid, "text": f"memory {mid}"} for mid in IDS])
    helper = Sidecar(store)
    for t in range(outcomes):
        store.record(helper.retrieved(IDS[t % 4 : t % 4 + 2], query=f"q{t}"), t % 3 > 0)
    followed = _followed_of(store)
    back = checkpoint.decode("default", checkpoint.encode("default", followed), store.policy)
    assert len(back) == outcomes and back.contexts == [] and back.ids == followed.ids
    assert back.recent(20) == followed.recent(20) and back.scan is not None
    _same_streams(back.scan.read().streams, followed.scan.read().streams)  # type: ignore[union-attr]


def test_a_memory_listed_twice_in_an_episode_counts_once_in_the_row_index_and_the_scan() -> None:
    from memworth.store.records import Episode, EpisodeItem, OutcomeRow

    rng = np.random.default_rng(17)
    rows = []
    for t in range(200):
        picked = [f"m{int(i)}" for i in rng.integers(0, 6, size=4)]  # repeats within an episode
        items = tuple(EpisodeItem(mid, float(w), 1.0, pos) for pos, (mid, w) in enumerate(zip(picked, rng.random(4), strict=True)))
        rows.append(
            (
                OutcomeRow(f"e{t}", bool(t % 3), "agent", 1.0, float(t), t + 1),
                Episode(f"e{t}", "d", "q", None, 0.0, items),
            )
        )
    followed = Followed()
    followed.extend(rows)
    distinct = [list(dict.fromkeys(followed.memory_ids(i))) for i in range(200)]
    assert [len(a) for a in followed.positions] == [sum(mid in d for d in distinct) for mid in followed.ids]
    shared = NamespaceScan(GovernancePolicy(), columns=followed)  # reads the history's columns
    alone = NamespaceScan(GovernancePolicy())  # its own columns, each memory once an episode
    alone.advance(distinct, np.frombuffer(followed.won, dtype=np.int8).astype(bool), np.ones(200))
    _same_streams(shared.read().streams, alone.read().streams)
    back = checkpoint.decode("d", checkpoint.encode("d", followed), GovernancePolicy())
    back.whole()
    assert [list(a) for a in back.positions] == [list(a) for a in followed.positions]
    assert back.recent(7) == followed.recent(7)


def test_the_columns_hold_much_less_than_rows() -> None:
    store = MemoryStore.open("memory://", encoder=HashingEncoder(), seed=0, exploration=0.0)
    store.add_many([{"id": mid, "text": f"memory {mid}"} for mid in IDS])
    _feed(store, "default", 300, np.random.default_rng(16), broken=False)
    followed = _followed_of(store)
    n = len(followed)
    assert followed.nbytes() == 8 + n * (46 + 3 * 16)  # 46 bytes an outcome, 16 a retrieved memory (1 KB as rows)


def _url(store: MemoryStore) -> str:
    """The store's URL as it was opened (a PostgreSQL backend's ``url`` hides the password;
    the test servers have none)."""
    return str(store.backend.url)


class _Clock:
    """A minute a call: a long log spans many burst windows."""

    def __init__(self) -> None:
        self.now = 1.7e9

    def __call__(self) -> float:
        self.now += 60.0
        return self.now


def _plain_feed(store: MemoryStore, episodes: int, rng: np.random.Generator, ids: list[str]) -> None:
    """Episodes of 3 of ``ids`` without context labels; the first id is retrieved only at first
    (a rare memory) and ``ids[1]`` stops working half-way."""
    helper = Sidecar(store)
    batch = []
    for t in range(episodes):
        picked = [ids[int(i)] for i in rng.choice(np.arange(1, len(ids)), size=3, replace=False)]
        if t < 4:
            picked[0] = ids[0]
        rate = 0.05 if ids[1] in picked and t > episodes // 2 else 0.75
        batch.append((helper.retrieved(picked, query=f"q{t}").id, bool(rng.random() < rate)))
        if len(batch) == 5:  # recorded a while apart
            store.record_many(batch)
            batch = []
    if batch:
        store.record_many(batch)


def test_a_cold_govern_reads_only_the_checkpoints_head_and_equals_a_full_read(
    make_store: Callable[..., MemoryStore], backend_kind: str
) -> None:
    """The head keeps each memory's last retrievals and the burst window's outcomes: a new
    store object governs from it (and from a tail past it) without loading the rest, and
    every answer equals a full read; reading more (episode statistics) loads the rest."""
    if backend_kind == "memory":
        pytest.skip("an in-memory store is one store object: nothing to resume")
    ids = [f"m{i}" for i in range(30)]
    clock = _Clock()
    settings: dict[str, Any] = {"seed": 0, "exploration": 0.0, "holdout": 0.2}
    first = make_store(clock=clock, **settings)
    first.add_many([{"id": mid, "text": f"memory {mid}"} for mid in ids])
    _plain_feed(first, 1500, np.random.default_rng(21), ids)
    first.govern()  # 1,500 new outcomes: the checkpoint is written
    url = _url(first)
    with _opened(url, clock=clock, **settings) as other:  # outcomes past the checkpoint
        _plain_feed(other, 40, np.random.default_rng(22), ids)
    end = clock.now
    settings["clock"] = lambda: end
    with _opened(url, **settings) as second:
        reads = _reads(second)
        report = second.govern()
        followed = second._followed["default"]
        assert reads == [first._followed["default"].last_seq]  # one read of the log, the tail only
        assert followed.loads == 0 and followed.partial and len(followed) == 1540
        assert len(followed.starts) - 1 < 1000  # most outcomes were never loaded
        reads.clear()
        second.proposals()
        assert reads == [followed.last_seq]  # one read for every part of the decision
        streams = second.outcome_streams()
        assert followed.loads == 0 and len(streams["m0"]) == 8 and len(streams["m1"]) > 100  # m0: 4 episodes of each feed
        got = _answers(second)  # reads every stream's arrays and the episode statistics
        assert followed.loads == 1 and not followed.partial
    with _opened(url, **settings) as scratch:
        scratch.backend.load_checkpoint = lambda namespace: None  # type: ignore[method-assign]
        assert scratch.govern().proposals == report.proposals
        assert any(p.memory_id == "m1" for p in report.proposals)
    _same(got, _scratch(url, **settings))


def test_a_lazy_stream_pickles_and_reads_as_the_stream_it_stands_for() -> None:
    import pickle

    from memworth.signals.change_detection import OutcomeStream

    store = MemoryStore.open("memory://", encoder=HashingEncoder(), seed=0, exploration=0.0)
    store.add_many([{"id": mid, "text": f"memory {mid}"} for mid in IDS])
    _plain_feed(store, 200, np.random.default_rng(23), IDS)
    lazy = store.outcome_streams()["m1"]
    back = pickle.loads(pickle.dumps(lazy))
    assert type(back) is OutcomeStream and len(back) == len(lazy) == back.episode.size
    for name in ("success", "weight", "reference", "episode"):
        assert np.array_equal(getattr(back, name), getattr(lazy, name)), name
    assert back.reading == lazy.reading and back.change_alarm == lazy.change_alarm
