"""A writer killed with SIGKILL at random points, 20 times per backend, loses nothing it acknowledged.

``tests/store/test_durability.py`` kills a recall-and-record loop 20 times per backend
(5 runs x 4 lives). This test kills a writer that does everything a store writes:
``add_many`` (with provenance edges), ``record`` and ``record_many``, ``govern(apply=True)``
and ``set_status``, chosen at random, on SQLite and on PostgreSQL (a private server, so the
``amcheck`` extension can check its indexes and heap). After each of the 20 kills the
store is reopened and must show:

* every acknowledged memory, with its text and provenance;
* every acknowledged outcome, once, with its result; no episode logged twice, and only
  work in flight at a kill (at most one call's worth per kill) logged unacknowledged;
* every acknowledged audit entry, and audit chains that fold to each memory's state;
* counters equal to a replay of the log;
* a database that passes its integrity check (``conftest.integrity_problems``).
"""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from memworth import HashingEncoder, MemoryStore

from .conftest import (
    HANG,
    SEED_MEMORIES,
    AckFile,
    ForkServer,
    PrivatePostgres,
    Tally,
    assert_sound,
    seeded_store,
    wait_gone,
)

KILLS = 20
MAX_ACKS = 15
"""Each life is killed after a random number (1..MAX_ACKS) of acknowledged steps, plus a random pause."""
MAX_BATCH = 6  # the most outcomes (record_many) or memories (add_many: 4) one step writes


def live_until_killed(fork_server: ForkServer, job: dict[str, Any], acks: int, pause: float) -> list[dict[str, Any]]:
    """Run one crash writer, SIGKILL it after ``acks`` acknowledged steps and ``pause`` seconds."""
    out = AckFile(Path(job["out"]))
    pid = fork_server.spawn(job)
    deadline = time.monotonic() + HANG
    while len(out.poll()) < acks + 1:  # + the "ready" line
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            log = Path(job["out"] + ".log")
            pytest.fail(f"writer died before the kill:\n{log.read_text() if log.exists() else ''}")
        assert time.monotonic() < deadline, f"writer made {len(out.records)} steps in {HANG} s (hung?)"
        time.sleep(0.001)
    # A pause of a few steps' length makes the kill land anywhere: inside a transaction,
    # in a commit, between a commit and its acknowledgement.
    time.sleep(pause)
    os.kill(pid, signal.SIGKILL)
    wait_gone(pid)
    records = out.poll()
    assert records[0] == {"op": "ready"}
    return records[1:]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_writer_killed_at_random_points_loses_nothing(
    backend: str, tmp_path: Path, fork_server: ForkServer, tally: Tally, request: pytest.FixtureRequest
) -> None:
    amcheck = False
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'crash.db'}"
    else:
        private_pg: PrivatePostgres = request.getfixturevalue("private_pg")
        url = request.getfixturevalue("pg_url")
        amcheck = private_pg.amcheck
    seeded_store(url).close()
    rng = random.Random(f"crash-{backend}")
    memories: dict[str, dict[str, Any]] = {}
    outcomes: dict[str, bool] = {}
    audit: set[int] = set()
    for life in range(KILLS):
        job = {"mode": "mixed", "url": url, "seed": rng.randrange(2**32), "life": life}
        job["out"] = str(tmp_path / f"life{life}.acks")
        for record in live_until_killed(fork_server, job, rng.randint(1, MAX_ACKS), rng.uniform(0.0, 0.03)):
            if record["op"] == "add":
                memories |= {item["id"]: item for item in record["items"]}
            elif record["op"] == "record":
                for eid, ok in record["outcomes"]:
                    assert eid not in outcomes, f"episode {eid} acknowledged twice"
                    outcomes[eid] = ok
            else:
                audit |= set(record["seqs"])
        tally(f"crash: SIGKILL of a writer ({backend})")

        with MemoryStore.open(url, encoder=HashingEncoder()) as reopened:
            where = f"after kill {life + 1} ({backend})"
            log = assert_sound(reopened, url, require_amcheck=amcheck)
            logged = {o.episode_id: o.success for o in log}
            lost = [eid for eid in outcomes if eid not in logged]
            assert not lost, f"{where}: {len(lost)} acknowledged outcomes missing, e.g. {lost[:3]}"
            changed = [eid for eid, ok in outcomes.items() if logged[eid] != ok]
            assert not changed, f"{where}: outcomes logged with another result: {changed[:3]}"
            assert 0 <= len(log) - len(outcomes) <= (life + 1) * MAX_BATCH, where
            stored = {m.id: m for m in reopened.list()}
            missing = [mid for mid in memories if mid not in stored]
            assert not missing, f"{where}: acknowledged memories missing: {missing[:3]}"
            for mid, item in memories.items():
                assert stored[mid].text == item["text"], where
                assert stored[mid].derived_from == tuple(item.get("derived_from", ())), where
            assert 0 <= len(stored) - SEED_MEMORIES - len(memories) <= (life + 1) * 4, where
            seqs = {e.seq for e in reopened.audit()}
            assert audit <= seqs, f"{where}: acknowledged audit entries missing: {sorted(audit - seqs)[:3]}"

    with MemoryStore.open(url, encoder=HashingEncoder(), seed=1) as reopened:  # and the store still works
        recall = reopened.recall("python list", k=4)
        reopened.record(recall.episode, success=True)
        assert_sound(reopened, url)
    # The kills landed in every kind of step, not only in one.
    assert memories and outcomes and audit
