"""Co-retrieval: which memories come together, what a memory's worth borrows from its company.

A memory that is (almost) always retrieved beside the same partner shares every outcome
with it, so its Memory Worth cannot tell their contributions apart (the paper's
Experiment 4). Three pieces address that:

* :class:`CoRetrieval` - running counts of retrievals and co-retrievals (pairs);
* :func:`confounds` - for each memory in a habitual pair, a confound score: how habitual
  the pair is (its share of episodes together) times how much more the partner is worth
  on an adjusted scale (:class:`memworth.signals.context_adjusted.RegressionWorth`), i.e. the worth the
  memory's raw MW borrows from the partner, and a ``confounded`` flag;
* :class:`AblationPlanner` - asks recall to drop one member of a habitual pair in a small,
  budgeted, seeded share of the pair's episodes, so that independent evidence exists.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from memworth._index import Index, check_key
from memworth.errors import UnknownMemoryError, ValidationError

__all__ = [
    "Ablation",
    "AblationPlanner",
    "AlarmSplitter",
    "CoRetrieval",
    "Confound",
    "Pair",
    "RecallPlanner",
    "confounds",
]


class Pair(NamedTuple):
    """Two memories, how many episodes retrieved both, and ``share = together / max(retrievals)``.

    ``share`` is the smaller of the two members' shares of episodes that came with the
    other: 1.0 for a pair never retrieved apart; low when either often comes alone (a
    memory in every episode is not habitually paired with each memory it meets).
    """

    first: Hashable
    second: Hashable
    together: int
    share: float


def check_ids(ids: object, field: str = "ids") -> list[Hashable]:
    """One episode's retrieved ids as a list: non-empty, hashable, no duplicates."""
    if isinstance(ids, (str, bytes)) or not isinstance(ids, (Sequence, np.ndarray)):
        raise ValidationError(field, f"must be a list of memory ids, got {type(ids).__name__}")
    keys = [check_key(k.item() if isinstance(k, np.generic) else k, field) for k in ids]
    if not keys:
        raise ValidationError(field, "an episode must retrieve at least one memory")
    if len(set(keys)) != len(keys):
        seen: set[Hashable] = set()
        dup = next(x for x in keys if x in seen or seen.add(x))  # type: ignore[func-returns-value]
        raise ValidationError(field, f"{dup!r} appears twice in one episode")
    return keys


