"""Memory ids to dense row numbers, one id at a time or a whole integer array at once."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from memworth.errors import UnknownMemoryError, ValidationError

# Integer ids in [0, DENSE_LIMIT) are looked up through a flat table (one gather for a
# whole batch); other ids through dictionaries. 2**24 ids keep that table under 64 MB.
DENSE_LIMIT = 1 << 24
# The flat table holds rows as int32 (half the memory traffic of a gather) while every
# row fits; past ROW32_LIMIT rows it is widened to int64 once.
ROW32_LIMIT = int(np.iinfo(np.int32).max)


def check_key(key: object, field: str) -> Hashable:
    """Refuse ids that are unhashable or that compare equal across types (bool, float, None)."""
    if key is None or isinstance(key, (bool, np.bool_, float, np.floating)):
        raise ValidationError(field, f"{key!r} is not a valid id: use strings, integers or tuples")
    try:
        hash(key)
    except TypeError:
        raise ValidationError(field, f"ids must be hashable, got {type(key).__name__}") from None
    return key


def is_int(key: object) -> bool:
    return isinstance(key, (int, np.integer)) and not isinstance(key, (bool, np.bool_))


class Index:
    """Assigns each new id the next row; answers rows for known ids."""

    def __init__(self) -> None:
        self._table = np.full(0, -1, dtype=np.int32)
        self._int_rows: dict[int, int] = {}  # integer ids outside the flat table
        self._other_rows: dict[Hashable, int] = {}
        self._keys: list[Hashable] = []
        self._pending: list[np.ndarray] = []  # ids added in bulk after _keys, not yet Python ints
        self._size = 0
        self._dense = 0  # slots of the flat table that hold a row

    def __len__(self) -> int:
        return self._size

    @property
    def keys(self) -> list[Hashable]:
        """Every id, in row order (ids added in bulk become Python ints when first read)."""
        if self._pending:
            for part in self._pending:
                self._keys.extend(part.tolist())
            self._pending.clear()
        return self._keys

    def row(self, key: Hashable) -> int | None:
        if is_int(key):
            k = int(key)  # type: ignore[call-overload]
            if 0 <= k < len(self._table):
                r = int(self._table[k])
                return r if r >= 0 else None
            return self._int_rows.get(k)
        return self._other_rows.get(key)

    def row_or_raise(self, key: Hashable) -> int:
        r = self.row(key)
        if r is None:
            raise UnknownMemoryError(key)
        return r

    def rows(self, keys: Sequence[Hashable], *, create: bool) -> np.ndarray:
        out = np.empty(len(keys), dtype=np.int64)
        for i, key in enumerate(keys):
            r = self.row(key)
            if r is None:
                if not create:
                    raise UnknownMemoryError(key)
                r = self._add(key)
            out[i] = r
        return out

    def int_rows(self, ids: np.ndarray, *, create: bool, compact: bool = False) -> np.ndarray:
        """Rows of a flat integer array of ids, vectorised.

        Rows are int64, or with ``compact`` whatever the flat table holds (int32 while
        every row fits) when every id is in it.
        """
        if ids.size == 0:
            return np.zeros(0, dtype=np.int64)
        if ids.dtype.kind in "iu" and ids.dtype.itemsize <= 8 and ids.min() >= 0 and ids.max() < DENSE_LIMIT:
            rows = self._dense_rows(ids, create=create)
            return rows if compact else rows.astype(np.int64, copy=False)
        ids = ids.astype(np.int64, copy=False)
        dense = (ids >= 0) & (ids < DENSE_LIMIT)
        out = np.empty(ids.size, dtype=np.int64)
        if dense.any():
            out[dense] = self._dense_rows(ids[dense], create=create)
        sparse = ids[~dense]
        uniq, inverse = np.unique(sparse, return_inverse=True)
        out[~dense] = self.rows([int(k) for k in uniq], create=create)[inverse]
        return out

    def _dense_rows(self, ids: np.ndarray, *, create: bool) -> np.ndarray:
        """Rows of ids in [0, DENSE_LIMIT); new ones (with ``create``) get rows in ascending id order."""
        top = int(ids.max())
        if top >= len(self._table):
            if not create:
                missing = ids[ids >= len(self._table)]
                raise UnknownMemoryError(int(missing[0]))
            grown = np.full(min(DENSE_LIMIT, max(top + 1, 2 * len(self._table))), -1, dtype=self._table.dtype)
            grown[: len(self._table)] = self._table
            self._table = grown
        if self._dense == len(self._table):  # every slot holds a row: no id can be new
            return np.take(self._table, ids)
        if create and 4 * ids.size >= len(self._table):
            # A batch large against the table: mark the ids it holds, keep those without a
            # row, then gather once (cheaper than gathering, finding the gaps, and patching).
            seen = np.zeros(len(self._table), dtype=bool)
            seen[ids] = True
            seen &= self._table < 0
            self._assign(np.flatnonzero(seen))
            return np.take(self._table, ids)
        rows = np.take(self._table, ids)
        if rows.min() < 0:
            missing = rows < 0
            if not create:
                raise UnknownMemoryError(int(ids[missing.argmax()]))
            fresh = ids[missing]
            self._assign(np.unique(fresh))
            rows = rows.astype(self._table.dtype, copy=False)  # the table may have widened
            rows[missing] = self._table[fresh]
        return rows

    def _assign(self, new: np.ndarray) -> None:
        """Give the dense ids ``new`` (ascending, all without a row) the next rows."""
        if new.size == 0:
            return
        start = self._size
        if start + new.size > ROW32_LIMIT and self._table.dtype != np.int64:
            self._table = self._table.astype(np.int64)
        self._table[new] = np.arange(start, start + new.size, dtype=self._table.dtype)
        self._pending.append(new.astype(np.int64, copy=False))
        self._size += new.size
        self._dense += new.size

    def _add(self, key: Hashable) -> int:
        r = self._size
        if is_int(key):
            k = int(key)  # type: ignore[call-overload]
            if 0 <= k < DENSE_LIMIT:
                self._dense_rows(np.array([k], dtype=np.int64), create=True)
                return r
            self._int_rows[k] = r
            key = k
        else:
            self._other_rows[key] = r
        self.keys.append(key)
        self._size += 1
        return r
