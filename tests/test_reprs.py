"""Notebooks show memworth's objects as tables, with every value escaped (issue 18)."""

from __future__ import annotations

from memworth import HashingEncoder, MemoryStore


def test_memories_recalls_proposals_and_reports_render_as_escaped_tables() -> None:
    store = MemoryStore.open("memory://", encoder=HashingEncoder(), exploration=0.0)
    store.add("<script>alert(1)</script> Prague was the capital of Czechoslovakia.", id="cz")
    recall = store.recall("capital of czechoslovakia", k=1)
    for _ in range(25):
        store.record(store.recall("capital of czechoslovakia", k=1), success=False)
    report = store.govern()
    shown = [
        store.get("cz")._repr_html_(),
        recall._repr_html_(),
        report.proposals[0]._repr_html_(),
        report._repr_html_(),
        store.report("cz")._repr_html_(),
    ]
    for html in shown:
        assert html.startswith("<table") and "<script>" not in html
    assert "&lt;script&gt;" in shown[0] and "&lt;script&gt;" in shown[1]
    assert "deprecate" in shown[2] and "deprecate" in shown[3] and "proposed" in shown[3]
