"""Worker processes of the crash and concurrency tests, forked from one pre-imported parent.

Run as a script, this file is a *fork server*: it imports memworth once, says ``ready``,
then reads one JSON job per line on stdin and forks a child for each, answering with the
child's pid. Forking a warm process costs milliseconds where a fresh interpreter costs a
second or more, which keeps twenty kills per backend cheap. The fork server ignores
SIGCHLD, so the kernel reaps every child the moment it dies.

A child never writes to the fork server's stdout: acknowledgements go to the job's
``out`` file, one JSON object per line, each in a single ``write`` (a line cut short by a
kill has no newline and is not an acknowledgement); its own stdout and stderr go to
``out + ".log"``; a final result, when the job has one, to ``result`` (written to a
temporary name, then renamed).

Jobs (``mode``):

* ``mixed``: the crash writer. Adds memories (some derived from others), recalls and
  records one or several outcomes, governs with ``apply=True``, flips memories'
  status, forever, acknowledging each step after it returned, until killed.
* ``write``: recall and record ``episodes`` outcomes (``batch`` per call) once ``go``
  exists; the result lists what was recorded and any error.
* ``govern``: ``govern(apply=True)`` in a loop, sometimes ``restore`` of an applied
  entry, until ``stop`` exists.
* ``read``: recall, get, list, audit and hot-tier reads in a loop until ``stop`` exists.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import time
import traceback
import zlib
from typing import Any

WORDS = (
    "python list reverse sort append insert pop dict key value set tuple string split join "
    "prague capital czech river bridge castle water boil celsius pressure altitude kettle "
    "recursion base case stack frame loop iterate generator yield lambda closure scope"
).split()


def query(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4)))


def outcome(rng: random.Random, ids: list[str]) -> bool:
    """Episodes that retrieved a "bad" memory (a third of ids) mostly fail, others mostly succeed."""
    bad = any(zlib.crc32(i.encode()) % 3 == 0 for i in ids)
    return rng.random() < (0.15 if bad else 0.85)


def describe(exc: BaseException) -> dict[str, str]:
    return {"type": type(exc).__name__, "message": str(exc), "traceback": traceback.format_exc()}


class Acks:
    """Acknowledgement lines, each written with one ``write`` call."""

    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def __call__(self, record: dict[str, Any]) -> None:
        data = (json.dumps(record) + "\n").encode()
        while data:
            data = data[os.write(self._fd, data) :]


def wait_for(path: str) -> None:
    while not os.path.exists(path):
        time.sleep(0.005)


def open_store(cfg: dict[str, Any]) -> Any:
    from memworth import HashingEncoder, MemoryStore

    return MemoryStore.open(cfg["url"], encoder=HashingEncoder(), seed=cfg["seed"])


def mixed(cfg: dict[str, Any]) -> None:
    """The crash writer: no error handling on purpose, any exception ends it early (the parent sees)."""
    rng = random.Random(cfg["seed"])
    ack = Acks(cfg["out"])
    store = open_store(cfg)
    known = [m.id for m in store.list()]
    life = cfg["life"]
    ack({"op": "ready"})
    for step in range(10**9):
        op = rng.choices(["add", "record", "record_many", "govern", "status"], weights=[2, 6, 3, 1, 1])[0]
        if op == "add":
            items: list[dict[str, Any]] = []
            for j in range(rng.randint(1, 4)):
                mid = f"L{life}-{step}-{j}"
                item: dict[str, Any] = {"id": mid, "text": f"{query(rng)} note {mid}"}
                if known and rng.random() < 0.3:
                    item["derived_from"] = [rng.choice(known)]
                items.append(item)
            store.add_many(items)
            known += [item["id"] for item in items]
            ack({"op": "add", "items": items})
        elif op in ("record", "record_many"):
            pairs = []
            for _ in range(1 if op == "record" else rng.randint(2, 6)):
                recall = store.recall(query(rng), k=rng.randint(1, 5))
                pairs.append((recall.episode.id, outcome(rng, [r.memory.id for r in recall])))
            if op == "record":
                store.record(pairs[0][0], pairs[0][1])
            else:
                store.record_many(pairs)
            ack({"op": "record", "outcomes": pairs})
        elif op == "govern":
            report = store.govern(apply=True)
            ack({"op": "audit", "seqs": [e.seq for e in report.applied]})
        else:
            mid = rng.choice(known)
            new = "suppressed" if store.get(mid).status == "active" else "active"
            entry = store.set_status(mid, new, reason=f"life {life} step {step}")
            ack({"op": "audit", "seqs": [entry.seq]})


def write(cfg: dict[str, Any]) -> dict[str, Any]:
    rng = random.Random(cfg["seed"])
    result: dict[str, Any] = {"errors": [], "recorded": []}
    store = open_store(cfg)
    wait_for(cfg["go"])
    pending: list[tuple[str, bool]] = []
    for i in range(cfg["episodes"]):
        try:
            recall = store.recall(query(rng), k=rng.randint(1, 5))
            pending.append((recall.episode.id, outcome(rng, [r.memory.id for r in recall])))
        except Exception as exc:
            result["errors"].append(describe(exc))
        if pending and (len(pending) == cfg["batch"] or i == cfg["episodes"] - 1):
            try:
                store.record_many(pending)
                result["recorded"] += pending
            except Exception as exc:
                result["errors"].append(describe(exc))
            pending = []
    store.close()
    return result


def govern(cfg: dict[str, Any]) -> dict[str, Any]:
    from memworth import StoreError

    rng = random.Random(cfg["seed"])
    result: dict[str, Any] = {"errors": [], "applied": [], "skipped": 0, "restored": [], "conflicts": 0, "rounds": 0}
    store = open_store(cfg)
    wait_for(cfg["go"])
    while True:
        last = os.path.exists(cfg["stop"])  # one more round after the writers finished
        try:
            report = store.govern(apply=True)
            result["rounds"] += 1
            result["applied"] += [[e.seq, e.at] for e in report.applied]
            result["skipped"] += len(report.skipped)
            if report.applied and rng.random() < 0.3:
                entry = rng.choice(report.applied)
                try:
                    result["restored"].append(store.restore(entry.seq, reason="undo under load").seq)
                except StoreError:
                    result["conflicts"] += 1  # changed again since: restore refuses, as documented
        except Exception as exc:
            result["errors"].append(describe(exc))
        if last:
            break
        time.sleep(0.02)  # leave the two cores to the writers between rounds
    store.close()
    return result


def read(cfg: dict[str, Any]) -> dict[str, Any]:
    rng = random.Random(cfg["seed"])
    result: dict[str, Any] = {"errors": [], "reads": 0, "bad": []}
    store = open_store(cfg)
    wait_for(cfg["go"])
    while not os.path.exists(cfg["stop"]):
        try:
            k = rng.randint(1, 6)
            recall = store.recall(query(rng), k=k)
            ids = [r.memory.id for r in recall]
            if len(ids) > k or len(set(ids)) != len(ids):
                result["bad"].append(f"recall returned {ids} for k={k}")
            memories = store.list()
            if len(memories) < cfg["memories"]:
                result["bad"].append(f"list() saw {len(memories)} memories of {cfg['memories']}")
            m = store.get(rng.choice(memories).id)
            store.audit(m.id)
            store.hot_tier()
            result["reads"] += 1
        except Exception as exc:
            result["errors"].append(describe(exc))
        time.sleep(0.01)
    store.close()
    return result


def run(cfg: dict[str, Any]) -> None:
    log = os.open(cfg["out"] + ".log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    if cfg["mode"] == "mixed":
        mixed(cfg)
        return
    result = {"write": write, "govern": govern, "read": read}[cfg["mode"]](cfg)
    tmp = cfg["result"] + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(result, fh)
    os.replace(tmp, cfg["result"])


def serve() -> None:
    import psycopg  # noqa: F401
    import psycopg_pool  # noqa: F401

    import memworth  # imported once here, inherited by every child
    import memworth.store.postgres
    import memworth.store.sqlite

    # Warm up once (first calls build caches), on the in-process backend: no threads, no files.
    with memworth.MemoryStore.open("memory://", encoder=memworth.HashingEncoder(), seed=0) as warm:
        warm.add_many([{"id": "a", "text": "warm up"}, {"id": "b", "text": "warm up too", "derived_from": ["a"]}])
        for i in range(12):
            warm.record(warm.recall("warm", k=2).episode, i % 3 == 0)
        warm.govern(apply=True)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    print("ready", flush=True)
    for line in sys.stdin:
        cfg = json.loads(line)
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                sys.stdin.close()
                run(cfg)
            except BaseException:
                traceback.print_exc()
                code = 1
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        print(json.dumps({"pid": pid}), flush=True)


if __name__ == "__main__":
    serve()
