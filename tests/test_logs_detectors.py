"""memworth score --state keeps the change detectors: increments advance them over new episodes only,
and every column, class and proposal equals one run over all the files (change detection on)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from memworth.governance import GovernancePolicy
from memworth.logs import ScoreSettings, score_files
from memworth.logs.state import VERSION, Counting
from memworth.signals.outcome_streams import NamespaceScan

duckdb = pytest.importorskip("duckdb")

APPROX = ("decayed_success", "decayed_failure", "decayed_n", "decayed_worth")
"""Columns compared to 1e-9 relative: decay factors are not exact binary fractions, so their
sums differ in the last bits with the order SQL adds them in. Everything else is compared to
the bit: every credit here is 1/4 of a confidence of 1 or 1/2, so the plain sums are exact in
any order and a difference could only come from the detectors or the rules."""


def write_part(
    path: object, first: int, count: int, seed: int, *, namespace: str = "default", late: bool = False
) -> None:
    """Episodes ``first`` .. ``first + count - 1`` (timestamps = episode number): 4 of 30 memories
    each, 70% success; memory m3 fails from episode 250 on; ``late`` puts memory "new-*" in place
    of the fourth, which fails often; contexts "a"/"b" and confidences 1 / 0.5 alternate."""
    rng = np.random.default_rng(seed)
    rows: dict[str, list[object]] = {
        k: [] for k in ("episode_id", "memory_id", "outcome", "timestamp", "confidence", "context", "namespace")
    }
    for e in range(first, first + count):
        ids = [f"m{m}" for m in rng.permutation(30)[:4]]
        ok = bool(rng.random() < 0.7) and not ("m3" in ids and e >= 250)
        if late:
            ids[-1] = f"new-{e % 3}"
            ok = ok and e % 3 != 0
        for mid in ids:
            rows["episode_id"].append(f"{namespace}-e{e}")
            rows["memory_id"].append(mid)
            rows["outcome"].append("success" if ok else "failure")
            rows["timestamp"].append(1_700_000_000.0 + e)
            rows["confidence"].append(1.0 if e % 2 else 0.5)
            rows["context"].append("a" if e % 4 < 2 else "b")
            rows["namespace"].append(namespace)
    pq.write_table(pa.table(rows), str(path))


def parts(tmp_path) -> list[str]:
    """Four increments; the third brings memories never seen before."""
    spans = [(0, 200, False), (200, 150, False), (350, 120, True), (470, 130, False)]
    paths = []
    for i, (first, count, late) in enumerate(spans):
        path = tmp_path / f"part-{i}.parquet"
        write_part(path, first, count, seed=i, late=late)
        paths.append(str(path))
    return paths


def in_state(path: object, *statements: str) -> object:
    """Run ``statements`` on a kept score state file, in order; the last one's first row."""
    import duckdb

    con = duckdb.connect(str(path))
    try:
        found = None
        for sql in statements:
            found = con.execute(sql).fetchone()
        return found
    finally:
        con.close()


def assert_same(got_table: pa.Table, want_table: pa.Table) -> None:
    got = {(r["namespace"], r["memory_id"]): r for r in got_table.to_pylist()}
    want = {(r["namespace"], r["memory_id"]): r for r in want_table.to_pylist()}
    assert list(got) == list(want)
    for key, row in want.items():
        for column, value in row.items():
            if column in APPROX:
                assert got[key][column] == pytest.approx(value, rel=1e-9, abs=1e-12), (key, column)
            else:
                assert got[key][column] == value, (key, column)


def advanced_episodes(monkeypatch) -> list[int]:
    """Record how many episodes each NamespaceScan.advance call is given."""
    calls: list[int] = []
    original = NamespaceScan.advance

    def counting(self, sets, success, confidence, contexts=None):  # type: ignore[no-untyped-def]
        calls.append(len(sets))
        return original(self, sets, success, confidence, contexts)

    monkeypatch.setattr(NamespaceScan, "advance", counting)
    return calls


def test_several_increments_equal_one_run_and_read_only_new_episodes(tmp_path, monkeypatch) -> None:
    files = parts(tmp_path)
    settings = ScoreSettings(Counting("uniform", 0.0, 40.0))
    whole = score_files(files, settings)
    rows = whole.table.to_pylist()
    assert any(r["change_alarm"] for r in rows) and any(r["action"] for r in rows)
    assert any(r["memory_id"].startswith("new-") and r["change_statistic"] > 0 for r in rows)
    state = tmp_path / "state.duckdb"
    calls = advanced_episodes(monkeypatch)
    sizes = [200, 150, 120, 130]
    for i in range(len(files)):
        calls.clear()
        run = score_files(files[: i + 1], settings, state=state)
        assert calls == [sizes[i]]  # the kept detectors advance over the new episodes only
        assert_same(run.table, score_files(files[: i + 1], settings).table)
    assert_same(run.table, whole.table)
    calls.clear()
    again = score_files(files, settings, state=state)  # nothing new: nothing advanced, same table
    assert calls == [] and again.files_read == []
    assert_same(again.table, whole.table)


