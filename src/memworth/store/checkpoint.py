"""A namespace's followed history and change detectors, saved so that a new process resumes them.

:class:`memworth.store.followed.Followed` holds what governing a namespace reads of its
log, as columns, and the change detectors advanced over it. A store object saves it in
its backend (:meth:`memworth.store.backend.Backend.save_checkpoint`) at the end of
:meth:`memworth.MemoryStore.govern` once enough new outcomes came in (see
:func:`due`); a store object opened later loads it and reads only the outcomes logged
after it.

Two parts, so that a cold govern does not decode a history of millions of outcomes: the
*head* holds what governing reads (every outcome's result, holdout mark and time, for the
holdout guard and the burst window's start; the outcomes of the burst window and each
memory's last retrievals in full, for recent counts, burst alerts and the streams' tails;
each memory's number of retrievals; the detectors' state), the *body* every outcome in
full. :func:`decode` decodes the head; the body is decoded when a reader needs more
(:meth:`Followed.whole`: a whole stream's arrays, episode statistics, a longer window,
context labels, the window test, a probe that reaches further back).

The bytes: a magic line, the format version, the head's length, the SHA-256 of the head
and of the body (both checked by :func:`decode`), then the head and the body, each a
zlib-compressed ``.npz`` archive (numeric arrays only, read with ``allow_pickle=False``:
loading runs no code). Strings (memory ids, sources, contexts) are UTF-8 bytes with their
lengths. The detectors' part carries the fingerprint of the governance policy it was
computed under.

What a loader trusts: nothing it has not checked. Any damage (wrong magic, format or
digest, arrays that do not fit together) raises ``ValueError`` and the store reads the
whole history instead; a policy fingerprint that differs keeps the columns (they do not
depend on settings) and runs the detectors again over them; and the store checks that
the log still agrees with the checkpoint (its outcomes up to the checkpoint's last
sequence number are as many as it holds) before it reads the outcomes after it.
"""

from __future__ import annotations

import hashlib
import io
import json
import zlib
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

import numpy as np

from memworth.governance import GovernancePolicy
from memworth.signals.outcome_streams import NamespaceScan
from memworth.store.followed import Followed

__all__ = ["CHECKPOINT_EVERY", "CHECKPOINT_SHARE", "FORMAT", "decode", "due", "encode", "fingerprint", "kept_outcomes"]

FORMAT = 2
"""The version of the checkpoint's layout; a checkpoint of another version is not read."""

MAGIC = b"memworth checkpoint\n"

CHECKPOINT_EVERY = 1000
"""Fewest new outcomes since the last checkpoint for govern() to write another."""

CHECKPOINT_SHARE = 0.01
"""...and at least this share of the namespace's outcomes (writing costs the whole history,
the body loaded first if it was not, so in a long log a checkpoint is written every 1% of
it: the cost per outcome stays flat)."""


def due(outcomes: int, saved: int) -> bool:
    """Whether a namespace of ``outcomes`` outcomes whose checkpoint holds ``saved`` needs a new one."""
    return outcomes - saved >= max(CHECKPOINT_EVERY, CHECKPOINT_SHARE * outcomes)


