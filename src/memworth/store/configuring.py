"""The settings a store keeps with its data: read when it opens, versioned when changed.

A store's settings (:class:`memworth.settings.Settings`) live in its ``meta`` table, with
every version it ever had. Whoever opens the store without naming a setting gets the kept
one, so the CLI, the HTTP and MCP servers, the dashboard, the sidecar and a Python client
all work under the same settings; one that names a setting that differs from the kept
one makes a new version (with who made it and which settings changed). Stores made
before settings were kept had only their governance policy and holdout share kept; they
are read as the first version's parts.
"""

from __future__ import annotations

import builtins
import dataclasses
import functools
import json
import math
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from memworth.embed.vector_index import faiss_available
from memworth.errors import SettingsConflictError, SettingsError, ValidationError
from memworth.governance import GovernancePolicy
from memworth.governance.parts import FLAT_NAMES
from memworth.settings import HoldoutSettings, Settings
from memworth.signals.coretrieval import AblationPlanner, AlarmSplitter, RecallPlanner
from memworth.store.recording import DEFAULT_SOURCES
from memworth.store.state import StoreState
from memworth.store.steps import Call, Steps, run
from memworth.validation import check_actor, check_flag, check_store_settings, check_verifier

R = TypeVar("R")

__all__ = ["KEPT", "SETTINGS_KEY", "ConfigMixin", "settings_from_arguments"]

SETTINGS_KEY = "settings"
"""The store's ``meta`` key of the settings in force (and ``settings_history``)."""

LEGACY_POLICY_KEY, LEGACY_HOLDOUT_KEY = "policy", "holdout"
"""Where stores made before settings were kept held their policy and holdout share."""


class _Kept:
    """The default of a store argument: the store's kept setting (else the default)."""

    def __repr__(self) -> str:
        return "kept"


KEPT: Any = _Kept()

SETTINGS_CHECK_SECONDS = 1.0
"""How often a store object looks for a settings version another one kept (at most once
per this many seconds, at the start of recall, recording and governance)."""

WRITE_ATTEMPTS = 20
"""How many times a settings version is written again after another writer came first."""

_now = time.monotonic

_WHERE = {
    "scoring": ("recall", "scoring"),
    "exploration": ("recall", "exploration"),
    "min_evidence": ("recall", "min_evidence"),
    "probe_share": ("recall", "probe_share"),
    "index": ("recall", "index"),
    "index_threshold": ("recall", "index_threshold"),
    "credit": ("credit", "rule"),
    "w_min": ("credit", "w_min"),
    "propagation": ("credit", "propagation"),
    "max_hops": ("credit", "max_hops"),
    "sources": ("sources", "confidences"),
    "limits": ("sources", "limits"),
    "reliability": ("sources", "reliability"),
    "burst": ("sources", "burst"),
    "govern_every": ("automation", "govern_every"),
    "govern_every_seconds": ("automation", "govern_every_seconds"),
    "verifier_timeout": ("automation", "verifier_timeout"),
}
"""Where each store argument lives in the settings: (part, setting)."""


