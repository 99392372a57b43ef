"""Memory ids to dense row numbers, one id at a time or a whole integer array at once."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from memworth.errors import UnknownMemoryError, ValidationError

# Integer ids in [0, DENSE_LIMIT) are looked up through a flat table (one gather for a
# whole batch); other ids through dictionaries. 2**24 ids keep that table under 128 MB.
DENSE_LIMIT = 1 << 24


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
        self._table = np.full(0, -1, dtype=np.int64)
        self._int_rows: dict[int, int] = {}  # integer ids outside the flat table
        self._other_rows: dict[Hashable, int] = {}
        self.keys: list[Hashable] = []

    def __len__(self) -> int:
        return len(self.keys)

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

    def int_rows(self, ids: np.ndarray, *, create: bool) -> np.ndarray:
        """Rows of a flat integer array of ids, vectorised."""
        ids = ids.astype(np.int64, copy=False)
        if ids.size == 0:
            return ids.copy()
        if ids.min() >= 0 and ids.max() < DENSE_LIMIT:
            return self._dense_rows(ids, create=create)
        dense = (ids >= 0) & (ids < DENSE_LIMIT)
        out = np.empty(ids.size, dtype=np.int64)
        if dense.any():
            out[dense] = self._dense_rows(ids[dense], create=create)
        sparse = ids[~dense]
        uniq, inverse = np.unique(sparse, return_inverse=True)
        out[~dense] = self.rows([int(k) for k in uniq], create=create)[inverse]
        return out

    def _dense_rows(self, ids: np.ndarray, *, create: bool) -> np.ndarray:
        top = int(ids.max())
        if top >= len(self._table):
            if not create:
                missing = ids[ids >= len(self._table)]
                raise UnknownMemoryError(int(missing[0]))
            grown = np.full(min(DENSE_LIMIT, max(top + 1, 2 * len(self._table))), -1, dtype=np.int64)
            grown[: len(self._table)] = self._table
            self._table = grown
        rows = self._table[ids]
        if rows.min() < 0:
            missing = rows < 0
            if not create:
                raise UnknownMemoryError(int(ids[missing.argmax()]))
            seen = np.zeros(len(self._table), dtype=bool)  # marks instead of a sort: O(n)
            seen[ids[missing]] = True
            new = np.flatnonzero(seen)
            start = len(self.keys)
            self._table[new] = np.arange(start, start + new.size)
            self.keys.extend(new.tolist())
            rows = self._table[ids]  # one more gather beats scattering into the missing slots
        return rows

    def _add(self, key: Hashable) -> int:
        r = len(self.keys)
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
        return r
