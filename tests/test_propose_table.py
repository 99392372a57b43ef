"""``GovernancePolicy.propose_table`` (the array path ``memworth score`` proposes with) gives,
memory by memory, what ``propose`` gives: the same action, new value and reason text."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memworth.counts import Counts, CountsTable
from memworth.errors import ValidationError
from memworth.governance import GovernancePolicy

# Counts on a grid of quarters (the credit of k = 1, 2, 4 items), so that worth lands on
# the thresholds and on the rounding edges of the reason texts, as well as anywhere else.
count = st.one_of(
    st.integers(0, 80).map(lambda q: q / 4), st.floats(min_value=0.0, max_value=1e6, allow_nan=False)
)
memory = st.tuples(count, count, st.integers(0, 400)).map(lambda t: Counts(t[0], t[1], float(max(t[2], 0))))
policies = st.builds(
    GovernancePolicy,
    deprecation=st.sampled_from(["fixed", "sequential"]),
    min_evidence=st.sampled_from([0.0, 1.0, 10.0, 30.0]),
    theta_low=st.sampled_from([0.2, 0.4, 0.5]),
    window_test=st.booleans(),
    staleness_window=st.sampled_from([1, 5, 20]),
    change_detection=st.just(False),
)


def _table(rows: list[Counts]) -> CountsTable:
    return CountsTable(*(np.array([getattr(c, f) for c in rows], dtype=float) for f in ("success", "failure", "n")))


@settings(max_examples=300, deadline=None)
@given(policy=policies, rows=st.lists(st.tuples(memory, st.one_of(st.none(), memory)), min_size=1, max_size=30))
def test_propose_table_is_propose_memory_by_memory(policy: GovernancePolicy, rows: list) -> None:
    counts = [c for c, _ in rows]
    recent = [r for _, r in rows]
    flags = policy.worth_flags(counts)
    want = []
    for i, (c, r) in enumerate(rows):
        p = policy.propose(f"m{i}", c, "active", "normal", r, worth_flag=flags[i])
        want.append((None, None, None) if p is None else (p.action, p.new, p.reason))
    window = _table([Counts(0.0, 0.0, 0.0) if r is None else r for r in recent])
    action, new, reason = policy.propose_table(_table(counts), window)
    assert list(zip(action.tolist(), new.tolist(), reason.tolist(), strict=True)) == want


def test_propose_table_fires_every_rule() -> None:
    """Each rule's branch is taken by some memory (the property above could pass on Nones alone)."""
    table = _table([Counts(1.0, 29.0, 30), Counts(27.0, 3.0, 30), Counts(4.0, 6.0, 10), Counts(9.0, 3.0, 40)])
    window = _table([Counts(0.0, 0.0, 0.0)] * 3 + [Counts(0.0, 20.0, 20)])
    fixed = GovernancePolicy(deprecation="fixed", window_test=True, change_detection=False)
    action, new, _ = fixed.propose_table(table, window)
    assert action.tolist() == ["deprecate", "promote", None, "re-verify"]
    assert new.tolist() == ["deprecated", "promoted", None, "re-verify"]
    action, _, reason = GovernancePolicy(change_detection=False).propose_table(table)
    assert action[0] == "deprecate" and "e-BH" in reason[0]


def test_propose_table_refuses_a_list() -> None:
    with pytest.raises(ValidationError, match="counts"):
        GovernancePolicy().propose_table([Counts(1.0, 0.0, 1)])  # type: ignore[arg-type]


def test_propose_table_writes_each_repeated_reason_once_and_keeps_signed_zeros_apart() -> None:
    """Repeated counts share one reason text (written once per distinct numbers, found by their
    bits); a worth of -0.0 prints '-0.000' as ``propose`` prints it, not 0.0's text; an e-BH
    test handed in (``tested``) gives what running it again gives."""
    policy = GovernancePolicy(change_detection=False, min_evidence=1.0)
    rows = [Counts(-0.0, 40.0, 40), Counts(0.0, 40.0, 40), Counts(-0.0, 40.0, 40), Counts(39.0, 1.0, 40)] * 3
    flags = policy.worth_flags(rows)
    want = []
    for i, c in enumerate(rows):
        p = policy.propose(f"m{i}", c, "active", "normal", None, worth_flag=flags[i])
        want.append((None, None, None) if p is None else (p.action, p.new, p.reason))
    table = _table(rows)
    for tested in (None, policy.worth_test(table)):
        action, new, reason = policy.propose_table(table, tested=tested)
        assert list(zip(action.tolist(), new.tolist(), reason.tolist(), strict=True)) == want
    sequential_off = GovernancePolicy(change_detection=False, deprecation="fixed", min_evidence=1e9)
    _, _, reason = sequential_off.propose_table(table)
    assert reason[0] != reason[1] and "-0.000" in reason[0] and reason[0] == reason[2]


@settings(max_examples=200, deadline=None)
@given(policy=policies, rows=st.lists(memory, min_size=1, max_size=30), repeats=st.integers(1, 4))
def test_the_distinct_rows_path_gives_every_memory_its_own_numbers(
    policy: GovernancePolicy, rows: list, repeats: int
) -> None:
    """With the table's distinct rows handed in (as ``memworth score`` does), the e-values and
    the actions and reasons are those of each memory's own counts: bit for bit, text for text."""
    from memworth.logs.score import distinct_rows

    table = _table(rows * repeats)
    distinct = distinct_rows(table)
    plain, once = policy.worth_test(table), policy.worth_test(table, distinct)
    assert plain[0].tolist() == once[0].tolist() and plain[2:] == once[2:]
    for mine, theirs in zip(plain[1], once[1], strict=True):
        assert mine.view(np.int64).tolist() == theirs.view(np.int64).tolist()
    want = [a.tolist() for a in policy.propose_table(table)]
    assert [a.tolist() for a in policy.propose_table(table, distinct=distinct)] == want
    assert [a.tolist() for a in policy.propose_table(table, tested=once, distinct=distinct)] == want


def test_the_distinct_rows_path_keeps_signed_zeros_apart() -> None:
    """-0.0 and 0.0 are one distinct row of counts, but their reasons print apart."""
    from memworth.logs.score import distinct_rows

    policy = GovernancePolicy(change_detection=False, deprecation="fixed", min_evidence=1e9)
    table = _table([Counts(-0.0, 40.0, 40), Counts(0.0, 40.0, 40), Counts(-0.0, 40.0, 40), Counts(39.0, 1.0, 40)] * 3)
    _, _, reason = policy.propose_table(table, distinct=distinct_rows(table))
    assert reason.tolist() == policy.propose_table(table)[2].tolist()
    assert reason[0] != reason[1] and "-0.000" in reason[0] and reason[0] == reason[2]
