"""HTML to the text a model reads: no tags, scripts or styles; blocks, `<br>` and `<pre>` lines kept;
links as `text (url)`; tables laid out on a grid.

A table honours `colspan` and `rowspan`: each cell takes its place on a grid (a spanned cell's
text sits in its first column and row, the rest stays blank), so a pandas MultiIndex frame
lines up column by column. Columns are padded to their widest cell and joined by ` | `; the
header rows (those in `<thead>`, or a first run of rows made only of `<th>` cells) are followed
by a `---|---` rule. A table inside a cell is flattened into that cell's text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

_BLOCKS = frozenset(
    {
        *("address", "article", "aside", "blockquote", "br", "caption", "dd", "details", "div", "dl"),
        *("dt", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header"),
        *("hr", "li", "main", "nav", "ol", "p", "pre", "section", "summary", "ul"),
    }
)
_CELLS = frozenset({"td", "th"})
_ROW_GROUPS = frozenset({"thead", "tbody", "tfoot"})
_INVISIBLE = frozenset({"script", "style", "head", "title", "template"})
_MAX_SPAN = 1000
"""Larger spans are taken as this: a span is a layout hint, not a reason to build a huge grid."""


@dataclass
class Cell:
    text: str
    colspan: int = 1
    rowspan: int = 1
    header: bool = False


@dataclass
class Table:
    """The rows of one table as parsed, each a list of cells; `head_rows` of them are headers."""

    rows: list[list[Cell]] = field(default_factory=list)
    head_rows: int = 0
    in_head: bool = False


def grid(rows: list[list[Cell]]) -> list[list[str]]:
    """Cells placed as a browser places them: a rowspan holds its column in the rows below."""
    placed: list[list[str]] = []
    taken: dict[tuple[int, int], str] = {}
    for r, row in enumerate(rows):
        line: list[str] = []
        column = 0
        for cell in row:
            while (r, column) in taken:
                line.append(taken.pop((r, column)))
                column += 1
            for dc in range(cell.colspan):
                line.append(cell.text if dc == 0 else "")
                for dr in range(1, cell.rowspan):
                    taken[(r + dr, column + dc)] = ""
            column += cell.colspan
        while (r, column) in taken:
            line.append(taken.pop((r, column)))
            column += 1
        placed.append(line)
    return placed


def layout(table: Table) -> list[str]:
    """The table's lines: padded columns joined by ` | `, a rule under the header rows."""
    placed = grid(table.rows)
    keep = [i for i, row in enumerate(placed) if any(row)]
    if not keep:
        return []
    columns = max(len(row) for row in placed)
    widths = [max((len(row[c]) for row in placed if c < len(row)), default=0) for c in range(columns)]
    widths = [max(width, 1) for width in widths]
    lines: list[str] = []
    heads = table.head_rows
    for i in keep:
        row = placed[i] + [""] * (columns - len(placed[i]))
        lines.append(" | ".join(text.ljust(width) for text, width in zip(row, widths, strict=True)).rstrip())
        if i == heads - 1 and heads < len(placed):
            lines.append("-|-".join("-" * width for width in widths))
    return lines


def _span(value: str | None) -> int:
    try:
        return min(max(int(value or 1), 1), _MAX_SPAN)
    except ValueError:
        return 1


