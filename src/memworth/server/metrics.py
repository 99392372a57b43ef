"""Prometheus metrics of the HTTP API, on the official client library (``GET /metrics``).

Every number is an aggregate over the server's tenants: no namespace, memory id or text is
ever a label, so the route answers without a key, like ``/health``.

* ``memworth_request_seconds`` (histogram; ``route``, ``method``): latency of every route,
  recall and outcome recording included, labelled by the route's template, never its ids;
* ``memworth_outcomes_total`` (counter; ``source``, ``outcome``): outcomes recorded;
* ``memworth_governance_actions_total`` (counter; ``action``): changes governance applied
  through the API (re-verify, suppress, deprecate, release, promote, demote, restore,
  resolve, pin, unpin);
* ``memworth_errors_total`` (counter; ``type``, ``status``): errors answered, database
  outages (``UnavailableError``, 503) among them;
* ``memworth_verification_queue`` (gauge): memories quarantined for re-verification,
  counted over every namespace when scraped.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

__all__ = ["CONTENT_TYPE_LATEST", "Metrics", "TimedRoutes"]

BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class _QueueLength(Collector):
    """The verification queue's length, read from the store when scraped."""

    def __init__(self, quarantined: Callable[[], int]) -> None:
        self.quarantined = quarantined

    def collect(self) -> Iterator[GaugeMetricFamily]:
        total = self.quarantined()  # one count query per scrape, whatever the store holds
        yield GaugeMetricFamily("memworth_verification_queue", "memories quarantined for re-verification", total)


class Metrics:
    """One server's metrics, in a registry of its own (two apps in one process never mix)."""

    def __init__(self, quarantined: Callable[[], int]) -> None:
        """``quarantined``: counts the memories quarantined in every namespace (the store's
        ``backend.quarantined()``, called on a store object the caller may use)."""
        self.registry = CollectorRegistry()
        self.requests = Histogram(
            "memworth_request_seconds",
            "latency of HTTP requests, by route template",
            ["route", "method"],
            buckets=BUCKETS,
            registry=self.registry,
        )
        self.outcomes = Counter("memworth_outcomes", "outcomes recorded", ["source", "outcome"], registry=self.registry)
        self.actions = Counter(
            "memworth_governance_actions",
            "governance changes applied through the API",
            ["action"],
            registry=self.registry,
        )
        self.errors = Counter("memworth_errors", "errors answered", ["type", "status"], registry=self.registry)
        self.registry.register(_QueueLength(quarantined))

    def exposition(self) -> bytes:
        """The metrics in Prometheus' text format."""
        return bytes(generate_latest(self.registry))


class TimedRoutes:
    """ASGI middleware: time each HTTP request under its route template (``/v1/memories/{memory_id}``)."""

    def __init__(self, app: Any, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics
        self._timers: dict[tuple[str, str], Any] = {}  # (template, method) -> its histogram child

    def _timer(self, template: str, method: str) -> Any:
        timer = self._timers.get((template, method))
        if timer is None:  # routes and methods are few: prometheus' label lookup runs once per pair
            timer = self._timers[(template, method)] = self.metrics.requests.labels(template, method)
        return timer

    async def __call__(
        self, scope: dict[str, Any], receive: Callable[[], Awaitable[dict[str, Any]]], send: Any
    ) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        try:
            await self.app(scope, receive, send)
        finally:
            route = scope.get("route")
            template = getattr(route, "path_format", None) or getattr(route, "path", None) or "unmatched"
            self._timer(template, scope.get("method", "")).observe(time.perf_counter() - started)
