"""The first record of a store object starts the AlarmSplitter's live change statistics.

It advances the namespace's detectors over the log, as govern and ``outcome_streams`` do, but
does not read every memory's stream (each one's CUSUM reading and baseline: half of the first
record's time on a PostgreSQL log of 600 outcomes, issue 17): recording needs the CUSUM state
only. The statistics it starts from are those a full read gives, bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from memworth import MemoryStore, Sidecar
from memworth.signals.outcome_streams import NamespaceScan
from tests.store.test_checkpoint import _opened, _url
from tests.store.test_following import IDS, _feed


def test_the_first_record_reads_no_stream_and_starts_where_a_full_read_does(
    make_store: Callable[..., MemoryStore], backend_kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if backend_kind == "memory":
        pytest.skip("an in-memory store is one store object: its first record scans an empty log")
    first = make_store(seed=0, exploration=0.0)
    first.add_many([{"id": mid, "text": f"memory {mid}"} for mid in IDS])
    rng = np.random.default_rng(5)
    _feed(first, "default", 120, rng, broken=False)
    _feed(first, "default", 60, rng, broken=True)
    url = _url(first)
    episode = Sidecar(first).retrieved(["m0", "m1", "m2"], query="last one")
    reads: list[Any] = []
    read = NamespaceScan._read

    def counted(self: NamespaceScan) -> Any:
        reads.append(self)
        return read(self)

    monkeypatch.setattr(NamespaceScan, "_read", counted)
    with _opened(url) as second:
        second.record(episode.id, False)
        assert reads == []  # no stream was read to start the live statistics
        live = dict(second._live["default"].statistics())
    with _opened(url) as third:
        third.outcome_streams("default")  # a full read of the same log, the new outcome included
        assert reads
        want = dict(third._live["default"].statistics())
    assert live == want and max(live.values()) > 0
