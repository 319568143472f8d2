"""Custom summaries for inspect_python_variable, registered from code running inside the kernel.

    from warmkernel.inspection import summarizer

    @summarizer
    def summarize_model(obj):
        if not isinstance(obj, MyModel):
            return None  # not mine: the next summarizer tries
        return {"kind": "MyModel", "layers": len(obj.layers)}

A summarizer takes the object and returns a dict of facts (made JSON-safe and bounded by
warmkernel) or None. User summarizers, the configured ones (`[tool.warmkernel.inspection]
summarizers = ["pkg.mod:func"]`) then the decorated ones, are tried before the built-in
summaries; one that raises is skipped and its error is noted in the summary. Registering a
function of the same module and name again replaces it, so re-running a cell is harmless.

Inside a warmkernel kernel the registry is the injected helper's; where warmkernel is not
installed in the kernel, the helper provides a module of this name with the same decorator.
Outside a warmkernel kernel the decorator returns the function unchanged.
"""

from __future__ import annotations

import sys

from warmkernel.kernel.inside import INSPECTION_MODULE
from warmkernel.kernel.inside.summaries import Summarizer

__all__ = ["Summarizer", "summarizer"]


def summarizer(func: Summarizer) -> Summarizer:
    """Register `func` with the helper of the kernel this runs in (if any) and return it."""
    helper = sys.modules.get(INSPECTION_MODULE)
    if helper is None:
        return func
    return helper.summarizer(func)
