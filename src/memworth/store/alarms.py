"""Each memory's change statistic in one namespace, kept current outcome by outcome.

:meth:`memworth.MemoryStore.govern` scans a namespace's whole outcome log to run the
change detectors. An :class:`memworth.signals.coretrieval.AlarmSplitter` needs the statistics at
every recall, not only at the last scan: :class:`LiveAlarms` starts from a scan and
advances each memory's CUSUM with every outcome this process records, exactly as the
scan would (same detector, same reference rate, same order). Outcomes that other
processes record reach it at the next scan.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from memworth.signals.change_detection import BernoulliCusum, CusumState, ReferenceRate

__all__ = ["LiveAlarms"]


class LiveAlarms:
    """The CUSUM state of one namespace's memories, and the reference rate, to advance.

    ``ids`` name the rows of ``state`` (a copy of a namespace scan's), ``reference`` is the
    success rate of the outcomes that scan read (:class:`memworth.signals.change_detection.ReferenceRate`, a
    copy) and ``logged`` how many outcomes it has seen.
    """

    def __init__(
        self,
        detector: BernoulliCusum,
        ids: Sequence[str],
        state: CusumState,
        reference: ReferenceRate,
        logged: int,
    ) -> None:
        self.detector = detector
        self.names = list(dict.fromkeys(ids))
        self.rows = {mid: i for i, mid in enumerate(self.names)}
        self.state = state
        self.reference = reference
        self.logged = int(logged)

    def advance(self, memory_ids: Sequence[str], success: bool, confidence: float) -> dict[str, float]:
        """Add one outcome of an episode that retrieved ``memory_ids``; return their statistics now."""
        unique = list(dict.fromkeys(memory_ids))
        for mid in unique:
            if mid not in self.rows:
                self.rows[mid] = len(self.rows)
                self.names.append(mid)
        if len(self.rows) > len(self.state):
            self.state.grow(max(len(self.rows), 2 * len(self.state)))
        self.logged += 1
        ok = bool(success)
        if not unique:
            self.reference.add(ok)
            return {}
        rows = np.array([self.rows[mid] for mid in unique], dtype=np.int64)
        _steps, after = self.detector.advance_one(self.state, rows, ok, float(confidence), self.reference.rate, self.logged)
        self.reference.add(ok)
        return dict(zip(unique, after.tolist(), strict=True))

    def advance_many(self, outcomes: Sequence[tuple[Sequence[str], bool, float]]) -> dict[str, float]:
        """Add outcomes in log order, each ``(memory_ids, success, confidence)``: what one
        :meth:`advance` per outcome does, bit for bit, in one vectorised pass per repeat of a
        memory (a batch of ``record_many``). Returns the statistics of the memories they moved, after the last.

        Python walks the outcomes once (each memory's row, the reference rate before each
        outcome); an outcome's success, confidence, rate and episode number are spread over
        its memories by one ``np.repeat`` each."""
        known = self.rows
        rows: list[int] = []
        sizes: list[int] = []
        ys: list[bool] = []
        ws: list[float] = []
        refs: list[float] = []
        reference = self.reference
        for memory_ids, success, confidence in outcomes:
            unique = dict.fromkeys(memory_ids)
            for mid in unique:
                row = known.get(mid)
                if row is None:
                    row = known[mid] = len(known)
                    self.names.append(mid)
                rows.append(row)
            ok = bool(success)
            sizes.append(len(unique))
            ys.append(ok)
            ws.append(float(confidence))
            refs.append(reference.rate)
            reference.add(ok)
        times = np.arange(self.logged + 1, self.logged + 1 + len(sizes), dtype=np.int64)
        self.logged += len(sizes)
        if len(known) > len(self.state):
            self.state.grow(max(len(known), 2 * len(self.state)))
        r = np.array(rows, dtype=np.int64)
        per = np.array(sizes, dtype=np.int64)
        _steps, after = self.detector.advance_many(
            self.state,
            r,
            np.repeat(np.array(ys, dtype=bool), per),
            np.repeat(np.array(ws), per),
            np.repeat(np.array(refs), per),
            np.repeat(times, per),
        )
        last = dict(zip(rows, after.tolist(), strict=True))  # each row's statistic after its last observation
        names = self.names
        return {names[row]: last[row] for row in sorted(last)}

    def statistics(self) -> dict[str, float]:
        """Every known memory's statistic now."""
        return {mid: float(self.state.statistic[row]) for mid, row in self.rows.items()}
