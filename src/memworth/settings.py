"""Every setting of a store in one object of named parts, kept with the data.

A store's behaviour is decided by its settings: how recall ranks and explores, how an
outcome is credited, which outcome sources count and how much, which share of episodes
is held out, when governance runs by itself, and the governance policy. :class:`Settings`
holds them all, composed of one part per question:

* :class:`RecallSettings` (``recall``): ranking rule, exploration floor, probes of
  quarantined memories, the recall planner (ablation), the candidate index;
* :class:`CreditSettings` (``credit``): how an outcome's credit is split and propagated;
* :class:`SourceSettings` (``sources``): outcome sources' confidences, limits, learned
  reliability, the burst alert;
* :class:`HoldoutSettings` (``holdout``): the share of episodes recalled without governance;
* :class:`AutomationSettings` (``automation``): continuous governance and the verifier's time limit;
* ``governance``: the :class:`memworth.governance.GovernancePolicy`, itself of named parts
  (``classes``, ``standing``, ``low_worth``, ``staleness``, ``change``, ``probes``,
  ``limits``, ``holdout_guard``: :mod:`memworth.governance.parts`).

The object is pure data: :meth:`Settings.to_dict` gives plain JSON and
:meth:`Settings.from_dict` reads it back, refusing an unknown name or a bad value with the
setting's dotted name (``governance.classes.theta_low``). :meth:`Settings.changed` applies changes
given by dotted name, as ``memworth config set``, ``PUT /v1/config`` and a TOML file give
them. A store keeps its settings, versioned (:meth:`memworth.MemoryStore.configure`), so
every face and every process that opens it works under the same ones.

Examples
--------
>>> s = Settings()
>>> s.recall.exploration, s.governance.classes.theta_low
(0.1, 0.4)
>>> t = s.changed({"recall.exploration": 0.05, "theta_low": 0.35})
>>> t.recall.exploration, t.governance.classes.theta_low
(0.05, 0.35)
>>> sorted(Settings.diff(s, t))
['governance.classes.theta_low', 'recall.exploration']
>>> Settings.from_dict(t.to_dict()) == t
True
>>> try:
...     s.changed({"recall.explore": 0.5})
... except ValidationError as exc:
...     print(exc.field)
recall.explore
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from memworth.errors import ValidationError
from memworth.estimators import RawWorth, WilsonBound
from memworth.governance import GovernancePolicy
from memworth.governance.parts import FLAT_NAMES
from memworth.governance.parts import PARTS as GOVERNANCE_PARTS
from memworth.ranking import Blend, CosineRecencyWorth, LowerBoundBlend, ScoreRule
from memworth.signals.sources import BurstDetector, Reliability, SourceLimit
from memworth.validation import check_confidence, check_name, check_storable

__all__ = [
    "AutomationSettings",
    "CreditSettings",
    "HoldoutSettings",
    "RecallSettings",
    "Settings",
    "SourceSettings",
]

PLANNERS = ("split", "pairs", "none")
"""Recall planners a store can run: ``split`` (:class:`memworth.signals.coretrieval.AlarmSplitter`),
``pairs`` (:class:`memworth.signals.coretrieval.AblationPlanner`), ``none``."""

_TYPES: dict[str, type] = {
    cls.__name__: cls
    for cls in (
        Blend,
        LowerBoundBlend,
        CosineRecencyWorth,
        RawWorth,
        WilsonBound,
        SourceLimit,
        Reliability,
        BurstDetector,
    )
}
"""The setting values that are objects, by the name their JSON form carries in ``type``."""


def _share(value: object, name: str, *, open_low: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValidationError(name, f"must be a number within [0, 1], got {value!r}")
    if not (0 < value <= 1 if open_low else 0 <= value <= 1):
        raise ValidationError(name, f"must be within {'(0' if open_low else '[0'}, 1], got {value!r}")
    return float(value)


def _count(value: object, name: str, *, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        span = f"from {low} to {high}" if high is not None else f">= {low}"
        raise ValidationError(name, f"must be an integer {span}, got {value!r}")
    return value


def _number(value: object, name: str, *, low: float, open_low: bool = False) -> float:
    ok = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
    if not ok or (value <= low if open_low else value < low):  # type: ignore[operator]
        raise ValidationError(name, f"must be a finite number {'>' if open_low else '>='} {low:g}, got {value!r}")
    return float(value)  # type: ignore[arg-type]


@dataclass(frozen=True)
class RecallSettings:
    """How recall ranks, explores and plans its sets.

    Parameters
    ----------
    scoring
        The ranking rule: :class:`memworth.ranking.Blend` (0.6 x similarity + 0.4 x worth),
        ``LowerBoundBlend`` or ``CosineRecencyWorth``; each carries how standing moves
        the score (``promoted_boost``, ``promoted_margin``, ``demoted_penalty``).
    exploration
        Chance that each recall slot goes to a low-evidence memory (assumption A2's floor).
    min_evidence
        Retrievals below which a memory is low-evidence for the exploration floor.
    probe_share
        Share of recalls on which a quarantined memory is allowed back as a probe.
    planner
        ``split`` (drop one of several co-retrieved memories in change alarm), ``pairs``
        (budgeted ablation of habitual pairs) or ``none``.
    planner_share
        ``split``: chance of a drop in an episode with two suspects; ``pairs``: the budget.
    index
        Candidate search: ``auto``, ``exact``, ``hnsw`` or ``database``.
    index_threshold
        Namespace size at which ``auto`` switches to HNSW.
    """

    scoring: ScoreRule = field(default_factory=Blend)
    exploration: float = 0.1
    min_evidence: float = 10.0
    probe_share: float = 0.1
    planner: str = "split"
    planner_share: float = 0.8
    index: str = "auto"
    index_threshold: int = 200_000

    def __post_init__(self) -> None:
        if not isinstance(self.scoring, (Blend, CosineRecencyWorth)):
            kind = type(self.scoring).__name__
            raise ValidationError("scoring", f"must be Blend, LowerBoundBlend or CosineRecencyWorth, got {kind}")
        try:
            self.scoring.validate()
        except ValidationError as exc:
            raise ValidationError(f"scoring.{exc.field}", exc.reason) from None
        _share(self.exploration, "exploration")
        _number(self.min_evidence, "min_evidence", low=0.0)
        _share(self.probe_share, "probe_share")
        if self.planner not in PLANNERS:
            raise ValidationError("planner", f"must be one of {', '.join(PLANNERS)}, got {self.planner!r}")
        _share(self.planner_share, "planner_share", open_low=True)
        if self.index not in ("auto", "exact", "hnsw", "database"):
            raise ValidationError("index", f"must be 'auto', 'exact', 'hnsw' or 'database', got {self.index!r}")
        _count(self.index_threshold, "index_threshold", low=1)


@dataclass(frozen=True)
class CreditSettings:
    """How an outcome's credit reaches memories.

    Parameters
    ----------
    rule
        ``uniform`` (1/k each) or ``score`` (proportional to the final score).
    w_min
        Floor on a credit weight.
    propagation
        Share of credit passed back along each provenance edge (TD-lambda; 0: off).
    max_hops
        How far back along provenance edges credit travels.
    """

    rule: str = "uniform"
    w_min: float = 0.0
    propagation: float = 0.7
    max_hops: int = 3

    def __post_init__(self) -> None:
        if self.rule not in ("uniform", "score"):
            raise ValidationError("rule", f"must be 'uniform' or 'score', got {self.rule!r}")
        if isinstance(self.w_min, bool) or not isinstance(self.w_min, (int, float)) or not 0 <= self.w_min <= 1:
            raise ValidationError("w_min", f"must be within [0, 1], got {self.w_min!r}")
        p = self.propagation
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p < 1:
            raise ValidationError("propagation", f"must be within [0, 1), got {p!r}")
        _count(self.max_hops, "max_hops", low=0, high=10)


@dataclass(frozen=True)
class SourceSettings:
    """Which outcome sources count, and how much.

    Parameters
    ----------
    confidences
        Extra or overriding sources ``{name: confidence}`` beside the defaults.
    limits
        Per-source quota and rate limit ``{source: SourceLimit}``.
    reliability
        Learn each source's confidence from verified outcomes; ``None``: fixed confidences.
    burst
        The burst alert governance reports; ``None`` turns it off.
    """

    confidences: Mapping[str, float] = field(default_factory=dict)
    limits: Mapping[str, SourceLimit] = field(default_factory=dict)
    reliability: Reliability | None = None
    burst: BurstDetector | None = field(default_factory=BurstDetector)

    def __post_init__(self) -> None:
        from memworth.store.recording import DEFAULT_SOURCES

        if not isinstance(self.confidences, Mapping):
            raise ValidationError("confidences", "must be a mapping of source name to confidence")
        for name, conf in self.confidences.items():
            check_name(name, "confidences")
            try:
                check_confidence(conf)
            except ValidationError as exc:  # named by the setting, as every other refusal of it
                raise ValidationError("confidences", f"{name!r}: {exc.reason}") from None
        known = set(DEFAULT_SOURCES) | set(self.confidences)
        if not isinstance(self.limits, Mapping):
            raise ValidationError("limits", "must be a mapping of source name to SourceLimit")
        for name, limit in self.limits.items():
            if name not in known:
                raise ValidationError("limits", f"unknown source {name!r}; known: {', '.join(sorted(known))}")
            if not isinstance(limit, SourceLimit):
                raise ValidationError("limits", f"{name!r} must map to a SourceLimit, got {type(limit).__name__}")
            limit.validate()
        if self.reliability is not None and not isinstance(self.reliability, Reliability):
            raise ValidationError(
                "reliability", f"must be a Reliability or None, got {type(self.reliability).__name__}"
            )
        if self.burst is not None:
            if not isinstance(self.burst, BurstDetector):
                raise ValidationError("burst", f"must be a BurstDetector or None, got {type(self.burst).__name__}")
            self.burst.validate()
        object.__setattr__(self, "confidences", {k: float(v) for k, v in sorted(self.confidences.items())})
        object.__setattr__(self, "limits", dict(sorted(self.limits.items())))


@dataclass(frozen=True)
class HoldoutSettings:
    """The share of episodes (by a seeded hash of the episode id) recalled without governance."""

    share: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        from memworth.signals.holdout import check_share

        check_share(self.share, "share")
        _count(self.seed, "seed", low=0)


@dataclass(frozen=True)
class AutomationSettings:
    """What the store does by itself.

    Parameters
    ----------
    govern_every
        Govern a namespace after this many outcomes recorded there (a store object counts
        the others' since the last automatic round at its first outcome there, then its
        own; ``None``: only when asked).
    govern_every_seconds
        Govern a namespace at the first outcome recorded there once this many seconds (of
        the store's ``clock``) have passed since the last automatic round there, whichever
        trigger ran it (``None``, the default: off). The first outcome a store sees starts
        the clock. More than 0, at most :data:`MAX_GOVERN_SECONDS` (a year).
    verifier_timeout
        Seconds a verifier may take before its verdict counts as failed: more than 0, at most
        :data:`MAX_VERIFIER_TIMEOUT` (a week; govern holds its writes open meanwhile).
    """

    govern_every: int | None = None
    verifier_timeout: float = 30.0
    govern_every_seconds: float | None = None

    def __post_init__(self) -> None:
        if self.govern_every is not None:
            _count(self.govern_every, "govern_every", low=1)
        if self.govern_every_seconds is not None:
            _number(self.govern_every_seconds, "govern_every_seconds", low=0.0, open_low=True)
            if self.govern_every_seconds > MAX_GOVERN_SECONDS:
                raise ValidationError(
                    "govern_every_seconds",
                    f"must be at most {MAX_GOVERN_SECONDS:g} s (a year), got {self.govern_every_seconds!r}",
                )
            object.__setattr__(self, "govern_every_seconds", float(self.govern_every_seconds))
        _number(self.verifier_timeout, "verifier_timeout", low=0.0, open_low=True)
        if self.verifier_timeout > MAX_VERIFIER_TIMEOUT:  # a thread cannot wait longer than the platform's limit
            raise ValidationError(
                "verifier_timeout", f"must be at most {MAX_VERIFIER_TIMEOUT:g} s (a week), got {self.verifier_timeout!r}"
            )


MAX_GOVERN_SECONDS = 366 * 86400.0
"""The longest ``govern_every_seconds``: a store governed less often than yearly by the clock
is better governed by hand (or by ``govern_every`` outcomes)."""

MAX_VERIFIER_TIMEOUT = 7 * 86400.0
"""The longest ``verifier_timeout``: a longer wait is a mistake (govern holds its writes open
while the verifier works), and from about 1e10 s no thread can wait that long at all (every
verdict would fail with OverflowError)."""


PARTS: dict[str, type] = {
    "recall": RecallSettings,
    "credit": CreditSettings,
    "sources": SourceSettings,
    "holdout": HoldoutSettings,
    "automation": AutomationSettings,
    "governance": GovernancePolicy,
}
"""The parts of :class:`Settings`, by name."""


@dataclass(frozen=True)
class Settings:
    """Every setting of a store, one part per question (see the module's documentation)."""

    recall: RecallSettings = field(default_factory=RecallSettings)
    credit: CreditSettings = field(default_factory=CreditSettings)
    sources: SourceSettings = field(default_factory=SourceSettings)
    holdout: HoldoutSettings = field(default_factory=HoldoutSettings)
    automation: AutomationSettings = field(default_factory=AutomationSettings)
    governance: GovernancePolicy = field(default_factory=GovernancePolicy)

    def __post_init__(self) -> None:
        for name, kind in PARTS.items():
            if not isinstance(getattr(self, name), kind):
                raise ValidationError(name, f"must be a {kind.__name__}, got {type(getattr(self, name)).__name__}")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON: one object per part; an object-valued setting carries its ``type``."""
        out: dict[str, Any] = {
            name: {f.name: _encode(getattr(getattr(self, name), f.name)) for f in _fields(name)}
            for name in PARTS
            if name != "governance"
        }
        out["governance"] = self.governance.settings()  # its own parts, as plain objects
        return out

    @classmethod
    def from_dict(cls, data: object) -> Settings:
        """The settings :meth:`to_dict` describes; a part or setting left out keeps its
        default. An unknown name or a bad value is refused, naming it (``part.setting``)."""
        if not isinstance(data, Mapping):
            raise ValidationError("settings", f"must be an object of parts, got {type(data).__name__}")
        parts: dict[str, Any] = {}
        for name, given in data.items():
            if name not in PARTS:
                raise ValidationError(str(name), f"not a part of the settings (parts: {', '.join(PARTS)})")
            if not isinstance(given, Mapping):
                raise ValidationError(name, f"must be an object of settings, got {type(given).__name__}")
            parts[name] = _part(name, given)
        return cls(**parts)

    def changed(self, changes: Mapping[str, object]) -> Settings:
        """These settings with ``changes`` applied: ``{"part.setting": value}`` (JSON values;
        ``recall.scoring.worth`` reaches inside an object-valued setting). A bare setting
        name that only one part has (``theta_low``) means that part's."""
        if not isinstance(changes, Mapping) or not changes:
            raise ValidationError("changes", "must be a non-empty object of setting name to value")
        data = self.to_dict()
        given_as: dict[str, str] = {}  # a refusal names the setting as the caller named it
        for dotted, value in changes.items():
            if not isinstance(dotted, str):
                raise ValidationError("changes", f"setting names must be text, got {dotted!r}")
            check_storable(dotted, "changes")  # a name is echoed in errors: it must be text any face can show
            path = resolve(dotted)
            given_as[".".join(path)] = dotted
            target = data[path[0]]
            for i, step in enumerate(path[1:-1], start=1):
                inner = target.get(step)
                if not isinstance(inner, dict):
                    raise ValidationError(str(dotted), f"{'.'.join(path[: i + 1])} holds no settings")
                target = inner
            if len(path) > 2 and path[-1] not in target:
                raise ValidationError(str(dotted), f"not a setting of {'.'.join(path[:-1])}")
            if len(path) == 2 and path[0] == "governance" and isinstance(value, Mapping):
                value = {**target[path[-1]], **value}  # a governance part given as an object: its settings changed
            target[path[-1]] = value
        try:
            return Settings.from_dict(data)
        except ValidationError as exc:
            raise ValidationError(given_as.get(exc.field, exc.field), exc.reason) from None

    @staticmethod
    def diff(old: Settings, new: Settings) -> list[str]:
        """The dotted names of the settings that differ between ``old`` and ``new``."""
        a, b = old.to_dict(), new.to_dict()
        out = [f"{p}.{k}" for p in PARTS if p != "governance" for k in b[p] if a[p].get(k) != b[p][k]]
        ga, gb = a["governance"], b["governance"]
        return out + [f"governance.{p}.{k}" for p in gb for k in gb[p] if ga.get(p, {}).get(k) != gb[p][k]]


def by_setting(data: Mapping[str, Any]) -> list[tuple[str, str, object]]:
    """The settings JSON (:meth:`Settings.to_dict`) a setting at a time: ``(part, name,
    value)``, a governance part's settings named ``part.setting``; the rows ``memworth
    config show`` and the dashboard's settings page print.

    Examples
    --------
    >>> rows = by_setting(Settings().to_dict())
    >>> rows[1], [r for r in rows if r[1] == "change.threshold"]
    (('recall', 'exploration', 0.1), [('governance', 'change.threshold', 12.0)])
    """
    rows: list[tuple[str, str, object]] = []
    for part, values in data.items():
        if part == "governance":
            rows += [(part, f"{inner}.{name}", v) for inner, group in values.items() for name, v in group.items()]
        else:
            rows += [(part, name, v) for name, v in values.items()]
    return rows


def resolve(dotted: str) -> list[str]:
    """``dotted`` as a path ``[part, setting, ...]``; a bare name must belong to one part.

    The governance part has parts of its own (``governance.change.threshold``); the flat
    names it had before (``governance.change_threshold``, bare ``change_threshold``) are
    aliases (:data:`memworth.governance.parts.FLAT_NAMES`), and so is a governance part
    named without ``governance.`` (``change.threshold``), unless another part has a setting
    of that name (``limits`` is ``sources.limits``: ``governance.limits.pin_evidence``).

    Examples
    --------
    >>> resolve("governance.change_threshold"), resolve("theta_low"), resolve("change.threshold")
    (['governance', 'change', 'threshold'], ['governance', 'classes', 'theta_low'], ['governance', 'change', 'threshold'])
    """
    path = dotted.split(".")
    elsewhere = {f.name for p in PARTS if p != "governance" for f in _fields(p)}
    if path[0] in GOVERNANCE_PARTS and path[0] not in elsewhere:  # a governance part without "governance."
        path = ["governance", *path]  # (not "limits": that bare name stays sources.limits, as before)
    if path[0] == "governance":
        if len(path) == 2 and path[1] in FLAT_NAMES:
            return ["governance", *FLAT_NAMES[path[1]]]
        inner = GOVERNANCE_PARTS.get(path[1]) if len(path) > 1 else None
        if inner is None:
            known = ", ".join(f"governance.{p}" for p in GOVERNANCE_PARTS)
            raise ValidationError(dotted, f"not a setting (parts: {known}; or a flat name such as theta_low)")
        names = [f.name for f in dataclasses.fields(inner)]
        if len(path) > 3 or (len(path) == 3 and path[2] not in names):
            known = ", ".join(f"governance.{path[1]}.{name}" for name in names)
            raise ValidationError(dotted, f"not a setting (known: {known})")
        return path  # a setting, or a whole part (an object of its settings)
    if path[0] in PARTS:
        if len(path) < 2 or path[1] not in {f.name for f in _fields(path[0])}:
            known = ", ".join(f"{path[0]}.{f.name}" for f in _fields(path[0]))
            raise ValidationError(dotted, f"not a setting (known: {known})")
        return path
    owners = [p for p in PARTS if p != "governance" and path[0] in {f.name for f in _fields(p)}]
    if path[0] in FLAT_NAMES and len(path) == 1:
        owners.append("governance")
    if len(owners) != 1:
        why = "is in " + " and ".join(owners) + ": name the part" if owners else "is not a setting"
        raise ValidationError(dotted, f"{why} (parts: {', '.join(PARTS)}; `memworth config show` lists them)")
    if owners == ["governance"]:
        return ["governance", *FLAT_NAMES[path[0]]]
    return [owners[0], *path]


def _fields(part: str) -> tuple[dataclasses.Field[Any], ...]:
    return dataclasses.fields(PARTS[part])


def _encode(value: object) -> object:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: _encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {"type": type(value).__name__, **fields}
    if isinstance(value, Mapping):
        return {str(k): _encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    return value


def _decode(value: object, name: str) -> object:
    if isinstance(value, Mapping) and "type" in value:
        kind = _TYPES.get(str(value["type"]))
        if kind is None:
            raise ValidationError(name, f"unknown type {value['type']!r} (known: {', '.join(sorted(_TYPES))})")
        known = {f.name for f in dataclasses.fields(kind)}
        args = {}
        for k, v in value.items():
            if k == "type":
                continue
            if k not in known:
                raise ValidationError(f"{name}.{k}", f"not a setting of {kind.__name__} (known: {', '.join(known)})")
            args[k] = _decode(v, f"{name}.{k}")
        try:
            made = kind(**args)
        except ValidationError as exc:
            raise ValidationError(f"{name}.{exc.field}", exc.reason) from None
        except (TypeError, ValueError) as exc:
            raise ValidationError(name, str(exc)) from None
        check = getattr(made, "validate", None)
        if check is not None:
            try:
                check()
            except ValidationError as exc:
                raise ValidationError(f"{name}.{exc.field}", exc.reason) from None
        return made
    if isinstance(value, Mapping):
        return {str(k): _decode(v, f"{name}.{k}") for k, v in value.items()}
    return value


def _part(name: str, given: Mapping[str, object]) -> Any:
    if name == "governance":  # its parts, or (kept before it had parts) its flat names
        try:
            return GovernancePolicy.from_settings(given)
        except ValidationError as exc:
            raise ValidationError(f"governance.{exc.field}", exc.reason) from None
    known = {f.name for f in _fields(name)}
    args: dict[str, object] = {}
    for key, value in given.items():
        if key not in known:
            raise ValidationError(f"{name}.{key}", f"not a setting (known: {', '.join(sorted(known))})")
        args[key] = _decode(value, f"{name}.{key}")
    if name == "sources" and isinstance(args.get("limits"), Mapping):
        for source, limit in dict(args["limits"]).items():  # type: ignore[call-overload]
            if not isinstance(limit, SourceLimit):
                raise ValidationError(f"sources.limits.{source}", 'must be {"type": "SourceLimit", ...}')
    try:
        part = PARTS[name](**args)
    except ValidationError as exc:
        field_name = exc.field if exc.field.startswith(name + ".") else f"{name}.{exc.field}"
        raise ValidationError(field_name, exc.reason) from None
    except TypeError as exc:
        raise ValidationError(name, str(exc)) from None
    return part
