"""OutputCollector: one notebook cell's kernel events as the nbformat v4 outputs Jupyter saves.

It sits in front of the execution's own inbox and forwards every event to it unchanged. The
dicts are those `nbformat.v4.output_from_msg` makes from the same messages: `stream` (text
that follows text of the same stream is joined, as Jupyter shows it), `execute_result` with
the execution count, `display_data` and `error`. `clear_output` empties the list (with
`wait=True`, once the next output arrives), and `update_display_data` replaces the data and
metadata of the outputs shown with that display id, here and (through `on_update`) in the
cells that ran before, as nbclient does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from warmkernel.kernel.channel import ClearOutput, Display, Error, Event, Inbox, Result, Stream

Output = dict[str, Any]


class OutputCollector:
    """Collects outputs for the `.ipynb`, then hands each event on to `forward`."""

    def __init__(
        self,
        forward: Inbox,
        execution_count: int,
        on_update: Callable[[str, Mapping[str, Any], Mapping[str, Any]], None] | None = None,
    ) -> None:
        self._forward = forward
        self._on_update = on_update
        self._execution_count = execution_count
        self._clear_pending = False
        self._display_ids: dict[int, str] = {}
        """Position in `outputs` -> the display id it was shown with."""
        self.outputs: list[Output] = []

    def deliver(self, event: Event) -> None:
        self._collect(event)
        self._forward.deliver(event)

    def _collect(self, event: Event) -> None:
        match event:
            case Stream(name=name, text=text):
                last = self.outputs[-1] if self.outputs and not self._clear_pending else None
                if last is not None and last["output_type"] == "stream" and last["name"] == name:
                    last["text"] += text
                else:
                    self._add({"output_type": "stream", "name": name, "text": text})
            case Result(data=data, metadata=metadata):
                self._add(
                    {
                        "output_type": "execute_result",
                        "execution_count": self._execution_count,
                        "data": dict(data),
                        "metadata": dict(metadata),
                    }
                )
            case Display(data=data, metadata=metadata, update=True, display_id=display_id):
                for position, shown_id in self._display_ids.items():
                    if shown_id == display_id:
                        self.outputs[position].update(data=dict(data), metadata=dict(metadata))
                if display_id is not None and self._on_update is not None:
                    self._on_update(display_id, data, metadata)
            case Display(data=data, metadata=metadata, display_id=display_id):
                self._add({"output_type": "display_data", "data": dict(data), "metadata": dict(metadata)})
                if display_id is not None:
                    self._display_ids[len(self.outputs) - 1] = display_id
            case Error(ename=ename, evalue=evalue, traceback=traceback):
                self._add(
                    {"output_type": "error", "ename": ename, "evalue": evalue, "traceback": list(traceback)}
                )
            case ClearOutput(wait=True):
                self._clear_pending = True
            case ClearOutput():
                self._clear()
            case _:
                pass

    def displays(self) -> dict[str, list[Output]]:
        """The outputs shown with each display id (the dicts themselves, for later updates)."""
        shown: dict[str, list[Output]] = {}
        for position, display_id in self._display_ids.items():
            shown.setdefault(display_id, []).append(self.outputs[position])
        return shown

    def _add(self, output: Output) -> None:
        if self._clear_pending:
            self._clear()
        self.outputs.append(output)

    def _clear(self) -> None:
        self.outputs.clear()
        self._display_ids.clear()
        self._clear_pending = False
