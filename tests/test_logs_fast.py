"""The one-statement path of a run that keeps nothing (:mod:`memworth.logs.fast`) counts what
the checked path counts, and a bad log it meets is refused with the checked path's own error."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import memworth.logs.score as score_module
from memworth.governance import GovernancePolicy
from memworth.logs import ScoreSettings, score_files
from memworth.logs.fast import _same_parquet, fast_counts
from memworth.logs.read import LogError
from memworth.logs.score import _connect
from memworth.logs.state import Counting

pytest.importorskip("duckdb")

QUIET = GovernancePolicy(change_detection=False)
"""Nothing read from the episode log after the sums: the run can take the one-statement path."""


def write(path, columns: dict[str, list]) -> str:
    pq.write_table(pa.table(columns), str(path), row_group_size=50)
    return str(path)


def rich_logs(tmp_path, files: int = 3, per_file: int = 120) -> list[str]:
    """Episodes of 1-5 memories in two namespaces, with confidence, source and context; one
    episode is split across two files and timestamps repeat, so the order (ts, file, row) decides."""
    rng = np.random.default_rng(7)
    out = []
    carry: dict[str, list] | None = None
    for f in range(files):
        cols: dict[str, list] = {
            k: []
            for k in ("episode_id", "memory_id", "outcome", "timestamp", "confidence", "source", "namespace", "context")
        }
        for e in range(per_file):
            k = int(rng.integers(1, 6))
            ns = "default" if e % 3 else "tenant-b"
            ok = bool(rng.random() < 0.6)
            conf, src, ctx = (
                float(rng.choice([0.5, 1.0])),
                str(rng.choice(["user", "judge"])),
                (None if e % 4 else "qa"),
            )
            for m in rng.choice(30, size=k, replace=False):
                for name, value in zip(
                    cols,
                    (f"f{f}e{e}", f"m{m}", "success" if ok else "failure", float(e // 2), conf, src, ns, ctx),
                    strict=True,
                ):
                    cols[name].append(value)
        if carry is not None:  # the last episode of the file before goes on here
            for name in cols:
                cols[name] = carry[name] + cols[name]
        last = cols["episode_id"][-1]
        cut = cols["episode_id"].index(last)
        if f < files - 1 and len(cols["episode_id"]) - cut > 1:
            half = cut + 1
            carry = {name: values[half:] for name, values in cols.items()}
            cols = {name: values[:half] for name, values in cols.items()}
        else:
            carry = None
        out.append(write(tmp_path / f"part-{f}.parquet", cols))
    return out


def checked(monkeypatch, files, settings):
    """The checked path's table (the one-statement path switched off)."""
    with monkeypatch.context() as m:
        m.setattr(score_module, "fast_counts", lambda *a, **k: None)
        return score_files(files, settings)


@pytest.mark.parametrize("half_life", [100.0, 0.05])
def test_fast_path_counts_what_the_checked_path_counts(tmp_path, monkeypatch, half_life) -> None:
    """Every column equal (the float sums to 1e-12 relative: their order is DuckDB's); a half-life
    of 0.05 episodes makes most decayed terms underflow to 0 and the rest depend on each position."""
    files = rich_logs(tmp_path)
    settings = ScoreSettings(counting=Counting(half_life=half_life), policy=QUIET)
    called = []
    real = score_module.fast_counts

    def spy(*args, **kwargs):
        called.append(got := real(*args, **kwargs))
        return got

    monkeypatch.setattr(score_module, "fast_counts", spy)
    fast = score_files(files, settings)
    assert called and called[0] is not None  # the one-statement path counted this run
    slow = checked(monkeypatch, files, settings)
    assert (fast.rows_read, fast.episodes_added) == (slow.rows_read, slow.episodes_added)
    a, b = fast.table.to_pydict(), slow.table.to_pydict()
    assert a.keys() == b.keys() and len(a["memory_id"]) == len(b["memory_id"]) > 30
    for name in a:
        if isinstance(a[name][0], float):
            np.testing.assert_allclose(a[name], b[name], rtol=1e-12, atol=0, err_msg=name)
        else:
            assert a[name] == b[name], name
    assert sum(a["decayed_n"]) > 0


