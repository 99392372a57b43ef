"""Cost of the pin check in an audited change (``requires.no_pin_after``: no pin or unpin entry
of the memory after the audit entries govern read), beside the same change without it, on
SQLite and (with ``--postgres URL``) PostgreSQL, in one run, alternating.

A store of 2,000 memories whose audit log holds ``--entries`` entries (pins and status
changes spread over every memory); each timed change flips one memory's status and back.

Usage: ``PYTHONPATH=src python benchmarks/change_pin_check.py [--entries 20000] [--json out.json]``
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

from memworth import HashingEncoder, MemoryStore
from memworth.store.backend import REQUIRES
from memworth.store.records import AuditEntry


def timed(store: MemoryStore, reps: int, pinned_check: bool, seen: int) -> float:
    total = 0.0
    for i in range(reps):
        mid = f"m{i % 2000}"
        for old, new in (("active", "suppressed"), ("suppressed", "active")):
            requires = {"status": old, "standing": "normal"}
            if pinned_check:
                requires["no_pin_after"] = seen  # type: ignore[assignment]
            entry = AuditEntry(0, mid, "default", "suppress", "status", old, new, "bench", {REQUIRES: requires}, 0.0)
            start = time.perf_counter()
            store.backend.change(entry)
            total += time.perf_counter() - start
    return total / (2 * reps)


def run(url: str, entries: int, reps: int) -> dict[str, object]:
    s = MemoryStore.open(url, encoder=HashingEncoder(), seed=0)
    s.add_many([{"id": f"m{i}", "text": f"fact {i}"} for i in range(2000)])
    for i in range(entries // 2):
        s.pin(f"m{i % 2000}", reason="bench") if i % 4000 < 2000 else s.unpin(f"m{i % 2000}", reason="bench")
        s.set_status(f"m{i % 2000}", "suppressed" if (i // 2000) % 2 == 0 else "active", reason="bench")
    for m in s.list(status="suppressed"):
        s.set_status(m.id, "active", reason="bench")
    seen = max(e.seq for e in s.audit())
    without, with_check = [], []
    for _ in range(3):  # alternating, side by side
        without.append(timed(s, reps, False, seen))
        with_check.append(timed(s, reps, True, seen))
    s.close()
    return {
        "backend": url.split(":", 1)[0],
        "audit_entries": seen,
        "change_ms": min(without) * 1e3,
        "change_with_pin_check_ms": min(with_check) * 1e3,
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--entries", type=int, default=20000)
    p.add_argument("--reps", type=int, default=300)
    p.add_argument("--postgres", default=None)
    p.add_argument("--json", default=None)
    a = p.parse_args()
    urls = [f"sqlite:///{tempfile.mkdtemp()}/c.db"] + ([a.postgres] if a.postgres else [])
    rows = [run(u, a.entries, a.reps) for u in urls]
    load = os.getloadavg()
    print("| backend | audit entries | change | change with pin check | ratio |")
    print("|---|---|---|---|---|")
    for r in rows:
        ratio = float(r["change_with_pin_check_ms"]) / float(r["change_ms"])  # type: ignore[arg-type]
        print(
            f"| {r['backend']} | {r['audit_entries']} | {r['change_ms']:.3f} ms "
            f"| {r['change_with_pin_check_ms']:.3f} ms | {ratio:.2f} |"
        )
    print(f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rows": rows, "load": load}, f, indent=1)


if __name__ == "__main__":
    main()
