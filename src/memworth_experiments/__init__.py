"""Experiments that rebuild the paper's tables and figures with the public memworth API.

The library never imports this package; ``memworth reproduce`` finds it through an entry
point. Each experiment is data (``configs/<name>.toml``) plus a module with ``run``.
"""

__all__: list[str] = []
