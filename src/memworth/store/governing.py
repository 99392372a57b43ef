"""Governance wired to the store: proposals, govern, approve, restore, audited changes
of status and standing, and the governance policy kept with the data.

The one proposal function (:meth:`GovernanceMixin.proposals`) reads the namespace's
history once for the window test and the change detectors; :meth:`govern`,
:meth:`approve` and :meth:`report` (and through it every face) call it. A person's
decision pins a memory; promote and demote are rate-limited; every change is audited
and reversible with :meth:`restore`.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memworth.errors import (
    ChangedError,
    RateLimitError,
    StoreError,
    UnknownEntryError,
    UnknownMemoryError,
    ValidationError,
)
from memworth.estimators import RawWorth
from memworth.governance import Proposal
from memworth.governance.holdout_guard import GuardReading
from memworth.policy import Taxonomy
from memworth.progress import Bar, Progress
from memworth.progress import bar as progress_bar
from memworth.signals.sources import BurstAlert
from memworth.store import decisions
from memworth.store.backend import DRAWS_FROM_KEY, ERASE, REQUIRES, NewMemory
from memworth.store.followed import Followed
from memworth.store.records import STANDINGS, STATUSES, AuditEntry, Memory
from memworth.store.report import MemoryReport, assess
from memworth.store.state import StoreState
from memworth.store.steps import Blocking, Call, Steps, run
from memworth.validation import check_actor, check_flag, check_memory_id, check_name, check_reason, check_text

__all__ = ["AUTOMATIC", "POLICY_KEY", "RATE_LIMITED", "GovernanceMixin", "GovernanceReport"]

RATE_LIMITED = ("promote", "demote")

AUTOMATIC = frozenset({"re-verify", "suppress", "deprecate", "release"})
"""What continuous governance (``govern_every``) applies by itself; the rest it only proposes."""


POLICY_KEY = "policy"
"""The store's ``meta`` key of the governance policy it keeps (and ``policy_history``)."""


@dataclass(frozen=True)
class _Decision:
    """One memory's proposal, or the proposal a person's pin holds back, with the pin."""

    proposal: Proposal | None
    held: Proposal | None
    pin: decisions.Pin | None


def _until(pin: decisions.Pin) -> str:
    return "until unpinned" if pin.until is None else f"until {pin.until:g} retrievals"


@dataclass(frozen=True)
class GovernanceReport:
    """What :meth:`MemoryStore.govern` proposed, applied (as audit entries) and skipped (with why)."""

    proposals: list[Proposal]
    applied: list[AuditEntry]
    skipped: list[tuple[Proposal, str]]
    alerts: list[BurstAlert] = field(default_factory=list)
    """Memories whose worth moved faster than their evidence allows (the store's ``burst``)."""
    guard: GuardReading | None = None
    """The holdout guard (None: the store has no holdout share). When it fired, nothing was
    applied and the proposals include the rollbacks of governance's changes since it last led."""

    def _repr_html_(self) -> str:
        from memworth.reprs import cell, table

        done = {(e.memory_id, e.action) for e in self.applied}
        why = {(p.memory_id, p.action): w for p, w in self.skipped}
        rows = [
            [
                p.memory_id,
                p.action,
                f"{p.field}: {p.old} -> {p.new}",
                p.reason,
                "applied" if (p.memory_id, p.action) in done else why.get((p.memory_id, p.action), "proposed"),
            ]
            for p in self.proposals
        ]
        note = "" if self.guard is None else f"<p>holdout guard: {cell(self.guard.reason)}</p>"
        return table(["memory", "action", "change", "reason", "state"], rows) + note

    def row(self) -> dict[str, Any]:
        """The JSON shape every face shows."""
        return {
            "proposals": [dict(p.__dict__) for p in self.proposals],
            "applied": [dict(e.__dict__) for e in self.applied],
            "skipped": [{"proposal": dict(p.__dict__), "why": why} for p, why in self.skipped],
            "alerts": [{"memory_id": a.memory_id, "reason": a.reason, **a.numbers()} for a in self.alerts],
            "guard": None if self.guard is None else self.guard.row(),
        }


