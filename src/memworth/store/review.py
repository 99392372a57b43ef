"""The review of quarantined memories: the queue, a person's or the verifier's verdict,
and pins that keep governance away from a memory.

A memory flagged ``re-verify`` is quarantined; it waits in :meth:`ReviewMixin.queue`
until :meth:`ReviewMixin.resolve` (a person), the ``verifier`` (called by
``govern(apply=True)``, with a timeout) or the probe test decides it.
"""

from __future__ import annotations

import builtins
import threading
import uuid
from collections.abc import Callable
from typing import Any

from memworth.errors import ConflictError, UnknownMemoryError, ValidationError
from memworth.store import decisions
from memworth.store.records import AuditEntry, Memory
from memworth.store.report import MemoryReport
from memworth.store.state import StoreState
from memworth.validation import MAX_REASON, check_actor, check_memory_id, check_reason, check_text

__all__ = ["VERDICTS", "ReviewMixin"]

VERDICTS = ("confirmed", "stale", "edited")
"""How a quarantined memory is resolved: back to normal, out of recall, or replaced by new text."""


class _Raised(Exception):
    """The verifier raised something that is not an Exception (SystemExit from a test runner's
    ``main``, KeyboardInterrupt, ...): in its own thread that is its failure, not a request to
    stop this program, so it is audited like any other."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(f"{type(error).__name__}: {error}")
        self.error = error


def _call_with_timeout(
    fn: Callable[[MemoryReport], object], report: MemoryReport, timeout: float
) -> tuple[str, str | None]:
    """``fn(report)`` in a daemon thread, as ``(verdict, text)``; TimeoutError when it has not
    answered in ``timeout`` s (the thread is left to finish on its own: Python cannot stop it).
    Whatever the verifier raises is raised here as an Exception (:class:`_Raised` for the rest)."""
    result: dict[str, object] = {}

    def run() -> None:
        try:
            result["value"] = fn(report)
        except BaseException as exc:
            result["error"] = exc

    worker = threading.Thread(target=run, name="memworth-verifier", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise TimeoutError(f"no answer within {timeout:g} s")
    error = result.get("error")
    if isinstance(error, Exception):
        raise error
    if isinstance(error, BaseException):
        raise _Raised(error)
    answer = result.get("value")
    if isinstance(answer, str):
        return answer, None
    if isinstance(answer, tuple) and len(answer) == 2 and answer[0] == "edited" and isinstance(answer[1], str):
        return "edited", answer[1]
    raise ValidationError("verifier", f"must answer a verdict or ('edited', text), got {answer!r}")


class ReviewMixin(StoreState):
    """The review part of :class:`memworth.store.MemoryStore`: queue, resolve, pin, unpin, the verifier."""

    def queue(self, *, namespace: str = "default") -> builtins.list[MemoryReport]:
        """Memories awaiting verification (active, standing ``re-verify``: quarantined), with
        their reports; resolve each with :meth:`resolve` (or let the probe test or the
        ``verifier`` do it)."""
        return [r for r in self.reports(namespace=namespace) if r.status == "active" and r.standing == "re-verify"]

    def resolve(
        self,
        memory_id: str,
        verdict: str,
        *,
        reason: str,
        text: str | None = None,
        new_id: str | None = None,
        status: str | None = None,
        actor: str | None = None,
        namespace: str = "default",
    ) -> AuditEntry:
        """Resolve a quarantined memory, audited and pinned (a person's or a verifier's decision),
        the audit entry naming who gave the verdict (``actor``; the verifier's say ``verifier``).

        ``confirmed``: back to standing ``normal``, its counters (and the fall they showed)
        kept. ``stale``: ``status`` (``suppressed``, the default, or ``deprecated``). ``edited``:
        ``text`` becomes a new memory (``new_id``, default ``<id>~<8 hex>``) derived from
        this one, with the same metadata and contexts and fresh counters (the old ones
        measured the old text); this one is archived, its entry naming its replacement.
        Refused, with nothing changed: a memory not awaiting verification (ConflictError),
        an unknown verdict, ``edited`` without text, a ``text`` or ``new_id`` with another
        verdict than ``edited``, a ``status`` with another than ``stale`` (ValidationError:
        what the verdict does not use would be dropped unsaid).

        Examples
        --------
        >>> from memworth import MemoryStore, HashingEncoder
        >>> store = MemoryStore.open("memory://", encoder=HashingEncoder())
        >>> _ = store.add("Prague was the capital of Czechoslovakia.", id="cz")
        >>> _ = store.set_standing("cz", "re-verify", reason="looks stale")
        >>> [r.id for r in store.queue()]
        ['cz']
        >>> entry = store.resolve("cz", "edited", reason="updated", text="Czechoslovakia split in 1993.", new_id="cz2")
        >>> store.get("cz").status, store.get("cz2").derived_from, store.queue()
        ('archived', ('cz',), [])
        """
        if not isinstance(verdict, str) or verdict not in VERDICTS:
            raise ValidationError("verdict", f"must be one of {', '.join(VERDICTS)}, got {verdict!r}")
        unused = [("text", text, "edited"), ("new_id", new_id, "edited"), ("status", status, "stale")]
        for name, value, takes in unused:
            if value is not None and verdict != takes:
                raise ValidationError(name, f"only the {takes} verdict takes a {name}, not {verdict} (got {value!r})")
        reason = check_reason(reason)
        who = {} if actor is None else {"actor": check_actor(actor)}
        memory = self.get(memory_id, namespace=namespace)
        if memory.status != "active" or memory.standing != "re-verify":
            raise ConflictError(
                f"memory {memory_id!r} is not awaiting verification (status {memory.status}, standing {memory.standing})"
            )
        # Checked again by the backend in the statement that makes the change: of two verdicts
        # given at once (two people, a person and the verifier), one wins, the other is a ConflictError.
        queued: dict[str, object] = {"status": "active", "standing": "re-verify"}
        if verdict == "confirmed":
            return self._change(
                memory.id, "standing", "normal", reason=f"confirmed: {reason}", namespace=namespace,
                action="resolve", expected="re-verify", pin=True, requires=queued, settings=who,
            )  # fmt: skip
        if verdict == "stale":
            status = "suppressed" if status is None else status
            if status not in ("suppressed", "deprecated"):
                raise ValidationError("status", f"must be 'suppressed' or 'deprecated', got {status!r}")
            return self._change(
                memory.id, "status", status, reason=f"stale: {reason}", namespace=namespace,
                action="resolve", expected="active", pin=True, requires=queued, settings=who,
            )  # fmt: skip
        if text is None:
            raise ValidationError("text", "an edited memory needs its new text")
        return self._replace(
            memory, text, new_id, reason=reason, action="resolve", namespace=namespace, requires=queued, settings=who
        )

    def _replace(
        self,
        memory: Memory,
        text: str,
        new_id: str | None,
        *,
        reason: str,
        action: str,
        namespace: str,
        settings: dict[str, Any] | None = None,
        requires: dict[str, object] | None = None,
    ) -> AuditEntry:
        """The one edit: ``text`` becomes a new memory (``new_id``, default ``<id>~<8 hex>``)
        derived from ``memory``, with its metadata, contexts and time to live and fresh
        counters (the old ones measured the old text); ``memory`` is archived, keeping its
        counters, its audit entry naming the replacement; both in one transaction, so an edit
        that cannot be made (``memory`` changed meanwhile, or no longer holds ``requires``)
        writes nothing. :meth:`resolve` ("edited") and
        :meth:`memworth.MemoryStore.edit` both call it."""
        new_text = check_text(text, "text")
        replacement = (
            check_memory_id(new_id, "new_id") if new_id is not None else f"{memory.id[:190]}~{uuid.uuid4().hex[:8]}"
        )
        new = self._prepare_one(
            new_text,
            id=replacement,
            namespace=namespace,
            metadata=memory.metadata,
            contexts=memory.contexts,
            derived_from=[memory.id],
            expires=memory.expires,
        )
        return self._change(  # the new version and the old one's archiving: one transaction
            memory.id, "status", "archived", reason=f"edited: replaced by {replacement}: {reason}",
            namespace=namespace, action=action, settings={**(settings or {}), "replaced_by": replacement},
            expected=memory.status, pin=True, with_new=[new], requires=requires,
        )  # fmt: skip

    def pin(self, memory_id: str, *, reason: str, actor: str | None = None, namespace: str = "default") -> AuditEntry:
        """Keep governance away from a memory until :meth:`unpin` (audited, naming who: ``actor``).
        A memory pinned so already is a ConflictError (nothing written); one a person's
        decision pinned for a number of retrievals is pinned until unpinned from now on."""
        reason = check_reason(reason)
        who = {} if actor is None else {"actor": check_actor(actor)}
        held = self._pin_of(memory_id, namespace)
        if held is not None and held.until is None:
            raise ConflictError(
                f"memory {memory_id!r} is pinned until unpinned already (audit entry {held.seq}: {held.action})"
            )
        return self._note(memory_id, "pin", "pinned", reason, namespace, {"pin": {"until": None}, **who})

    def unpin(self, memory_id: str, *, reason: str, actor: str | None = None, namespace: str = "default") -> AuditEntry:
        """End a memory's pin (an explicit one, or the one a person's decision set); audited,
        naming who (``actor``). A memory no pin holds is a ConflictError (nothing written)."""
        reason = check_reason(reason)
        who = {} if actor is None else {"actor": check_actor(actor)}
        if self._pin_of(memory_id, namespace) is None:
            raise ConflictError(f"memory {memory_id!r} is not pinned: there is nothing to unpin")
        return self._note(memory_id, "unpin", "unpinned", reason, namespace, {"pin": None, **who})

    def _pin_of(self, memory_id: str, namespace: str) -> decisions.Pin | None:
        """The pin that holds a memory now (as its report shows it), or None."""
        memory = self.get(memory_id, namespace=namespace)
        pin = decisions.pins(self.backend.audit_log(namespace, memory.id)).get(memory.id)
        return pin if pin is not None and pin.holds(memory.counts.n) else None

    def _note(
        self, memory_id: str, action: str, new: str, reason: str, namespace: str, settings: dict[str, Any]
    ) -> AuditEntry:
        """An audit entry that changes no column (a pin, a verifier's failure)."""
        reason = check_reason(reason)
        memory = self.get(memory_id, namespace=namespace)
        field_name = "verification" if action == "verifier-failed" else "pin"
        entry = AuditEntry(0, memory.id, namespace, action, field_name, "", new, reason, settings, self.clock())
        return self.backend.change(entry)

    def _queued(self, memory_id: str, namespace: str) -> bool:
        """Whether the memory exists and still awaits verification (as :meth:`queue` lists it)."""
        found = self.backend.memories(namespace, [memory_id])
        return bool(found) and (found[0].status, found[0].standing) == ("active", "re-verify")

    def _verify_queue(self, namespace: str) -> builtins.list[AuditEntry]:
        """Ask the ``verifier`` about each quarantined memory (once per flag): resolve on its
        verdict, or audit its failure (an exception, a bad answer, no answer within
        ``verifier_timeout`` seconds) and leave the memory as it is. A memory someone else
        resolved, changed or erased while the verifier worked is left to them: nothing failed."""
        assert self.verifier is not None
        done: builtins.list[AuditEntry] = []
        audit = self.backend.audit_log(namespace)
        flagged = decisions.flags(audit)
        for report in self.queue(namespace=namespace):
            flag = flagged.get(report.id)
            asked = [e for e in audit if e.memory_id == report.id and e.action == "verifier-failed"]
            if report.pin is not None or (flag is not None and any(e.seq > flag.seq for e in asked)):
                continue  # pinned, or the verifier already failed on this flag
            try:
                verdict, text = _call_with_timeout(self.verifier, report, self.verifier_timeout)
                done.append(
                    self.resolve(
                        report.id, verdict, reason="verifier", text=text, actor="verifier", namespace=namespace
                    )
                )
            except Exception as exc:
                if isinstance(exc, (ConflictError, UnknownMemoryError)) and not self._queued(report.id, namespace):
                    continue  # resolved, changed or erased by someone else while the verifier worked: nothing failed
                failure = str(exc) if isinstance(exc, _Raised) else f"{type(exc).__name__}: {exc}"
                why = f"verifier failed: {failure}"[:MAX_REASON]
                done.append(
                    self._note(report.id, "verifier-failed", "unresolved", why, namespace, {"actor": "verifier"})
                )
        return done