def settings_from_arguments(
    kept: Settings | None, given: Mapping[str, Any], seed: int | None
) -> tuple[Settings, RecallPlanner | None]:
    """The settings a store opens under: ``kept`` (else the defaults) with the arguments
    ``given`` (store argument names) put in, and the recall planner object given, if one was.

    A refused value raises :class:`ValidationError` naming the argument.
    """
    base = kept if kept is not None else Settings()
    parts = {name: getattr(base, name) for name in ("recall", "credit", "sources", "holdout", "automation")}
    changes: dict[str, dict[str, Any]] = {name: {} for name in parts}
    planner: RecallPlanner | None = None
    for arg, value in given.items():
        if arg in _WHERE:
            part, name = _WHERE[arg]
            changes[part][name] = {} if arg in ("sources", "limits") and value is None else value
        elif arg == "holdout":
            if value is not None:
                changes["holdout"] = {"share": value, "seed": 0 if seed is None else int(seed)}
        elif arg == "ablation":
            kind, share, planner = _planner_setting(value)
            changes["recall"]["planner"] = kind
            if share is not None:
                changes["recall"]["planner_share"] = share
    for part, values in changes.items():
        if not values:
            continue
        try:
            parts[part] = dataclasses.replace(parts[part], **values)
        except ValidationError as exc:
            raise ValidationError(_argument(part, exc.field), exc.reason) from None
    governance = base.governance
    if "policy" in given and given["policy"] is not None:
        if not isinstance(given["policy"], GovernancePolicy):
            raise ValidationError("policy", f"must be a GovernancePolicy, got {type(given['policy']).__name__}")
        governance = given["policy"]
    elif kept is None and "min_evidence" in given:  # a new store: the policy's evidence floor follows
        classes = dataclasses.replace(governance.classes, min_evidence=parts["recall"].min_evidence)
        governance = dataclasses.replace(governance, classes=classes)
    return Settings(governance=governance, **parts), planner


ASSIGNABLE = frozenset({*_WHERE, "policy", "holdout", "ablation", "verifier", "clock"})
"""The store's settings that may also be set as attributes (``store.probe_share = 0.2``):
each assignment is validated as :meth:`MemoryStore.open` and :meth:`ConfigMixin.configure`
validate it (:func:`assigned`), and a refused one changes nothing."""


class WrapsStore:
    """A wrapper of store objects (the sidecar, the async classes): a store setting assigned
    on it is refused, naming the setting. Before, ``async_store.probe_share = 5`` made an
    attribute of the wrapper that nothing read, silently."""

    __slots__ = ()

    def __setattr__(self, name: str, value: object) -> None:
        if name in ASSIGNABLE:
            raise ValidationError(
                name,
                "is a setting of the wrapped store: keep it with configure({...}) (every store object follows), "
                "or set it on the store object itself",
            )
        object.__setattr__(self, name, value)


def assigned(settings: Settings, name: str, value: object, holdout_seed: int) -> tuple[Settings, RecallPlanner | None]:
    """``settings`` with the store attribute ``name`` (a setting of :data:`ASSIGNABLE`) set to
    ``value``, and the recall planner object given (for ``ablation``): the one validator of an
    assignment, the store arguments' (:func:`settings_from_arguments`). A refused value raises
    :class:`ValidationError` naming the setting; the holdout share keeps its seed.

    Examples
    --------
    >>> assigned(Settings(), "probe_share", 0.2, 0)[0].recall.probe_share
    0.2
    >>> assigned(Settings(), "probe_share", 5, 0)
    Traceback (most recent call last):
    ...
    memworth.errors.ValidationError: probe_share: must be within [0, 1], got 5
    """
    if name == "holdout":
        try:
            part = HoldoutSettings(value, holdout_seed)  # type: ignore[arg-type]
        except ValidationError as exc:
            raise ValidationError("holdout", exc.reason) from None
        return dataclasses.replace(settings, holdout=part), None
    if name == "policy" and not isinstance(value, GovernancePolicy):
        raise ValidationError("policy", f"must be a GovernancePolicy, got {type(value).__name__}")
    return settings_from_arguments(settings, {name: value}, None)


def _argument(part: str, name: str) -> str:
    """The store argument a refused setting came from."""
    for arg, where in _WHERE.items():
        if where == (part, name):
            return arg
    return {("holdout", "share"): "holdout", ("recall", "planner"): "ablation"}.get((part, name), name)


def _planner_setting(value: object) -> tuple[str, float | None, RecallPlanner | None]:
    """A store's ``ablation`` argument as (planner kind, share, the object given)."""
    if value is None:
        return "none", None, None
    if isinstance(value, str):
        if value not in ("split", "pairs", "none"):
            raise ValidationError("ablation", f"must be 'split', 'pairs', 'none', a planner or None, got {value!r}")
        return value, None, None
    if isinstance(value, AlarmSplitter):
        return "split", value.share, value
    if isinstance(value, AblationPlanner):
        return "pairs", value.budget, value
    kind = type(value).__name__
    raise ValidationError("ablation", f"must be an AblationPlanner, an AlarmSplitter or None, got {kind}")


