"""memworth score on DuckDB: counts equal the Tracker's, incremental runs equal one run, outputs."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from memworth import Tracker
from memworth.cli import main
from memworth.governance import GovernancePolicy
from memworth.logs import ColumnMap, ScoreSettings, score_files
from memworth.logs.state import Counting

pytest.importorskip("duckdb")


def episodes(seed: int = 0, count: int = 600, k: int = 4, memories: int = 40, start: int = 0) -> dict[str, np.ndarray]:
    """Random episodes: ids (count, k), scores, outcomes; memory 3 starts failing halfway."""
    rng = np.random.default_rng(seed)
    ids = np.argsort(rng.random((count, memories)), axis=1)[:, :k]
    success = rng.random(count) < 0.7
    success[(np.arange(count) > count // 2) & (ids == 3).any(axis=1)] = False
    scores = rng.random((count, k)) + 0.01
    return {"ids": ids, "success": success, "scores": scores, "start": np.array(start)}


def write_log(path: object, ep: dict[str, np.ndarray], *, confidence: bool = False) -> None:
    count, k = ep["ids"].shape
    start = int(ep["start"])
    table = {
        "episode_id": [f"e{start + e}" for e in range(count) for _ in range(k)],
        "memory_id": [f"m{m}" for row in ep["ids"] for m in row],
        "outcome": ["success" if ok else "failure" for ok in ep["success"] for _ in range(k)],
        "timestamp": [1_700_000_000.0 + start + e for e in range(count) for _ in range(k)],
        "score": ep["scores"].ravel().tolist(),
    }
    if confidence:
        table["confidence"] = [0.5 if e % 3 else 1.0 for e in range(count) for _ in range(k)]
    pq.write_table(pa.table(table), str(path))


def by_memory(table: pa.Table) -> dict[str, dict[str, object]]:
    return {r["memory_id"]: r for r in table.to_pylist()}


@pytest.mark.parametrize(("credit", "w_min"), [("uniform", 0.0), ("score", 0.0), ("score", 0.1)])
def test_counts_equal_tracker_record_batch(tmp_path, credit, w_min) -> None:
    ep = episodes()
    write_log(tmp_path / "log.parquet", ep)
    scored = score_files([str(tmp_path / "log.parquet")], ScoreSettings(Counting(credit, w_min, 25.0)))
    tracker = Tracker(w_min=w_min, half_life=25.0)
    tracker.record_batch(ep["ids"], ep["success"], weights=None if credit == "uniform" else ep["scores"])
    rows = by_memory(scored.table)
    assert set(rows) == {f"m{m}" for m in tracker.ids()}
    for m in tracker.ids():
        want, decayed = tracker.counts(m), tracker.counts(m, decayed=True)
        got = rows[f"m{m}"]
        np.testing.assert_allclose(
            [got["success"], got["failure"], got["n"]], [want.success, want.failure, want.n], rtol=1e-9, atol=1e-12
        )
        np.testing.assert_allclose(
            [got["decayed_success"], got["decayed_failure"], got["decayed_n"]],
            [decayed.success, decayed.failure, decayed.n],
            rtol=1e-9,
            atol=1e-12,
        )


def test_counts_equal_tracker_record_one_at_a_time_with_given_weights(tmp_path) -> None:
    ep = episodes(seed=1, count=200)
    count, k = ep["ids"].shape
    weights = ep["scores"] / ep["scores"].sum(axis=1, keepdims=True)
    table = pa.table(
        {
            "trace": [f"t{e}" for e in range(count) for _ in range(k)],
            "doc": [f"m{m}" for row in ep["ids"] for m in row],
            "result": [bool(ok) for ok in ep["success"] for _ in range(k)],
            "at": [f"2026-01-01T00:{e // 60:02d}:{e % 60:02d}Z" for e in range(count) for _ in range(k)],
            "w": weights.ravel().tolist(),
        }
    )
    path = tmp_path / "log.jsonl"
    path.write_text("".join(__import__("json").dumps(r) + "\n" for r in table.to_pylist()))
    columns = ColumnMap.parse(["episode_id=trace", "memory_id=doc", "outcome=result", "timestamp=at", "weight=w"])
    scored = score_files([str(path)], ScoreSettings(Counting("given"), columns=columns))
    tracker = Tracker()
    for e in range(count):
        tracker.record([f"m{m}" for m in ep["ids"][e]], bool(ep["success"][e]), weights=weights[e])
    rows = by_memory(scored.table)
    for m in tracker.ids():
        want = tracker.counts(m)
        got = rows[str(m)]
        np.testing.assert_allclose(
            [got["success"], got["failure"], got["n"]], [want.success, want.failure, want.n], rtol=1e-9
        )


def test_incremental_runs_equal_one_run(tmp_path) -> None:
    a, b = episodes(seed=2, count=400), episodes(seed=3, count=300, start=400)
    write_log(tmp_path / "a.parquet", a, confidence=True)
    write_log(tmp_path / "b.parquet", b, confidence=True)
    settings = ScoreSettings(Counting("score", 0.05, 30.0))
    state = tmp_path / "state.duckdb"
    first = score_files([str(tmp_path / "a.parquet")], settings, state=state)
    assert first.episodes_added == 400
    second = score_files([str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet")], settings, state=state)
    assert second.files_read == [str(tmp_path / "b.parquet")] and second.episodes_added == 300
    whole = score_files([str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet")], settings)
    got, want = by_memory(second.table), by_memory(whole.table)
    assert set(got) == set(want)
    for mid, row in want.items():
        for column, value in row.items():
            if isinstance(value, float):
                assert got[mid][column] == pytest.approx(value, rel=1e-9, abs=1e-12), (mid, column)
            else:
                assert got[mid][column] == value, (mid, column)
    assert want["m3"]["change_statistic"] > 0 and any(r["action"] for r in want.values())


def test_state_refuses_other_counting_and_older_outcomes(tmp_path) -> None:
    write_log(tmp_path / "a.parquet", episodes(seed=4, count=100, start=100))
    write_log(tmp_path / "old.parquet", episodes(seed=5, count=50, start=0))
    state = tmp_path / "state.duckdb"
    score_files([str(tmp_path / "a.parquet")], ScoreSettings(), state=state)
    before = state.read_bytes()
    with pytest.raises(Exception, match="counts under both do not add up"):
        score_files([str(tmp_path / "a.parquet")], ScoreSettings(Counting("score")), state=state)
    with pytest.raises(Exception, match=r"old\.parquet, row 1: .* older than the newest outcome"):
        score_files([str(tmp_path / "old.parquet")], ScoreSettings(), state=state)
    assert state.read_bytes() == before


def test_columns_come_from_the_library_rules(tmp_path) -> None:
    from memworth.counts import Counts
    from memworth.estimators import BetaBound, WilsonBound

    ep = episodes(seed=6, count=1200)
    ep["success"][(ep["ids"] == 3).any(axis=1)] = False  # m3 never helps: the sequence deprecates it
    write_log(tmp_path / "log.parquet", ep)
    policy = GovernancePolicy(deprecation="sequential")
    scored = score_files([str(tmp_path / "log.parquet")], ScoreSettings(policy=policy))
    rows = scored.table.to_pylist()
    assert any(r["sequential_deprecate"] for r in rows) and not all(r["sequential_deprecate"] for r in rows)
    for row in rows:
        c = Counts(row["success"], row["failure"], row["n"])
        assert (row["beta_lower"], row["beta_upper"]) == pytest.approx(BetaBound().interval(c))
        assert (row["wilson_lower"], row["wilson_upper"]) == pytest.approx(WilsonBound(z=1.959963984540054).interval(c))
        assert row["value_class"] == policy.taxonomy().classify(c).value_class.value
        cs = policy.sequential(policy.deprecate_below).check(c)
        assert (row["sequential_lower"], row["sequential_upper"]) == pytest.approx(
            (cs.numbers["lower"], cs.numbers["upper"]), rel=1e-12
        )
        assert row["sequential_deprecate"] == (cs.action == "deprecate")
    assert next(r for r in rows if r["memory_id"] == "m3")["action"] == "deprecate"


def test_window_test_reads_each_memorys_last_retrievals(tmp_path) -> None:
    """With the window test on, the proposals are propose's given each memory's last
    ``staleness_window`` retrievals (the window counts are read only then): m3, failing
    since halfway, is flagged for re-verification by the window."""
    from memworth.counts import Counts

    ep = episodes(seed=8, count=800)
    write_log(tmp_path / "log.parquet", ep)
    policy = GovernancePolicy(window_test=True, change_detection=False, deprecation="fixed")
    rows = by_memory(score_files([str(tmp_path / "log.parquet")], ScoreSettings(policy=policy)).table)
    k = ep["ids"].shape[1]
    window = int(policy.staleness.window)
    for mid, row in rows.items():
        seen = np.flatnonzero((ep["ids"] == int(mid[1:])).any(axis=1))[-window:]  # its last retrievals
        ok = ep["success"][seen]
        recent = Counts(float(ok.sum()) / k, float((~ok).sum()) / k, float(seen.size))
        want = policy.propose(mid, Counts(row["success"], row["failure"], row["n"]), "active", "normal", recent)
        assert (row["action"], row["reason"]) == ((None, None) if want is None else (want.action, want.reason))
    assert rows["m3"]["action"] == "re-verify" and "retrievals at worth" in rows["m3"]["reason"]


def test_cli_writes_tables_and_figure(tmp_path, capsys) -> None:
    write_log(tmp_path / "log.parquet", episodes(seed=7))
    out = tmp_path / "out"
    assert main(["score", str(tmp_path / "log.parquet"), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "re-verify" in printed and "wrote" in printed
    table = pq.read_table(out / "worth.parquet")
    assert table.num_rows == 40
    assert (out / "worth.csv").read_text().count("\n") == 41
    assert (out / "report.png").stat().st_size > 10_000


def test_progress_bar_on_stderr_when_asked(tmp_path, capsys) -> None:
    write_log(tmp_path / "log.parquet", episodes(seed=8, count=100))
    score_files([str(tmp_path / "log.parquet")], ScoreSettings(), progress=True)
    err = capsys.readouterr().err
    assert "files" in err and "proposals" in err
    score_files([str(tmp_path / "log.parquet")], ScoreSettings())
    assert capsys.readouterr().err == ""


def test_namespaces_are_scored_apart_with_their_own_clock(tmp_path) -> None:
    import datetime as dt

    a, b = episodes(seed=9, count=300), episodes(seed=10, count=120)
    rows: dict[str, list[object]] = {k: [] for k in ("episode_id", "memory_id", "outcome", "timestamp", "namespace")}
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    for ns, ep in (("alpha", a), ("beta", b)):
        for e, (ids, ok) in enumerate(zip(ep["ids"], ep["success"], strict=True)):
            for m in ids:
                rows["episode_id"].append(f"{ns}-{e}")
                rows["memory_id"].append(f"m{m}")
                rows["outcome"].append(bool(ok))
                rows["timestamp"].append(start + dt.timedelta(seconds=e))
                rows["namespace"].append(ns)
    pq.write_table(pa.table(rows), str(tmp_path / "log.parquet"))
    assert pa.types.is_timestamp(pq.read_schema(str(tmp_path / "log.parquet")).field("timestamp").type)
    scored = score_files([str(tmp_path / "log.parquet")], ScoreSettings(Counting(half_life=10.0)))
    got = {(r["namespace"], r["memory_id"]): r for r in scored.table.to_pylist()}
    for ns, ep in (("alpha", a), ("beta", b)):
        tracker = Tracker(half_life=10.0)
        tracker.record_batch(ep["ids"], ep["success"])
        for m in tracker.ids():
            row, want, decayed = got[(ns, f"m{m}")], tracker.counts(m), tracker.counts(m, decayed=True)
            np.testing.assert_allclose(
                [row["success"], row["failure"], row["n"], row["decayed_success"], row["decayed_n"]],
                [want.success, want.failure, want.n, decayed.success, decayed.n],
                rtol=1e-9,
                atol=1e-12,
            )


def test_text_past_one_string_arrays_limit_becomes_a_chunked_string_column() -> None:
    """A text column past 2 GiB (int32 offsets) was built as large_string and cast to string,
    which pyarrow refuses; it is now split into string chunks. The limit is lowered here:
    the rule is the same, without allocating 2 GiB."""
    from memworth.errors import MemworthError
    from memworth.logs.score import STRING_BYTES, _arrow_strings, string_chunks

    offsets = np.array([0, 2**30, 2**31 - 1, 2**31, 3 * 2**30])  # byte offsets of four values
    assert string_chunks(offsets) == [(0, 2), (2, 4)]
    assert string_chunks(offsets[:3]) == [(0, 2)]  # exactly at the limit: one array
    assert string_chunks(np.array([0, 10, 11]), limit=STRING_BYTES) == [(0, 2)]
    with pytest.raises(MemworthError, match="text value of 2147483648 bytes"):
        string_chunks(np.array([0, 2**31]))

    values = ["ab", None, "cde", "f", None, "ghij"]
    whole = _arrow_strings(values)
    assert isinstance(whole, pa.Array) and whole.type == pa.string() and whole.to_pylist() == values
    split = _arrow_strings(values, limit=4)
    assert isinstance(split, pa.ChunkedArray) and split.type == pa.string()
    assert [len(c) for c in split.chunks] == [2, 3, 1] and split.to_pylist() == values  # 2, 4, 4 bytes
    assert pa.table({"text": split}).schema.field("text").type == pa.string()


def test_cli_scores_under_a_store_s_governance_settings(tmp_path, capsys) -> None:
    """`memworth score --settings` reads what `memworth config show --json` prints: the proposals
    follow that store's rules, as ScoreSettings(policy=...) does; a flag given beside it wins."""
    import argparse
    import json

    from memworth.logs.command import _settings

    log = tmp_path / "log.parquet"
    write_log(log, episodes(seed=7))
    store = f"sqlite:///{tmp_path / 'store.db'}"
    assert main(["config", "set", "standing.promote_above=0.76", "classes.min_evidence=400", "--store", store]) == 0
    capsys.readouterr()
    assert main(["config", "show", "--json", "--store", store]) == 0
    config = tmp_path / "config.json"
    config.write_text(capsys.readouterr().out)
    assert main(["score", str(log), "--settings", str(config), "--json", "--quiet"]) == 0
    got = json.loads(capsys.readouterr().out)
    policy = GovernancePolicy.from_settings({"standing": {"promote_above": 0.76}, "classes": {"min_evidence": 400}})
    want = score_files([str(log)], ScoreSettings(policy=policy)).table.to_pylist()
    assert [(r["memory_id"], r["action"], r["reason"]) for r in got] == [
        (r["memory_id"], r["action"], r["reason"]) for r in want
    ]
    default = score_files([str(log)], ScoreSettings()).table.to_pylist()
    assert [r["action"] for r in want] != [r["action"] for r in default]  # the settings changed the answer
    flags = {"credit": "uniform", "w_min": 0.0, "column": [], "log_format": None}
    kept = _settings(argparse.Namespace(settings=config, min_evidence=None, deprecation=None, **flags)).policy
    assert kept == policy
    over = argparse.Namespace(settings=config, min_evidence=10.0, no_change_detection=True, deprecation=None, **flags)
    assert _settings(over).policy == GovernancePolicy.from_settings(
        {"standing": {"promote_above": 0.76}, "classes": {"min_evidence": 10.0}, "change": {"enabled": False}}
    )


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (None, "cannot read"),
        ("{not json", "is not JSON"),
        ("[1, 2]", "JSON object"),
        ('{"governance": {"theta_lo": 0.2}}', "theta_lo"),
    ],
)
def test_cli_refuses_a_bad_settings_file_naming_it(tmp_path, capsys, text, reason) -> None:
    log = tmp_path / "log.parquet"
    write_log(log, episodes(seed=3, count=50))
    path = tmp_path / "settings.json"
    if text is not None:
        path.write_text(text)
    assert main(["score", str(log), "--settings", str(path), "--quiet"]) != 0
    err = capsys.readouterr().err
    assert reason in err and "Traceback" not in err


