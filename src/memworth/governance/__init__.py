"""Governance: from evidence to proposed changes, and the checks that keep them honest.

=====================  ==================================================================
:mod:`.proposals`      :class:`GovernancePolicy`: a memory's evidence to a :class:`Proposal`
:mod:`.parts`          the policy's settings, one frozen part per rule
:mod:`.replay`         re-running governance over a recorded log under other settings
:mod:`.holdout_guard`  is governance making the agent fail more than no governance would?
:mod:`.verification`   resolving a quarantined memory from its probe outcomes (SPRT)
=====================  ==================================================================

``from memworth.governance import GovernancePolicy`` keeps working: the policy's names are
re-exported here.
"""

from memworth.governance.proposals import ACTIONS, GovernancePolicy, Proposal, WorthFlag

__all__ = ["ACTIONS", "GovernancePolicy", "Proposal", "WorthFlag"]
