"""memworth's benchmarks: ``memworth bench`` runs them side by side and writes BENCHMARKS.md and JSON."""

from memworth_bench.common import Section, Settings, Task

__all__ = ["Section", "Settings", "Task"]
