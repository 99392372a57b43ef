"""The HTTP baseline: a FastAPI app whose outcome route only validates the body.

Same route, same request model (``OutcomeRequest`` from memworth's app), same kind of
handler (a plain ``def``, run in the thread pool as memworth's are), same uvicorn
settings as ``memworth serve``; no key lookup, no store. Run it with
``python -m memworth_bench.http_baseline --port 8001``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI

from memworth.server.app import OutcomeRequest

__all__ = ["create_app", "main"]


def create_app() -> FastAPI:
    """The validate-only app.

    Examples
    --------
    >>> from fastapi.testclient import TestClient
    >>> TestClient(create_app()).post("/v1/episodes/e1/outcome", json={"success": True}).json()
    {'ok': True, 'episode': 'e1', 'success': True}
    """
    app = FastAPI(title="validate-only baseline")

    @app.get("/health")
    def health() -> dict[str, Any]:
        return {"ok": True}

    @app.post("/v1/episodes/{episode_id}/outcome")
    def record(episode_id: str, body: OutcomeRequest) -> dict[str, Any]:
        return {"ok": True, "episode": episode_id, "success": body.success}

    return app


def main(argv: Sequence[str] | None = None) -> int:
    import uvicorn

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8001)
    args = p.parse_args(argv)
    uvicorn.run(create_app(), host=args.host, port=args.port, log_level="warning")  # as memworth serve does
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
