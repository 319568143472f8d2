"""Submission: a cell as a caller sent it, parsed once into what the kernel runs and how to wait on it.

The face parses (so a bad directive is refused before anything waits or starts) and hands the
submission to the session, which sends `runs` and keeps `source` in the record.
"""

from __future__ import annotations

from dataclasses import dataclass

from warmkernel.execution.directive import Directives, kernel_source, parse_directives
from warmkernel.execution.patch_literal import transform_patch_literals


@dataclass(frozen=True)
class Submission:
    source: str
    """The cell as sent: what the record keeps and exports show."""
    runs: str
    """What the kernel runs: Apply Patch literals converted, a cell magic's directive lines dropped."""
    directives: Directives
    patch_literals: int
    """How many Apply Patch literals were converted."""


def parse_cell(source: str) -> Submission:
    """The cell's patch literals, then its directives; `invalid_directive` names a line that is wrong."""
    transformed = transform_patch_literals(source)
    # Directives are read after the patch transform: a patch body may hold an odd number of
    # quotes, which would hide a later directive line from the scanner.
    directives = parse_directives(transformed.source)
    return Submission(source, kernel_source(transformed.source), directives, transformed.converted)
