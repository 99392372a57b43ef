"""A PostgreSQL record's array parameters go through memworth's own binary dumpers (issue 17):
one call per array instead of psycopg's search for the element type and its dump element by
element. They must send what psycopg sends, byte for byte (an empty array, which psycopg
sends as the text ``{}``, is the same empty array on the server), and a store still records
names and ids of any text."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import pytest

from memworth import HashingEncoder, MemoryStore
from tests.store.conftest import drop, url_for

ODD = ["é∂\u2028'\"{},\\ x", "", "NULL", "a b"]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MemoryStore]:
    s = MemoryStore.open(url_for("postgres", tmp_path), encoder=HashingEncoder(), seed=0, exploration=0.0)
    s.add_many([{"id": mid, "text": f"fact {i} about python lists"} for i, mid in enumerate(ODD) if mid])
    yield s
    drop(s)


def test_the_array_dumpers_send_what_psycopg_sends(store: MemoryStore) -> None:
    from psycopg.adapt import PyFormat, Transformer

    from memworth.store.postgres import _Bools, _Float8s, _Texts

    cases = [
        (ODD, _Texts(ODD)),
        ([0.25, -0.0, 1e-310, math.inf, math.nan, 1.8e9], _Float8s([0.25, -0.0, 1e-310, math.inf, math.nan, 1.8e9])),
        ([True, False, True], _Bools([True, False, True])),
    ]
    with store.backend._pool.connection() as conn:  # type: ignore[attr-defined]
        for plain, ours in cases:
            want = Transformer(conn).dump_sequence([plain], [PyFormat.BINARY])
            got = Transformer(conn).dump_sequence([ours], [PyFormat.BINARY])
            assert got == want, type(ours).__name__
        empties = (
            ("SELECT cardinality(%b::text[]), %b::text[] = '{}'::text[]", _Texts()),
            ("SELECT cardinality(%b::float8[]), %b::float8[] = '{}'::float8[]", _Float8s()),
            ("SELECT cardinality(%b::bool[]), %b::bool[] = '{}'::bool[]", _Bools()),
        )
        for sql, empty in empties:
            assert conn.execute(sql, [empty, empty]).fetchone() == (0, True), sql


def test_a_record_of_memories_with_odd_ids_is_kept_and_replays(store: MemoryStore) -> None:
    for query in ("python lists", "fact about lists", "fact 2"):
        store.record(store.recall(query, k=3).episode, True)
    assert sum(m.counts.n for m in store.list()) == 9
    assert store.replay().consistent


@pytest.mark.parametrize("encoding", ["SQL_ASCII", "LATIN1", "EUC_JP"])
def test_the_text_dumper_encodes_as_psycopg_under_any_client_encoding(store: MemoryStore, encoding: str) -> None:
    # psycopg sends UTF-8 to a SQL_ASCII connection; ours sent ASCII and raised on "é" (found in review).
    import psycopg
    from psycopg.adapt import PyFormat, Transformer

    from memworth.store.postgres import _array_dumpers, _Texts

    _array_dumpers()
    with psycopg.connect("host=127.0.0.1 dbname=test user=postgres", client_encoding=encoding) as conn:
        for texts in (["é"], ["¥", "plain"], ["日本"] if encoding != "LATIN1" else ["ÿ"]):
            want = Transformer(conn).dump_sequence([list(texts)], [PyFormat.BINARY])
            assert Transformer(conn).dump_sequence([_Texts(texts)], [PyFormat.BINARY]) == want


def test_the_nullable_array_dumpers_give_the_server_what_psycopg_gives_it(store: MemoryStore) -> None:
    # an outcome's propagation, max_hops and settings version (NULL: logged before the column)
    from memworth.store.postgres import _maybe_int4s, _MaybeFloat8s, _MaybeInt4s

    floats = ([0.5], [None], [0.25, None, -0.0, math.inf, -math.inf, 1e-310, 1.8e9], [])
    ints = ([3], [None], [0, None, -5, 2**31 - 1, -(2**31)], [])
    with store.backend._pool.connection() as conn:  # type: ignore[attr-defined]
        for values in floats:
            sql = "SELECT %b::float8[]::text, %s::float8[]::text, %b::float8[] IS NOT DISTINCT FROM %s::float8[]"
            ours, theirs, same = conn.execute(sql, [_MaybeFloat8s(values), values] * 2).fetchone()
            assert ours == theirs and same, values
        for values in ints:
            assert isinstance(_maybe_int4s(values), _MaybeInt4s)
            sql = "SELECT %b::int4[]::text, %s::int4[]::text"
            ours, theirs = conn.execute(sql, [_maybe_int4s(values), values]).fetchone()
            assert ours == theirs, values
        assert conn.execute("SELECT %b::float8[]::text", [_MaybeFloat8s([-0.0, math.nan])]).fetchone() == ("{-0,NaN}",)
    assert type(_maybe_int4s([2**31])) is list  # psycopg sends it: the server says "integer out of range"
    assert type(_maybe_int4s([3, 2.5])) is list  # not an int: psycopg's dump, as before


def test_a_bool_is_not_sent_as_a_number_by_the_nullable_array_dumpers() -> None:
    # bool is an int to Python: it must not become max_hops 1 or propagation 1.0 on the way
    # (psycopg sends it as a boolean, which the server refuses for int4[]/float8[], as before)
    from memworth.store.postgres import _maybe_float8s, _maybe_int4s, _MaybeFloat8s, _MaybeInt4s

    assert type(_maybe_int4s([True, 5])) is list and type(_maybe_int4s([None, False])) is list
    assert type(_maybe_float8s([True])) is list and type(_maybe_float8s([0.5, False])) is list
    assert isinstance(_maybe_int4s([1, None]), _MaybeInt4s)
    assert isinstance(_maybe_float8s([1, None, 0.5]), _MaybeFloat8s) and _maybe_float8s([1, None]) == [1.0, None]