def check_id_matrix(ids: object, field: str = "ids") -> np.ndarray:
    """A batch of episodes as an integer array (episodes, k) with no id twice in a row."""
    arr = np.asarray(ids)
    if arr.ndim != 2:
        raise ValidationError(field, f"must be a 2-D array (episodes, k), got shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.integer):
        raise ValidationError(field, f"must be integers, got dtype {arr.dtype}")
    if arr.shape[1] == 0:
        raise ValidationError(field, "an episode must retrieve at least one memory")
    if arr.shape[1] > 1 and arr.shape[0]:
        ordered = np.sort(arr, axis=1)
        same = (ordered[:, 1:] == ordered[:, :-1]).any(axis=1)
        if same.any():
            raise ValidationError(field, f"episode {int(np.flatnonzero(same)[0])} retrieves the same id twice")
    return arr


class CoRetrieval:
    """Running counts: episodes that retrieved each memory, and each pair of memories.

    Write with :meth:`update` (one episode, any hashable ids) or :meth:`update_batch`
    (an integer array, vectorised); read with :meth:`retrievals`, :meth:`together`,
    :meth:`partner`, :meth:`pairs`, :meth:`habitual`. ``a + b`` merges two statistics
    kept on separate shards into the one a single statistic would have kept. Pairs are
    kept sparse (only pairs seen together), as sorted keys with counts.

    Examples
    --------
    >>> co = CoRetrieval()
    >>> co.update(["anchor", "hitchhiker", "x"])
    >>> co.update(["anchor", "hitchhiker", "y"])
    >>> co.update(["anchor", "z"])
    >>> co.retrievals("anchor"), co.together("anchor", "hitchhiker")
    (3, 2)
    >>> co.partner("hitchhiker")
    ('anchor', 2)
    >>> co.share("anchor", "hitchhiker")  # 2 episodes together / 3 with the anchor
    0.6666666666666666
    >>> co.habitual(min_share=0.6, min_episodes=2)
    [Pair(first='anchor', second='hitchhiker', together=2, share=0.6666666666666666)]
    """

    def __init__(self) -> None:
        self._index = Index()
        self._n = np.zeros(0, dtype=np.int64)
        self._keys = np.zeros(0, dtype=np.int64)  # (row a << 32) | row b with a < b, sorted
        self._counts = np.zeros(0, dtype=np.int64)
        self.episodes = 0

    # -- writing ----------------------------------------------------------------------

    def update(self, ids: Sequence[Hashable]) -> None:
        """Count one episode that retrieved ``ids`` (no duplicates)."""
        self.observe(ids)

    def observe(self, ids: Sequence[Hashable]) -> np.ndarray:
        """:meth:`update`, returning the rows of ``ids`` (for statistics built on this one)."""
        if isinstance(ids, np.ndarray) and ids.ndim == 1 and np.issubdtype(ids.dtype, np.integer):
            return self.observe_batch(ids[None, :])[0]  # integer ids: the vectorised path
        keys = check_ids(ids)
        rows = self._index.rows(keys, create=True)
        self._add(rows[None, :])
        return rows

    def update_batch(self, ids: np.ndarray) -> None:
        """Count many episodes at once: an integer array of shape (episodes, k)."""
        self.observe_batch(ids)

    def observe_batch(self, ids: np.ndarray) -> np.ndarray:
        """:meth:`update_batch`, returning the rows of ``ids`` (same shape)."""
        arr = check_id_matrix(ids)
        rows = self._index.int_rows(arr.ravel(), create=True).reshape(arr.shape)
        self._add(rows)
        return rows

    def _add(self, rows: np.ndarray) -> None:
        size = len(self._index)
        if size > len(self._n):
            grown = np.zeros(max(size, 2 * len(self._n), 16), dtype=np.int64)
            grown[: len(self._n)] = self._n
            self._n = grown
        np.add.at(self._n, rows.ravel(), 1)
        self.episodes += rows.shape[0]
        if rows.shape[1] < 2 or rows.shape[0] == 0:
            return
        keys = _pair_keys(rows).ravel()
        if rows.shape[0] == 1:  # one episode holds each pair once
            keys.sort()
            self._merge(keys, np.ones(keys.size, dtype=np.int64))
        else:
            self._merge(*np.unique(keys, return_counts=True))

    def _merge(self, uniq: np.ndarray, counts: np.ndarray) -> None:
        """Add ``counts`` to the pairs ``uniq`` (sorted, unique keys), inserting new ones."""
        pos = np.searchsorted(self._keys, uniq)
        found = pos < self._keys.size
        found[found] = self._keys[pos[found]] == uniq[found]
        self._counts[pos[found]] += counts[found]
        if not found.all():
            self._keys = np.insert(self._keys, pos[~found], uniq[~found])
            self._counts = np.insert(self._counts, pos[~found], counts[~found])

    def __add__(self, other: object) -> CoRetrieval:
        if not isinstance(other, CoRetrieval):
            return NotImplemented
        out = CoRetrieval()
        for part in (self, other):
            rows = out._index.rows(part.ids(), create=True)
            out._add(np.zeros((0, 1), dtype=np.int64))  # grow the retrieval counts
            out._n[rows] += part._n[: rows.size]
            out.episodes += part.episodes
            if part._keys.size:
                a, b = rows[part._keys >> 32], rows[part._keys & _LOW]
                keys = (np.minimum(a, b) << 32) | np.maximum(a, b)
                order = np.argsort(keys)
                out._merge(keys[order], part._counts[order])
        return out

    # -- reading ----------------------------------------------------------------------

    def ids(self) -> list[Hashable]:
        """Every memory seen, in the order first seen."""
        return list(self._index.keys)

    def _row(self, memory_id: Hashable) -> int:
        return self._index.row_or_raise(check_key(memory_id, "memory_id"))

    def retrievals(self, memory_id: Hashable) -> int:
        """Episodes that retrieved ``memory_id``."""
        return int(self._n[self._row(memory_id)])

    def together(self, a: Hashable, b: Hashable) -> int:
        """Episodes that retrieved both ``a`` and ``b``."""
        return int(self._together_rows(np.array([self._row(a)]), np.array([self._row(b)]))[0])

    def _together_rows(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        keys = (np.minimum(a, b) << 32) | np.maximum(a, b)
        pos = np.minimum(np.searchsorted(self._keys, keys), max(self._keys.size - 1, 0))
        if not self._keys.size:
            return np.zeros(keys.size, dtype=np.int64)
        return np.where(self._keys[pos] == keys, self._counts[pos], 0)

    def partners(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For every memory (in :meth:`ids` order): its closest partner's row (-1 if none),
        their episodes together and the pair's share; closest = highest share, then most
        episodes together, then first seen."""
        size = len(self._index)
        best, count, share = np.full(size, -1, dtype=np.int64), np.zeros(size, dtype=np.int64), np.zeros(size)
        if self._keys.size:
            a, b = self._keys >> 32, self._keys & _LOW
            me, other = np.concatenate([a, b]), np.concatenate([b, a])
            c = np.concatenate([self._counts, self._counts])
            sh = c / np.maximum(self._n[me], self._n[other])
            order = np.lexsort((other, -c, -sh, me))
            first = np.ones(order.size, dtype=bool)
            first[1:] = me[order][1:] != me[order][:-1]
            pick = order[first]
            best[me[pick]], count[me[pick]], share[me[pick]] = other[pick], c[pick], sh[pick]
        return best, count, share

    def partner(self, memory_id: Hashable) -> tuple[Hashable | None, int]:
        """The closest partner of ``memory_id`` (see :meth:`partners`) and their episodes together."""
        row = self._row(memory_id)
        best, count, _ = self.partners()
        return (None, 0) if best[row] < 0 else (self._index.keys[int(best[row])], int(count[row]))

    def share(self, a: Hashable, b: Hashable) -> float:
        """``together(a, b) / max(retrievals(a), retrievals(b))``: 1.0 for a pair never retrieved apart."""
        most = max(self.retrievals(a), self.retrievals(b))
        return self.together(a, b) / most if most else 0.0

    def pairs(self) -> Iterator[Pair]:
        """Every pair retrieved together at least once, in order of their rows."""
        keys = self._index.keys
        for key, c in zip(self._keys.tolist(), self._counts.tolist(), strict=True):
            a, b = key >> 32, key & _LOW
            yield Pair(keys[a], keys[b], c, c / max(int(self._n[a]), int(self._n[b])))

    def habitual(self, min_share: float = 0.5, min_episodes: int = 20) -> list[Pair]:
        """Pairs retrieved together in ``min_episodes`` episodes or more, with ``share`` at least ``min_share``."""
        _check_share(min_share)
        _check_count(min_episodes, "min_episodes")
        return [p for p in self.pairs() if p.together >= min_episodes and p.share >= min_share]

    def pair_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Rows ``a < b`` and counts of every pair, as arrays (for the outcome regression)."""
        return self._keys >> 32, self._keys & _LOW, self._counts.astype(float)


_LOW = 0xFFFFFFFF


@functools.cache
def _upper(k: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions ``(i, j)``, ``i < j``, of every pair among ``k`` slots."""
    return np.triu_indices(k, 1)


def _pair_keys(rows: np.ndarray) -> np.ndarray:
    """Key ``(min << 32) | max`` of every pair within each row of ``rows`` (episodes, k)."""
    i, j = _upper(rows.shape[1])
    a, b = rows[:, i], rows[:, j]
    return (np.minimum(a, b) << 32) | np.maximum(a, b)


@dataclass(frozen=True)
class Confound:
    """How much of one memory's worth may be a habitual partner's.

    ``partner`` is, among the memory's habitual partners, the one with the highest score;
    ``share`` is that pair's share (:class:`Pair`); ``score`` =
    ``share x (partner_adjusted - adjusted)``: positive when a better partner lifts its
    raw MW (a hitchhiker), negative when a worse one drags it down (an anchor).
    """

    memory_id: Hashable
    partner: Hashable
    retrievals: int
    together: int
    share: float
    adjusted: float
    partner_adjusted: float
    score: float
    confounded: bool

    @property
    def independent(self) -> int:
        """Episodes that retrieved the memory without this partner: evidence of its own."""
        return self.retrievals - self.together


def confounds(
    co: CoRetrieval,
    adjusted: Mapping[Hashable, float],
    *,
    min_share: float = 0.5,
    min_episodes: int = 20,
    margin: float = 0.02,
) -> list[Confound]:
    """The confound score of every memory in a habitual pair (first seen first).

    A memory's score is the highest, over its habitual partners (:meth:`CoRetrieval.habitual`
    with ``min_share`` and ``min_episodes``), of ``share x (partner's adjusted worth - its
    own)``; it is flagged ``confounded`` when that exceeds ``margin``: its raw MW is
    largely a better partner's. ``adjusted`` maps ids to adjusted worth (e.g.
    :meth:`memworth.signals.context_adjusted.RegressionWorth.worth`). Without independent evidence the
    regression gives both members of a pair the same worth, so neither is flagged until
    some exists (that is what :class:`AblationPlanner` provides).

    Examples
    --------
    >>> co = CoRetrieval()
    >>> for _ in range(30):
    ...     co.update(["anchor", "hitchhiker"])
    >>> flags = confounds(co, {"anchor": 0.55, "hitchhiker": 0.44})
    >>> [(c.memory_id, c.partner, round(c.score, 2), c.confounded) for c in flags]
    [('anchor', 'hitchhiker', -0.11, False), ('hitchhiker', 'anchor', 0.11, True)]
    """
    _check_share(min_share)
    _check_count(min_episodes, "min_episodes")
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not np.isfinite(margin) or margin < 0:
        raise ValidationError("margin", f"must be a finite number >= 0, got {margin!r}")
    ids = co.ids()
    best: dict[int, tuple[float, int, int, float]] = {}  # row -> (score, partner row, together, share)
    a, b, together = co.pair_arrays()
    shares = together / np.maximum(co._n[a], co._n[b]) if a.size else np.zeros(0)
    habitual = (together >= min_episodes) & (shares >= min_share)
    mine = np.concatenate([a[habitual], b[habitual]]).tolist()  # each habitual pair seen from both sides
    theirs = np.concatenate([b[habitual], a[habitual]]).tolist()
    both_n, both_share = np.tile(together[habitual], 2).tolist(), np.tile(shares[habitual], 2).tolist()
    for me, other, both, share in zip(mine, theirs, both_n, both_share, strict=True):
        for key in (ids[me], ids[other]):
            if key not in adjusted:
                raise ValidationError("adjusted", f"has no adjusted worth for memory {key!r}")
        score = share * (float(adjusted[ids[other]]) - float(adjusted[ids[me]]))
        if me not in best or score > best[me][0]:
            best[me] = (score, other, int(both), share)
    out = []
    for row in sorted(best):
        score, other, both, share = best[row]
        mine, theirs = float(adjusted[ids[row]]), float(adjusted[ids[other]])
        out.append(Confound(ids[row], ids[other], int(co._n[row]), both, share, mine, theirs, score, score > margin))
    return out


@dataclass(frozen=True)
class Ablation:
    """One planned drop: ``dropped`` leaves the retrieval set in which ``partner`` stays.

    ``position`` is its index in the ids passed to :meth:`AblationPlanner.plan`.
    """

    dropped: Hashable
    partner: Hashable
    position: int


class RecallPlanner:
    """What recall asks before it returns a set: whether to drop one of its members.

    A :class:`memworth.MemoryStore` opened with a planner (its ``ablation``) calls
    :meth:`plan` with the ids it intends to return (``(namespace, id)`` keys) and, when
    a member is named, returns the set without it (the next candidate takes its slot).
    Subclasses decide when: :class:`AblationPlanner` (habitual pairs, budgeted) and
    :class:`AlarmSplitter` (memories in change alarm). Every planned drop is appended to
    ``log``; ``seed`` seeds the draws.
    """

    def __init__(self, seed: int | None = None) -> None:
        self.seed = seed
        self.log: list[Ablation] = []
        self._rng = np.random.default_rng(seed)

    def plan(self, ids: Sequence[Hashable]) -> Ablation | None:
        """Count the intended retrieval set ``ids``; return the member to drop, or ``None``."""
        raise NotImplementedError


class AblationPlanner(RecallPlanner):
    """Decides, within a budget and seeded, when recall drops one member of a habitual pair.

    Every :meth:`plan` call sees the set recall intends to return and counts it. When the
    set holds a habitual pair (see :meth:`CoRetrieval.habitual`) whose ablations would stay
    within ``budget`` of the pair's episodes so far, the planner drops one member with
    probability ``budget``: of the pair that has used the least of its budget, the member
    dropped fewer times (a coin on ties), so every pair and both directions get evidence. Ablations of a pair never exceed ``budget`` times its
    episodes. A dropped memory's slot goes to the next candidate (the store does that).

    Parameters
    ----------
    budget
        Largest share of a pair's episodes that may be ablated, in (0, 1].
    min_share, min_episodes
        When a pair is habitual.
    seed
        Seed of the planner's draws (``None``: fresh randomness).

    Examples
    --------
    >>> planner = AblationPlanner(budget=0.5, min_episodes=2, seed=0)
    >>> plans = [planner.plan(["anchor", "hitchhiker", f"other{t}"]) for t in range(40)]
    >>> dropped = [p.dropped for p in plans if p is not None]
    >>> len(dropped) <= 0.5 * 40, sorted(set(dropped))
    (True, ['anchor', 'hitchhiker'])
    >>> planner.spent("anchor", "hitchhiker") == len(dropped)
    True
    """

    def __init__(
        self, budget: float = 0.1, *, min_share: float = 0.5, min_episodes: int = 20, seed: int | None = None
    ) -> None:
        if isinstance(budget, bool) or not isinstance(budget, (int, float)) or not 0 < budget <= 1:
            raise ValidationError("budget", f"must be a share of episodes in (0, 1], got {budget!r}")
        _check_share(min_share)
        _check_count(min_episodes, "min_episodes")
        self.budget = float(budget)
        self.min_share = float(min_share)
        self.min_episodes = int(min_episodes)
        super().__init__(seed)
        # Plain dicts and lists: plan() runs once per recall, where numpy's per-call cost dominates.
        self._rows: dict[Hashable, int] = {}
        self._ids: list[Hashable] = []
        self._n: list[int] = []
        self._together: dict[tuple[int, int], int] = {}
        self._spent: dict[tuple[int, int], int] = {}
        self._drops: dict[tuple[int, int, int], int] = {}

    def plan(self, ids: Sequence[Hashable]) -> Ablation | None:
        """Count the intended retrieval set ``ids``; return the member to drop, or ``None``."""
        keys = check_ids(ids)
        rows = []
        for key in keys:
            row = self._rows.get(key)
            if row is None:
                row = self._rows[key] = len(self._ids)
                self._ids.append(key)
                self._n.append(0)
            self._n[row] += 1
            rows.append(row)
        n, together, spent = self._n, self._together, self._spent
        best: tuple[float, int, int] | None = None  # (share of budget used, i, j): the pair most behind
        for i, a in enumerate(rows):
            for j in range(i + 1, len(rows)):
                b = rows[j]
                pair = (a, b) if a < b else (b, a)
                both = together[pair] = together.get(pair, 0) + 1
                if both < self.min_episodes or both < self.min_share * max(n[a], n[b]):
                    continue
                used = (spent.get(pair, 0) + 1) / (self.budget * both)
                if used <= 1 and (best is None or used < best[0]):
                    best = (used, i, j)
        if best is None or self._rng.random() >= self.budget:
            return None
        _, i, j = best
        a, b = rows[i], rows[j]
        pair = (min(a, b), max(a, b))
        drops_a, drops_b = self._drops.get((*pair, a), 0), self._drops.get((*pair, b), 0)
        drop_first = drops_a < drops_b or (drops_a == drops_b and self._rng.random() < 0.5)
        gone, stay = (i, j) if drop_first else (j, i)
        spent[pair] = spent.get(pair, 0) + 1
        self._drops[(*pair, rows[gone])] = self._drops.get((*pair, rows[gone]), 0) + 1
        ablation = Ablation(self._ids[rows[gone]], self._ids[rows[stay]], gone)
        self.log.append(ablation)
        return ablation

    def _pair(self, a: Hashable, b: Hashable) -> tuple[int, int]:
        rows = []
        for key in (a, b):
            row = self._rows.get(check_key(key, "memory_id"))
            if row is None:
                raise UnknownMemoryError(key)
            rows.append(row)
        return min(rows), max(rows)

    def together(self, a: Hashable, b: Hashable) -> int:
        """Episodes so far in which recall intended to return both ``a`` and ``b``."""
        return self._together.get(self._pair(a, b), 0)

    def spent(self, a: Hashable, b: Hashable) -> int:
        """Ablations of the pair ``(a, b)`` so far (at most ``budget x together(a, b)``)."""
        return self._spent.get(self._pair(a, b), 0)


def _check_share(value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise ValidationError("min_share", f"must be in (0, 1], got {value!r}")


def _check_count(value: object, field: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValidationError(field, f"must be an integer >= 1, got {value!r}")


class AlarmSplitter(RecallPlanner):
    """Drop one of several co-retrieved memories in alarm, so that their alarms can be told apart.

    Memories retrieved together fail together: when one of them breaks, every CUSUM in
    the set rises (:class:`memworth.signals.change_detection.ExplainingAway` then holds the flags it
    cannot tell apart). Separating them needs episodes that retrieve one without the
    other. When the set recall intends to return holds at least two memories whose
    change statistic is at least ``suspect``, the splitter drops one of them with
    probability ``share``: the one it has dropped fewest times (seeded draws break ties).
    A memory is dropped at most ``limit`` times, so two memories that both broke and are
    always retrieved together are not kept apart for ever. Its slot goes to the next
    candidate; the episode is logged as it was returned.

    The statistics come from whoever runs the change detectors: :meth:`watch` gives the
    splitter the statistic of each memory key now (keys as :meth:`plan` sees them; a
    :class:`memworth.MemoryStore` with the policy's ``change_detection`` on gives it those
    of a namespace after every outcome it records, and on every
    :meth:`~memworth.MemoryStore.govern`); a key never watched counts as 0.

    Parameters
    ----------
    share
        Chance of dropping one suspect in an episode that retrieves two or more, in (0, 1].
    suspect
        The least statistic of a memory that counts as a suspect (finite, >= 0).
    limit
        Most drops of any one memory (an integer >= 1).
    seed
        Seed of the draws (``None``: fresh randomness).

    Examples
    --------
    >>> splitter = AlarmSplitter(share=1.0, suspect=6.0, seed=0)
    >>> splitter.watch({"stale": 14.0, "neighbour": 13.5, "fine": 0.0})
    >>> splitter.plan(["neighbour", "stale", "fine"]).dropped in {"stale", "neighbour"}
    True
    >>> splitter.plan(["stale", "fine"]) is None  # one suspect: nothing to tell apart
    True
    """

    def __init__(self, share: float = 0.8, suspect: float = 6.0, *, limit: int = 100, seed: int | None = None) -> None:
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share <= 1:
            raise ValidationError("share", f"must be a chance in (0, 1], got {share!r}")
        if isinstance(suspect, bool) or not isinstance(suspect, (int, float)) or not 0 <= suspect < float("inf"):
            raise ValidationError("suspect", f"must be a finite number >= 0, got {suspect!r}")
        _check_count(limit, "limit")
        super().__init__(seed)
        self.share = float(share)
        self.suspect = float(suspect)
        self.limit = int(limit)
        self._statistics: dict[Hashable, float] = {}
        self._dropped: dict[Hashable, int] = {}

    def watch(self, statistics: Mapping[Hashable, float]) -> None:
        """Set the change statistic of the given memories (read by the next :meth:`plan`);
        other keys keep theirs. Nothing changes if a value is refused."""
        if not isinstance(statistics, Mapping):
            kind = type(statistics).__name__
            raise ValidationError("statistics", f"must be a mapping of memory key to statistic, got {kind}")
        fresh: dict[Hashable, float] = {}
        for key, value in statistics.items():
            if type(value) is float:  # a store's live statistics: only the size to test, no isinstance chain
                number = value if abs(value) < 1e308 else math.nan
            else:
                ok = not isinstance(value, (bool, np.bool_)) and isinstance(
                    value, (int, float, np.integer, np.floating)
                )
                number = float(value) if ok and abs(value) < 1e308 else math.nan
            if not math.isfinite(number):  # a Python float: math's test, not a NumPy call per key
                raise ValidationError("statistics", f"the statistic of {key!r} must be a finite number, got {value!r}")
            if not (type(key) is tuple and len(key) == 2 and type(key[0]) is str and type(key[1]) is str):
                key = check_key(key, "statistics")  # a store's (namespace, id) pair passes it: not tested again
            fresh[key] = number
        self._statistics.update(fresh)

    def watched(self, keys: Iterable[Hashable]) -> dict[Hashable, float | None]:
        """The statistic each of ``keys`` has now (None: it has none), as :meth:`rewatch` takes it back."""
        return {key: self._statistics.get(key) for key in keys}

    def rewatch(self, statistics: Mapping[Hashable, float | None]) -> None:
        """Give each key the statistic :meth:`watched` read (None: none), undoing later :meth:`watch`
        calls on those keys (a store's rolled-back transaction)."""
        for key, value in statistics.items():
            if value is None:
                self._statistics.pop(key, None)
            else:
                self._statistics[key] = value

    def plan(self, ids: Sequence[Hashable]) -> Ablation | None:
        """Return the suspect to drop from the intended set ``ids``, or ``None``."""
        keys = check_ids(ids)
        suspects = [i for i, key in enumerate(keys) if self._statistics.get(key, 0.0) >= self.suspect]
        if len(suspects) < 2:
            return None
        droppable = [i for i in suspects if self._dropped.get(keys[i], 0) < self.limit]
        if not droppable or self._rng.random() >= self.share:
            return None
        draws = self._rng.random(len(droppable)).tolist()
        gone = min(zip(droppable, draws, strict=True), key=lambda x: (self._dropped.get(keys[x[0]], 0), x[1]))[0]
        partner = next(i for i in suspects if i != gone)
        self._dropped[keys[gone]] = self._dropped.get(keys[gone], 0) + 1
        ablation = Ablation(keys[gone], keys[partner], gone)
        self.log.append(ablation)
        return ablation

    def dropped(self, key: Hashable) -> int:
        """How many times ``key`` was dropped so far."""
        return self._dropped.get(key, 0)
