"""Recall and govern while several processes write: nothing lost, nothing applied twice.

The multi-process proof of the PostgreSQL issue (4 processes x 2,000 episodes, with
``record`` and with ``record_many``, on SQLite and PostgreSQL, no error, no lost update,
counters equal a replay) is ``tests/store/test_durability.py::test_concurrent_writers_lose_nothing``,
and two processes racing to record the same episodes is ``test_racing_recorders_record_each_episode_once``
there. This test adds the readers and the governors: on SQLite and on PostgreSQL, at the
same time,

* 3 writers recall and record 200 episodes each (one, five and twenty outcomes per call),
  where episodes that retrieved "bad" memories mostly fail, so governance has work;
* 2 governors run ``govern(apply=True)`` in a loop (racing each other on the same
  proposals) and sometimes ``restore`` what they applied;
* 1 reader recalls, gets, lists and reads audit logs and the hot tier in a loop.

Then: no process saw an error other than a documented conflict (``restore`` of an entry
changed again since), every recorded outcome is logged once with its result, counters
equal a replay, every audit chain folds to its memory's state (no change applied twice
or lost), the promote/demote rate limit held, governance really ran while outcomes were
being written, and the database passes its integrity check.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from memworth import HashingEncoder, MemoryStore
from memworth.governance import GovernancePolicy

from .conftest import HANG, SEED_MEMORIES, ForkServer, PrivatePostgres, Tally, assert_sound, seeded_store

WRITERS = [1, 5, 20]  # outcomes per record_many call, one writer each
EPISODES = 200
GOVERNORS = 2
READERS = 1


def wait_results(jobs: list[dict[str, Any]], pids: list[int]) -> list[dict[str, Any]]:
    """Each job's result, failing with its log if its process died without one."""
    results = []
    deadline = time.monotonic() + HANG
    for job, pid in zip(jobs, pids, strict=True):
        path = Path(job["result"])
        while not path.exists():
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                if path.exists():
                    break
                log = Path(job["out"] + ".log")
                pytest.fail(f"{job['mode']} process died:\n{log.read_text() if log.exists() else ''}")
            assert time.monotonic() < deadline, f"{job['mode']} process hung"
            time.sleep(0.01)
        results.append(json.loads(path.read_text()))
    return results


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_recall_and_govern_while_writing(
    backend: str, tmp_path: Path, fork_server: ForkServer, tally: Tally, request: pytest.FixtureRequest
) -> None:
    amcheck = False
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'shared.db'}"
    else:
        private_pg: PrivatePostgres = request.getfixturevalue("private_pg")
        url = request.getfixturevalue("pg_url")
        amcheck = private_pg.amcheck
    seeded_store(url).close()
    # The paper's fixed rule (10 retrievals) acts while the writers still write; the default,
    # error-controlled rule waits for more evidence than 600 outcomes over 30 memories give.
    # Kept with the store, so every worker governs under it.
    with MemoryStore.open(url, encoder=HashingEncoder(), policy=GovernancePolicy(deprecation="fixed")):
        pass
    go, stop = str(tmp_path / "go"), str(tmp_path / "stop")
    jobs: list[dict[str, Any]] = [
        {"mode": "write", "seed": 100 + i, "episodes": EPISODES, "batch": batch} for i, batch in enumerate(WRITERS)
    ]
    jobs += [{"mode": "govern", "seed": 200 + i} for i in range(GOVERNORS)]
    jobs += [{"mode": "read", "seed": 300 + i, "memories": SEED_MEMORIES} for i in range(READERS)]
    for i, job in enumerate(jobs):
        job |= {
            "url": url,
            "go": go,
            "stop": stop,
            "out": str(tmp_path / f"job{i}"),
            "result": str(tmp_path / f"job{i}.json"),
        }
    pids = [fork_server.spawn(job) for job in jobs]
    Path(go).touch()
    writers = wait_results(jobs[: len(WRITERS)], pids[: len(WRITERS)])
    Path(stop).touch()
    others = wait_results(jobs[len(WRITERS) :], pids[len(WRITERS) :])
    governors, readers = others[:GOVERNORS], others[GOVERNORS:]
    tally(f"concurrency: processes run together ({backend})", len(jobs))

    errors = [e for r in writers + others for e in r["errors"]]
    assert not errors, f"{len(errors)} errors; first:\n{errors[0]['traceback']}"
    assert not [b for r in readers for b in r["bad"]], readers[0]["bad"][:3]
    assert all(r["reads"] > 0 for r in readers)
    recorded = {eid: ok for r in writers for eid, ok in r["recorded"]}
    assert len(recorded) == len(WRITERS) * EPISODES
    applied = [seq for g in governors for seq, _ in g["applied"]]
    restored = [seq for g in governors for seq in g["restored"]]
    assert applied, "governance applied nothing: the test would prove nothing about governing while writing"

    with MemoryStore.open(url, encoder=HashingEncoder()) as reopened:
        log = assert_sound(reopened, url, require_amcheck=amcheck)
        assert {o.episode_id: o.success for o in log} == recorded
        entries = {e.seq: e for e in reopened.audit()}
        assert set(applied) | set(restored) <= set(entries)
        assert len(set(applied)) == len(applied), "two governors were told they applied the same entry"
        # Governance really ran while outcomes were being written.
        assert min(at for g in governors for _, at in g["applied"]) < max(o.recorded for o in log)
        # The promote/demote cap held under two racing governors (the run is far shorter than a day).
        cap = GovernancePolicy().max_changes_per_day
        rated = Counter(e.memory_id for e in entries.values() if e.action in ("promote", "demote"))
        assert max(rated.values(), default=0) <= cap, rated.most_common(3)
    tally(f"concurrency: outcomes recorded while governing ({backend})", len(recorded))
    tally(f"concurrency: governance changes applied while writing ({backend})", len(applied))