def fingerprint(policy: GovernancePolicy) -> str:
    """What the change detectors' state depends on: the policy's settings and the format."""
    text = json.dumps({"format": FORMAT, "policy": policy.settings()}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _pack(names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    encoded = [n.encode("utf-8", "surrogatepass") for n in names]
    return np.frombuffer(b"".join(encoded), dtype=np.uint8), np.array([len(b) for b in encoded], dtype=np.int64)


def _unpack(blob: np.ndarray, lengths: np.ndarray) -> list[str]:
    data = blob.astype(np.uint8).tobytes()
    ends = np.cumsum(lengths.astype(np.int64)).tolist()
    if lengths.ndim != 1 or (lengths.size and (lengths.min() < 0 or ends[-1] != len(data))):
        raise ValueError("string lengths do not fit their bytes")
    starts = [0, *ends[:-1]] if ends else []
    return [data[a:b].decode("utf-8", "surrogatepass") for a, b in zip(starts, ends, strict=True)]


def _archive(arrays: dict[str, np.ndarray], meta: dict[str, Any] | None = None) -> bytes:
    """``arrays`` (and ``meta`` as JSON) as a zlib-compressed ``.npz`` archive."""
    body = io.BytesIO()
    if meta is not None:
        arrays = {**arrays, "meta": np.frombuffer(json.dumps(meta, sort_keys=True).encode(), dtype=np.uint8)}
    np.savez(body, **arrays)  # type: ignore[arg-type]  # numpy's stub types allow_pickle among the arrays
    return zlib.compress(body.getvalue(), 1)


def _unarchive(payload: bytes) -> dict[str, np.ndarray]:
    try:
        with np.load(io.BytesIO(zlib.decompress(payload)), allow_pickle=False) as archive:
            return {name: archive[name] for name in archive.files}
    except (OSError, EOFError, KeyError, ValueError, zlib.error) as exc:
        raise ValueError(f"unreadable checkpoint: {exc}") from exc


def kept_outcomes(followed: Followed, recent: int, tail_from: int) -> np.ndarray:
    """The outcomes a checkpoint's head holds in full: every outcome from ``tail_from`` on
    and each memory's last ``recent`` retrievals (ascending)."""
    n = len(followed)
    parts = [np.arange(min(max(tail_from, 0), n), n, dtype=np.int64)]
    if recent > 0:
        parts += [np.frombuffer(at, dtype=np.int32)[-recent:].astype(np.int64) for at in followed.positions]
    return np.unique(np.concatenate(parts))


def encode(namespace: str, followed: Followed, *, recent: int = 0, tail_from: int | None = None) -> bytes:
    """The checkpoint of ``followed`` (the detectors included when they cover every outcome).

    Its head holds what governing the namespace reads at once (the outcomes from
    ``tail_from`` on, default none, and each memory's last ``recent`` retrievals in full;
    every outcome's outcome, holdout mark and time; the detectors' state), its body every
    outcome in full, read only when a reader needs more (:meth:`Followed.whole`). Writing
    reads every outcome (the outcomes not kept are loaded first)."""
    followed.whole()
    n = len(followed)
    cols = {k: v.copy() for k, v in followed.columns().items()}
    kept = kept_outcomes(followed, recent, n if tail_from is None else tail_from)
    starts = cols["starts"]
    pick = np.concatenate([np.arange(starts[i], starts[i + 1]) for i in kept.tolist()] or [np.zeros(0, dtype=np.int64)])
    lengths = starts[kept + 1] - starts[kept]
    head: dict[str, np.ndarray] = {name: cols[name] for name in ("won", "held", "recorded")}
    head |= {name: cols[name][kept] for name in ("seq", "confidence", "source", "context", "credit")}
    head |= {
        "kept": kept,
        "starts": np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
        "members": cols["members"][pick.astype(np.int64)],
        "weights": cols["weights"][pick.astype(np.int64)],
        "retrievals": np.array([len(at) for at in followed.positions], dtype=np.int64),
    }
    for name, names in (("ids", followed.ids), ("sources", followed.sources), ("contexts", followed.contexts)):
        head[f"{name}_bytes"], head[f"{name}_lengths"] = _pack(names)
    credits = followed.credits
    head["credit_propagation"] = np.array([np.nan if p is None else p for p, _ in credits], dtype=np.float64)
    head["credit_hops"] = np.array([-1 if h is None else h for _, h in credits], dtype=np.int64)
    body = {name: cols[name] for name in ("seq", "confidence", "source", "context", "credit", "starts", "members", "weights")}
    scan = followed.scan
    scanned = scan is not None and followed.scanned == n and scan.episodes == n and scan.columns is followed
    if scan is not None and scanned:
        head |= {f"scan_{k}": v for k, v in scan.snapshot().items()}
        reference = scan.reference_column().copy()
        head["scan_reference"] = reference[kept]
        body["reference"] = reference
    meta = {
        "format": FORMAT,
        "namespace": namespace,
        "outcomes": n,
        "last_seq": followed.last_seq,
        "scan": fingerprint(scan.policy) if scan is not None and scanned else None,
    }
    front, back = _archive(head, meta), _archive(body)
    return (
        MAGIC
        + FORMAT.to_bytes(4, "big")
        + len(front).to_bytes(8, "big")
        + hashlib.sha256(front).digest()
        + hashlib.sha256(back).digest()
        + front
        + back
    )


def decode(
    namespace: str, data: bytes, policy: GovernancePolicy, lock: AbstractContextManager[Any] | None = None
) -> Followed:
    """The followed history saved in ``data`` (its detectors too when saved under ``policy``,
    holding ``lock`` while their streams are gathered): the head's outcomes in full, the
    body's loaded when a reader needs them (both digests are checked here).

    ValueError (with the reason) when ``data`` is not an intact checkpoint of this format
    for ``namespace``."""
    head = len(MAGIC)
    if not data.startswith(MAGIC) or len(data) < head + 76:
        raise ValueError("not a memworth checkpoint")
    version = int.from_bytes(data[head : head + 4], "big")
    if version != FORMAT:
        raise ValueError(f"checkpoint format {version}, this memworth reads {FORMAT}")
    size = int.from_bytes(data[head + 4 : head + 12], "big")
    front_digest, back_digest = data[head + 12 : head + 44], data[head + 44 : head + 76]
    front, back = data[head + 76 : head + 76 + size], data[head + 76 + size :]
    if len(front) != size or hashlib.sha256(front).digest() != front_digest:
        raise ValueError("the checkpoint's head does not match its digest")
    if hashlib.sha256(back).digest() != back_digest:
        raise ValueError("the checkpoint's body does not match its digest")
    arrays = _unarchive(front)
    try:
        meta: dict[str, Any] = json.loads(arrays.pop("meta").tobytes())
        if meta["format"] != FORMAT or meta["namespace"] != namespace:
            raise ValueError(f"a checkpoint of namespace {meta['namespace']!r}, format {meta['format']}")
        names = {n: _unpack(arrays[f"{n}_bytes"], arrays[f"{n}_lengths"]) for n in ("ids", "sources", "contexts")}
        hops = arrays["credit_hops"].tolist()
        credits = [
            (None if np.isnan(p) else float(p), None if h < 0 else int(h))
            for p, h in zip(arrays["credit_propagation"].tolist(), hops, strict=True)
        ]
        kept = arrays["kept"]
        followed = Followed.from_columns(
            arrays, names["ids"], names["sources"], names["contexts"], credits, kept, arrays["retrievals"]
        )
        n = len(followed)
        if n != meta["outcomes"] or (kept.size and kept[-1] == n - 1 and followed.last_seq != meta["last_seq"]):
            raise ValueError("the columns disagree with the checkpoint's counts")
        followed.last_seq = int(meta["last_seq"])
    except KeyError as exc:
        raise ValueError(f"the checkpoint lacks {exc}") from exc
    followed.saved = n
    light = {name: arrays[name] for name in ("won", "held", "recorded")}
    scanned = meta["scan"] is not None

    def body() -> tuple[Followed, np.ndarray | None]:
        """Every outcome of the checkpoint, and the detectors' reference column."""
        columns = _unarchive(back)
        whole = Followed.from_columns(columns | light, names["ids"], names["sources"], names["contexts"], credits)
        if len(whole) != n or whole.last_seq != meta["last_seq"]:
            raise ValueError("the checkpoint's body disagrees with its head")
        return whole, columns["reference"] if scanned else None

    if followed.rows is not None or len(followed.starts) - 1 < n:
        followed._body, followed._body_rows = body, len(followed.starts) - 1
    if scanned and meta["scan"] == fingerprint(policy):
        try:
            snapshot = {k[len("scan_") :]: v for k, v in arrays.items() if k.startswith("scan_")}
            followed.scan = NamespaceScan.resume(policy, followed, snapshot, snapshot.pop("reference"), lock)
            followed.scanned = n
        except (KeyError, ValueError):  # the columns are sound: the detectors run again over them
            followed.scan, followed.scanned = None, 0
    return followed
