"""Past the paper: a gamed outcome source, against fixed confidences and against learned reliability.

See ``configs/sources.toml`` for the world. Each seed runs two passes over the same
world: one with the gamed source ``agent-b`` and one without it (the control for false
alerts). In each pass two stores receive exactly the same episodes and calls: the
paper's (fixed confidences) and ours (learned reliability and a per-memory quota).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memworth import Blend, MemoryStore
from memworth.errors import RateLimitError
from memworth.signals.sources import BurstDetector, Reliability, SourceLimit
from memworth_experiments.common import Result, Row, mean_std, progress, read_raw, spearman

STORES = ("paper", "ours")


class VectorBook:
    """An encoder that looks texts up in a table of vectors the simulator fills in."""

    name = "vector-book"

    def __init__(self, dimension: int) -> None:
        self.dimension = dimension
        self.table: dict[str, np.ndarray] = {}

    def put(self, text: str, vector: np.ndarray) -> str:
        self.table[text] = (vector / np.linalg.norm(vector)).astype(np.float32)
        return text

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self.table[t] for t in texts])


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def _stores(cfg: dict[str, Any], book: VectorBook, clock: Clock) -> dict[str, MemoryStore]:
    w, o = cfg["world"], cfg["ours"]
    common: dict[str, Any] = {
        "encoder": book,
        "scoring": Blend(similarity=1.0, worth=0.0),
        "exploration": 0.0,
        "seed": 0,
        "clock": clock,
        "sources": dict(cfg["sources"]),
        "burst": BurstDetector(window=float(o["window"])),
        "propagation": 0.0,
    }
    limit = SourceLimit(max_per_memory=int(o["max_per_memory"]), window=float(o["window"]))
    stores = {
        "paper": MemoryStore.open("memory://", **common),
        "ours": MemoryStore.open(
            "memory://",
            **common,
            reliability=Reliability(prior_strength=float(o["prior_strength"])),
            limits={name: limit for name in cfg["sources"]},
        ),
    }
    for s in stores.values():
        s.add_many([{"id": f"m{i:02d}", "text": f"memory {i}"} for i in range(w["memories"])])
    return stores


def run_pass(cfg: dict[str, Any], seed: int, episodes: int, gamed: bool) -> dict[str, Any]:
    """One pass over the world; returns final worth, alerts, refusals and learned weights per store."""
    w = cfg["world"]
    rng = np.random.default_rng([seed, 7])  # the same world and draws with and without the gamer
    gamer_rng = np.random.default_rng([seed, 8])
    m, dim, k = w["memories"], w["dimension"], w["k"]
    utility = rng.uniform(0.05, 0.95, m)
    utility[0] = w["target_utility"]
    target = "m00"
    book = VectorBook(dim)
    vectors = rng.standard_normal((m, dim))
    for i in range(m):
        book.put(f"memory {i}", vectors[i])
    clock = Clock()
    stores = _stores(cfg, book, clock)
    refused = {s: {"honest": 0, "gamer": 0} for s in STORES}
    pumped: set[str] = set()  # memories the burst episodes credited
    alerts: dict[str, list[tuple[int, str]]] = {s: [] for s in STORES}
    target_truth: list[bool] = []
    burst_at = episodes // 2

    def episode(t: int, query: str, source: str, truth: bool, reported: bool, audit: bool) -> None:
        for name, store in stores.items():
            ep = store.recall(query, k=k, episode_id=f"e{t}").episode
            try:
                store.record(ep, reported, source=source)
            except RateLimitError:  # the quota refused it (429), nothing recorded
                refused[name]["gamer" if source == "agent-b" else "honest"] += 1
            if audit:
                store.verify(ep, truth)

    t = 0
    plan: list[str] = []
    for i in range(episodes):
        plan.append("honest")
        if gamed and gamer_rng.random() < w["gamer_share"]:
            plan.append("gamer")
        if gamed and i == burst_at:
            plan += ["burst"] * w["burst"]
    jump: dict[str, list[float]] = {name: [] for name in STORES}  # target worth before and after the burst
    previous = ""
    for kind in plan:
        t += 1
        if (kind == "burst") != (previous == "burst") and previous:
            for name, store in stores.items():
                jump[name].append(_worth(store.get(target).counts))
        previous = kind
        if kind == "honest":
            clock.now += w["episode_seconds"]
            q = book.put(f"q{t}", rng.standard_normal(dim))
            sims = vectors @ book.table[q]
            picked = np.argsort(-sims)[:k]
            truth = bool(rng.random() < utility[picked].mean())
            if 0 in picked:
                target_truth.append(truth)
            if rng.random() < w["verified_share"]:
                episode(t, q, "verified", truth, truth, False)
            else:
                flipped = bool(rng.random() < w["heuristic_flip"])
                episode(t, q, "heuristic", truth, truth != flipped, bool(rng.random() < w["audit_share"]))
        else:  # the gamer aims its query at the target and always reports success
            clock.now += w["burst_seconds"] if kind == "burst" else w["episode_seconds"]
            q = book.put(f"g{t}", vectors[0] + 0.3 * gamer_rng.standard_normal(dim))
            sims = vectors @ book.table[q]
            picked = np.argsort(-sims)[:k]
            truth = bool(gamer_rng.random() < utility[picked].mean())
            if kind == "burst":
                pumped.update(f"m{i:02d}" for i in picked)
            episode(t, q, "agent-b", truth, True, bool(gamer_rng.random() < w["audit_share"]))
        if t % w["govern_every"] == 0:
            for name, store in stores.items():
                alerts[name] += [(t, a.memory_id) for a in store.govern().alerts]
    burst_t = next((i + 1 for i, kind in enumerate(plan) if kind == "burst"), None)
    out: dict[str, Any] = {"burst_t": burst_t, "utility": utility, "target_truth": float(np.mean(target_truth))}
    for name, store in stores.items():
        mems = {x.id: x for x in store.list()}
        worth = np.array([_worth(mems[f"m{i:02d}"].counts) for i in range(m)])
        rel = store.source_reliability()
        after = [a for a in alerts[name] if burst_t is not None and a[0] >= burst_t and a[1] in pumped]
        out[name] = {
            "target_worth": worth[0],
            "burst_move": jump[name][1] - jump[name][0] if len(jump[name]) == 2 else 0.0,
            "rho": spearman(worth, utility),
            "alerted": any(a[1] == target for a in after),
            "false_alerts": len(alerts[name]) - len(after),
            "refused": refused[name]["gamer"],
            "refused_honest": refused[name]["honest"],
            "heuristic_weight": rel["heuristic"].in_use,
            "agent_b_weight": rel["agent-b"].in_use,
        }
        store.close()
    return out


def _worth(c: Any) -> float:
    return float(c.success / c.evidence) if c.evidence else 0.5


def run(cfg: dict[str, Any], seeds: int, episodes: int, show_progress: bool = True) -> Result:
    raw: list[dict[str, Any]] = []
    for seed in progress(range(seeds), seeds, "sources", show_progress):
        gamed = run_pass(cfg, seed, episodes, gamed=True)
        honest = run_pass(cfg, seed, episodes, gamed=False)
        for name in STORES:
            g, h = gamed[name], honest[name]
            raw.append(
                {
                    "seed": seed,
                    "store": name,
                    "target_truth": gamed["target_truth"],
                    "target_worth": g["target_worth"],
                    "target_worth_honest": h["target_worth"],
                    "burst_move": g["burst_move"],
                    "rho": g["rho"],
                    "rho_honest": h["rho"],
                    "alerted": int(g["alerted"]),
                    "false_alerts": g["false_alerts"],
                    "false_alerts_honest": h["false_alerts"],
                    "refused": g["refused"],
                    "refused_honest": g["refused_honest"] + h["refused_honest"],
                    "heuristic_weight": g["heuristic_weight"],
                    "agent_b_weight": g["agent_b_weight"],
                }
            )
    return Result("sources", _rows(raw), raw, {"seeds": seeds, "episodes": episodes})


def _pair(raw: list[dict[str, Any]], key: str) -> tuple[tuple[float, float], tuple[float, float]]:
    return tuple(mean_std([float(r[key]) for r in raw if r["store"] == s]) for s in STORES)  # type: ignore[return-value]


def _rows(raw: list[dict[str, Any]]) -> list[Row]:
    """Paper column: note 003's fixed confidences; ours: learned reliability + quota."""
    rows = []
    specs = [
        ("gamed target: worth", "target_worth", "true rate {truth:.3f}; honest-run worth {honest}"),
        ("gamed target: pushed above truth", "pushed", "worth minus the target's true success rate"),
        ("rank correlation with utility", "rho", "Spearman rho of worth vs true utility, all 40 memories"),
        ("rank correlation, no gamer", "rho_honest", "the same world without agent-b"),
        ("target worth moved by the burst", "burst_move", "worth just after the burst minus just before"),
        ("burst alert on the target", "alerted", "share of seeds where govern() flagged it after the burst"),
        ("false alerts, gamed run", "false_alerts", "alerts not on a memory the burst credited, or before it"),
        ("false alerts, honest run", "false_alerts_honest", "alerts with no gamer at all"),
        ("agent-b outcomes refused", "refused", "by the per-memory quota (of about 100 per run)"),
        ("honest outcomes refused", "refused_honest", "heuristic outcomes the quota refused, both runs"),
        ("confidence: heuristic", "heuristic_weight", "fixed 0.2; it reports the truth 75% of the time"),
        ("confidence: agent-b", "agent_b_weight", "fixed 0.5; it reports success whatever happened"),
    ]
    truth = float(np.mean([r["target_truth"] for r in raw]))
    for r in raw:
        r["pushed"] = r["target_worth"] - r["target_truth"]
    for name, key, note in specs:
        (p, _ps), (o, os_) = _pair(raw, key)
        honest = "/".join(f"{_pair(raw, 'target_worth_honest')[i][0]:.3f}" for i in range(2))
        rows.append(Row(name, key, p, o, os_, None, note.format(truth=truth, honest=honest)))
    for r in raw:
        del r["pushed"]
    return rows


