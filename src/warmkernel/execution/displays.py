"""DisplayLog owns the rich side of one execution's output: where each display sits among the
combined lines, its image, its later states, and the clears.

Every display_data and execute_result bundle is rendered (`mime.render_bundle`) and appended
to the `result` stream. An image is kept in the execution's `ImageStore` and its caption line
(`[image 2: image/png 640x480, 23,456 bytes]`) follows the bundle's text/plain. The log
remembers which combined lines each display occupies, so a reply can show the image in place
of its repr and leave out what a later state replaced. The streams stay append-only: every
rule below changes what the inline reply shows, never what a read finds.

- **Updates** (`update_display_data`: IPython progress bars, `display(..., display_id=True)`
  handles): an update is written to the streams when it arrives at least
  `UPDATE_RECORD_INTERVAL_S` after the display's last written state, else held; the held
  state is written when the execution ends. So a display updated 10,000 times leaves its
  first state, one state per interval, and its final state. The inline reply shows only the
  latest written state of each display. An update whose display was shown by an earlier
  execution is shown like a new display.
- **Widget views** are displays whose id is their model's (`widget:<model id>`): each change of
  a model they show is an update, and the bundle is a callable that renders the view only
  when its state is written. They are shown in place: the inline reply shows the latest
  written state where the first one was written (`moved`).
- **Clears** (`clear_output`): the inline reply shows only what came after the last clear,
  with a note naming the cleared lines. `clear_output(wait=True)` takes effect when the next
  output arrives, as in Jupyter; if none arrives, nothing is cleared.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from warmkernel.execution.images import ImageStore, StoredImage
from warmkernel.execution.mime import Chart, render_bundle
from warmkernel.execution.output_log import OutputLog
from warmkernel.execution.spill import Spill

Bundle = Mapping[str, Any] | Callable[[], Mapping[str, Any]]
"""A display's MIME bundle, or what makes it when it is written (a widget view renders only then)."""

UPDATE_RECORD_INTERVAL_S = 5.0
"""Least time between two written states of one display while updates keep coming."""


@dataclass(frozen=True)
class Placement:
    """The combined lines one written display state occupies: `first` up to `end` (exclusive)."""

    first: int
    end: int
    image: StoredImage | None
    """When set, the last line is the image's caption and the lines before it its text/plain."""


@dataclass
class _Updatable:
    """A display with an id: its written states, and the latest state not yet written."""

    placements: list[Placement]
    written_at: float
    in_place: bool = False
    """A reply shows the latest state where the first was written (a widget view), not at its own place."""
    held: tuple[Bundle, Chart | None] | None = None


class DisplayLog:
    """Displays of one execution, their images, later states and clears."""

    def __init__(self, spill: Spill | None = None) -> None:
        self.images = ImageStore(spill)
        self.cleared_before = 0
        """Combined lines before this index were cleared by clear_output (0: none were)."""
        self._placements: list[Placement] = []
        self._updatable: dict[str, _Updatable] = {}
        self._clear_waiting = False

    def show(
        self,
        output: OutputLog,
        data: Bundle,
        *,
        now: float,
        label: str = "",
        display_id: str | None = None,
        update: bool = False,
        chart: Chart | None = None,
        in_place: bool = False,
    ) -> None:
        """Append a bundle's rendering to `result`, or hold an update until it is due.

        `in_place` (given with a display's first state): a reply shows its latest state there.
        """
        known = self._updatable.get(display_id) if display_id is not None else None
        if update and known is not None and now - known.written_at < UPDATE_RECORD_INTERVAL_S:
            known.held = (data, chart)
            return
        placement = self._write(output, data, label, chart)
        if display_id is None:
            return
        if known is None:
            self._updatable[display_id] = _Updatable([placement], now, in_place)
        else:
            known.placements.append(placement)
            known.written_at, known.held = now, None

    def clear(self, output: OutputLog, *, wait: bool) -> None:
        """clear_output: now, or (wait=True) when the next output arrives."""
        self._clear_waiting = wait
        if not wait:
            self.cleared_before = output.completed_count()

    def output_arrived(self, output: OutputLog) -> None:
        """Output is about to be appended: a clear that waited for it happens first."""
        if self._clear_waiting:
            self._clear_waiting = False
            self.cleared_before = output.completed_count()

    def settle(self, output: OutputLog) -> None:
        """The execution ends: write the held final state of every updated display."""
        for known in self._updatable.values():
            if known.held is not None:
                data, chart = known.held
                known.placements.append(self._write(output, data, "", chart))
                known.held = None

    def _write(self, output: OutputLog, data: Bundle, label: str, chart: Chart | None) -> Placement:
        self.output_arrived(output)
        rendering = render_bundle(data() if callable(data) else data, chart)
        first = output.completed_count()
        if rendering.text or rendering.image is None:
            output.append("result", _line(_labelled(label, rendering.text)))
        image = None
        if rendering.image is not None:
            image = self.images.add(rendering.image)
            output.append("result", image.caption + "\n")
        placement = Placement(first, output.completed_count(), image)
        self._placements.append(placement)
        return placement

    def _superseded(self) -> list[Placement]:
        """Written states that a later state of the same display replaced."""
        return [old for known in self._updatable.values() for old in known.placements[:-1]]

    def states(self) -> list[tuple[Placement, bool]]:
        """Every written display state in order, and whether a later state of its display replaced it."""
        replaced = set(self._superseded())
        return [(placement, placement in replaced) for placement in self._placements]

    def moved(self) -> dict[int, range]:
        """For each display shown in place: the first line of its first state, and the combined
        lines of its latest state, which a reply shows there instead."""
        return {
            known.placements[0].first: range(known.placements[-1].first, known.placements[-1].end)
            for known in self._updatable.values()
            if known.in_place and len(known.placements) > 1
        }

    def hidden_lines(self) -> frozenset[int]:
        """Combined lines an inline reply leaves out: replaced states, the latest state of a display
        shown in place (it moves to the first one's place), and the repr of each image."""
        hidden: set[int] = set()
        for old in self._superseded():
            hidden.update(range(old.first, old.end))
        for first, latest in self.moved().items():
            hidden.discard(first)
            hidden.update(latest)
        for placement in self._placements:
            if placement.image is not None:
                hidden.update(range(placement.first, placement.end - 1))
        return frozenset(hidden)

    def captions(self) -> dict[int, StoredImage]:
        """The combined line of each image caption an inline reply shows, with its image."""
        replaced = set(self._superseded())
        return {
            placement.end - 1: placement.image
            for placement in self._placements
            if placement.image is not None and placement not in replaced
        }

    def drop(self) -> int:
        """Throw the images away with the output; returns the spill-file bytes freed."""
        return self.images.drop()


def _labelled(label: str, text: str) -> str:
    """`Out[3]: 42`; a value of several lines starts on the line after its label, so that a
    table's header stays above its columns."""
    if label and "\n" in text.rstrip("\n"):
        return f"{label.rstrip()}\n{text}"
    return label + text


def _line(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"
