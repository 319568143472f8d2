"""Domain objects to the text a model reads, and the same facts as a structured dict.

This package is the only place that writes text for the model. Every reply function returns
a `Reply` whose `text` is identical whatever the result mode; `data` carries the same facts
for structured clients. A call the text tells the model to make is written by `hints.call`.

Modules, by subject: `execution` (run and wait replies) with `inline` (the head-and-tail
budget), `reads` (read and search), `status`, `variables`, `notebook`; `reply` holds the
shared pieces and `hints` the tool-call hints.
"""

from warmkernel.present.execution import execution_reply, progress_message
from warmkernel.present.notebook import notebook_run_reply, notebook_status_reply, notebook_watch_reply
from warmkernel.present.reads import dropped, dropped_reply, images_reply, read_reply, search_reply
from warmkernel.present.reply import Picture, Reply, clip, duration, size
from warmkernel.present.status import (
    execution_status_reply,
    interrupt_reply,
    list_reply,
    reset_reply,
    status_reply,
)
from warmkernel.present.variables import summary_reply, variables_reply

__all__ = [
    "Picture",
    "Reply",
    "clip",
    "dropped",
    "dropped_reply",
    "duration",
    "execution_reply",
    "execution_status_reply",
    "images_reply",
    "interrupt_reply",
    "list_reply",
    "notebook_run_reply",
    "notebook_status_reply",
    "notebook_watch_reply",
    "progress_message",
    "read_reply",
    "reset_reply",
    "search_reply",
    "size",
    "status_reply",
    "summary_reply",
    "variables_reply",
]
