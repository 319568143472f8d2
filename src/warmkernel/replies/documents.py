"""Executions as documents a person opens, reruns and keeps: a notebook, a script, Markdown, HTML.

Pure functions of `Transcript`s (no I/O): `notebook_cell` and `notebook` build nbformat v4
dicts (`notebook_text` writes one as Jupyter does), `script` writes `# %%` cells without
outputs, `markdown` and `html` write every output, images included as `data:` URIs, so each
document stands alone. The HTML page loads nothing and runs no script.
"""

from __future__ import annotations

import html as html_text
import json
import re
from collections.abc import Collection, Sequence
from typing import Any

from warmkernel.execution.transcript import Output, Transcript
from warmkernel.notebook.staleness import RAISES_TAG
from warmkernel.replies.reply import duration
from warmkernel.types import ExportFormat

NBFORMAT_MINOR = 5
"""New notebooks are nbformat 4.5: cells have ids."""
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


def cell_ids(numbers: Sequence[int], taken: Collection[str] = ()) -> list[str]:
    """An id per execution, `execution-N`, suffixed `-2`, `-3`, ... past ids already `taken`."""
    used = set(taken)
    ids: list[str] = []
    for number in numbers:
        base = candidate = f"execution-{number}"
        suffix = 1
        while candidate in used:
            suffix += 1
            candidate = f"{base}-{suffix}"
        used.add(candidate)
        ids.append(candidate)
    return ids


def notebook_cell(transcript: Transcript, cell_id: str | None) -> dict[str, Any]:
    """One code cell: the source, the outputs, In [N] as its count, the facts as `warmkernel` metadata.

    `cell_id` None: for a notebook older than nbformat 4.5, whose cells have no ids."""
    cell: dict[str, Any] = {
        "cell_type": "code",
        "execution_count": transcript.number,
        "metadata": {"warmkernel": transcript.facts()},
        "outputs": [dict(output) for output in transcript.outputs],
        "source": transcript.source,
    }
    if any(output["output_type"] == "error" for output in transcript.outputs):
        cell["metadata"]["tags"] = [RAISES_TAG]  # it raised when it ran: a rerun goes on past it
    if cell_id is not None:
        cell["id"] = cell_id
    return cell


def new_cells(transcripts: Sequence[Transcript], minor: int, taken: Collection[str]) -> list[dict[str, Any]]:
    """Cells to add to a notebook of nbformat 4.`minor` whose cells use the ids `taken`, as files store
    them; with ids from nbformat 4.5 on."""
    ids: Sequence[str | None] = (
        cell_ids([t.number for t in transcripts], taken)
        if minor >= NBFORMAT_MINOR
        else [None] * len(transcripts)
    )
    return stored_cells([notebook_cell(t, cell_id) for t, cell_id in zip(transcripts, ids, strict=True)])


def ranges(numbers: Sequence[int]) -> str:
    """`3, 5-9` for 3, 5, 6, 7, 8, 9: runs of consecutive numbers as ranges."""
    runs: list[list[int]] = []
    for number in numbers:
        if runs and number == runs[-1][1] + 1:
            runs[-1][1] = number
        else:
            runs.append([number, number])
    return ", ".join(str(first) if first == last else f"{first}-{last}" for first, last in runs)


def image_count(transcripts: Sequence[Transcript]) -> int:
    return sum(_image(output) is not None for t in transcripts for output in t.outputs)


def notebook(transcripts: Sequence[Transcript]) -> dict[str, Any]:
    """A new nbformat 4.5 notebook with one code cell per execution."""
    ids = cell_ids([t.number for t in transcripts])
    return {
        "cells": [notebook_cell(t, cell_id) for t, cell_id in zip(transcripts, ids, strict=True)],
        "metadata": {
            "kernelspec": dict(KERNELSPEC),
            "language_info": {"name": "python"},
            "warmkernel": {"executions": [t.number for t in transcripts]},
        },
        "nbformat": 4,
        "nbformat_minor": NBFORMAT_MINOR,
    }


