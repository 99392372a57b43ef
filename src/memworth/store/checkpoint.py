"""A namespace's followed history and change detectors, saved so that a new process resumes them.

:class:`memworth.store.followed.Followed` holds what governing a namespace reads of its
log, as columns, and the change detectors advanced over it. A store object saves it in
its backend (:meth:`memworth.store.backend.Backend.save_checkpoint`) at the end of
:meth:`memworth.MemoryStore.govern` once enough new outcomes came in (see
:func:`due`); a store object opened later loads it and reads only the outcomes logged
after it.

The bytes: a magic line, the format version, the SHA-256 of the rest, then a zlib-compressed
``.npz`` archive (numeric arrays only, read with ``allow_pickle=False``: loading runs no
code). Strings (memory ids, sources, contexts) are UTF-8 bytes with their lengths. The
detectors' part carries the fingerprint of the governance policy it was computed under.

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
from typing import Any

import numpy as np

from memworth.governance import GovernancePolicy
from memworth.signals.outcome_streams import NamespaceScan
from memworth.store.followed import Followed

__all__ = ["CHECKPOINT_EVERY", "CHECKPOINT_SHARE", "FORMAT", "decode", "due", "encode", "fingerprint"]

FORMAT = 1
"""The version of the checkpoint's layout; a checkpoint of another version is not read."""

MAGIC = b"memworth checkpoint\n"

CHECKPOINT_EVERY = 1000
"""Fewest new outcomes since the last checkpoint for govern() to write another."""

CHECKPOINT_SHARE = 0.01
"""...and at least this share of the namespace's outcomes (writing costs the whole history,
so in a long log a checkpoint is written every 1% of it: the cost per outcome stays flat)."""


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


def encode(namespace: str, followed: Followed) -> bytes:
    """The checkpoint of ``followed`` (the detectors included when they cover every outcome)."""
    arrays: dict[str, np.ndarray] = {k: v.copy() for k, v in followed.columns().items()}
    for name, names in (("ids", followed.ids), ("sources", followed.sources), ("contexts", followed.contexts)):
        arrays[f"{name}_bytes"], arrays[f"{name}_lengths"] = _pack(names)
    credits = followed.credits
    arrays["credit_propagation"] = np.array([np.nan if p is None else p for p, _ in credits], dtype=np.float64)
    arrays["credit_hops"] = np.array([-1 if h is None else h for _, h in credits], dtype=np.int64)
    scan = followed.scan
    scanned = scan is not None and followed.scanned == len(followed) and scan.ids == followed.ids
    if scan is not None and scanned:
        arrays |= {f"scan_{k}": v for k, v in scan.snapshot().items()}
    meta = {
        "format": FORMAT,
        "namespace": namespace,
        "outcomes": len(followed),
        "last_seq": followed.last_seq,
        "scan": fingerprint(scan.policy) if scan is not None and scanned else None,
    }
    body = io.BytesIO()
    arrays["meta"] = np.frombuffer(json.dumps(meta, sort_keys=True).encode(), dtype=np.uint8)
    np.savez(body, **arrays)  # type: ignore[arg-type]  # numpy's stub types allow_pickle among the arrays
    payload = zlib.compress(body.getvalue(), 1)
    return MAGIC + FORMAT.to_bytes(4, "big") + hashlib.sha256(payload).digest() + payload


def decode(namespace: str, data: bytes, policy: GovernancePolicy) -> Followed:
    """The followed history saved in ``data`` (its detectors too when saved under ``policy``).

    ValueError (with the reason) when ``data`` is not an intact checkpoint of this format
    for ``namespace``."""
    head = len(MAGIC)
    if not data.startswith(MAGIC) or len(data) < head + 36:
        raise ValueError("not a memworth checkpoint")
    version = int.from_bytes(data[head : head + 4], "big")
    if version != FORMAT:
        raise ValueError(f"checkpoint format {version}, this memworth reads {FORMAT}")
    digest, payload = data[head + 4 : head + 36], data[head + 36 :]
    if hashlib.sha256(payload).digest() != digest:
        raise ValueError("the checkpoint's digest does not match its bytes")
    try:
        with np.load(io.BytesIO(zlib.decompress(payload)), allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
    except (OSError, EOFError, KeyError, zlib.error) as exc:
        raise ValueError(f"unreadable checkpoint: {exc}") from exc
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
        followed = Followed.from_columns(arrays, names["ids"], names["sources"], names["contexts"], credits)
        if len(followed) != meta["outcomes"] or followed.last_seq != meta["last_seq"]:
            raise ValueError("the columns disagree with the checkpoint's counts")
    except KeyError as exc:
        raise ValueError(f"the checkpoint lacks {exc}") from exc
    followed.saved = len(followed)
    if meta["scan"] is not None and meta["scan"] == fingerprint(policy):
        try:
            members, starts = followed.distinct_members()
            columns = followed.columns()
            followed.scan = NamespaceScan.resume(
                policy,
                followed.ids,
                {k[len("scan_") :]: v for k, v in arrays.items() if k.startswith("scan_")},
                members,
                starts,
                columns["won"].astype(bool),
                columns["confidence"].copy(),
                followed.context_labels(),
                [np.frombuffer(a, dtype=np.int32) + 1 for a in followed.positions],  # the scan counts from 1
            )
            del columns
            followed.scanned = len(followed)
        except (KeyError, ValueError):  # the columns are sound: the detectors run again over them
            followed.scan, followed.scanned = None, 0
    return followed