def figure(raw_csv: Path, out_png: Path) -> None:
    """Target worth (paper vs ours vs truth) and rank correlation, per seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_raw(raw_csv)
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.8))
    x = np.arange(2)
    for ax, key, title in (
        (axes[0], "target_worth", "worth of the gamed memory"),
        (axes[1], "rho", "Spearman rho, worth vs true utility"),
    ):
        for i, store in enumerate(STORES):
            vals = [float(r[key]) for r in rows if r["store"] == store]
            ax.scatter(np.full(len(vals), x[i]) + np.linspace(-0.1, 0.1, len(vals)), vals, s=14, color="black")
            ax.bar(x[i], np.mean(vals), width=0.5, alpha=0.3)
        ax.set_xticks(x, ["paper (fixed)", "ours (learned + quota)"])
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3, axis="y")
    truth = np.mean([float(r["target_truth"]) for r in rows])
    axes[0].axhline(truth, color="black", ls="--", lw=0.8, label=f"true rate {truth:.2f}")
    axes[0].legend(fontsize=8)
    axes[0].set_ylim(0, 1)
    fig.suptitle("A gamed outcome source: fixed confidence vs learned reliability", fontsize=11)
    fig.tight_layout()
    fig.savefig(out_png, dpi=130)
    plt.close(fig)