def test_kept_detectors_equal_a_scan_of_the_whole_kept_log(tmp_path) -> None:
    from memworth.logs.detectors import follow
    from memworth.logs.streams import namespace_rows, recent_counts, streams_of

    files = parts(tmp_path)
    policy = GovernancePolicy()
    state = tmp_path / "state.duckdb"
    for i in range(len(files)):
        score_files(files[: i + 1], ScoreSettings(policy=policy), state=state)
    con = duckdb.connect(str(state))
    try:
        scan, read = follow(con, "default", policy)
        whole = streams_of(namespace_rows(con, "default"), policy, recent_counts(con, "default", 20))
    finally:
        con.close()
    assert read == 600 and scan.episodes == 600
    kept = scan.read()
    assert kept.ids == whole.ids and kept.held == whole.held and whole.state is not None
    for name in ("statistic", "observations", "successes", "expected", "since", "first_alarm"):
        np.testing.assert_array_equal(getattr(kept.state, name), getattr(whole.state, name))
    assert kept.streams.keys() == whole.streams.keys()
    for mid, stream in whole.streams.items():
        other = kept.streams[mid]
        for field in ("success", "weight", "reference", "episode"):
            np.testing.assert_array_equal(getattr(other, field), getattr(stream, field))
        assert (other.context, other.reading, other.explained_by) == (
            stream.context,
            stream.reading,
            stream.explained_by,
        )


def test_state_without_kept_detectors_is_read_once_then_upgraded(tmp_path, monkeypatch) -> None:
    """A version 1 state (counts and the episode log, no detectors) and a run with detection off
    both leave the detectors behind; the next run catches up over the kept log, once."""
    files = parts(tmp_path)
    state = tmp_path / "state.duckdb"
    score_files(files[:2], ScoreSettings(policy=GovernancePolicy(change_detection=False)), state=state)
    con = duckdb.connect(str(state))
    try:
        assert con.execute("SELECT count(*) FROM scans").fetchall() == [(0,)]
        for table in ("scans", "scan_memories", "scan_shared", "scan_references"):  # as a version 1 file was
            con.execute(f"DROP TABLE {table}")
        con.execute("DELETE FROM settings WHERE key = 'version'")
    finally:
        con.close()
    calls = advanced_episodes(monkeypatch)
    run = score_files(files[:3], ScoreSettings(), state=state)
    assert calls == [470]  # everything kept, once
    assert_same(run.table, score_files(files[:3], ScoreSettings()).table)
    con = duckdb.connect(str(state))
    try:
        assert con.execute("SELECT value FROM settings WHERE key = 'version'").fetchall() == [(str(VERSION),)]
        assert con.execute("SELECT episodes FROM scans").fetchall() == [(470,)]
    finally:
        con.close()
    calls.clear()
    run = score_files(files, ScoreSettings(), state=state)
    assert calls == [130]
    assert_same(run.table, score_files(files, ScoreSettings()).table)


def test_other_detector_settings_start_the_detectors_again(tmp_path, monkeypatch) -> None:
    files = parts(tmp_path)
    state = tmp_path / "state.duckdb"
    score_files(files[:2], ScoreSettings(), state=state)
    calls = advanced_episodes(monkeypatch)
    other = ScoreSettings(policy=GovernancePolicy(change_threshold=6.0, change_reference_half_life=20.0))
    run = score_files(files[:3], other, state=state)
    assert calls == [470]
    assert_same(run.table, score_files(files[:3], other).table)


def test_saved_detectors_that_do_not_fit_the_kept_log_are_read_again(tmp_path, monkeypatch) -> None:
    files = parts(tmp_path)
    state = tmp_path / "state.duckdb"
    score_files(files[:2], ScoreSettings(), state=state)
    con = duckdb.connect(str(state))
    con.execute("DELETE FROM scan_memories WHERE memory_id = 'm3'")  # a memory lost from the saved scan
    con.close()
    calls = advanced_episodes(monkeypatch)
    run = score_files(files[:3], ScoreSettings(), state=state)
    assert calls == [470]
    assert_same(run.table, score_files(files[:3], ScoreSettings()).table)