def base(n: int = 6) -> dict[str, list]:
    return {
        "episode_id": [f"e{i // 2}" for i in range(n)],
        "memory_id": [f"m{i % 2}" for i in range(n)],
        "outcome": ["success"] * n,
        "timestamp": [float(i // 2) for i in range(n)],
    }


def spoiled(field: str, row: int, value) -> dict[str, list]:
    cols = base()
    cols[field][row - 1] = value
    return cols


BAD = {
    "outcome": lambda: spoiled("outcome", 4, "maybe"),
    "two outcomes": lambda: spoiled("outcome", 4, "failure"),
    "duplicate row": lambda: spoiled("memory_id", 4, "m0"),
    "empty id": lambda: spoiled("episode_id", 5, " "),
    "no timestamp": lambda: spoiled("timestamp", 3, None),
    "two sources": lambda: base() | {"source": ["a", "a", "a", "b", "a", "a"]},
    "context beside none": lambda: base() | {"context": ["x", "x", "y", None, None, None]},
    "confidence": lambda: base() | {"confidence": [1.0, 1.0, 1.0, 1.0, 1.5, 1.5]},
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_log_is_refused_as_the_checked_path_refuses_it(tmp_path, monkeypatch, case) -> None:
    """The same file, row, column and words, and the refusal comes from the second file of the scan."""
    good = write(tmp_path / "a.parquet", base() | {"episode_id": [f"g{i // 2}" for i in range(6)]})
    cols = BAD[case]()
    bad = write(tmp_path / "b.parquet", cols)
    extra = {k: v for k, v in cols.items() if k not in base()}
    if extra:  # both files need the same columns to share a scan
        good = write(
            tmp_path / "a.parquet",
            base() | {"episode_id": [f"g{i // 2}" for i in range(6)]} | {k: [v[0]] * 6 for k, v in extra.items()},
        )
    con = _connect(None)
    try:  # the two files share one scan: the one-statement path reads them and finds the problem
        assert _same_parquet([good, bad], None, con) is not None
    finally:
        con.close()
    with pytest.raises(LogError) as fast:
        score_files([good, bad], ScoreSettings(policy=QUIET))
    with pytest.raises(LogError) as slow:
        checked(monkeypatch, [good, bad], ScoreSettings(policy=QUIET))
    assert fast.value.file == bad
    assert str(fast.value) == str(slow.value)
    assert (fast.value.file, fast.value.row, fast.value.column) == (slow.value.file, slow.value.row, slow.value.column)


def test_paths_it_does_not_take(tmp_path, monkeypatch) -> None:
    """A state file, a log read afterwards, credit to split, other formats or columns: the checked path."""
    calls = []
    monkeypatch.setattr(score_module, "fast_counts", lambda *a, **k: calls.append(1))
    log = write(tmp_path / "a.parquet", base() | {"score": [1.0] * 6})
    score_files([log], ScoreSettings(policy=QUIET), state=tmp_path / "s.duckdb")
    score_files([log], ScoreSettings())
    score_files([log], ScoreSettings(policy=QUIET, counting=Counting(credit="score")))
    assert calls == []
    monkeypatch.undo()

    csv = tmp_path / "a.csv"
    csv.write_text("episode_id,memory_id,outcome,timestamp\ne1,a,success,1\n")
    other = write(tmp_path / "b.parquet", base() | {"note": ["x"] * 6})
    con = _connect(None)
    try:
        for files in ([str(csv)], [log, other]):
            assert fast_counts(con, files, ScoreSettings().columns, None, 100.0, 0.0) is None
    finally:
        con.close()


def test_w_min_too_large_for_an_episode_is_refused(tmp_path) -> None:
    log = write(tmp_path / "a.parquet", base() | {"episode_id": ["e0"] * 2 + ["e1"] * 4, "memory_id": list("abcdef")})
    with pytest.raises(ValueError, match="w_min"):
        score_files([log], ScoreSettings(policy=QUIET, counting=Counting(w_min=0.3)))


@pytest.mark.parametrize("key_limit", [2**63, 10])
def test_intervals_per_distinct_counts_are_each_rows_own(monkeypatch, key_limit) -> None:
    """Computed once per distinct (success, failure, n), bit for bit what each row gives alone
    (one int64 key per row, or rows of floats when the distinct values overflow it)."""
    from memworth.counts import CountsTable
    from memworth.estimators import BetaBound
    from memworth.logs.score import per_distinct_counts
    from memworth.signals.confidence_sequences import BetaBinomialCS

    monkeypatch.setattr(score_module, "_KEY_LIMIT", key_limit)
    rng = np.random.default_rng(3)
    n = rng.poisson(20, 5000).astype(float)
    s = rng.binomial(n.astype(int), 0.6) / 4.0
    table = CountsTable(s, n / 4 - s, n)
    for interval in (BetaBound().interval, BetaBinomialCS(evidence="retrievals").interval):
        got, alone = per_distinct_counts(table, interval), interval(table)
        for a, b in zip(got, alone, strict=True):
            assert np.array_equal(a, np.asarray(b))
    empty = CountsTable(np.zeros(0), np.zeros(0), np.zeros(0))
    assert [x.size for x in per_distinct_counts(empty, BetaBound().interval)] == [0, 0]


def test_an_episode_split_across_files_is_placed_by_its_first_row(tmp_path, monkeypatch) -> None:
    """Episodes tied on time are ordered by their first row, (file, row) taken together. Episode A
    starts at file 0 row 4 and goes on at file 1 row 1; B is file 0 rows 1-2. Taking the least file
    and the least row apart gave A (0, 1), B's own first row, so the two tied and DuckDB chose the
    order (and with it the decayed counts) from run to run. B comes first: A's decay is one step less."""
    from memworth.logs.read import check_episodes, read_logs

    f0 = write(
        tmp_path / "f0.parquet",
        {
            "episode_id": ["B", "B", "C", "A"],
            "memory_id": ["x", "y", "z", "a"],
            "outcome": ["success", "success", "failure", "failure"],
            "timestamp": [0.0, 0.0, 1.0, 0.0],
        },
    )
    f1 = write(
        tmp_path / "f1.parquet", {"episode_id": ["A"], "memory_id": ["b"], "outcome": ["failure"], "timestamp": [0.0]}
    )
    con = _connect(None)
    try:
        read_logs(con, [f0, f1], ScoreSettings().columns)
        check_episodes(con, [f0, f1], 0, into="episode_rows")
        firsts = dict(con.execute("SELECT episode_id, [file, row] FROM episode_rows").fetchall())
    finally:
        con.close()
    assert firsts == {"A": [0, 4], "B": [0, 1], "C": [0, 3]}
    settings = ScoreSettings(counting=Counting(half_life=1.0), policy=QUIET)
    want = {"a": 0.5, "b": 0.5, "x": 0.25, "y": 0.25, "z": 1.0}
    for _ in range(5):  # the order was DuckDB's choice: a few runs of each path
        for scored in (score_files([f0, f1], settings), checked(monkeypatch, [f0, f1], settings)):
            got = scored.table.to_pydict()
            assert dict(zip(got["memory_id"], got["decayed_n"], strict=True)) == want


def fast_and_checked(monkeypatch, files, settings):
    """Both paths' tables, the one-statement path required to have counted its run."""
    called = []
    real = score_module.fast_counts

    def spy(*args, **kwargs):
        called.append(got := real(*args, **kwargs))
        return got

    with monkeypatch.context() as m:
        m.setattr(score_module, "fast_counts", spy)
        fast = score_files(files, settings)
    assert called and called[0] is not None, "the one-statement path fell back"
    return fast.table.to_pydict(), checked(monkeypatch, files, settings).table.to_pydict()


def one_memory_per_episode(path, times: list[float]) -> str:
    return write(
        path,
        {
            "episode_id": [f"e{i}" for i in range(len(times))],
            "memory_id": [f"m{i}" for i in range(len(times))],
            "outcome": ["success"] * len(times),
            "timestamp": times,
        },
    )


@pytest.mark.parametrize("tied", [False, True])
def test_decay_terms_that_underflow_and_those_that_just_do_not(tmp_path, monkeypatch, tied) -> None:
    """With a half-life of 1/1074 episodes the newest episode adds 1.0, the one before it 2**-1074
    (the least double), every older one exactly 0.0: only the newest few are numbered, and the
    least double is not lost. Tied on time, the episodes are ordered by row, the cutoff among them."""
    from memworth.logs.fast import recent_episodes

    half_life = 1 / 1074
    assert recent_episodes(half_life) == 4  # fewer than the 12 episodes: the others are not numbered
    times = [0.0] * 12 if tied else [float(t) for t in range(12)]
    log = one_memory_per_episode(tmp_path / "a.parquet", times)
    a, b = fast_and_checked(monkeypatch, [log], ScoreSettings(counting=Counting(half_life=half_life), policy=QUIET))
    want = {f"m{i}": 0.0 for i in range(10)} | {"m10": 2.0**-1074, "m11": 1.0}
    for got in (a, b):
        assert dict(zip(got["memory_id"], got["decayed_n"], strict=True)) == want
        assert dict(zip(got["memory_id"], got["decayed_success"], strict=True)) == want


def test_every_episode_is_numbered_when_too_many_would_be_picked_out(tmp_path, monkeypatch) -> None:
    """Past ``_MOST_RECENT`` newest episodes the cutoff is the oldest: all numbered, the same sums."""
    import memworth.logs.fast as fast_module

    monkeypatch.setattr(fast_module, "_MOST_RECENT", 3)
    assert fast_module.recent_episodes(0.05) is None
    files = rich_logs(tmp_path, files=2, per_file=40)
    a, b = fast_and_checked(monkeypatch, files, ScoreSettings(counting=Counting(half_life=0.05), policy=QUIET))
    for name in ("decayed_success", "decayed_failure", "decayed_n"):
        np.testing.assert_allclose(a[name], b[name], rtol=1e-12, atol=0, err_msg=name)
    assert a["memory_id"] == b["memory_id"] and sum(a["decayed_n"]) > 0


def big_episode(path, memories: list[str]) -> str:
    """Episode 'big' with ``memories`` (more than the 64 bits of a bitmap), then a small one."""
    k = len(memories)
    return write(
        path,
        {
            "episode_id": ["big"] * k + ["small", "small"],
            "memory_id": [*memories, "x", "y"],
            "outcome": ["success"] * k + ["failure"] * 2,
            "timestamp": [1.0] * k + [2.0, 2.0],
        },
    )


def test_an_episode_the_bitmaps_cannot_clear_is_checked_exactly(tmp_path, monkeypatch) -> None:
    """70 distinct memories cannot set 70 bits of a 64-bit map: the episode's ids are compared
    one by one, found distinct, and the run is counted here all the same."""
    log = big_episode(tmp_path / "a.parquet", [f"m{i}" for i in range(70)])
    a, b = fast_and_checked(monkeypatch, [log], ScoreSettings(policy=QUIET))
    assert a["memory_id"] == b["memory_id"] and len(a["memory_id"]) == 72
    np.testing.assert_allclose(a["success"], b["success"], rtol=1e-12, atol=0)
    assert a["n"] == b["n"]


def test_a_duplicate_in_an_episode_the_bitmaps_cannot_clear_is_refused(tmp_path, monkeypatch) -> None:
    """The same memory twice among 70: refused with the checked path's error (file, row, column)."""
    memories = [f"m{i}" for i in range(70)]
    memories[50] = "m3"
    log = big_episode(tmp_path / "a.parquet", memories)
    con = _connect(None)
    try:
        from memworth.logs.state import create_tables

        create_tables(con, Counting())
        assert fast_counts(con, [log], ScoreSettings().columns, None, 100.0, 0.0) is None
    finally:
        con.close()
    with pytest.raises(LogError) as fast:
        score_files([log], ScoreSettings(policy=QUIET))
    assert (fast.value.row, fast.value.column) == (51, "memory_id")
    assert "appears twice in episode 'big'" in str(fast.value)


def test_rows_past_the_order_key_take_the_checked_path(tmp_path, monkeypatch) -> None:
    """A file with more rows than the order key ``file * _ROWS + row`` holds is not counted here."""
    import memworth.logs.fast as fast_module

    log = write(tmp_path / "a.parquet", base())
    con = _connect(None)
    try:
        from memworth.logs.state import create_tables

        create_tables(con, Counting())
        assert fast_counts(con, [log], ScoreSettings().columns, None, 100.0, 0.0) is not None
        con.execute("DELETE FROM counts")
        monkeypatch.setattr(fast_module, "_ROWS", 6)  # rows 1-6: the sixth is past it
        assert fast_counts(con, [log], ScoreSettings().columns, None, 100.0, 0.0) is None
        assert con.execute("SELECT count(*) FROM counts").fetchall() == [(0,)]
    finally:
        con.close()


def test_a_namespace_with_fewer_episodes_than_the_cutoff_is_numbered_whole(tmp_path, monkeypatch) -> None:
    """Namespace 'big' has 12 episodes (only its newest 4 are numbered), 'small' 3 (all of
    them, no cutoff sought): each namespace's decay is counted from its own newest episode."""
    times = [float(t) for t in range(12)] + [0.0, 5.0, 20.0]
    log = write(
        tmp_path / "a.parquet",
        {
            "episode_id": [f"e{i}" for i in range(15)],
            "memory_id": [f"m{i}" for i in range(15)],
            "outcome": ["success"] * 15,
            "timestamp": times,
            "namespace": ["big"] * 12 + ["small"] * 3,
        },
    )
    settings = ScoreSettings(counting=Counting(half_life=1 / 1074), policy=QUIET)
    a, b = fast_and_checked(monkeypatch, [log], settings)
    want = {("big", f"m{i}"): 0.0 for i in range(10)} | {("big", "m10"): 2.0**-1074, ("big", "m11"): 1.0}
    want |= {("small", "m12"): 0.0, ("small", "m13"): 2.0**-1074, ("small", "m14"): 1.0}
    for got in (a, b):
        assert dict(zip(zip(got["namespace"], got["memory_id"], strict=True), got["decayed_n"], strict=True)) == want


def test_a_duplicate_row_is_named_before_a_w_min_too_large_for_it_as_the_checked_path_names_it(tmp_path) -> None:
    """An episode retrieving memory a twice and b once: 0.5 x 3 items exceeds 1, but the row
    that repeats a is what is wrong (found in review: the fast path said w_min)."""
    path = write(tmp_path / "dup.parquet", {
        "episode_id": ["e", "e", "e"], "memory_id": ["a", "a", "b"], "outcome": ["success"] * 3, "timestamp": [1.0] * 3,
    })
    settings = ScoreSettings(counting=Counting(w_min=0.5), policy=GovernancePolicy(change_detection=False))
    with pytest.raises(LogError, match="appears twice"):
        score_files([path], settings)


def test_a_half_life_past_what_the_cutoff_can_pick_numbers_every_episode(tmp_path) -> None:
    """DuckDB's max(x, n) refuses n of a million or more, and a half-life near the float limit
    overflows the count (both found in review: the first lost the fast path on big logs, the
    second raised OverflowError)."""
    import duckdb

    from memworth.logs.fast import _MOST_RECENT, recent_episodes

    duckdb.sql(f"SELECT max(x, {_MOST_RECENT}) FROM range(3) t(x)").fetchall()  # accepted
    assert recent_episodes(1000.0) is None and recent_episodes(1e306) is None and recent_episodes(math.inf) is None
    assert recent_episodes(900.0) == 900 * 1080 + 2  # the largest picked: just under a million
    path = write(tmp_path / "two.parquet", {
        "episode_id": ["e1", "e2"], "memory_id": ["a", "b"], "outcome": ["success"] * 2, "timestamp": [1.0, 2.0],
    })
    settings = ScoreSettings(counting=Counting(half_life=1e306), policy=GovernancePolicy(change_detection=False))
    assert score_files([path], settings).table.column("decayed_n").to_pylist() == [1.0, 1.0]


@pytest.mark.parametrize(
    "spellings",
    [
        ["success", " Success ", "TRUE", "1", "failure", "FAILURE", " false", "0", "-1"],
        [1, 1, 1, 1, 0, 0, 0, -1, -1],  # an integer column
        [True, True, True, True, False, False, False, False, False],  # a boolean column
    ],
)
def test_every_outcome_spelling_is_read_by_both_paths(tmp_path, monkeypatch, spellings) -> None:
    """The two words as written are read first, the rest trimmed and lowered: each spelling, in a
    text, integer or boolean column, counts as the outcome it names (4 successes, 5 failures)."""
    n = len(spellings)
    path = write(
        tmp_path / "a.parquet",
        {
            "episode_id": [f"e{i}" for i in range(n)],
            "memory_id": ["m"] * n,
            "outcome": spellings,
            "timestamp": [float(i) for i in range(n)],
        },
    )
    fast, slow = fast_and_checked(monkeypatch, [path], ScoreSettings(policy=QUIET))
    for got in (fast, slow):
        assert (got["success"], got["failure"]) == ([4.0], [5.0])


@pytest.mark.parametrize("word", ["succes", "", None, "success!"])
def test_an_outcome_that_is_not_a_word_is_refused_by_both_paths(tmp_path, monkeypatch, word) -> None:
    path = write(tmp_path / "a.parquet", spoiled("outcome", 3, word))
    for fast_counts_on in (True, False):
        with monkeypatch.context() as m:
            if not fast_counts_on:
                m.setattr(score_module, "fast_counts", lambda *a, **k: None)
            with pytest.raises(LogError) as info:
                score_files([path], ScoreSettings(policy=QUIET))
        assert (info.value.row, info.value.column) == (3, "outcome") and "must be success or failure" in str(info.value)
