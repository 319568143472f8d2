"""Domain objects to the text a model reads, and the same facts as a structured dict.

This package is the only place that writes text for the model. Every reply function returns
a `Reply` whose `text` is identical whatever the result mode; `data` carries the same facts
for structured clients. A call the text tells the model to make is written by `hints.call`.

Modules, by subject: `execution` (run and wait replies) with `inline` (the head-and-tail
budget), `reads` (read and search), `status`, `variables`, `notebook`; `reply` holds the
shared pieces and `hints` the tool-call hints.
"""
