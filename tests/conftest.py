"""Shared test settings: deterministic hypothesis runs, no example database on disk."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

settings.register_profile(
    "memworth",
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=100,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("memworth")
