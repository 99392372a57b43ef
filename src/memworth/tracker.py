"""An in-process Memory Worth tracker: any hashable ids, one episode or millions at once."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence

import numpy as np

from memworth._index import Index, check_key, is_int
from memworth.counts import Counts, CountsTable
from memworth.credit import as_float_array, check_w_min, normalise, normalise_rows
from memworth.decay import decay_factor
from memworth.errors import ValidationError
from memworth.estimators import ContextPooled, Decayed, Estimator, RawWorth
from memworth.outcome import as_outcome, as_outcomes
from memworth.policy import Classification, Taxonomy

__all__ = ["Tracker"]

_CHUNK = 1 << 14  # episodes per scatter-add pass: the temporaries stay in cache
_BLOCK = 1 << 16  # memories per pass when adding counts to every memory
_COUNT_CHUNK = 1 << 17  # episodes per np.bincount when counting a batch
_DUP_CHUNK = 1 << 13  # episodes per pass of the duplicate check
_PAIRWISE_MAX_K = 16  # up to this k, compare columns pairwise; beyond, sort each row
_PAIRWISE_MIN_EPISODES = 1 << 10  # below this, sorting each row costs less than the set-up


class _Bank:
    """Growable aligned arrays of counts, one row per memory.

    hits+ and hits- sit side by side in one (rows, 2) array, so a retrieval's slot is
    2 * row (+1 on failure) in its flat view and one scatter-add updates both. A batch
    with uniform credit that is large against the table is counted with one
    ``np.bincount`` over those slots instead (see :meth:`_add_counts`).
    """

    def __init__(self, decayed: bool = False) -> None:
        self.hits = np.zeros((0, 2))
        self.n = np.zeros(0)
        self.last = np.zeros(0)  # episode clock of the last update (grown for decayed banks only)
        self.decayed = decayed
        self.used = 0  # rows that may hold counts; growing copies only these

    @property
    def success(self) -> np.ndarray:
        return self.hits[:, 0]

    @property
    def failure(self) -> np.ndarray:
        return self.hits[:, 1]

    def reserve(self, size: int) -> None:
        if size > len(self.n):
            # Fresh zeros cost nothing until written, so room to grow is nearly free (and
            # growing again, which touches every page twice, rarer); only rows in use are copied.
            cap = max(2 * size, 16)
            hits = np.zeros((cap, 2))
            hits[: self.used] = self.hits[: self.used]
            n = np.zeros(cap)
            n[: self.used] = self.n[: self.used]
            self.hits, self.n = hits, n
            if self.decayed:
                last = np.zeros(cap)
                last[: self.used] = self.last[: self.used]
                self.last = last
        self.used = max(self.used, size)

    def add(
        self,
        rows: np.ndarray,
        weights: np.ndarray | None,
        success: np.ndarray,
        size: int,
        discount: np.ndarray | None = None,
    ) -> None:
        """Add the episodes ``rows`` (episodes, k): credit ``weights`` (None: 1/k), outcomes ``success``.

        ``discount`` (one factor per episode) scales each episode's hits and retrieval
        count, as decayed counts need. Scatter-adds touch only the rows retrieved, so a
        small batch into a large table costs what the batch costs.
        """
        self.reserve(size)
        n_ep, k = rows.shape
        if weights is None and discount is None and size <= 2 * rows.size:
            self._add_counts(rows, success, size)
            return
        for start in range(0, n_ep, _CHUNK):
            part = slice(start, start + _CHUNK)
            r = rows[part].astype(np.int64, copy=False)  # np.add.at is fastest with int64 indices
            slots = r << 1
            slots |= ~success[part, None]
            if discount is None:
                credit: np.ndarray | float = 1.0 / k if weights is None else weights[part].ravel()
                np.add.at(self.n, r.ravel(), 1.0)
            else:
                per_slot = np.broadcast_to(discount[part, None], r.shape)
                credit = (per_slot / k if weights is None else per_slot * weights[part]).ravel()
                np.add.at(self.n, r.ravel(), per_slot.ravel())
            np.add.at(self.hits.reshape(-1), slots.ravel(), credit)

    def _add_counts(self, rows: np.ndarray, success: np.ndarray, size: int) -> None:
        """Uniform credit when the batch covers the table: count, then add once per memory.

        One ``np.bincount`` over the slots (2 * row, +1 on failure) counts each memory's
        successful and failed retrievals exactly; its hits grow by count x (1/k), rounded
        once rather than once per retrieval, and its retrieval count by the two counts' sum.
        """
        share = 1.0 / rows.shape[1]
        counts = np.zeros(0, dtype=np.int64)
        for start in range(0, rows.shape[0], _COUNT_CHUNK):  # pieces: the slots stay small
            slots = np.left_shift(rows[start : start + _COUNT_CHUNK], 1, dtype=np.int64)
            slots |= ~success[start : start + _COUNT_CHUNK, None]
            piece = np.bincount(slots.ravel(), minlength=2 * size)
            counts = piece if start == 0 else np.add(counts, piece, out=counts)
        for start in range(0, size, _BLOCK):  # in blocks: small temporaries, no fresh pages
            block = counts[2 * start : 2 * (start + _BLOCK)]
            stop = start + block.size // 2
            hits = self.hits[start:stop].reshape(-1)  # a view: the rows are contiguous
            hits += block * share
            self.n[start:stop] += block[0::2] + block[1::2]

    def decay_to(self, rows: np.ndarray, clock: float, half_life: float) -> None:
        """Bring the decayed counts of ``rows`` (unique) to episode ``clock``."""
        factor = decay_factor(clock - self.last[rows], half_life)
        self.hits[rows] *= np.asarray(factor)[:, None]
        self.n[rows] *= factor
        self.last[rows] = clock

    def table(self, rows: np.ndarray) -> CountsTable:
        return CountsTable(self.success[rows], self.failure[rows], self.n[rows])


class Tracker:
    """Counts and worth of every memory an agent has retrieved, kept in memory.

    Parameters
    ----------
    w_min
        Floor on each retrieved memory's credit weight (the paper's assumption A5).
    half_life
        If set, also keep counts that decay with this half-life in episodes, read by
        :class:`memworth.Decayed` estimators.

    Examples
    --------
    >>> t = Tracker()
    >>> t.record(["paris-fact", "python-tip"], success=True)
    >>> t.record(["paris-fact"], success=False)
    >>> t.counts("paris-fact")
    Counts(success=0.5, failure=1.0, n=2.0)
    >>> round(t.worth("paris-fact"), 3), t.worth("python-tip")
    (0.333, 1.0)

    Millions of episodes at once, with integer ids:

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> ids = np.argsort(rng.random((1000, 50)), axis=1)[:, :8]   # 1000 episodes, k=8 of 50
    >>> t2 = Tracker()
    >>> t2.record_batch(ids, success=rng.random(1000) < 0.5)
    >>> len(t2), t2.episodes
    (50, 1000)
    """

    def __init__(self, *, w_min: float = 0.0, half_life: float | None = None) -> None:
        check_w_min(w_min, 1)
        if half_life is not None and (
            isinstance(half_life, bool)
            or not isinstance(half_life, (int, float, np.integer, np.floating))
            or not np.isfinite(float(half_life))
            or half_life <= 0
        ):
            raise ValidationError("half_life", f"must be a finite number > 0 or None, got {half_life!r}")
        self.w_min = w_min
        self.half_life = half_life
        self._index = Index()
        self._totals = _Bank()
        self._decayed = _Bank(decayed=True) if half_life is not None else None
        self._contexts: dict[Hashable, _Bank] = {}
        self._episodes = 0

    # -- writing --------------------------------------------------------------------

    def register(self, ids: Sequence[Hashable] | np.ndarray) -> None:
        """Start tracking memories that have no evidence yet (their worth reads 0.5).

        Recording registers ids on first sight; registering first lets a caller read the
        worth of memories that were never retrieved. Known ids are left as they are.

        Examples
        --------
        >>> t = Tracker()
        >>> t.register(["a", "b"])
        >>> t.worth("b"), t.counts("b").n
        (0.5, 0.0)
        """
        if isinstance(ids, np.ndarray):
            if ids.size and not np.issubdtype(ids.dtype, np.integer):
                raise ValidationError("ids", f"an array of ids must hold integers, got dtype {ids.dtype}")
            self._index.int_rows(ids.ravel(), create=True)
            return
        if isinstance(ids, (str, bytes)) or not isinstance(ids, Sequence):
            raise ValidationError("ids", f"must be a list of memory ids, got {type(ids).__name__}")
        keys = [check_key(k, "ids") for k in ids]
        self._index.rows(keys, create=True)

    def record(
        self,
        ids: Sequence[Hashable],
        success: object,
        weights: Sequence[float] | np.ndarray | None = None,
        context: Hashable | None = None,
    ) -> None:
        """Record one episode: the memories it retrieved and whether it succeeded.

        Parameters
        ----------
        ids
            The retrieved memories (any hashable ids; no duplicates).
        success
            ``True``/``False``, ``"success"``/``"failure"``, or ``1``/``0``/``-1``.
        weights
            Credit weights or retrieval scores, one per id; normalised to sum to 1 and
            floored at ``w_min``. ``None`` means uniform ``1/k``.
        context
            Optional context label (task type, query cluster) for per-context worth.

        Nothing changes if any argument is refused.
        """
        if isinstance(ids, (str, bytes)) or not isinstance(ids, (Sequence, np.ndarray)):
            raise ValidationError("ids", f"must be a list of memory ids, got {type(ids).__name__}")
        keys = [check_key(k, "ids") for k in ids]
        k = len(keys)
        if k == 0:
            raise ValidationError("ids", "an episode must retrieve at least one memory")
        if len(set(keys)) != k:
            seen: set[Hashable] = set()
            dup = next(x for x in keys if x in seen or seen.add(x))  # type: ignore[func-returns-value]
            raise ValidationError("ids", f"{dup!r} appears twice in one episode")
        outcome = as_outcome(success)
        check_w_min(self.w_min, k)
        w = None
        if weights is not None:
            w = normalise(weights, w_min=self.w_min)
            if w.size != k:
                raise ValidationError("weights", f"expected {k} weights, one per id, got {w.size}")
        if context is not None:
            check_key(context, "context")
        rows = self._index.rows(keys, create=True)
        self._apply(rows[None, :], None if w is None else w[None, :], np.array([outcome]), context)

    def record_batch(
        self,
        ids: np.ndarray,
        success: np.ndarray,
        weights: np.ndarray | None = None,
        contexts: np.ndarray | Sequence[Hashable] | None = None,
    ) -> None:
        """Record many episodes at once, in order; vectorised.

        Parameters
        ----------
        ids
            Integer array of shape (episodes, k): the memories each episode retrieved.
        success
            Shape (episodes,): booleans, or integers 1 (success) / 0 or -1 (failure).
        weights
            Optional shape (episodes, k): credit weights or scores, normalised per row.
        contexts
            Optional, one context label per episode.

        Nothing changes if any argument is refused.
        """
        arr = np.asarray(ids)
        if arr.ndim != 2:
            raise ValidationError("ids", f"must be a 2-D array (episodes, k), got shape {arr.shape}")
        if not np.issubdtype(arr.dtype, np.integer):
            raise ValidationError("ids", f"must be integers, got dtype {arr.dtype}")
        n_ep, k = arr.shape
        if k == 0:
            raise ValidationError("ids", "an episode must retrieve at least one memory")
        if k > 1:
            dup = _first_duplicate_row(arr)
            if dup >= 0:
                raise ValidationError("ids", f"episode {dup} retrieves the same id twice")
        outcome = as_outcomes(success, n_ep)
        check_w_min(self.w_min, k)
        w = None
        if weights is not None:
            warr = as_float_array(weights, "weights")
            if warr.shape != arr.shape:
                raise ValidationError("weights", f"must have the shape of ids {arr.shape}, got {warr.shape}")
            w = normalise_rows(warr, w_min=self.w_min)
        labels = None
        if contexts is not None:
            if isinstance(contexts, (str, bytes)) or not isinstance(contexts, Iterable):
                raise ValidationError(
                    "contexts", f"must be a list of labels, one per episode, got {type(contexts).__name__}"
                )
            labels = list(contexts)
            if len(labels) != n_ep:
                raise ValidationError("contexts", f"expected {n_ep} labels, one per episode, got {len(labels)}")
            labels = [check_key(c.item() if isinstance(c, np.generic) else c, "contexts") for c in labels]
        if n_ep == 0:
            return
        rows = self._index.int_rows(arr.ravel(), create=True, compact=True).reshape(n_ep, k)
        self._apply(rows, w, outcome, None)
        if labels is not None:
            groups: dict[Hashable, list[int]] = {}
            for e, c in enumerate(labels):
                groups.setdefault(c, []).append(e)
            for c, eps in groups.items():
                sel = np.asarray(eps)
                self._context_bank(c).add(rows[sel], None if w is None else w[sel], outcome[sel], len(self._index))

    def merge(self, other: Tracker) -> None:
        """Add the counts of ``other`` (another shard) into this tracker, exactly.

        Shards that saw disjoint episodes add up to one tracker that saw them all: overall
        and per-context counts and the episode count are sums, ids new to this tracker
        are appended in ``other``'s order. Decayed counts do not merge exactly (each
        shard's clock counts only its own episodes, and how they interleave is lost), so
        trackers with a ``half_life`` are refused, as are shards with different ``w_min``.
        ``other`` is left unchanged.

        Examples
        --------
        >>> a, b = Tracker(), Tracker()
        >>> a.record(["x", "y"], success=True)
        >>> b.record(["y", "z"], success=False)
        >>> a.merge(b)
        >>> a.counts("y"), a.episodes, a.ids()
        (Counts(success=0.5, failure=0.5, n=2.0), 2, ['x', 'y', 'z'])
        """
        if not isinstance(other, Tracker):
            raise ValidationError("other", f"must be a Tracker, got {type(other).__name__}")
        if other is self:
            raise ValidationError("other", "a tracker cannot be merged into itself (its counts would double)")
        if self.half_life is not None or other.half_life is not None:
            raise ValidationError(
                "half_life", "trackers with decayed counts do not merge exactly: their episode clocks interleave"
            )
        if self.w_min != other.w_min:
            raise ValidationError("w_min", f"shards must share w_min, got {self.w_min} and {other.w_min}")
        keys = other._index.keys
        if keys and all(is_int(k) for k in keys):
            rows = self._index.int_rows(np.asarray(keys, dtype=np.int64), create=True)
        else:
            rows = self._index.rows(keys, create=True)
        size = len(self._index)
        pairs = [(self._totals, other._totals)]
        pairs += [(self._context_bank(c), bank) for c, bank in other._contexts.items()]
        for mine, theirs in pairs:
            mine.reserve(size)
            used = min(len(theirs.n), len(keys))
            # rows are distinct, so fancy-index addition adds each exactly once
            mine.hits[rows[:used]] += theirs.hits[:used]
            mine.n[rows[:used]] += theirs.n[:used]
        self._episodes += other._episodes

    def _apply(
        self, rows: np.ndarray, weights: np.ndarray | None, success: np.ndarray, context: Hashable | None
    ) -> None:
        """Add episodes ``rows`` (episodes, k), in order, to every bank; advance the clock."""
        size = len(self._index)
        n_ep = rows.shape[0]
        self._totals.add(rows, weights, success, size)
        if context is not None:
            self._context_bank(context).add(rows, weights, success, size)
        if self._decayed is not None and self.half_life is not None:
            bank = self._decayed
            bank.reserve(size)
            for start in range(0, n_ep, _CHUNK):
                # Episode i of the chunk is i + 1 episodes after the clock; bring every touched
                # memory to the chunk's end, then add each episode discounted by its age then.
                part = rows[start : start + _CHUNK]
                m = part.shape[0]
                bank.decay_to(np.unique(part), self._episodes + float(start + m), self.half_life)
                age = np.asarray(decay_factor(np.arange(m - 1, -1, -1, dtype=float), self.half_life))
                w = None if weights is None else weights[start : start + _CHUNK]
                bank.add(part, w, success[start : start + _CHUNK], size, discount=age)
        self._episodes += n_ep

    def _context_bank(self, context: Hashable) -> _Bank:
        bank = self._contexts.get(context)
        if bank is None:
            bank = self._contexts[context] = _Bank()
        return bank

    # -- reading --------------------------------------------------------------------

    @property
    def episodes(self) -> int:
        """Number of episodes recorded so far (the clock decay is measured on)."""
        return self._episodes

    def __len__(self) -> int:
        return len(self._index)

    def __contains__(self, memory_id: object) -> bool:
        try:
            return self._index.row(memory_id) is not None
        except TypeError:
            return False

    def ids(self) -> list[Hashable]:
        """Every memory id seen, in the order first seen (the row order of :meth:`table`).

        Within one :meth:`record_batch` or :meth:`register` call with an integer array,
        the new ids are added in ascending order.
        """
        return list(self._index.keys)

    def contexts(self) -> list[Hashable]:
        """Every context label seen."""
        return list(self._contexts)

    def counts(self, memory_id: Hashable, context: Hashable | None = None, decayed: bool = False) -> Counts:
        """The counts of one memory: overall, within ``context``, or decayed to now."""
        t = self.table([memory_id], context=context, decayed=decayed)
        return Counts(float(t.success[0]), float(t.failure[0]), float(t.n[0]))

    def table(
        self, ids: Iterable[Hashable] | None = None, context: Hashable | None = None, decayed: bool = False
    ) -> CountsTable:
        """Counts of many memories (all, in :meth:`ids` order, by default) as arrays."""
        rows = self._rows(ids)
        if decayed:
            if context is not None:
                raise ValidationError("context", "decayed counts are not kept per context")
            if self._decayed is None or self.half_life is None:
                raise ValidationError("decayed", "this tracker keeps no decayed counts: build it with half_life=...")
            bank = self._decayed
            bank.reserve(len(self._index))
            factor = decay_factor(self._episodes - bank.last[rows], self.half_life)
            t = bank.table(rows)
            return CountsTable(t.success * factor, t.failure * factor, t.n * factor)
        if context is None:
            bank = self._totals
        else:
            check_key(context, "context")
            found = self._contexts.get(context)
            if found is None:
                z = np.zeros(rows.size)
                return CountsTable(z, z.copy(), z.copy())
            bank = found
        bank.reserve(len(self._index))
        return bank.table(rows)

    def worth(self, memory_id: Hashable, estimator: Estimator | None = None, context: Hashable | None = None) -> float:
        """Worth of one memory under ``estimator`` (default: the paper's raw MW)."""
        return float(self.values([memory_id], estimator=estimator, context=context)[0])

    def values(
        self,
        ids: Iterable[Hashable] | None = None,
        estimator: Estimator | None = None,
        context: Hashable | None = None,
    ) -> np.ndarray:
        """Worth of many memories (all, in :meth:`ids` order, by default), vectorised."""
        est = RawWorth() if estimator is None else estimator
        if not isinstance(est, Estimator):
            names = ", ".join(c.__name__ for c in Estimator.__args__)
            raise ValidationError("estimator", f"must be one of {names}, got {type(est).__name__}")
        rows_ids = _id_list(ids)
        if isinstance(est, Decayed):
            if est.half_life != self.half_life:
                raise ValidationError(
                    "estimator",
                    f"Decayed(half_life={est.half_life}) needs a tracker built with that half_life, "
                    f"this one has half_life={self.half_life}",
                )
            return np.asarray(est.value(self.table(rows_ids, context=context, decayed=True)), dtype=float)
        if context is not None and isinstance(est, ContextPooled):
            glob = self.table(rows_ids)
            return np.asarray(est.value_in_context(self.table(rows_ids, context=context), glob), dtype=float)
        return np.asarray(est.value(self.table(rows_ids, context=context)), dtype=float)

    def classify(self, memory_id: Hashable, taxonomy: Taxonomy, estimator: Estimator | None = None) -> Classification:
        """The value class of one memory under ``taxonomy`` (worth from ``estimator``)."""
        if not isinstance(taxonomy, Taxonomy):
            raise ValidationError("taxonomy", f"must be a Taxonomy, got {type(taxonomy).__name__}")
        counts = self.counts(memory_id)
        worth = None if estimator is None else self.worth(memory_id, estimator)
        return taxonomy.classify(counts, worth)

    def _rows(self, ids: Iterable[Hashable] | None) -> np.ndarray:
        if ids is None:
            return np.arange(len(self._index))
        if isinstance(ids, np.ndarray) and np.issubdtype(ids.dtype, np.integer):
            return self._index.int_rows(ids.ravel(), create=False)
        found = _id_list(ids)
        keys = [] if found is None else list(found)
        for key in keys:
            check_key(key, "ids")
        return self._index.rows(keys, create=False)


def _id_list(ids: object) -> list[Hashable] | np.ndarray | None:
    """``ids`` to read: None (all), an array, or a list; a string or a non-iterable is refused."""
    if ids is None or isinstance(ids, np.ndarray):
        return ids
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
        raise ValidationError("ids", f"must be a list of memory ids, got {type(ids).__name__}")
    return list(ids)


def _first_duplicate_row(ids: np.ndarray) -> int:
    """Index of the first row of the integer array ``ids`` that holds an id twice, or -1.

    Up to ``_PAIRWISE_MAX_K`` columns, each cache-sized chunk is transposed into columns
    of its ids' low 32 bits and every column is compared with every later one, shift by
    shift (k - 1 comparisons of whole blocks, no per-row sort). Rows where the low bits
    collide are then checked on the full ids, so wide ids are judged exactly. Wider rows
    are sorted instead.
    """
    n_ep, k = ids.shape
    if k < 2 or n_ep == 0:
        return -1
    if k > _PAIRWISE_MAX_K or n_ep < _PAIRWISE_MIN_EPISODES:
        return _first_duplicate_row_sorted(ids)
    size = min(n_ep, _DUP_CHUNK)
    cols = np.empty((k, size), dtype=np.uint32)
    same = np.empty((k - 1, size), dtype=bool)
    equal = np.empty((k - 2, size), dtype=bool)
    exact = ids.dtype.itemsize <= 4  # the low 32 bits are the whole id
    for start in range(0, n_ep, size):
        chunk = ids[start : start + size]
        m = chunk.shape[0]
        c, s, e = cols[:, :m], same[:, :m], equal[:, :m]
        np.copyto(c, chunk.T, casting="unsafe")  # keeps the low 32 bits
        np.equal(c[1:], c[:-1], out=s)  # s[i]: column i + d equals column i, for every shift d
        for d in range(2, k):
            np.equal(c[d:], c[:-d], out=e[: k - d])
            s[: k - d] |= e[: k - d]
        if s.any():
            hit = np.flatnonzero(s.any(axis=0))
            if not exact:
                found = _first_duplicate_row_sorted(chunk[hit])
                if found < 0:
                    continue
                hit = hit[found:]
            return start + int(hit[0])
    return -1


def _first_duplicate_row_sorted(ids: np.ndarray) -> int:
    """:func:`_first_duplicate_row` by sorting each row (in cache-sized chunks)."""
    for start in range(0, ids.shape[0], _CHUNK):
        ordered = np.sort(ids[start : start + _CHUNK], axis=1)
        same = ordered[:, 1:] == ordered[:, :-1]
        if same.any():
            return start + int(np.flatnonzero(same.any(axis=1))[0])
    return -1
