"""Replies to list_python_variables and inspect_python_variable: a table of the user's variables,
and one variable's summary as a gist line and JSON."""

from __future__ import annotations

import json
from typing import Any

from warmkernel.kernel.inspector import Summary, VariableListing
from warmkernel.replies.hints import call
from warmkernel.replies.reply import Reply, clip, columns, counted, size


def _extent(facts: dict[str, Any]) -> str:
    shape, length = facts.get("shape"), facts.get("length")
    if isinstance(shape, list):
        return "x".join(str(n) for n in shape) or "scalar"
    return f"len {length}" if isinstance(length, int) else ""


def variables_reply(listing: VariableListing) -> Reply:
    """A table of the user's variables, one per line."""
    rows = listing["variables"]
    table = [("name", "type", "size (shallow)", "shape/len", "In")] + [
        (
            row["name"],
            clip(row["type"], 48),
            size(row["size_bytes"]),
            _extent(dict(row)),
            str(row["execution"]) if row["execution"] is not None else "",
        )
        for row in rows
    ]
    lines = columns(table)
    notes = [counted(listing["total"], "variable")]
    if listing["total"] > len(rows):
        notes.append(f"the first {len(rows)} by name are shown")
    if listing["imports_hidden"]:
        more = call("list_python_variables", include_imports=True)
        notes.append(f"{counted(listing['imports_hidden'], 'import')} not listed ({more} lists them)")
    if listing["summary_status"] == "timeout":
        notes.append("sizes and shapes ran out of time; the rows without them show ?")
    if not rows:
        lines = []
    footer = "; ".join(notes) + f". {call('inspect_python_variable', name='NAME')} summarizes one."
    return Reply("\n".join([*_mid_run(listing.get("during_execution")), *lines, footer]), dict(listing))


def _mid_run(number: int | None) -> list[str]:
    """The note of an answer made beside a running cell."""
    if number is None:
        return []
    return [f"note: In [{number}] is running; these values may be mid-update"]


def summary_reply(summary: Summary) -> Reply:
    """A one-line gist of a variable summary, then the summary itself as JSON."""
    gist = [f"{summary['name']}: {summary['type']}"]
    if extent := _extent(summary):
        gist.append(extent)
    gist.append(f"{size(summary['size_bytes'])} shallow")
    if summary.get("deep_size_bytes") is not None:
        gist.append(f"{size(summary['deep_size_bytes'])} deep")
    if summary.get("execution") is not None:
        gist.append(f"bound by In [{summary['execution']}]")
    if summary["summary_status"] == "timeout":
        gist.append(f"summary timed out after {summary.get('budget_s')} s: type and size only")
    lines = [*_mid_run(summary.get("during_execution")), " · ".join(gist), _json_text(summary)]
    return Reply("\n".join(lines), summary)


def _json_text(data: dict[str, Any]) -> str:
    """Valid JSON with one top-level key per line, and one item per line for lists and dicts of
    containers; everything deeper stays on its line."""

    def compact(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False)

    def nested(value: Any) -> str:
        if isinstance(value, dict) and any(isinstance(item, dict | list) for item in value.values()):
            items = [f"  {compact(key)}: {compact(item)}" for key, item in value.items()]
            return "{\n" + ",\n".join(items) + "\n }"
        if isinstance(value, list) and any(isinstance(item, dict | list) for item in value):
            return "[\n" + ",\n".join(f"  {compact(item)}" for item in value) + "\n ]"
        return compact(value)

    return "{\n" + ",\n".join(f" {compact(key)}: {nested(item)}" for key, item in data.items()) + "\n}"