def test_detectors_saved_before_credit_0_items_were_left_out_are_read_again(tmp_path, monkeypatch) -> None:
    """A scan saved by a memworth that read credit-0 items as observations (its settings do not
    name the rule) may hold such observations: it is not resumed, the kept log is read again."""
    from memworth.logs.detectors import settings_of
    from memworth.logs.streams import CREDITED

    files = parts(tmp_path)
    state = tmp_path / "state.duckdb"
    score_files(files[:2], ScoreSettings(), state=state)
    before = settings_of(GovernancePolicy()).removesuffix(f" observations={CREDITED!r}")
    assert before != settings_of(GovernancePolicy())
    con = duckdb.connect(str(state))
    con.execute("UPDATE scans SET detector = ?", [before])
    con.close()
    calls = advanced_episodes(monkeypatch)
    run = score_files(files[:3], ScoreSettings(), state=state)
    assert calls == [470]
    assert_same(run.table, score_files(files[:3], ScoreSettings()).table)


def test_increment_interleaving_kept_outcomes_is_refused_and_state_kept(tmp_path) -> None:
    """An earlier outcome moves the namespace's reference rate for every later episode, and so
    every memory's CUSUM there: refused (rescore from scratch), the state untouched. Another
    namespace's outcomes keep their own clock and are taken."""
    files = parts(tmp_path)
    state = tmp_path / "state.duckdb"
    score_files(files[:2], ScoreSettings(), state=state)
    before = state.read_bytes()
    rows = pq.read_table(files[2]).to_pylist()
    for r in rows:  # every other episode of the increment is older than the newest kept one
        if int(r["episode_id"].split("-e")[1]) % 2:
            r["timestamp"] -= 200.5
    pq.write_table(pa.Table.from_pylist(rows), str(tmp_path / "mixed.parquet"))
    with pytest.raises(Exception, match=r"mixed\.parquet, row 5: .*older than the newest outcome in the state"):
        score_files([*files[:2], str(tmp_path / "mixed.parquet")], ScoreSettings(), state=state)
    assert state.read_bytes() == before
    write_part(tmp_path / "other.parquet", 0, 100, seed=9, namespace="other")
    both = [*files[:2], str(tmp_path / "other.parquet")]
    assert_same(score_files(both, ScoreSettings(), state=state).table, score_files(both, ScoreSettings()).table)


def test_state_from_a_newer_memworth_is_refused(tmp_path) -> None:
    files = parts(tmp_path)
    state = tmp_path / "state.duckdb"
    score_files(files[:1], ScoreSettings(), state=state)
    con = duckdb.connect(str(state))
    con.execute("UPDATE settings SET value = '99' WHERE key = 'version'")
    con.close()
    with pytest.raises(Exception, match="state version 99"):
        score_files(files[:2], ScoreSettings(), state=state)


@pytest.mark.parametrize("chunk", [1, 7, 64])
def test_detectors_advanced_chunk_by_chunk_equal_one_pass(tmp_path, monkeypatch, chunk) -> None:
    """The kept log is handed to the detectors a chunk of episodes at a time (so a large log's
    items are never all Python objects at once): any chunk size gives the one-pass scan, also
    with memories first retrieved mid-chunk and at a chunk's edge (the third part brings new ones)."""
    import memworth.logs.detectors as detectors
    from memworth.logs.detectors import follow
    from memworth.logs.streams import namespace_rows, recent_counts, streams_of

    files = parts(tmp_path)
    settings = ScoreSettings(Counting("uniform", 0.0, 40.0))
    whole = score_files(files, settings)
    calls = advanced_episodes(monkeypatch)
    monkeypatch.setattr(detectors, "_ADVANCE_EPISODES", chunk)
    chunked = score_files(files, settings)
    assert calls == [chunk] * (600 // chunk) + ([600 % chunk] if 600 % chunk else [])
    assert chunked.table.equals(whole.table)
    assert_same(chunked.table, whole.table)
    state = tmp_path / "state.duckdb"
    score_files(files[:2], settings, state=state)
    score_files(files, settings, state=state)  # resumed at episode 350, then chunked
    con = duckdb.connect(str(state))
    try:
        con.execute("DELETE FROM scans")  # the next follow scans the whole kept log, chunk by chunk
        scan, read = follow(con, "default", settings.policy)
        one = streams_of(namespace_rows(con, "default"), settings.policy, recent_counts(con, "default", 20))
    finally:
        con.close()
    got = scan.read()
    assert read == 0 and got.ids == one.ids and got.held == one.held and one.state is not None
    for name in ("statistic", "observations", "successes", "expected", "since", "first_alarm", "watched"):
        np.testing.assert_array_equal(getattr(got.state, name), getattr(one.state, name))
    for mid, stream in one.streams.items():
        for field in ("success", "weight", "reference", "episode"):
            np.testing.assert_array_equal(getattr(got.streams[mid], field), getattr(stream, field))
