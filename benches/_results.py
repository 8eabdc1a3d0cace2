"""The machine-readable results a benchmark writes with ``--json PATH``, for ``run_all.py``.

Each result is a metric with our figure, the anchor's figure measured in the
same run (if any), their ratio (ours / anchor) and the project's target, if
it states one. A target reads ``"ratio <= 0.5"``, ``"ours >= 0.95"`` or
``"ours == 0"``: what is compared, how, and the limit.

>>> r = Results("bench_x", [])
>>> r.add("time per request", 2.0, 5.0, unit="us", target="ratio <= 0.5")
>>> r.metrics[0]["ratio"], r.metrics[0]["passed"]
(0.4, True)
"""

from __future__ import annotations

import datetime
import json
import operator
import os
import platform
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

_OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "==": operator.eq,
}


def judge(target: str, ours: float, ratio: float | None) -> bool | None:
    """Whether ``target`` is met; None when it cannot be told (no ratio)."""
    subject, op, limit = target.split()
    value = ratio if subject == "ratio" else ours
    if value is None:
        return None
    return _OPS[op](value, float(limit))


class Results:
    """The metrics of one benchmark run, written as JSON by :meth:`write`."""

    def __init__(self, bench: str, argv: Sequence[str]) -> None:
        self.bench = bench
        self.argv = list(argv)
        self.metrics: list[dict[str, Any]] = []

    def add(
        self,
        metric: str,
        ours: float,
        anchor: float | None = None,
        *,
        unit: str = "",
        target: str | None = None,
        note: str = "",
    ) -> None:
        ratio = ours / anchor if anchor else None
        if target is not None and target.split()[1] not in _OPS:
            raise ValueError(f"target {target!r}: expected '<ratio|ours> <op> <number>'")
        self.metrics.append(
            {
                "metric": metric,
                "ours": ours,
                "anchor": anchor,
                "ratio": ratio,
                "unit": unit,
                "target": target,
                "passed": judge(target, ours, ratio) if target else None,
                "note": note,
            }
        )

    def write(self, path: str | os.PathLike[str]) -> None:
        data = {
            "bench": self.bench,
            "argv": self.argv,
            "date": datetime.datetime.now().isoformat(timespec="seconds"),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "metrics": self.metrics,
        }
        Path(path).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
