"""The Redis hot tier: a mirror of each namespace's hot memories (note 003), for the fastest recall.

Redis holds only what can be rebuilt from the database: for every memory the store's
policy calls hot (active, worth >= 0.5, enough evidence), its text, counts and
embedding, in one hash per namespace (``<prefix>:<namespace>:hot``). A rebuild replaces
the hash atomically (MULTI/EXEC); ``check`` compares Redis with what the database says
it should hold. Redis keeps nothing on disk here, and needs not: losing it loses no data.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from memworth.counts import Counts
from memworth.errors import StoreError, UnavailableError, ValidationError
from memworth.store.backend import redact

__all__ = ["HotMemory", "HotTier"]


@dataclass(frozen=True)
class HotMemory:
    """One mirrored memory."""

    id: str
    text: str
    counts: Counts
    created: float
    vector: np.ndarray

    def payload(self) -> str:
        c = self.counts
        return json.dumps(
            {
                "text": self.text,
                "counts": [c.success, c.failure, c.n],
                "created": self.created,
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
