"""What ``memworth score`` leaves behind: the table as Parquet and CSV, a summary, a figure."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from memworth.errors import ValidationError
from memworth.outputs import folder_to_write, written_whole

__all__ = ["draw_figure", "summary", "write_tables"]

CLASS_COLOURS = {"high": "tab:green", "mixed": "tab:orange", "low": "tab:red", "uncertain": "tab:gray"}


def write_tables(table: Any, out: Path) -> list[Path]:
    """Write ``worth.parquet`` and ``worth.csv`` into ``out`` (made if missing), each whole or
    not at all (:func:`memworth.outputs.written_whole`); return the paths."""
    import pyarrow.csv as pv
    import pyarrow.parquet as pq

    folder_to_write(out, "out")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValidationError("out", f"cannot make the folder {out}: {exc.strerror or exc}") from None
    parquet, csv = out / "worth.parquet", out / "worth.csv"
    with written_whole(parquet, "out") as part:
        pq.write_table(table, part)
    with written_whole(csv, "out") as part:
        pv.write_csv(table, part)
    return [parquet, csv]


def summary(table: Any, limit: int = 15) -> tuple[list[tuple[str, int]], list[dict[str, Any]]]:
    """Memories per class and per proposed action, and the flagged memories with most evidence first."""
    rows = table.to_pylist()
    tally = Counter(r["value_class"] for r in rows)
    tally.update(f"proposal: {r['action']}" for r in rows if r["action"])
    tally.update("change alarm" for r in rows if r["change_alarm"])
    flagged = sorted((r for r in rows if r["action"]), key=lambda r: (-r["n"], r["namespace"], r["memory_id"]))
    return sorted(tally.items()), flagged[:limit]


def print_summary(table: Any, limit: int = 15) -> None:
    """Print :func:`summary` as tables: with rich when it is installed, else plain text."""
    tally, flagged = summary(table, limit)
    heads = ("namespace", "memory", "n", "worth", "class", "action", "reason")
    lines = [
        (r["namespace"], r["memory_id"], f"{r['n']:g}", f"{r['worth']:.3f}", r["value_class"], r["action"], r["reason"])
        for r in flagged
    ]
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        print(f"{table.num_rows} memories: " + ", ".join(f"{k} {v}" for k, v in tally))
        for line in [heads, *lines]:
            print("  ".join(str(x) for x in line))
        return
    console = Console()
    counts = Table(title=f"{table.num_rows} memories")
    counts.add_column("")
    counts.add_column("memories", justify="right")
    for k, v in tally:
        counts.add_row(k, str(v))
    console.print(counts)
    if lines:
        top = Table(title=f"flagged (most evidence first, {len(lines)} shown)")
        for h in heads:
            top.add_column(h, overflow="fold")
        for line in lines:
            top.add_row(*(str(x) for x in line))
        console.print(top)


def draw_figure(table: Any, path: Path, names: int = 12) -> Path:
    """Worth against evidence (retrievals), one dot per memory coloured by class; flagged ones named."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = table.to_pylist()
    fig, ax = plt.subplots(figsize=(8, 5))
    for value_class, colour in CLASS_COLOURS.items():
        pick = [r for r in rows if r["value_class"] == value_class]
        if pick:
            ax.scatter([r["n"] for r in pick], [r["worth"] for r in pick], s=12, c=colour, label=value_class, alpha=0.7)
    flagged = sorted((r for r in rows if r["action"]), key=lambda r: -r["n"])[:names]
    for r in flagged:
        ax.scatter([r["n"]], [r["worth"]], s=40, facecolors="none", edgecolors="black")
        ax.annotate(
            f"{r['memory_id']} ({r['action']})",
            (r["n"], r["worth"]),
            fontsize=7,
            xytext=(4, 4),
            textcoords="offset points",
        )
    ax.set_xscale("symlog", linthresh=1.0)
    ax.set_xlabel("evidence (retrievals)")
    ax.set_ylabel("Memory Worth")
    ax.set_ylim(-0.05, 1.05)
    ax.set_title("Memory Worth against evidence (flagged memories named)")
    if rows:
        ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    try:
        with written_whole(path, "out") as part:
            fig.savefig(part, dpi=120, format="png")
    finally:
        plt.close(fig)
    return path
