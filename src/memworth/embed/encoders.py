"""Text encoders: the protocol every encoder meets, and a deterministic one for tests.

An encoder turns texts into unit-length float32 vectors, so cosine similarity is a dot
product. Its ``name`` is stored beside every embedding, so a store never compares
vectors from two different models. The real model, all-MiniLM-L6-v2, lives in
:mod:`memworth.embed.minilm` (extra ``embed``); :class:`HashingEncoder` needs nothing and is
what most tests use.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from memworth.errors import ValidationError

__all__ = ["Encoder", "HashingEncoder", "check_texts"]

_TOKEN = re.compile(r"[a-z0-9]+")


@runtime_checkable
class Encoder(Protocol):
    """What a store needs from an encoder."""

    @property
    def name(self) -> str:
        """Identifies the model and its settings; stored with each embedding."""
        ...

    @property
    def dimension(self) -> int:
        """Length of every vector."""
        ...

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length float32 vectors, shape (len(texts), dimension)."""
        ...


def check_texts(texts: object, field: str = "texts") -> list[str]:
    """Refuse anything but a list of strings."""
    if isinstance(texts, (str, bytes)) or not isinstance(texts, Sequence):
        raise ValidationError(field, f"must be a list of strings, got {type(texts).__name__}")
    out = list(texts)
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise ValidationError(field, f"entry {i} must be a string, got {type(t).__name__}")
    return out


class HashingEncoder:
    """Bag of words and word pairs hashed into ``dimension`` buckets; deterministic, instant.

    Texts that share words get a positive cosine similarity; that is all tests need.

    Examples
    --------
    >>> enc = HashingEncoder(dimension=64)
    >>> a, b, c = enc.encode(["reverse a python list", "python list reverse", "capital of france"])
    >>> float(a @ b) > 0.5 > float(a @ c)
    True
    """

    def __init__(self, dimension: int = 384) -> None:
        if isinstance(dimension, bool) or not isinstance(dimension, int) or dimension < 8:
            raise ValidationError("dimension", f"must be an integer >= 8, got {dimension!r}")
        self._dimension = dimension

    @property
    def name(self) -> str:
        return f"hashing-{self._dimension}"

    @property
    def dimension(self) -> int:
        return self._dimension

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        items = check_texts(texts)
        out = np.zeros((len(items), self._dimension), dtype=np.float32)
        for row, text in enumerate(items):
            words = _TOKEN.findall(text.lower())
            for feature in words + [f"{a} {b}" for a, b in itertools.pairwise(words)]:
                digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
                value = int.from_bytes(digest, "little")
                out[row, value % self._dimension] += 1.0 if (value >> 63) else -1.0
            norm = float(np.linalg.norm(out[row]))
            if norm > 0:
                out[row] /= norm
        return out
