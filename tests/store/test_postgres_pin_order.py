"""PostgreSQL: a pin (an audit note) takes its namespace's generation row like every audited change.

Govern's change requires no pin entry after the last audit seq its decision read. Seqs are
given at insert and commits can come in another order: a pin given seq 1 in a transaction
still open, another change committed at seq 2, govern reading up to 2, then the pin
committing before govern's write, let govern change the pinned memory (found in review,
2026-12-04). With the pin holding the generation row until it commits, no other change of
the namespace can take a later seq and commit first.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from memworth import HashingEncoder, MemoryStore
from tests.store.conftest import drop, url_for


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[tuple[MemoryStore, MemoryStore]]:
    url = url_for("postgres", tmp_path)
    a = MemoryStore.open(url, encoder=HashingEncoder(), seed=0, exploration=0.0)
    b = MemoryStore.open(url, encoder=HashingEncoder(), seed=0, exploration=0.0)
    a.add_many([{"id": "cz", "text": "Prague was the capital of Czechoslovakia."}, {"id": "water", "text": "Water boils."}])
    yield a, b
    b.close()
    drop(a)


def test_an_open_pin_holds_back_the_namespaces_other_changes(stores) -> None:
    import psycopg
    from psycopg import errors

    person, other = stores
    pinned, release = threading.Event(), threading.Event()

    def pin_in_flight() -> None:
        with person.transaction():
            person.pin("cz", reason="a person keeps it")
            pinned.set()
            release.wait(60)

    t = threading.Thread(target=pin_in_flight)
    t.start()
    try:
        assert pinned.wait(60)
        schema = person.backend.schema  # type: ignore[attr-defined]
        with psycopg.connect("postgresql://postgres@127.0.0.1:5432/test", autocommit=True) as probe:
            with pytest.raises(errors.LockNotAvailable):  # before: no lock, a later change committed first
                probe.execute(
                    psycopg.sql.SQL("SELECT 1 FROM {}.generations WHERE namespace = 'default' FOR UPDATE NOWAIT").format(
                        psycopg.sql.Identifier(schema)
                    )
                )
    finally:
        release.set()
        t.join(60)
    other.pin("water", reason="after the first pin committed")
    assert [e.seq for e in other.audit() if e.field == "pin"] == sorted(e.seq for e in other.audit() if e.field == "pin")
