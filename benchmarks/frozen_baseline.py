"""Issue 14, branch freeze: measure the change detector's frozen baseline where no flag sets it.

Two uses (measurement only; the library's defaults are untouched on disk)::

    # a memworth command with the frozen baseline as the default of both the detector and
    # the policy (the staleness experiment builds its own detector and checks it against the
    # policy's, so both are set)
    python benchmarks/frozen_baseline.py cli reproduce staleness --quick --out /tmp/freeze-stale

    # trace one memory of a governance world's governed agent: its CUSUM reading before each
    # govern (statistic, baseline, change point, successes before and since it), frozen or not
    python benchmarks/frozen_baseline.py trace agent 3 bratislava 250 --frozen
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np


def frozen_by_default() -> None:
    """Make ``frozen_baseline`` default to True in ``BernoulliCusum`` and ``ChangeSettings``."""
    from memworth.governance import GovernancePolicy
    from memworth.governance.parts import ChangeSettings
    from memworth.signals.change_detection import BernoulliCusum

    for cls in (BernoulliCusum, ChangeSettings):
        init: Any = cls.__init__
        defaults = list(init.__defaults__)
        if defaults[-1] is not False:  # frozen_baseline is the last field
            raise RuntimeError(f"{cls.__name__}'s last default is not frozen_baseline's")
        defaults[-1] = True
        init.__defaults__ = tuple(defaults)
        cls.__dataclass_fields__["frozen_baseline"].default = True  # type: ignore[attr-defined]
    if not GovernancePolicy().detector().frozen_baseline:
        raise RuntimeError("the default policy's detector is not frozen")


def trace(world_name: str, seed: int, memory: str, episodes: int, frozen: bool) -> None:
    """Print ``memory``'s reading before each govern of the governed agent of ``world_name``."""
    from memworth import MemoryStore
    from memworth.governance import GovernancePolicy
    from memworth_experiments.common import load_config
    from memworth_experiments.demo import run_agent
    from memworth_experiments.exp5 import CachedEncoder, default_encoder
    from memworth_experiments.governance import load_world

    cfg = load_config("governance")
    real = MemoryStore.govern

    def govern(self: MemoryStore, *args: Any, **kwargs: Any) -> Any:
        s = self.outcome_streams().get(memory)
        if s is not None and s.reading is not None and len(s.success):
            r, cp = s.reading, s.reading.change_point
            before = s.success if cp is None else s.success[s.episode < cp]
            since = s.success[:0] if cp is None else s.success[s.episode >= cp]
            print(
                f"episode {int(s.episode[-1])}: statistic {r.statistic:.1f} baseline {r.baseline:.3f} "
                f"change point {cp} reference {float(s.reference[-1]):.3f} "
                f"before {int(np.sum(before))}/{before.size} since {int(np.sum(since))}/{since.size}",
                flush=True,
            )
        return real(self, *args, **kwargs)

    MemoryStore.govern = govern  # type: ignore[method-assign]
    w = cfg["world"]
    settings = {"policy": GovernancePolicy(change_frozen_baseline=frozen)}
    encoder = CachedEncoder(default_encoder())
    world = load_world(world_name)
    run_agent(world, seed, episodes, encoder, "memory://", int(w["govern_every"]), float(w["minutes_per_episode"]), settings)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "cli":
        from memworth.cli import main as cli

        frozen_by_default()
        sys.exit(cli(sys.argv[2:]))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("cli", help="a memworth command with the frozen baseline by default (the rest of the line)")
    t = sub.add_parser("trace", help="one memory's CUSUM before each govern")
    t.add_argument("world", choices=("agent", "upgrade"))
    t.add_argument("seed", type=int)
    t.add_argument("memory")
    t.add_argument("episodes", type=int)
    t.add_argument("--frozen", action="store_true")
    args = parser.parse_args()
    trace(args.world, args.seed, args.memory, args.episodes, args.frozen)


if __name__ == "__main__":
    main()