def test_repeated_text_columns_are_the_arrays_built_value_by_value() -> None:
    """The scored table's class, action and reason columns are built from their distinct values
    (encoded once, then taken by index) and the ids from one joined text; both give the array
    that encoding each value gives: nulls, non-ASCII text, NumPy strings, and past the byte
    limit the chunked column."""
    from memworth.logs.score import _arrow_repeated, _arrow_strings

    values = ["low", None, "héllo", np.str_("low"), "low", None, "héllo", "mixed"] * 3
    want = [None if v is None else str(v) for v in values]
    for build in (_arrow_repeated, _arrow_strings):
        got = build(values)
        assert isinstance(got, pa.Array) and got.type == pa.string() and got.to_pylist() == want
        assert got.null_count == 6
    assert _arrow_repeated(values).equals(_arrow_strings(values))
    split = _arrow_repeated(values, limit=12)  # past the limit: the chunked column _arrow_strings makes
    assert isinstance(split, pa.ChunkedArray) and split.to_pylist() == want
    assert split.equals(_arrow_strings(values, limit=12))
    ids = ["m1", "ü2", "m3"]  # mostly distinct: the plain path, with a multi-byte id
    assert _arrow_repeated(ids).to_pylist() == ids and _arrow_strings(ids).to_pylist() == ids
    assert _arrow_repeated([]).to_pylist() == []


def test_the_imports_run_ahead_of_the_sums_are_done_when_scoring_starts(tmp_path, monkeypatch) -> None:
    """scipy and pyarrow are imported in a thread while DuckDB sums; the run waits for it before
    it scores, and leaves no thread behind."""
    import threading

    import memworth.logs.score as score_module
    from memworth.logs import ScoreSettings, score_files

    started = []
    real = score_module._import_ahead

    def spy():
        started.append(thread := real())
        return thread

    monkeypatch.setattr(score_module, "_import_ahead", spy)
    path = tmp_path / "log.csv"
    path.write_text("episode_id,memory_id,outcome,timestamp\ne1,a,success,1\ne2,a,failure,2\n")
    assert score_files([str(path)], ScoreSettings()).table.num_rows == 1
    assert len(started) == 1 and not started[0].is_alive()
    assert "memworth-import-ahead" not in {t.name for t in threading.enumerate()}
