"""How far a running cell got, read from its latest progress display: a widget bar, or a `\\r` line.

A tqdm line (`train:  45%|████▌     | 450/1000 [00:12<00:15, 37.5it/s]`, also with unit
prefixes: `4.50k/10.0k [`) and a Keras one (`450/1000 [=====>....] - ETA: 2s`) both carry
`done/total [`; a widget bar carries its value and range.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from warmkernel.execution.widgets import WidgetModels

_FRACTION = re.compile(r"(\d+(?:\.\d+)?)([kMGTP]?)/(\d+(?:\.\d+)?)([kMGTP]?)\s*\[")
_PREFIXES = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}


@dataclass(frozen=True)
class Progress:
    line: str
    """The progress display as text."""
    done: float
    total: float


def line_progress(line: str) -> Progress | None:
    """The fraction of a progress line, if it shows one with a positive total."""
    found = _FRACTION.search(line)
    if found is None:
        return None
    done, done_unit, total, total_unit = found.groups()
    scaled_total = float(total) * _PREFIXES[total_unit]
    if scaled_total <= 0:
        return None
    return Progress(line.strip(), float(done) * _PREFIXES[done_unit], scaled_total)


def widget_progress(models: WidgetModels, root: str) -> Progress | None:
    """The fraction of the first bar in a widget view, with the view's text."""
    fraction = models.fraction(root)
    if fraction is None:
        return None
    return Progress(" ".join(models.render(root).split("\n")), fraction.done, fraction.total)