class _Reader(HTMLParser):
    """Collects the visible text: a line per block, a table laid out when it ends."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.lines: list[str] = []
        self._text: list[str] = []
        self._tables: list[Table] = []
        self._cell: Cell | None = None
        self._outer_cells: list[tuple[Cell | None, list[str]]] = []
        """For each open table, the cell and text it interrupted (a table inside a cell)."""
        self._links: list[str | None] = []
        self._link_start = 0
        self._hidden = 0
        self._pre = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _INVISIBLE:
            self._hidden += 1
        elif tag == "a":
            self._links.append(dict(attrs).get("href"))
            self._link_start = len(self._text)
        elif tag == "table":
            self._outer_cells.append((self._cell, self._text))
            if self._cell is None:
                self.end_line()
            self._tables.append(Table())
            self._cell, self._text = None, []
        elif not self._tables:
            self._block_start(tag)
        elif tag in _CELLS:
            self._end_cell()
            named = dict(attrs)
            self._cell = Cell("", _span(named.get("colspan")), _span(named.get("rowspan")), tag == "th")
            self._row().append(self._cell)
        elif tag == "tr":
            self._end_cell()
            table = self._tables[-1]
            table.rows.append([])
            if table.in_head:
                table.head_rows = len(table.rows)
        elif tag in _ROW_GROUPS:
            self._end_cell()
            self._tables[-1].in_head = tag == "thead"
        elif tag in _BLOCKS:
            self._text.append(" ")

    def handle_endtag(self, tag: str) -> None:
        if tag in _INVISIBLE:
            self._hidden = max(0, self._hidden - 1)
        elif tag == "a":
            self._end_link()
        elif tag == "table":
            self._end_table()
        elif not self._tables:
            self._block_end(tag)
        elif tag in _CELLS:
            self._end_cell()
        elif tag in _ROW_GROUPS:
            self._end_cell()
            self._tables[-1].in_head = False
        elif tag in _BLOCKS:
            self._text.append(" ")

    def handle_data(self, data: str) -> None:
        if self._hidden or (self._tables and self._cell is None):
            return  # text between table rows is not shown by a browser either
        if not self._pre:
            self._text.append(re.sub(r"\s+", " ", data))
            return
        first, *rest = data.split("\n")
        self._text.append(first)
        for line in rest:
            self.lines.append("".join(self._text).rstrip())
            self._text = [line]

    def _block_start(self, tag: str) -> None:
        if tag in _BLOCKS:
            self.end_line()
            if tag == "li":
                self._text.append("- ")
            elif tag == "pre":
                self._pre += 1

    def _block_end(self, tag: str) -> None:
        if tag in _BLOCKS:
            self.end_line()
            if tag == "pre":
                self._pre = max(0, self._pre - 1)

    def _end_link(self) -> None:
        if not self._links:
            return
        href = self._links.pop()
        label = "".join(self._text[self._link_start :]).strip() if self._link_start <= len(self._text) else ""
        if href and not href.startswith(("#", "javascript:")) and href != label:
            self._text.append(f" ({href})" if label else href)

    def _row(self) -> list[Cell]:
        table = self._tables[-1]
        if not table.rows:  # a cell before any <tr>
            table.rows.append([])
            if table.in_head:
                table.head_rows = 1
        return table.rows[-1]

    def _end_cell(self) -> None:
        if self._cell is not None:
            self._cell.text = " ".join("".join(self._text).split())
        self._cell, self._text = None, []

    def _end_table(self) -> None:
        if not self._tables:
            return
        self._end_cell()
        table = self._tables.pop()
        if not table.head_rows:
            table.head_rows = _leading_header_rows(table.rows)
        lines = layout(table)
        self._cell, self._text = self._outer_cells.pop()
        if self._cell is not None:
            self._text.append(" " + " / ".join(line for line in lines if set(line) - set("-|")) + " ")
        else:
            self.lines.extend(lines)

    def end_line(self) -> None:
        """Close the open line (and any table left open)."""
        while self._tables:
            self._end_table()
        text = "".join(self._text)
        text = text.rstrip() if self._pre else text.strip()
        if text:
            self.lines.append(text)
        self._text = []


def _leading_header_rows(rows: list[list[Cell]]) -> int:
    """Without a `<thead>`: the first rows made only of `<th>` cells, unless every row is."""
    count = 0
    for row in rows:
        if not row or not all(cell.header for cell in row):
            break
        count += 1
    return count if count < len(rows) else 0


def html_text(html: str) -> str:
    """Readable text of an HTML fragment (see the module docstring)."""
    reader = _Reader()
    reader.feed(html)
    reader.close()
    reader.end_line()
    return "\n".join(reader.lines)
