"""The worth-over-time plot of a memory's page: an inline SVG, drawn on the server."""

from collections.abc import Sequence

from memworth.server.dashboard.history import Point
from memworth.server.dashboard.markup import esc

__all__ = ["worth_plot"]


def worth_plot(
    points: Sequence[Point], theta_low: float, theta_high: float, width: int = 720, height: int = 290
) -> str:
    """An inline SVG of worth after each outcome, its 95% interval as a band, the class thresholds
    (labelled lines), the y axis labelled, and a legend of the line, the band and the outcome dots.

    Point 0 is the memory before any evidence (worth 0.5, interval [0, 1]).

    Examples
    --------
    >>> svg = worth_plot([], 0.4, 0.6)
    >>> svg.startswith("<svg") and "no outcomes yet" in svg and 'id="y-label"' in svg and "theta_high 0.6" in svg
    True
    """
    left, right, top, bottom = 60, 14, 12, 66
    pw, ph = width - left - right, height - top - bottom
    worth = [0.5] + [p.worth for p in points]
    lower = [0.0] + [p.lower for p in points]
    upper = [1.0] + [p.upper for p in points]
    last = len(points)
    step = max(1, -(-last // 600))  # at most ~600 vertices, the last always kept
    idx = sorted({*range(0, last + 1, step), last})

    def x(i: int) -> float:
        return left + (i / last * pw if last else pw / 2)

    def y(v: float) -> float:
        return top + (1 - v) * ph

    out = [
        f'<svg id="trajectory" class="plot" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-labelledby="trajectory-title">',
        '<title id="trajectory-title">Worth after each outcome, with its 95% Wilson interval</title>',
    ]
    for v in (0.0, 0.25, 0.5, 0.75, 1.0):
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#e3e6ea"/>')
        out.append(f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end" font-size="11">{v:g}</text>')
    out.append(
        f'<text id="y-label" x="14" y="{top + ph / 2:.1f}" text-anchor="middle" font-size="12" '
        f'transform="rotate(-90 14 {top + ph / 2:.1f})">worth (hits+ share)</text>'
    )
    for v, name, dy in ((theta_low, "low", 13), (theta_high, "high", -4)):  # low's label under its line
        out.append(
            f'<line class="threshold" x1="{left}" x2="{left + pw}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#8a94a6" '
            f'stroke-dasharray="4 4"><title>theta_{name} {v:g}</title></line>'
            f'<text class="threshold-label" x="{left + pw - 4}" y="{y(v) + dy:.1f}" text-anchor="end" font-size="11" '
            f'fill="#4b5563">theta_{name} {v:g}: {"below, low worth" if name == "low" else "above, high worth"}</text>'
        )
    if not points:
        out.append(f'<text x="{left + pw / 2}" y="{top + ph / 2 - 10}" text-anchor="middle">no outcomes yet</text>')
    band = [f"{x(i):.1f},{y(upper[i]):.1f}" for i in idx] + [f"{x(i):.1f},{y(lower[i]):.1f}" for i in reversed(idx)]
    out.append(f'<polygon class="band" points="{" ".join(band)}" fill="#9ec5fe" fill-opacity="0.45"/>')
    line = " ".join(f"{x(i):.1f},{y(worth[i]):.1f}" for i in idx)
    out.append(f'<polyline class="worth" points="{line}" fill="none" stroke="#1d4ed8" stroke-width="2"/>')
    if last <= 200:
        for i, p in enumerate(points, start=1):
            colour = "#15803d" if p.success else "#b91c1c"
            fill = colour if p.direct else "#ffffff"
            how = "retrieved" if p.direct else "via provenance"
            out.append(
                f'<circle class="outcome" cx="{x(i):.1f}" cy="{y(p.worth):.1f}" r="3.5" fill="{fill}" stroke="{colour}">'
                f"<title>#{i} {'success' if p.success else 'failure'} ({how}), credit {p.credit:.3g}: "
                f"worth {p.worth:.3f} [{p.lower:.3f}, {p.upper:.3f}]; query {esc(p.query[:80])}</title></circle>"
            )
    for i in sorted({0, last // 2, last}):
        out.append(f'<text x="{x(i):.1f}" y="{top + ph + 16}" text-anchor="middle" font-size="11">{i}</text>')
    out.append(
        f'<text x="{left + pw / 2}" y="{top + ph + 32}" text-anchor="middle" font-size="12">'
        "outcomes that credited this memory</text>"
    )
    out.append(_legend(left, height - 12, dots=0 < last <= 200))
    return "".join(out) + "</svg>"


def _legend(x: float, y: float, dots: bool) -> str:
    """One line of keys: the worth line, its band and (when drawn) the outcome dots."""
    keys = [
        '<line x1="0" x2="18" y1="0" y2="0" stroke="#1d4ed8" stroke-width="2"/>|worth',
        '<rect x="0" y="-6" width="18" height="12" fill="#9ec5fe" fill-opacity="0.45"/>|95% interval',
    ]
    if dots:
        keys += [
            '<circle cx="9" cy="0" r="3.5" fill="#15803d" stroke="#15803d"/>|success',
            '<circle cx="9" cy="0" r="3.5" fill="#b91c1c" stroke="#b91c1c"/>|failure',
            '<circle cx="9" cy="0" r="3.5" fill="#ffffff" stroke="#616e7c"/>|hollow: credit via provenance',
        ]
    out, at = ['<g id="legend" font-size="11">'], x
    for key in keys:
        mark, label = key.split("|")
        out.append(f'<g transform="translate({at:.0f} {y:.0f})">{mark}<text x="22" y="4">{label}</text></g>')
        at += 30 + 6.2 * len(label)
    return "".join(out) + "</g>"
