"""memworth: Memory Worth, an outcome-driven governance signal for agent memory stores.

Every memory keeps two weighted counters, hits+ and hits- (retrieved in a successful or
a failed episode); Memory Worth = hits+ / (hits+ + hits-) converges to
Pr[success | memory retrieved]. From worth and evidence, govern: trust, promote,
suppress, re-verify, deprecate.
"""

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