class GovernanceMixin(StoreState):
    """The governance part of :class:`memworth.store.MemoryStore`."""

    @property
    def taxonomy(self) -> Taxonomy:
        """The value classes every face shows: the governance policy's (its thresholds and ``min_evidence``)."""
        return self.policy.taxonomy()

    def set_status(
        self, memory_id: str, status: str, *, reason: str, actor: str | None = None, namespace: str = "default"
    ) -> AuditEntry:
        """Change a memory's status by hand, with an audit entry saying why (and who: ``actor``);
        reversible with :meth:`restore`.

        A person's decision: it pins the memory (governance proposes nothing for it until
        ``policy.limits.pin_evidence`` more retrievals)."""
        if not isinstance(status, str) or status not in STATUSES:
            raise ValidationError("status", f"must be one of {', '.join(STATUSES)}, got {status!r}")
        reason = check_reason(reason)
        who = {} if actor is None else {"actor": check_actor(actor)}
        return self._change(
            memory_id, "status", status, reason=reason, namespace=namespace, action="set-status", pin=True,
            settings=who,
        )  # fmt: skip

    def set_standing(
        self, memory_id: str, standing: str, *, reason: str, actor: str | None = None, namespace: str = "default"
    ) -> AuditEntry:
        """Change a memory's governance standing by hand (normal, promoted, demoted, re-verify).

        A person's decision pins the memory, except a flag for ``re-verify``: that asks for
        verification, which a person, the verifier or the probe test then resolves."""
        if not isinstance(standing, str) or standing not in STANDINGS:
            raise ValidationError("standing", f"must be one of {', '.join(STANDINGS)}, got {standing!r}")
        reason = check_reason(reason)
        who = {} if actor is None else {"actor": check_actor(actor)}
        return self._change(
            memory_id,
            "standing",
            standing,
            reason=reason,
            namespace=namespace,
            action="set-standing",
            pin=standing != "re-verify",
            settings=who,
        )

    def _change(
        self,
        memory_id: str,
        field_name: str,
        new: str,
        *,
        reason: str,
        namespace: str,
        action: str,
        settings: dict[str, Any] | None = None,
        expected: str | None = None,
        pin: bool = False,
        with_new: builtins.list[NewMemory] | None = None,
        requires: dict[str, object] | None = None,
    ) -> AuditEntry:
        """Make one audited change; with ``pin`` (a person's decision) the entry pins the memory
        for ``policy.limits.pin_evidence`` more retrievals (:mod:`memworth.store.decisions`); with
        ``with_new``, those memories are inserted in the same transaction (an edit); with
        ``requires`` (``{"status": ..., "standing": ...}``), the backend makes the change only if
        the memory still holds those too, in the same statement (ChangedError otherwise)."""
        reason = check_text(reason, "reason")
        current = self.get(memory_id, namespace=namespace)
        settings = dict(settings or {})
        if requires:
            settings[REQUIRES] = dict(requires)
        if pin:
            settings["pin"] = {"until": current.counts.n + float(self.policy.limits.pin_evidence)}
        settings["settings_version"] = self._settings_version  # the kept settings it was made under
        if "numbers" not in settings:  # what the memory showed when the change was made (a flag's "before")
            worth = float(RawWorth().value(current.counts))
            settings["numbers"] = {"worth": round(worth, 6), "retrievals": current.counts.n}
        if field_name == "standing" and new == "re-verify":  # whoever flags it: the probes start after this
            with self._follow_lock:
                last = self._history(namespace).last_seq
            settings["numbers"] = {**settings["numbers"], "flag_outcome_seq": int(last)}
        old = getattr(current, field_name)
        if expected is not None and old != expected:  # a proposal made for a state that has gone
            raise ChangedError(
                f"memory {memory_id!r} changed since it was read: {field_name} is {old!r}, not {expected!r}"
            )
        if old == new:
            raise ValidationError(field_name, f"memory {memory_id!r} is already {new!r}")
        entry = AuditEntry(0, memory_id, namespace, action, field_name, old, new, reason, settings, self.clock())
        if with_new is None:
            saved = self.backend.change(entry)
        else:
            made = self.backend.insert_memories(with_new, then=entry)
            if made is None:  # a backend that ignored the change it was asked to make
                raise StoreError(f"{self.backend.url}: the change to {memory_id!r} was not made")
            saved = made
        leaves = (field_name == "status" and new != "active") or (field_name == "standing" and new == "re-verify")
        if self.hot is not None and leaves:
            try:  # a memory that stops being active must not be served from the mirror
                self.hot.remove(namespace, memory_id)
            except StoreError:  # Redis down: hot recall rebuilds the mirror before using it again
                self._hot_stale.add(namespace)
        elif self.hot is not None and field_name == "standing":  # the mirror ranks by standing too
            self._hot_stale.add(namespace)
        return saved

    def govern(
        self, *, apply: bool = False, namespace: str = "default", progress: Progress = False
    ) -> GovernanceReport:
        """Propose (and with ``apply``, make) governance changes for every memory of a namespace.

        Applied changes are audited with the policy's settings. Promote and demote (note
        003's strengthen / weaken) are capped at ``max_changes_per_day`` per memory in any
        24 hours, so a burst of outcomes cannot flip a memory's standing back and forth;
        protective actions (re-verify, suppress, deprecate) are never held back, since
        each is reversible with :meth:`restore`.

        ``progress``: bars over the memories decided and the changes applied (:mod:`memworth.progress`).
        """
        return self._govern(namespace, None if check_flag(apply, "apply") else frozenset(), progress)

    def _govern(self, namespace: str, apply: frozenset[str] | None, progress: Progress = False) -> GovernanceReport:
        """:meth:`govern`, applying the proposals whose action is in ``apply`` (None: all),
        from one read of the namespace's log."""
        check_name(namespace, "namespace")
        with self._settled_reads():
            return self._govern_read(namespace, apply, progress)

    def _govern_read(self, namespace: str, apply: frozenset[str] | None, progress: Progress) -> GovernanceReport:
        progress_bar(0, "memories decided", progress).close()  # a bad progress is refused before any work
        memories = self.backend.memories(namespace)
        with progress_bar(len(memories), "memories decided", progress) as deciding:
            found, guard, seen = self._decide_all(memories, namespace, deciding)
        proposals = [d.proposal for d in (found[m.id] for m in memories) if d.proposal is not None]
        skipped: list[tuple[Proposal, str]] = [
            (d.held, f"pinned by a person (audit entry {d.pin.seq}: {d.pin.action}) {_until(d.pin)}")
            for d in (found[m.id] for m in memories)
            if d.held is not None and d.pin is not None
        ]
        alerts = self._bursts(namespace, memories)
        applied: list[AuditEntry] = []
        if guard is not None and guard.fired:  # governance hurts: apply nothing, propose the rollbacks
            skipped += [(p, f"holdout guard: {guard.reason}; nothing is applied until it clears") for p in proposals]
        elif apply is None or apply:
            active = [m for m in memories if m.status == "active"]
            standing = {m.id: m.standing for m in active}
            # what each proposal was made on: its status and standing, and no pin after the audit
            # log read (a pin is an audit entry: the backend checks all three in the statement)
            read = {m.id: {"status": m.status, "standing": m.standing, "no_pin_after": seen} for m in memories}
            quarantined = sum(1 for m in active if m.standing == "re-verify")
            budget = self.policy.quarantine_budget(len(active))
            todo = sorted(proposals, key=lambda p: p.action == "re-verify")  # what frees the budget first
            applying = progress_bar(len(todo), "changes applied", progress if apply is None else False)
            for p in todo:
                applying.update(1)
                if apply is not None and p.action not in apply:
                    continue
                if p.action == "re-verify" and quarantined >= budget:
                    why = (
                        f"quarantine budget: {quarantined} of {len(active)} active memories are quarantined "
                        f"(max_quarantined {self.policy.limits.max_quarantined:g}); a person may still approve it"
                    )
                    skipped.append((p, why))
                    continue
                try:
                    applied.append(self._apply(p, namespace, requires=read.get(p.memory_id)))
                except StoreError as exc:  # rate-limited, or changed (or pinned) by someone else since we read it
                    meanwhile = self._pinned_meanwhile(p.memory_id, namespace, seen) if isinstance(exc, ChangedError) else None
                    skipped.append((p, meanwhile or str(exc)))
                    continue
                if p.action == "re-verify":
                    quarantined += 1
                elif standing.get(p.memory_id) == "re-verify" and (p.action == "release" or p.field == "status"):
                    quarantined -= 1  # released, or out of recall for good
            applying.close()
            if self.verifier is not None:
                applied += self._verify_queue(namespace)
            self._refresh_hot(namespace)
        self._checkpoint(namespace)
        return GovernanceReport(proposals, applied, skipped, alerts, guard)

    def proposals(
        self, memories: Sequence[Memory] | None = None, *, namespace: str = "default"
    ) -> dict[str, Proposal | None]:
        """The change governance proposes now for each of ``memories`` (default: every memory
        of the namespace), by id; ``None`` where it proposes nothing.

        The one proposal function: :meth:`govern`, :meth:`approve` and :meth:`report` (and
        through it every face) call it. It reads the namespace's history once, for the
        window test and the change detectors (whose explaining-away rule weighs every
        memory of the namespace together).
        """
        return {mid: d.proposal for mid, d in self._decide(memories, namespace).items()}

    def holdout_guard(self, *, namespace: str = "default") -> GuardReading | None:
        """The holdout guard over the namespace's log (:mod:`memworth.governance.holdout_guard`): whether governed
        success has fallen below holdout success with confidence. None without a holdout share.

        When it fires, :meth:`govern` applies nothing (continuous governance included) and
        proposes undoing, one memory at a time, the changes governance made by itself since it
        last led (action ``rollback``, which :meth:`approve` applies); every face shows it.
        """
        check_name(namespace, "namespace")
        return self._guard(namespace)

    def _guard(self, namespace: str) -> GuardReading | None:
        """The guard over the namespace's history as this store object last read it."""
        if self.holdout <= 0:
            return None
        with self._follow_lock:
            followed = self._history(namespace)
            held = np.array(followed.held, dtype=bool)
            success = np.array(followed.won, dtype=bool)
        return self.policy.guard().check(held, success, share=self.holdout)

    def _decide(self, memories: Sequence[Memory] | None, namespace: str) -> dict[str, _Decision]:
        with self._settled_reads():  # one read of the log for every part of the decision
            return self._decide_all(memories, namespace)[0]

    def _pinned_meanwhile(self, memory_id: str, namespace: str, seen: int) -> str | None:
        """Why govern skips a proposal whose write the backend refused, when the reason is a
        pin a person set after govern read the audit log (up to entry ``seen``); else None."""
        pin = decisions.pins(self.backend.audit_log(namespace, memory_id)).get(memory_id)
        if pin is None or pin.seq <= seen:
            return None
        return f"pinned by a person while govern ran (audit entry {pin.seq}: {pin.action}) {_until(pin)}; nothing changed"

    def _decide_all(
        self, memories: Sequence[Memory] | None, namespace: str, shown: Bar | None = None
    ) -> tuple[dict[str, _Decision], GuardReading | None, int]:
        """Each memory's proposal, the one a pin holds back, and its pin: the history and
        the audit log read once (the last audit seq read is returned too: a change made on
        these decisions requires no pin after it).

        A quarantined memory (standing ``re-verify``) is first put to the probe test
        (:meth:`GovernancePolicy.probe_test` over its outcomes since its flag): ``release``
        or ``suppress`` when the evidence decides, else the ordinary rules. A memory a person
        pinned gets no proposal while the pin holds (the one it would get is ``held``).
        """
        check_name(namespace, "namespace")
        everyone = self.backend.memories(namespace)
        chosen = everyone if memories is None else builtins.list(memories)
        audit = self.backend.audit_log(namespace)
        with self._follow_lock:
            followed = self._history(namespace)
            recent = followed.recent(self.policy.staleness.window)
        streams = self._streams(namespace) if self.policy.change.enabled else {}
        pinned, flagged = decisions.pins(audit), decisions.flags(audit)
        guard = self._guard(namespace)
        undone: dict[str, AuditEntry] = {}
        if guard is not None and guard.fired:  # governance's own changes since it last led
            with self._follow_lock:
                since = followed.recorded[guard.ahead - 1] if guard.ahead > 0 else -math.inf
            undone = decisions.rollbacks(audit, since)
        suspects = {mid for mid, s in streams.items() if s.suspect} | {
            m.id for m in everyone if m.standing == "re-verify" and m.status == "active"
        }
        # the test of low worth weighs every active memory of the namespace together (e-BH)
        active = [m for m in everyone if m.status == "active"]
        worth = dict(zip((m.id for m in active), self.policy.worth_flags([m.counts for m in active]), strict=True))
        out: dict[str, _Decision] = {}
        draws_from: int | None = None
        for m in chosen:
            p = None
            flag = flagged.get(m.id)
            if m.status == "active" and m.standing == "re-verify" and flag is not None:
                if draws_from is None:
                    draws_from = int(self.backend.get_meta(DRAWS_FROM_KEY) or 0)
                p = self._probe_proposal(m, flag, followed, suspects - {m.id}, draws_from)
            if p is None:
                p = self.policy.propose(
                    m.id,
                    m.counts,
                    m.status,
                    m.standing,
                    recent.get(m.id),
                    stream=streams.get(m.id),
                    worth_flag=worth.get(m.id),
                )
            undo = undone.get(m.id)
            if undo is not None and guard is not None and getattr(m, undo.field) == undo.new:
                p = Proposal(
                    m.id,
                    "rollback",
                    undo.field,
                    undo.new,
                    undo.old,
                    f"holdout guard: {guard.reason}; undoes audit entry {undo.seq} ({undo.action})",
                    {"audit_seq": undo.seq, "guard_evalue": guard.evalue, "lift": round(guard.lift, 6)},
                )
            pin = pinned.get(m.id)
            if pin is not None and pin.holds(m.counts.n):
                out[m.id] = _Decision(None, p, pin)
            else:
                out[m.id] = _Decision(p, None, None)
            if shown is not None:
                shown.update(1)
        return out, guard, max((e.seq for e in audit), default=0)

    def _probe_proposal(
        self, m: Memory, flag: AuditEntry, followed: Followed, others: set[str], draws_from: int = 0
    ) -> Proposal | None:
        """Release or suppress a quarantined memory when its probe outcomes decide (else None).

        The test (:meth:`GovernancePolicy.control_test`) compares the outcomes of the recalls
        where a random draw served the memory (probes) with those where it held the memory out
        (controls), both logged with their episodes (:class:`memworth.store.records.ProbeDraw`).
        A flag raised before the store logged draws (its audit seq at most ``draws_from``, the
        store's :data:`memworth.store.backend.DRAWS_FROM_KEY`), one that states no
        ``flag_outcome_seq``, and any flag in a store whose ``probe_share`` is 1 (every recall
        in contention serves the memory) have no controls: the probe-only test
        (:meth:`GovernancePolicy.probe_test`) resolves it, on the memory's retrievals since.

        The probe-only test leaves out the outcomes of episodes that also retrieved another
        suspect (``others``: memories that look broken now, or are quarantined themselves):
        they tell nothing about this memory. The control test keeps them: what else a recall
        retrieved depends on the draw (a control serves the next candidate, which may be a
        suspect), so leaving those episodes out would leave out controls more often than
        probes, and a memory that does nothing would look harmful (the draw already makes the
        other memories the same, on average, in both arms). Both leave out the outcomes the
        flag was raised on (up to its ``flag_outcome_seq``, the last outcome logged when the flag was written, by govern
        or by hand (:meth:`_change`); a flag written before it was recorded states none and
        keeps the time rule): the failures that raised the alarm are not evidence that it still fails,
        and counting them again would tilt the test toward suppression."""
        worth = float(RawWorth().value(m.counts))
        numbers = flag.settings.get("numbers", {}) if isinstance(flag.settings, dict) else {}
        read = numbers.get("flag_outcome_seq") if isinstance(numbers, dict) else None
        after_seq = int(read) if isinstance(read, int) and not isinstance(read, bool) else None
        if after_seq is not None and flag.seq > draws_from and self.probe_share < 1:
            rows = self.backend.draw_outcomes(m.namespace, m.id, after_seq)  # no exclusion: see above
            columns = [np.array([r[c] for r in rows], dtype=t) for c, t in enumerate((bool, float, bool, float))]
            decision = self.policy.control_test().decide(*columns)
        else:
            with self._follow_lock:
                success, confidence = followed.retrievals_since(m.id, flag.at, others, after_seq)
            evidence = decisions.probe_evidence(success, confidence, flag, worth, float(self.policy.change.odds_ratio))
            decision = self.policy.probe_test().decide(
                evidence.success, evidence.weight, before=evidence.before, after=evidence.after
            )
        if decision.action == "wait":
            return None
        numbers = {"worth": round(worth, 6), "retrievals": m.counts.n, "flag_seq": flag.seq}
        numbers |= {k: (round(v, 6) if isinstance(v, float) else v) for k, v in decision.numbers.items()}
        if decision.action == "release":
            return Proposal(m.id, "release", "standing", "re-verify", "normal", decision.reason, numbers)
        return Proposal(m.id, "suppress", "status", "active", "suppressed", decision.reason, numbers)

    def report(self, memory_id: str, *, namespace: str = "default") -> MemoryReport:
        """One memory's worth, interval, evidence, class, status, standing, hot-tier
        eligibility and the proposal :meth:`govern` would make for it now.

        Every face shows this report; :meth:`MemoryReport.row` is its JSON shape.

        Examples
        --------
        >>> from memworth import MemoryStore, HashingEncoder
        >>> store = MemoryStore.open("memory://", encoder=HashingEncoder(), exploration=0.0)
        >>> _ = store.add("Prague was the capital of Czechoslovakia.", id="cz")
        >>> for _ in range(20):
        ...     store.record(store.recall("capital of czechoslovakia", k=1), success=False)
        >>> r = store.report("cz")
        >>> r.value_class, r.proposal.action
        ('low', 'deprecate')
        >>> print(r.proposal.reason)  # doctest: +NORMALIZE_WHITESPACE
        worth 0.000 over 20 retrievals: e-value 59.7 against a rate >= 0.3 clears the e-BH bar 20
        (false discovery rate 0.05 over 2 tests)
        """
        return self.reports([memory_id], namespace=namespace)[0]

    def reports(self, ids: Sequence[str] | None = None, *, namespace: str = "default") -> builtins.list[MemoryReport]:
        """:meth:`report` for many memories with one history read: ``ids`` in the order given
        (an unknown one raises UnknownMemoryError), or every memory of the namespace."""
        return run(self._reports_steps(ids, namespace=namespace), self.backend)

    def _report_steps(self, memory_id: str, *, namespace: str = "default") -> Steps[MemoryReport]:
        """:meth:`report` as steps (:mod:`memworth.store.steps`)."""
        found = yield from self._reports_steps([memory_id], namespace=namespace)
        return found[0]

    def _reports_steps(
        self, ids: Sequence[str] | None = None, *, namespace: str = "default"
    ) -> Steps[builtins.list[MemoryReport]]:
        """:meth:`reports` as steps: the memories read, then the decisions (which follow the
        namespace's log and run its change detectors) as one blocking step."""
        check_name(namespace, "namespace")
        if ids is None:
            memories = yield Call("memories", (namespace,))
        else:
            wanted = [check_memory_id(mid) for mid in ids]
            by_id = {m.id: m for m in (yield Call("memories", (namespace, wanted)))}
            missing = [mid for mid in wanted if mid not in by_id]
            if missing:
                raise UnknownMemoryError(missing[0])
            memories = [by_id[mid] for mid in wanted]
        found = yield Blocking(self._decide, (memories, namespace))
        return [
            assess(self.policy, m, found[m.id].proposal, pin=found[m.id].pin, held=found[m.id].held) for m in memories
        ]

    def approve(
        self, memory_id: str, action: str, *, actor: str | None = None, namespace: str = "default"
    ) -> AuditEntry:
        """Apply the one change governance proposes now for one memory, as ``govern(apply=True)`` would,
        the audit entry naming who approved it (``actor``).

        ``action`` must be what :meth:`govern` proposes for the memory at this moment, so a
        stale approval changes nothing (ValidationError); the rate limit and the audit entry
        are those of :meth:`govern` (StoreError when the limit holds the change back).

        Examples
        --------
        >>> from memworth import MemoryStore, HashingEncoder
        >>> store = MemoryStore.open("memory://", encoder=HashingEncoder(), exploration=0.0)
        >>> _ = store.add("Prague was the capital of Czechoslovakia.", id="cz")
        >>> for _ in range(20):
        ...     store.record(store.recall("capital of czechoslovakia", k=1).episode, success=False)
        >>> [(p.memory_id, p.action) for p in store.govern().proposals]
        [('cz', 'deprecate')]
        >>> entry = store.approve("cz", "deprecate")
        >>> entry.action, entry.new, store.get("cz").status
        ('deprecate', 'deprecated', 'deprecated')
        """
        who = check_actor(actor)
        memory = self.get(memory_id, namespace=namespace)
        with self._settled_reads():  # the proposal, and the last audit entry it was made on
            found, _, seen = self._decide_all([memory], namespace)
        p = found[memory.id].proposal
        if p is None or p.action != action:
            now = "nothing" if p is None else repr(p.action)
            raise ValidationError("action", f"governance proposes {now} for {memory_id!r}, not {action!r}")
        # made on this status and standing, with no pin since (a pin given meanwhile holds it back)
        state: dict[str, object] = {"status": memory.status, "standing": memory.standing, "no_pin_after": seen}
        entry = self._apply(p, namespace, pin=True, requires=state, actor=who)  # a person approved it: it sticks
        self._refresh_hot(namespace)
        return entry

    def _apply(
        self,
        p: Proposal,
        namespace: str,
        *,
        pin: bool = False,
        requires: dict[str, object] | None = None,
        actor: str | None = None,
    ) -> AuditEntry:
        """Make one proposed change, audited with the policy's settings; StoreError when rate-limited.

        ``requires``: the status and standing the memory had when ``p`` was proposed for it;
        the backend writes the change only if it still has both (ChangedError otherwise), so
        a decision made meanwhile (a person's verdict, on another face or in another process)
        is never overruled on what was read before it."""
        if p.action in RATE_LIMITED:
            day_ago = self.clock() - 86400
            changes = [
                e
                for e in self.backend.audit_log(namespace, p.memory_id)
                if e.at >= day_ago and e.action in RATE_LIMITED
            ]
            if len(changes) >= self.policy.limits.max_changes_per_day:
                raise RateLimitError(f"rate limit: {len(changes)} promote/demote changes in the last 24 h")
        who = {} if actor is None else {"actor": actor}
        return self._change(
            p.memory_id,
            p.field,
            p.new,
            reason=p.reason,
            namespace=namespace,
            action=p.action,
            settings={"policy": self.policy.settings(), "numbers": p.numbers, **who},
            expected=p.old,
            pin=pin,
            requires=requires,
        )

    def restore(
        self, audit_seq: int, *, reason: str = "restored", actor: str | None = None, namespace: str = "default"
    ) -> AuditEntry:
        """Undo one audited change (the memory must still be as that change left it), the
        audit entry naming who undid it (``actor``)."""
        if isinstance(audit_seq, bool) or not isinstance(audit_seq, int):
            raise ValidationError("audit_seq", f"must be an integer, got {audit_seq!r}")
        reason = check_reason(reason)  # bad input is refused before anything is looked up
        who = {} if actor is None else {"actor": check_actor(actor)}
        entry = next((e for e in self.backend.audit_log(namespace) if e.seq == audit_seq), None)
        if entry is None:
            raise UnknownEntryError(audit_seq, namespace)
        if entry.action == ERASE:
            raise ValidationError(
                "audit_seq", f"entry {audit_seq} erased {entry.memory_id!r}: an erasure cannot be undone"
            )
        if entry.field not in ("status", "standing"):
            raise ValidationError(
                "audit_seq", f"entry {audit_seq} ({entry.action}) changed nothing to undo; use pin/unpin"
            )
        current = getattr(self.get(entry.memory_id, namespace=namespace), entry.field)
        if current != entry.new:
            raise ChangedError(
                f"memory {entry.memory_id!r} has {entry.field} {current!r}, not {entry.new!r} as entry {audit_seq} left it"
            )
        return self._change(
            entry.memory_id,
            entry.field,
            entry.old,
            reason=f"{reason} (undoes entry {audit_seq}: {entry.action})",  # the note is not counted in the limit
            namespace=namespace,
            action="restore",
            expected=entry.new,  # changed again meanwhile: StoreError, as above
            pin=True,  # a person undid it: governance does not redo it on the same evidence
            settings=who,
        )

    def may_consolidate(self, memory_id: str, *, namespace: str = "default") -> bool:
        """The consolidation gate: False for high-value memories, which are kept as they are."""
        return self.policy.may_consolidate(self.get(memory_id, namespace=namespace).counts)
