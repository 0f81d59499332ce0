"""The admin page's charts: a backend's latency and error rate over its last calls, as
small inline SVG (no script, no asset). In: ``/status``'s ``series`` of a backend
(``[at, ms, ok]``, oldest first, at most recent.SERIES). Out: SVG markup, every number
computed here and no text from the data, so nothing in it needs escaping but the label.

- latency: one point per call (x: its place among the calls, y: its milliseconds
  against the slowest shown), joined by a line; a failed call's point is red;
- error rate: the calls in groups of :data:`GROUP`, one bar per group, as high as the
  share of failed calls in it (a grey bar behind each: the group exists).

The page script (admin_script.py) draws the same shapes from each ``/status`` it fetches.
"""

from __future__ import annotations

import html
from typing import Any

W, H, PAD = 220, 44, 3
GROUP = 5  # calls per error-rate bar


def _svg(kind: str, points: int, label: str, body: str) -> str:
    return (
        f'<svg class="chart {kind}" data-points="{points}" viewBox="0 0 {W} {H}" width="{W}" height="{H}" '
        f'role="img" aria-label="{html.escape(label, quote=True)}" xmlns="http://www.w3.org/2000/svg">'
        f'<rect class="frame" x="0" y="0" width="{W}" height="{H}" fill="#fafbfc" stroke="#dde1e6"/>{body}</svg>'
    )


def latency(series: list[list[Any]], backend: str = "") -> str:
    n = len(series)
    top = max((float(s[1]) for s in series), default=0.0) or 1.0
    step = (W - 2 * PAD) / max(n - 1, 1)
    xy = [(PAD + i * step, H - PAD - float(s[1]) / top * (H - 2 * PAD)) for i, s in enumerate(series)]
    line = " ".join(f"{x:.1f},{y:.1f}" for x, y in xy)
    body = f'<polyline points="{line}" fill="none" stroke="#1b6ef3" stroke-width="1.5"/>' if n > 1 else ""
    body += "".join(
        f'<circle class="point{"" if s[2] else " failed"}" cx="{x:.1f}" cy="{y:.1f}" r="2" '
        f'fill="{"#1b6ef3" if s[2] else "#d11"}"/>'
        for (x, y), s in zip(xy, series)
    )
    return _svg("latency", n, f"latency of {backend}'s last {n} calls, up to {top:g} ms", body)


def error_rate(series: list[list[Any]], backend: str = "") -> str:
    groups = [series[i : i + GROUP] for i in range(0, len(series), GROUP)]
    width = (W - 2 * PAD) / max(len(groups), 1)
    body = ""
    failed_all = 0
    for i, group in enumerate(groups):
        failed = sum(1 for s in group if not s[2])
        failed_all += failed
        rate = failed / len(group)
        x, h = PAD + i * width, rate * (H - 2 * PAD)
        body += (
            f'<rect class="bar" data-rate="{rate:.2f}" x="{x + 1:.1f}" y="{PAD}" width="{width - 2:.1f}" '
            f'height="{H - 2 * PAD}" fill="#eceff2"/>'
        )
        if failed:
            body += (
                f'<rect class="failed" x="{x + 1:.1f}" y="{H - PAD - h:.1f}" width="{width - 2:.1f}" '
                f'height="{h:.1f}" fill="#d11"/>'
            )
    share = f"{failed_all / len(series):.0%}" if series else "no calls"
    return _svg("errors", len(groups), f"error rate of {backend}'s last {len(series)} calls: {share}", body)
