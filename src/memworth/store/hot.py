"""The Redis hot tier: a mirror of each namespace's hot memories (note 003), for the fastest recall.

Redis holds only what can be rebuilt from the database: for every memory the store's
policy calls hot (active, worth >= 0.5, enough evidence), its text, counts and
embedding, in one hash per namespace (``<prefix>:<namespace>:hot``). A rebuild replaces
the hash atomically (MULTI/EXEC); ``check`` compares Redis with what the database says
it should hold. Redis keeps nothing on disk here, and needs not: losing it loses no data.
"""

from __future__ import annotations

import base64
import builtins
import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from memworth.counts import Counts
from memworth.errors import SettingsError, StoreError, UnavailableError, ValidationError
from memworth.store.backend import redact
from memworth.store.records import Memory
from memworth.store.state import StoreState
from memworth.validation import check_name

__all__ = ["HotMemory", "HotTier", "HotTierMixin"]


@dataclass(frozen=True)
class HotMemory:
    """One mirrored memory."""

    id: str
    text: str
    counts: Counts
    created: float
    vector: np.ndarray
    standing: str = "normal"
    """Promoted or demoted moves the ranking score in hot recall as in any recall."""

    def payload(self) -> str:
        c = self.counts
        return json.dumps(
            {
                "text": self.text,
                "counts": [c.success, c.failure, c.n],
                "created": self.created,
                "standing": self.standing,
                "vector": base64.b64encode(np.ascontiguousarray(self.vector, dtype=np.float32).tobytes()).decode(),
            },
            sort_keys=True,
        )

    @staticmethod
    def parse(memory_id: str, raw: str | bytes) -> HotMemory:
        d = json.loads(raw)
        return HotMemory(
            memory_id,
            d["text"],
            Counts(*d["counts"]),
            float(d["created"]),
            np.frombuffer(base64.b64decode(d["vector"]), dtype=np.float32).copy(),
            str(d.get("standing", "normal")),  # a mirror written before standings were kept: normal
        )


class HotTier:
    """A Redis mirror of hot memories. Every Redis failure becomes a StoreError.

    Parameters
    ----------
    url
        ``redis://host:port/db``.
    prefix
        Key prefix, so several stores can share one Redis.
    timeout
        Seconds to wait for Redis before giving up (recall then falls back).
    """

    def __init__(self, url: str, prefix: str = "memworth", timeout: float = 0.5) -> None:
        if not isinstance(url, str) or not url.startswith(("redis://", "rediss://", "unix://")):
            raise ValidationError("hot_tier", f"must be a redis:// URL, got {url!r}")
        try:
            import redis
        except ImportError:
            raise StoreError("the hot tier needs redis-py: pip install 'memworth[redis]'") from None
        self.url = redact(url)  # shown in messages and recall diagnostics: never the password
        self.prefix = prefix
        self._errors: tuple[type[BaseException], ...] = (redis.RedisError, OSError)
        self._client = redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)

    def _key(self, namespace: str) -> str:
        return f"{self.prefix}:{namespace}:hot"

    def _call(self, fn: Any) -> Any:
        try:
            return fn()
        except self._errors as exc:
            raise UnavailableError(f"hot tier {self.url} unavailable: {exc}") from exc

    def replace(self, namespace: str, memories: list[HotMemory]) -> None:
        """Make Redis hold exactly ``memories`` for ``namespace``, atomically."""

        def work() -> None:
            pipe = self._client.pipeline(transaction=True)
            pipe.delete(self._key(namespace))
            if memories:
                pipe.hset(self._key(namespace), mapping={m.id: m.payload() for m in memories})
            pipe.execute()

        self._call(work)

    def entries(self, namespace: str) -> dict[str, str]:
        """The raw mirrored entries of ``namespace``: id to payload."""
        raw = self._call(lambda: self._client.hgetall(self._key(namespace)))
        return {
            (k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
            for k, v in raw.items()
        }

    def load(self, namespace: str) -> list[HotMemory]:
        """Every mirrored memory of ``namespace``, in id order; StoreError if an entry is corrupt."""
        out = []
        for mid, payload in self.entries(namespace).items():
            try:
                out.append(HotMemory.parse(mid, payload))
            except (ValueError, KeyError, TypeError) as exc:
                raise StoreError(f"hot tier {self.url} holds a corrupt entry {mid!r} ({exc!r}); rebuild it") from None
        return sorted(out, key=lambda m: m.id)

    def remove(self, namespace: str, memory_id: str) -> None:
        """Drop one memory from the mirror (it stopped being active)."""
        self._call(lambda: self._client.hdel(self._key(namespace), memory_id))

    def clear(self, namespace: str) -> None:
        self._call(lambda: self._client.delete(self._key(namespace)))

    def close(self) -> None:
        self._client.close()


class HotTierMixin(StoreState):
    """The hot-tier part of :class:`memworth.store.MemoryStore`: the Redis mirror of each namespace's hot memories."""

    def _refresh_hot(self, namespace: str) -> None:
        if self.hot is not None:
            try:
                self.rebuild_hot_tier(namespace=namespace)
            except StoreError:
                pass  # Redis down: the database stays the truth; rebuild_hot_tier later

    def _hot_from_database(self, namespace: str) -> builtins.list[HotMemory]:
        eligible = {m.id: m for m in self.hot_tier(namespace=namespace)}
        ids, _seqs, matrix = self.backend.vectors(namespace)
        rows = {mid: matrix[i] for i, mid in enumerate(ids) if mid in eligible}
        return [
            HotMemory(
                mid, eligible[mid].text, eligible[mid].counts, eligible[mid].created, rows[mid], eligible[mid].standing
            )
            for mid in sorted(eligible)
            if mid in rows  # external memories (governed by id, no vector) cannot be recalled
        ]

    def rebuild_hot_tier(self, *, namespace: str = "default") -> int:
        """Rewrite the Redis hot tier of ``namespace`` from the database; returns how many memories."""
        if self.hot is None:
            raise SettingsError("no hot tier configured: open the store with hot_tier='redis://...'")
        check_name(namespace, "namespace")
        memories = self._hot_from_database(namespace)
        self.hot.replace(namespace, memories)
        self._hot_stale.discard(namespace)
        return len(memories)

    def check_hot_tier(self, *, namespace: str = "default") -> dict[str, builtins.list[str]]:
        """Differences between Redis and the hot set the database implies: missing, extra, stale ids."""
        if self.hot is None:
            raise SettingsError("no hot tier configured: open the store with hot_tier='redis://...'")
        want = {m.id: m.payload() for m in self._hot_from_database(namespace)}
        have = self.hot.entries(namespace)
        stale = [mid for mid in sorted(set(want) & set(have)) if want[mid] != have[mid]]
        return {"missing": sorted(set(want) - set(have)), "extra": sorted(set(have) - set(want)), "stale": stale}

    def hot_tier(self, *, namespace: str = "default") -> builtins.list[Memory]:
        """Memories eligible for the hot tier (note 003: worth >= 0.5, with enough evidence)."""
        return [m for m in self.list(namespace=namespace) if self.policy.hot(m.counts, m.status, m.standing)]
