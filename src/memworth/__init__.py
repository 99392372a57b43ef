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
    from memworth.counts import Counts, CountsTable
    from memworth.embed.encoders import Encoder, HashingEncoder
    from memworth.errors import (
        ConflictError,
        DuplicateError,
        ErasedMemoryError,
        MemworthError,
        NotFoundError,
        StoreError,
        UnknownMemoryError,
        ValidationError,
    )
    from memworth.estimators import BetaBound, BetaMean, ContextPooled, Decayed, RawWorth, WilsonBound
    from memworth.governance import GovernancePolicy
    from memworth.policy import DecisionRule, DeprecationRule, Taxonomy, ValueClass
    from memworth.ranking import Blend, CosineRecencyWorth, LowerBoundBlend
    from memworth.sidecar import Sidecar
    from memworth.store import Episode, Memory, MemoryStore, Recall, Recalled
    from memworth.store.report import MemoryReport
    from memworth.tracker import Tracker

__version__ = "0.1.0"

_HOME = {  # each name and the module that defines it, imported at first use
    "AblationPlanner": "memworth.signals.coretrieval",
    "AlarmSplitter": "memworth.signals.coretrieval",
    "BernoulliCusum": "memworth.signals.change_detection",
    "BetaBinomialCS": "memworth.signals.confidence_sequences",
    "BetaBound": "memworth.estimators",
    "BetaMean": "memworth.estimators",
    "Blend": "memworth.ranking",
    "BurstDetector": "memworth.signals.sources",
    "Classification": "memworth.policy",
    "CoRetrieval": "memworth.signals.coretrieval",
    "ContextPooled": "memworth.estimators",
    "ConflictError": "memworth.errors",
    "CosineRecencyWorth": "memworth.ranking",
    "Counts": "memworth.counts",
    "CountsTable": "memworth.counts",
    "Decayed": "memworth.estimators",
    "Decision": "memworth.policy",
    "DecisionRule": "memworth.policy",
    "DeprecationRule": "memworth.policy",
    "DuplicateError": "memworth.errors",
    "ErasedMemoryError": "memworth.errors",
    "Encoder": "memworth.embed.encoders",
    "Episode": "memworth.store",
    "EpisodeStats": "memworth.signals.context_adjusted",
    "GovernancePolicy": "memworth.governance",
    "HashingEncoder": "memworth.embed.encoders",
    "LowerBoundBlend": "memworth.ranking",
    "Memory": "memworth.store",
    "MemoryReport": "memworth.store.report",
    "MemoryStore": "memworth.store",
    "MemworthError": "memworth.errors",
    "NotFoundError": "memworth.errors",
    "OutcomeError": "memworth.errors",
    "PropensityCounts": "memworth.signals.propensity",
    "QueryClusters": "memworth.signals.query_clusters",
    "RawWorth": "memworth.estimators",
    "Recall": "memworth.store",
    "Recalled": "memworth.store",
    "RegressionWorth": "memworth.signals.context_adjusted",
    "Reliability": "memworth.signals.sources",
    "ReplaySettings": "memworth.governance.replay",
    "SequentialDeprecation": "memworth.signals.confidence_sequences",
    "Settings": "memworth.settings",
    "Sidecar": "memworth.sidecar",
    "SourceLimit": "memworth.signals.sources",
    "StoreError": "memworth.errors",
    "StratifiedWorth": "memworth.signals.context_adjusted",
    "Taxonomy": "memworth.policy",
    "Tracker": "memworth.tracker",
    "UnknownEpisodeError": "memworth.errors",
    "UnknownMemoryError": "memworth.errors",
    "ValidationError": "memworth.errors",
    "ValueClass": "memworth.policy",
    "WilsonBound": "memworth.estimators",
    "as_outcome": "memworth.outcome",
    "confounds": "memworth.signals.coretrieval",
    "decay_factor": "memworth.decay",
    "evidence_of": "memworth.counts",
    "normalise": "memworth.credit",
    "normalise_rows": "memworth.credit",
    "uniform": "memworth.credit",
}

__all__ = [
    "BetaBound",
    "BetaMean",
    "Blend",
    "ConflictError",
    "ContextPooled",
    "CosineRecencyWorth",
    "Counts",
    "CountsTable",
    "Decayed",
    "DecisionRule",
    "DeprecationRule",
    "DuplicateError",
    "Encoder",
    "Episode",
    "ErasedMemoryError",
    "GovernancePolicy",
    "HashingEncoder",
    "LowerBoundBlend",
    "Memory",
    "MemoryReport",
    "MemoryStore",
    "MemworthError",
    "NotFoundError",
    "RawWorth",
    "Recall",
    "Recalled",
    "Settings",
    "Sidecar",
    "StoreError",
    "Taxonomy",
    "Tracker",
    "UnknownMemoryError",
    "ValidationError",
    "ValueClass",
    "WilsonBound",
    "__version__",
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
    if name in __all__:
        globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    """The public names, loaded or not, and what the module already holds."""
    return sorted(set(globals()) | set(__all__))


_FORMER = sorted(set(_HOME) - set(__all__))
"""Names that left ``__all__`` (the signals past the paper, credit helpers, less-used errors):
still importable from ``memworth`` so that code written against 0.1 keeps working, and
documented at their modules (``memworth.signals.coretrieval.AlarmSplitter``, ...)."""
