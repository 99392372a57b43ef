"""memworth: Memory Worth, an outcome-driven governance signal for agent memory stores.

Every memory keeps two weighted counters, hits+ and hits- (retrieved in a successful or
a failed episode); Memory Worth = hits+ / (hits+ + hits-) converges to
Pr[success | memory retrieved]. From worth and evidence, govern: trust, promote,
suppress, re-verify, deprecate.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names as type checkers see them; at run time __getattr__ imports them
    from memworth.adjusted import EpisodeStats, RegressionWorth, StratifiedWorth
    from memworth.change import BernoulliCusum
    from memworth.contexts import QueryClusters
    from memworth.coretrieval import AblationPlanner, AlarmSplitter, CoRetrieval, confounds
    from memworth.counts import Counts, CountsTable, evidence_of
    from memworth.credit import normalise, normalise_rows, uniform
    from memworth.decay import decay_factor
    from memworth.encoders import Encoder, HashingEncoder
    from memworth.errors import (
        DuplicateError,
        MemworthError,
        OutcomeError,
        StoreError,
        UnknownEpisodeError,
        UnknownMemoryError,
        ValidationError,
    )
    from memworth.estimators import BetaBound, BetaMean, ContextPooled, Decayed, RawWorth, WilsonBound
    from memworth.outcome import as_outcome
    from memworth.policy import Classification, Decision, DecisionRule, DeprecationRule, Taxonomy, ValueClass
    from memworth.policy_replay import ReplaySettings
    from memworth.propensity import PropensityCounts
    from memworth.ranking import Blend, CosineRecencyWorth, LowerBoundBlend
    from memworth.sequences import BetaBinomialCS, SequentialDeprecation
    from memworth.sidecar import Sidecar
    from memworth.sources import BurstDetector, Reliability, SourceLimit
    from memworth.store import Episode, Memory, MemoryStore, Recall, Recalled
    from memworth.tracker import Tracker

__version__ = "0.1.0"

_HOME = {  # each public name and the module that defines it, imported at first use
    "AblationPlanner": "memworth.coretrieval",
    "AlarmSplitter": "memworth.coretrieval",
    "BernoulliCusum": "memworth.change",
    "BetaBinomialCS": "memworth.sequences",
    "BetaBound": "memworth.estimators",
    "BetaMean": "memworth.estimators",
    "Blend": "memworth.ranking",
    "BurstDetector": "memworth.sources",
    "Classification": "memworth.policy",
    "CoRetrieval": "memworth.coretrieval",
    "ContextPooled": "memworth.estimators",
    "CosineRecencyWorth": "memworth.ranking",
    "Counts": "memworth.counts",
    "CountsTable": "memworth.counts",
    "Decayed": "memworth.estimators",
    "Decision": "memworth.policy",
    "DecisionRule": "memworth.policy",
    "DeprecationRule": "memworth.policy",
    "DuplicateError": "memworth.errors",
    "Encoder": "memworth.encoders",
    "Episode": "memworth.store",
    "EpisodeStats": "memworth.adjusted",
    "HashingEncoder": "memworth.encoders",
    "LowerBoundBlend": "memworth.ranking",
    "Memory": "memworth.store",
    "MemoryStore": "memworth.store",
    "MemworthError": "memworth.errors",
    "OutcomeError": "memworth.errors",
    "PropensityCounts": "memworth.propensity",
    "QueryClusters": "memworth.contexts",
    "RawWorth": "memworth.estimators",
    "Recall": "memworth.store",
    "Recalled": "memworth.store",
    "RegressionWorth": "memworth.adjusted",
    "Reliability": "memworth.sources",
    "ReplaySettings": "memworth.policy_replay",
    "SequentialDeprecation": "memworth.sequences",
    "Sidecar": "memworth.sidecar",
    "SourceLimit": "memworth.sources",
    "StoreError": "memworth.errors",
    "StratifiedWorth": "memworth.adjusted",
    "Taxonomy": "memworth.policy",
    "Tracker": "memworth.tracker",
    "UnknownEpisodeError": "memworth.errors",
    "UnknownMemoryError": "memworth.errors",
    "ValidationError": "memworth.errors",
    "ValueClass": "memworth.policy",
    "WilsonBound": "memworth.estimators",
    "as_outcome": "memworth.outcome",
    "confounds": "memworth.coretrieval",
    "decay_factor": "memworth.decay",
    "evidence_of": "memworth.counts",
    "normalise": "memworth.credit",
    "normalise_rows": "memworth.credit",
    "uniform": "memworth.credit",
}

__all__ = [
    "AblationPlanner",
    "AlarmSplitter",
    "BernoulliCusum",
    "BetaBinomialCS",
    "BetaBound",
    "BetaMean",
    "Blend",
    "BurstDetector",
    "Classification",
    "CoRetrieval",
    "ContextPooled",
    "CosineRecencyWorth",
    "Counts",
    "CountsTable",
    "Decayed",
    "Decision",
    "DecisionRule",
    "DeprecationRule",
    "DuplicateError",
    "Encoder",
    "Episode",
    "EpisodeStats",
    "HashingEncoder",
    "LowerBoundBlend",
    "Memory",
    "MemoryStore",
    "MemworthError",
    "OutcomeError",
    "PropensityCounts",
    "QueryClusters",
    "RawWorth",
    "Recall",
    "Recalled",
    "RegressionWorth",
    "Reliability",
    "ReplaySettings",
    "SequentialDeprecation",
    "Sidecar",
    "SourceLimit",
    "StoreError",
    "StratifiedWorth",
    "Taxonomy",
    "Tracker",
    "UnknownEpisodeError",
    "UnknownMemoryError",
    "ValidationError",
    "ValueClass",
    "WilsonBound",
    "__version__",
    "as_outcome",
    "confounds",
    "decay_factor",
    "evidence_of",
    "normalise",
    "normalise_rows",
    "uniform",
]


def __getattr__(name: str) -> Any:
    """Import a public name's module at its first use, so ``import memworth`` stays light.

    The command line (``memworth --version``) and code that needs one class do not pay
    for NumPy, SQLite and every estimator; the object returned is the module's own, so
    ``memworth.MemoryStore is memworth.store.MemoryStore``.
    """
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'memworth' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    """The public names, loaded or not, and what the module already holds."""
    return sorted(set(globals()) | set(__all__))