FOLLOWING = ("recall", "choose", "record", "record_many", "govern", "approve", "proposals", "report", "reports")
"""The store methods that first put in force a settings version another store object kept
(:meth:`ConfigMixin.follow_settings`): recall, recording and governance, and the reports
and proposals every face shows."""


def _readable(record: Mapping[str, Any]) -> Settings:
    """The settings of a kept version, else SettingsError (a version this memworth cannot read:
    one a newer memworth wrote): the same error whether a store opens, follows or writes."""
    try:
        return Settings.from_dict(record["settings"])
    except ValidationError as exc:
        raise SettingsError(
            f"the store's settings version {record.get('version')} cannot be read here ({exc}); "
            "it may have been written by a newer memworth"
        ) from None


def following_settings(method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` preceded by :meth:`ConfigMixin.follow_settings`, at the outermost call only:
    settings never change in the middle of a call (a govern's proposals, a record's govern)."""

    @functools.wraps(method)
    def call(self: ConfigMixin, *args: Any, **kwargs: Any) -> Any:
        if self._depth == 0:
            self.follow_settings()
        self._depth += 1
        try:
            return method(self, *args, **kwargs)
        finally:
            self._depth -= 1

    return call


class ConfigMixin(StoreState):
    """The settings part of :class:`memworth.store.MemoryStore`."""

    _settings: Settings
    _planner_given: RecallPlanner | None
    _seed: int | None

    _settings_version: int = 0
    """The kept version of the settings in force (0: never set, the defaults)."""
    _settings_seen: str | None = None
    """The kept settings record (its JSON text) this object last put in force or wrote."""
    _settings_checked: float = -math.inf
    """When (:func:`time.monotonic`) this object last looked for a newer kept version."""
    _depth: int = 0
    """How many calls of :data:`FOLLOWING` methods are under way on this object."""
    settings_check_interval: float = SETTINGS_CHECK_SECONDS
    """Seconds between two looks for a version another store object kept (0: every call)."""

    _adopting: bool = False
    """True while :meth:`_adopt` sets the attributes of a whole settings object."""

    def __setattr__(self, name: str, value: object) -> None:
        """A setting assigned as an attribute (:data:`ASSIGNABLE`) is validated as ``open`` and
        :meth:`configure` validate it, and put in force on this store object only (not kept:
        :meth:`configure` keeps a version); a refused value raises ValidationError naming the
        setting and changes nothing. Before, ``store.probe_share = 5`` was taken as given."""
        if name in ASSIGNABLE and not self._adopting and "_settings" in self.__dict__:
            self._assign(name, value)
        else:
            object.__setattr__(self, name, value)

    def _assign(self, name: str, value: object) -> None:
        """Put one assigned setting in force (see :meth:`__setattr__`)."""
        if name == "verifier":
            check_verifier(value)
            object.__setattr__(self, name, value)
            return
        if name == "clock":
            check_store_settings(value, None)
            object.__setattr__(self, name, value)
            return
        settings, planner = assigned(self._settings, name, value, self._holdout_seed)
        self._adopt(settings, self._settings_version)
        if name == "ablation":  # the planner object given (or the one its name makes)
            r = settings.recall
            object.__setattr__(self, "_planner_given", planner)
            object.__setattr__(self, "ablation", planner if planner is not None else self._planner(r.planner, r.planner_share))

    # -- reading what is kept ----------------------------------------------------------

    def settings_record(self) -> dict[str, Any] | None:
        """The settings the store keeps: ``{"version", "settings", "at", "actor", "changed"}``
        (``None``: never set; the defaults are in force)."""
        return self._kept_record(self.backend.get_meta(SETTINGS_KEY))

    def _kept_record(self, stored: str | None) -> dict[str, Any] | None:
        """The kept record from its JSON text, else a store's settings from before settings were kept."""
        if stored is not None:
            return dict(json.loads(stored))
        legacy = self._legacy_settings()
        if legacy is None:
            return None
        return {"version": 1, "settings": legacy.to_dict(), "at": None, "actor": "before settings", "changed": []}

    def settings_history(self) -> builtins.list[dict[str, Any]]:
        """Every version of the settings the store was used under, oldest first; the
        governance part of a version kept before it had parts is shown in parts."""
        return [_shown(v) for v in self._kept_history()]

    def _kept_history(self) -> builtins.list[dict[str, Any]]:
        stored = self.backend.get_meta(SETTINGS_KEY + "_history")
        if stored is not None:
            return builtins.list(json.loads(stored))
        record = self.settings_record()
        return [] if record is None else [record]

    def _kept_settings(self) -> tuple[Settings | None, int]:
        """The kept settings (None: never set) and their version (0: never set), read once;
        the record read is the one later looks compare with (:meth:`follow_settings`)."""
        self._settings_seen = self.backend.get_meta(SETTINGS_KEY)
        record = self._kept_record(self._settings_seen)
        return (None, 0) if record is None else (_readable(record), int(record["version"]))

    def _legacy_settings(self) -> Settings | None:
        policy, holdout = self.backend.get_meta(LEGACY_POLICY_KEY), self.backend.get_meta(LEGACY_HOLDOUT_KEY)
        if policy is None and holdout is None:
            return None
        kept = Settings()
        if policy is not None:
            kept = dataclasses.replace(kept, governance=GovernancePolicy.from_settings(json.loads(policy)["settings"]))
        if holdout is not None:
            h = json.loads(holdout)
            kept = dataclasses.replace(kept, holdout=HoldoutSettings(float(h["share"]), int(h["seed"])))
        return kept

    # -- the settings in force -----------------------------------------------------------

    @property
    def settings(self) -> Settings:
        """The settings in force (what :meth:`configure` changes)."""
        return self._settings

    @property
    def settings_version(self) -> int:
        """The kept settings version in force on this store object (0: never set, the
        defaults): every outcome it records, and every change governance makes, names it."""
        return self._settings_version

    def config(self) -> dict[str, Any]:
        """The settings in force and their version (0: never set, the defaults): the one
        JSON shape the CLI, HTTP and MCP show. It first puts in force a newer version
        another store object kept, if there is one."""
        self.follow_settings(now=True)
        kept = self.settings_record()
        return {"version": 0 if kept is None else int(kept["version"]), "settings": self._settings.to_dict()}

    def follow_settings(self, *, now: bool = False) -> bool:
        """Put in force the newest settings version another store object (another process:
        ``memworth config set``, a server's ``PUT /v1/config``) kept; whether it changed
        what is in force here.

        Recall, recording and governance call it first, so a version kept elsewhere is in
        force here within :attr:`settings_check_interval` seconds (default 1 s) of its write:
        it costs one read of the kept record's key per interval, and a parse only when the
        record changed. ``now``: look even if the last look is more recent. The newest
        kept version wins over what this object was opened with: an argument given to the
        store's constructor made a version when the store opened, and a later version
        replaces it like any other, so every outcome is credited under the kept version
        its time names.
        """
        return run(self._follow_settings_steps(check_flag(now, "now")), self.backend)

    def _follow_settings_steps(self, now: bool = False) -> Steps[bool]:
        """:meth:`follow_settings` as steps (:mod:`memworth.store.steps`)."""
        at = _now()
        if not now and at - self._settings_checked < self.settings_check_interval:
            return False
        self._settings_checked = at
        stored = yield Call("get_meta", (SETTINGS_KEY,))
        if stored is None or stored == self._settings_seen:
            return False
        record = json.loads(stored)
        kept = _readable(record)
        self._settings_seen = stored
        if kept.to_dict() == self._settings.to_dict():
            self._settings_version = int(record["version"])  # the same settings, kept as a newer version
            return False
        self._adopt(kept, int(record["version"]))
        return True

    def _following_steps(self, steps: Steps[R]) -> Steps[R]:
        """``steps`` preceded by :meth:`follow_settings` at the outermost call only: what
        :func:`following_settings` does for a sync method, for an async store's steps."""
        if self._depth == 0:
            yield from self._follow_settings_steps()
        self._depth += 1
        try:
            answer = yield from steps
        finally:
            self._depth -= 1
        return answer

    def configure(self, changes: Settings | Mapping[str, object], *, actor: str = "python") -> int:
        """Work under new settings from now on, and keep them with the store.

        ``changes`` is a whole :class:`memworth.settings.Settings` or ``{"part.setting":
        value}`` (:meth:`Settings.changed`). Settings that differ from the kept ones become a
        new version, recorded with ``actor`` and the names that changed
        (:meth:`settings_history`); returns the version in force. Nothing changes if a value
        is refused.

        A version is written atomically (compare and set on the kept record,
        :meth:`memworth.store.backend.Backend.set_meta_if`): when another store object (in
        this or another process) kept a version since this one read it, the changes are
        applied again to that newer version (a whole ``Settings`` is written as given) and
        the write is tried again, so no version is lost from the history. After 20 such
        losses in a row it raises :class:`memworth.errors.SettingsConflictError` (HTTP 409)
        and writes nothing.

        Examples
        --------
        >>> from memworth import MemoryStore, HashingEncoder
        >>> store = MemoryStore.open("memory://", encoder=HashingEncoder())
        >>> store.configure({"recall.exploration": 0.05, "governance.classes.theta_low": 0.35}, actor="ops")
        1
        >>> store.exploration, store.policy.classes.theta_low
        (0.05, 0.35)
        >>> store.settings_history()[-1]["changed"]
        ['recall.exploration', 'governance.classes.theta_low']
        """
        if actor is None:
            raise ValidationError("actor", "must name who changes the settings")
        check_actor(actor)
        if isinstance(changes, Settings):
            whole = changes
            return self._write_version(lambda kept: whole, actor)
        self._settings.changed(changes)  # refused now, naming the setting, before anything is read
        return self._write_version(lambda kept: (kept or Settings()).changed(changes), actor)

    def _write_version(self, make: Callable[[Settings | None], Settings], actor: str) -> int:
        """Keep ``make(kept settings)`` as the next version, unless it is the kept one, and
        put it in force; the version in force. Compare and set: a version another object
        kept in between makes it read and try again."""
        for _ in range(WRITE_ATTEMPTS):
            stored = self.backend.get_meta(SETTINGS_KEY)
            kept = self._kept_record(stored)
            base = None if kept is None else _readable(kept)
            new = make(base)
            if new.recall.index == "hnsw" and not faiss_available():
                raise ValidationError("recall.index", "'hnsw' needs faiss: pip install 'memworth[index]'")
            if kept is not None and base is not None and base.to_dict() == new.to_dict():
                self._settings_seen = stored
                self._adopt(new, int(kept["version"]))
                return int(kept["version"])
            version = 1 if kept is None else int(kept["version"]) + 1
            record = {
                "version": version,
                "settings": new.to_dict(),
                "at": self.clock(),
                "actor": actor,
                "changed": Settings.diff(base or Settings(), new),
            }
            history = self._kept_history()  # a store made before settings were kept: its first version too
            text = json.dumps(record, sort_keys=True)
            also = {SETTINGS_KEY + "_history": json.dumps([*history, record], sort_keys=True)}
            if self.backend.set_meta_if(SETTINGS_KEY, stored, text, also):
                self._settings_seen, self._settings_checked = text, _now()
                self._adopt(new, version)
                return version
        raise SettingsConflictError(
            f"settings: other store objects kept a newer version {WRITE_ATTEMPTS} times while this one was "
            "being written; nothing was written (try again)"
        )

    def _adopt(self, settings: Settings, version: int) -> None:
        """Put ``settings`` (kept as ``version``; 0: never set) in force on this store object."""
        object.__setattr__(self, "_adopting", True)
        try:
            self._adopt_all(settings, version)
        finally:
            object.__setattr__(self, "_adopting", False)

    def _adopt_all(self, settings: Settings, version: int) -> None:
        old = getattr(self, "_settings", None)
        r, c, s = settings.recall, settings.credit, settings.sources
        self.scoring, self.exploration, self.min_evidence = r.scoring, r.exploration, r.min_evidence
        self.probe_share = r.probe_share
        if old is not None and (old.recall.index, old.recall.index_threshold) != (r.index, r.index_threshold):
            self._spaces = {}  # the candidate index is built again, as now set
        self.index, self.index_threshold = r.index, r.index_threshold
        self.credit, self.w_min, self.propagation, self.max_hops = c.rule, c.w_min, c.propagation, c.max_hops
        self.sources = {**DEFAULT_SOURCES, **s.confidences}
        self.limits, self.reliability, self.burst = dict(s.limits), s.reliability, s.burst
        self.holdout, self._holdout_seed = settings.holdout.share, settings.holdout.seed
        self.govern_every = settings.automation.govern_every
        self.govern_every_seconds = settings.automation.govern_every_seconds
        self.verifier_timeout = settings.automation.verifier_timeout
        self.policy = settings.governance
        if old is None or (old.recall.planner, old.recall.planner_share) != (r.planner, r.planner_share):
            self.ablation = self._planner(r.planner, r.planner_share)
        self._settings = settings
        self._settings_version = version

    def _planner(self, kind: str, share: float) -> RecallPlanner | None:
        given = self._planner_given
        if given is not None and _planner_setting(given)[:2] == (kind, share):
            return given  # the object the store was opened with (its other settings too)
        if kind == "split":
            return AlarmSplitter(share=share, seed=self._seed)
        if kind == "pairs":
            return AblationPlanner(budget=share, seed=self._seed)
        return None

    # -- the governance part, as it was set before settings were composed ------------------

    def set_policy(self, policy: GovernancePolicy) -> int:
        """Govern under ``policy`` from now on and keep it with the store (:meth:`configure`
        with only the governance part changed, on the newest kept version); returns the
        settings version in force."""
        if not isinstance(policy, GovernancePolicy):
            raise ValidationError("policy", f"must be a GovernancePolicy, got {type(policy).__name__}")
        return self._write_version(
            lambda kept: dataclasses.replace(kept or self._settings, governance=policy), "python"
        )

    def policy_record(self) -> dict[str, Any] | None:
        """The governance part of the kept settings: ``{"version", "settings", "at"}`` (None: never set)."""
        kept = self.settings_record()
        if kept is None:
            return None
        return {"version": kept["version"], "settings": kept["settings"]["governance"], "at": kept["at"]}

    def policy_history(self) -> builtins.list[dict[str, Any]]:
        """The settings versions the store was governed under, with their governance part, oldest first."""
        return [
            {"version": v["version"], "settings": v["settings"]["governance"], "at": v["at"]}
            for v in self.settings_history()
        ]


def _shown(version: dict[str, Any]) -> dict[str, Any]:
    """A kept version with its governance part in parts (a version kept before the policy had
    parts holds it by flat names)."""
    governance = version.get("settings", {}).get("governance")
    if not isinstance(governance, dict) or not any(name in FLAT_NAMES for name in governance):
        return version
    nested: dict[str, Any] = {}
    for name, value in governance.items():
        part, setting = FLAT_NAMES.get(name, (None, name))
        if part is None:
            nested[name] = value
        else:
            nested.setdefault(part, {})[setting] = value
    return {**version, "settings": {**version["settings"], "governance": nested}}