def stored_cells(cells: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Code cells as `.ipynb` files store them: the source, stream text and `text/*` data as lists of
    lines (what nbformat's `split_lines` does to these outputs, without its copies)."""
    return [
        {**cell, "source": cell["source"].splitlines(True), "outputs": [_stored(o) for o in cell["outputs"]]}
        for cell in cells
    ]


def _stored(output: Output) -> Output:
    if output["output_type"] == "stream":
        return {**output, "text": output["text"].splitlines(True)}
    if "data" in output:
        data = output["data"]
        return {
            **output,
            "data": {k: v.splitlines(True) if k.startswith("text/") else v for k, v in data.items()},
        }
    return dict(output)


def notebook_text(transcripts: Sequence[Transcript]) -> str:
    """The notebook as Jupyter writes it: one-space indents, sorted keys, UTF-8, a final newline."""
    document = notebook(transcripts)
    document["cells"] = stored_cells(document["cells"])
    return json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def _title(transcript: Transcript) -> str:
    """`In [7] · error ZeroDivisionError · 1.2 s`."""
    state = transcript.state
    if transcript.error_name:
        state += f" {transcript.error_name}"
    elif transcript.end_reason:
        state += f" ({transcript.end_reason})"
    return f"In [{transcript.number}] · {state} · {duration(transcript.elapsed_s)}"


def _dropped_note(transcript: Transcript) -> str | None:
    if transcript.output_dropped:
        return f"output of execution {transcript.number} was dropped to stay under the output limit"
    return None


def script(transcripts: Sequence[Transcript]) -> str:
    """A Python script with one `# %%` cell per execution (outputs left out), as editors and
    jupytext read it."""
    parts = [f"# %% {_title(t)}\n{t.source.rstrip()}\n" for t in transcripts]
    return "\n".join(parts)


def _fence(text: str) -> str:
    """A backtick fence longer than any backtick run in `text`."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def _block(text: str, language: str = "") -> str:
    fence = _fence(text)
    return f"{fence}{language}\n{text.rstrip(chr(10))}\n{fence}"


def _image(output: Output) -> tuple[str, str] | None:
    """(mime, base64) of the image an output carries."""
    return next(
        ((mime, data) for mime, data in output.get("data", {}).items() if mime.startswith("image/")), None
    )


def _plain(output: Output) -> str:
    return output.get("data", {}).get("text/plain", "")


def markdown(transcripts: Sequence[Transcript]) -> str:
    """Each execution as a heading, its source as a Python block, then its outputs in order."""
    sections: list[str] = []
    for t in transcripts:
        parts = [f"## {_title(t)}", _block(t.source, "python")]
        note = _dropped_note(t)
        if note:
            parts.append(f"*{note}*")
        for output in t.outputs:
            parts.extend(_markdown_output(t, output))
        sections.append("\n\n".join(parts))
    return "\n\n".join(sections) + "\n"


def _markdown_output(t: Transcript, output: Output) -> list[str]:
    kind = output["output_type"]
    if kind == "stream":
        label = "" if output["name"] == "stdout" else "stderr:\n\n"
        return [label + _block(output["text"], "text")]
    if kind == "error":
        return [_block("\n".join(output["traceback"]), "pytb")]
    parts: list[str] = []
    image = _image(output)
    text = _plain(output)
    if kind == "execute_result":
        parts.append(f"Out[{t.number}]:")
    if text and image is None:
        parts.append(_block(text, "text"))
    if image is not None:
        mime, data = image
        parts.append(f"![{text or mime}](data:{mime};base64,{data})")
    return parts


_STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 60em; padding: 0 1em; }
section { border-top: 1px solid #ddd; padding: .5em 0 1em; }
h2 { font-size: 1em; color: #555; }
pre { margin: .3em 0; padding: .5em .7em; overflow-x: auto; white-space: pre-wrap; background: #f6f8fa; }
pre.source { background: #eef3fb; }
pre.stderr { background: #fff5e6; }
pre.error { background: #fdecec; color: #8b0000; }
.note { color: #777; font-style: italic; }
.out { color: #a33; font-family: monospace; }
img { max-width: 100%; display: block; margin: .3em 0; }
"""
_POLICY = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"


def html(transcripts: Sequence[Transcript], title: str) -> str:
    """A self-contained page: inline style, images as `data:` URIs, no script, nothing fetched."""
    sections = [_html_section(t) for t in transcripts]
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{_POLICY}">\n'
        f"<title>{html_text.escape(title)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
        f"<h1>{html_text.escape(title)}</h1>\n" + "\n".join(sections) + "\n</body>\n</html>\n"
    )


def _pre(text: str, kind: str) -> str:
    return f'<pre class="{kind}">{html_text.escape(text.rstrip(chr(10)))}</pre>'


def _html_section(t: Transcript) -> str:
    parts = [f'<section id="execution-{t.number}">', f"<h2>{html_text.escape(_title(t))}</h2>"]
    parts.append(_pre(t.source, "source"))
    note = _dropped_note(t)
    if note:
        parts.append(f'<p class="note">{html_text.escape(note)}</p>')
    for output in t.outputs:
        kind = output["output_type"]
        if kind == "stream":
            parts.append(_pre(output["text"], output["name"]))
        elif kind == "error":
            parts.append(_pre("\n".join(output["traceback"]), "error"))
        else:
            if kind == "execute_result":
                parts.append(f'<div class="out">Out[{t.number}]:</div>')
            image = _image(output)
            text = _plain(output)
            if image is not None:
                mime, data = image
                alt = html_text.escape(text or mime, quote=True)
                parts.append(f'<img alt="{alt}" src="data:{mime};base64,{data}">')
            elif text:
                parts.append(_pre(text, "result"))
    parts.append("</section>")
    return "\n".join(parts)


def render(transcripts: Sequence[Transcript], format: ExportFormat, title: str) -> str:
    """The document in `format`."""
    match format:
        case "ipynb":
            return notebook_text(transcripts)
        case "py":
            return script(transcripts)
        case "md":
            return f"# {title}\n\n" + markdown(transcripts)
        case "html":
            return html(transcripts, title)
