"""What people decided, and what a quarantine has seen since: read from the audit log and history.

Pure functions over records (no I/O): :meth:`memworth.MemoryStore.proposals` feeds them
the namespace's audit log and outcome history and applies what they say.

* **Pins.** A person's decision (a restore, an approval, a verdict on a quarantined
  memory, a status or standing set by hand, an explicit pin) is recorded in its audit
  entry as ``settings["pin"]``: ``{"until": n}`` (governance proposes nothing for the memory
  until it has ``n`` retrievals; ``n`` is its retrievals at the decision plus the policy's
  ``pin_evidence``) or ``{"until": None}`` (an explicit pin: until unpinned). An unpin
  entry carries ``settings["pin"] = None``. The latest such entry of a memory is its pin,
  except that a decision does not shorten an explicit pin: only an unpin ends it.
* **Flags.** The latest audit entry that set a memory's standing to ``re-verify`` is its
  flag: when it was raised and the numbers that raised it.
* **Rollbacks.** When the holdout guard fires, the changes governance made by itself
  since governance last led (entries with a governance action and no pin: a person's
  approval pins) are the ones to undo, newest first, one per memory at a time.
* **Probe evidence.** The memory's direct retrievals with an outcome since its flag (its
  probes, and any holdout episode that retrieved it), with their confidence.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from memworth.governance import ACTIONS
from memworth.store.records import AuditEntry

__all__ = ["Pin", "ProbeEvidence", "flags", "pins", "probe_evidence", "rollbacks"]

GOVERNANCE_ACTIONS = frozenset(ACTIONS)
"""The audit actions governance takes by itself (a rollback is a person's decision)."""


@dataclass(frozen=True)
class Pin:
    """A person's decision that holds governance back for one memory."""

    until: float | None
    """Retrievals the memory must reach before governance may propose again (None: until unpinned)."""
    seq: int
    """The audit entry that pinned it."""
    action: str
    reason: str

    def holds(self, retrievals: float) -> bool:
        """Whether the pin still holds at ``retrievals``."""
        return self.until is None or retrievals < self.until

    def row(self) -> dict[str, Any]:
        return {"until": self.until, "audit_seq": self.seq, "action": self.action, "reason": self.reason}


def pins(audit: Sequence[AuditEntry]) -> dict[str, Pin]:
    """Each memory's standing pin, by id: the latest pinning or unpinning entry wins, except
    that an explicit pin (until unpinned) ends only with an unpin, not with a later decision
    that pins for a number of retrievals (a person who pinned a memory "whatever the
    outcomes" and later confirms it in review still has it pinned).

    Examples
    --------
    >>> from memworth.store.records import AuditEntry
    >>> e = lambda seq, pin: AuditEntry(seq, "m", "default", "x", "pin", "", "", "why", {"pin": pin}, 0.0)
    >>> pins([e(1, {"until": 30.0})])["m"].holds(29.0), pins([e(1, {"until": 30.0})])["m"].holds(30.0)
    (True, False)
    >>> pins([e(1, {"until": None}), e(2, None)])
    {}
    >>> pins([e(1, {"until": None}), e(2, {"until": 30.0})])["m"].seq
    1
    """
    out: dict[str, Pin] = {}
    for entry in audit:
        if "pin" not in entry.settings:
            continue
        pin = entry.settings["pin"]
        if pin is None:
            out.pop(entry.memory_id, None)
            continue
        until = pin.get("until")
        held = out.get(entry.memory_id)
        if until is not None and held is not None and held.until is None:
            continue  # an explicit pin holds until unpinned
        out[entry.memory_id] = Pin(None if until is None else float(until), entry.seq, entry.action, entry.reason)
    return out


def flags(audit: Sequence[AuditEntry]) -> dict[str, AuditEntry]:
    """The latest entry that set each memory's standing to ``re-verify``, by id."""
    return {e.memory_id: e for e in audit if e.field == "standing" and e.new == "re-verify"}


def rollbacks(audit: Sequence[AuditEntry], since: float) -> dict[str, AuditEntry]:
    """For each memory, the newest change governance made by itself after time ``since``
    (what the holdout guard proposes to undo first), by id.

    Examples
    --------
    >>> from memworth.store.records import AuditEntry
    >>> e = lambda seq, action, at, settings: AuditEntry(seq, "m", "default", action, "status", "active",
    ...                                                  "suppressed", "why", settings, at)
    >>> rollbacks([e(1, "suppress", 5.0, {}), e(2, "suppress", 9.0, {"pin": {"until": 3}})], since=4.0)["m"].seq
    1
    >>> rollbacks([e(1, "suppress", 3.0, {})], since=4.0)
    {}
    """
    out: dict[str, AuditEntry] = {}
    for entry in audit:
        if entry.at > since and entry.action in GOVERNANCE_ACTIONS and "pin" not in entry.settings:
            out[entry.memory_id] = entry
    return out


@dataclass(frozen=True)
class ProbeEvidence:
    """A quarantined memory's outcomes since its flag, and the rates its flag states."""

    success: np.ndarray
    weight: np.ndarray
    before: float
    after: float


def flag_rates(numbers: dict[str, Any], worth_now: float, odds_ratio: float) -> tuple[float, float]:
    """The success rate before the flag and the lower rate that raised it, from the flag's numbers.

    A change alarm states its baseline and its alternative (the baseline's odds times
    ``odds_ratio``, or times the ``change_odds_ratio`` the alarm states: a mixture detector's
    leading alternative); the window test states the lifetime worth and the window's worth; a
    flag set by hand states neither, so the memory's worth now and the change detector's
    alternative to it are used.

    Examples
    --------
    >>> flag_rates({"worth": 0.7, "recent_worth": 0.2, "recent_retrievals": 20}, 0.6, 0.05)
    (0.7, 0.2)
    >>> [round(x, 3) for x in flag_rates({"change_statistic": 13.0, "change_threshold": 12.0,
    ...                                   "change_baseline": 0.8}, 0.6, 0.05)]
    [0.8, 0.167]
    >>> [round(x, 3) for x in flag_rates({"change_statistic": 13.0, "change_threshold": 12.0,
    ...                                   "change_baseline": 0.8, "change_odds_ratio": 0.5}, 0.6, 0.05)]
    [0.8, 0.667]
    """

    ratio = float(numbers.get("change_odds_ratio", odds_ratio))

    def alternative(p: float) -> float:
        p = min(max(p, 1e-6), 1 - 1e-6)
        odds = p / (1 - p) * ratio
        return odds / (1 + odds)

    statistic = numbers.get("change_statistic")
    threshold = numbers.get("change_threshold")
    if statistic is not None and threshold is not None and statistic >= threshold and "change_baseline" in numbers:
        before = float(numbers["change_baseline"])
        return before, alternative(before)
    if "recent_worth" in numbers and "worth" in numbers:
        return float(numbers["worth"]), float(numbers["recent_worth"])
    before = float(numbers.get("worth", worth_now))
    return before, alternative(before)


def probe_evidence(
    success: np.ndarray, confidence: np.ndarray, flag: AuditEntry, worth_now: float, odds_ratio: float
) -> ProbeEvidence:
    """The flagged memory's evidence since ``flag``: the outcome and confidence of each of
    its direct retrievals recorded since (those whose episode also retrieved another
    suspect left out by the caller), and the rates its flag states."""
    numbers = flag.settings.get("numbers", {}) if isinstance(flag.settings, dict) else {}
    before, after = flag_rates(numbers, worth_now, odds_ratio)
    if not (math.isfinite(before) and math.isfinite(after)):
        before, after = worth_now, worth_now
    return ProbeEvidence(np.asarray(success, dtype=bool), np.asarray(confidence, dtype=float), before, after)
