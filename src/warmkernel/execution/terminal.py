"""Owns `TerminalNormalizer`: the lines a terminal would show for one stream's raw text.

A kernel's stdout or stderr is written for a terminal: progress bars redraw with `\\r`,
spinners step back with `\\b`, colours and titles travel as escape sequences. The
normalizer renders that text into plain lines as a terminal would, one chunk at a time,
with a result that never depends on how the stream was cut into chunks.

The model is one line wide: a cursor on the open line, which `\\r`, `\\b` and erase-in-line
(CSI `K`) move or clear. Every other escape sequence, and every control character but `\\n`
and `\\t`, is removed. One character is one column (no wide or combining characters).
"""

from __future__ import annotations

import re

MAX_SEQUENCE_BODY = 4096
"""Most characters an escape sequence's body (parameters or payload) may have.

A sequence whose body runs past this length without ending (an OSC never terminated, say)
is garbage: its introducer and first `MAX_SEQUENCE_BODY` body characters are dropped and
what follows is read afresh as ordinary text. So a stray `ESC ]` cannot swallow the rest of
the stream, and a sequence pending between chunks stays small. The rule counts characters,
not chunks, so it holds however the text was split.
"""

# Everything that is not plain text, except `\n` (split in bulk) and `\t` (kept as a column):
# C0 controls, DEL and C1 controls. Text without a match takes the fast path.
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")

# A run of text the parser can take in bulk, starting in the ground state: plain text, and
# controls that leave the rendering alone there: a complete ESC-form CSI other than erase in
# line (colours, mostly) and `\r` right before `\n`. Inside such a run an ESC can only open
# one of those CSIs and a `\r` only precede a `\n`, so `_INERT` strips exactly them. Coloured
# logs and CRLF output thus cost a few C-level passes per chunk instead of a loop per control.
_INERT_CSI = rf"\x1b\[[\x20-\x3f]{{0,{MAX_SEQUENCE_BODY}}}[\x40-\x4a\x4c-\x7e]"
_GROUND_RUN = re.compile(r"(?:[^\x00-\x08\x0b-\x1f\x7f-\x9f]+|" + _INERT_CSI + r"|\r\n)*")
_INERT = re.compile(_INERT_CSI + r"|\r")

# The characters that open an escape sequence: ESC and the 8-bit C1 CSI, OSC, DCS, SOS, PM, APC.
INTRODUCERS = frozenset("\x1b\x9b\x9d\x90\x98\x9e\x9f")

# One escape sequence, anchored at its introducer. Each alternative has a `<kind>` body group
# and an optional `<kind>_end` group; no end means the sequence is incomplete (text ran out)
# or aborted (a character that cannot continue it). Bodies match one character past the cap
# so an over-long sequence is recognised without scanning the rest of the text.
_BODY = f"{{0,{MAX_SEQUENCE_BODY + 1}}}"
_SEQUENCE = re.compile(
    # CSI: parameters and intermediates (xterm accepts them in any order), then a final byte.
    r"(?:\x1b\[|\x9b)(?P<csi>[\x20-\x3f]" + _BODY + r")(?P<csi_end>[\x40-\x7e])?"
    # OSC: ends with BEL or ST (ESC \ or U+009C).
    r"|(?:\x1b\]|\x9d)(?P<osc>[^\x07\x1b\x9c]" + _BODY + r")(?P<osc_end>\x07|\x9c|\x1b\\)?"
    # DCS, SOS, PM, APC: end with ST only; a BEL inside is payload.
    r"|(?:\x1b[PX^_]|[\x90\x98\x9e\x9f])(?P<str>[^\x1b\x9c]" + _BODY + r")(?P<str_end>\x9c|\x1b\\)?"
    # Any other ESC sequence: intermediates, then one final byte (ESC 7, ESC ( B, ESC =).
    r"|\x1b(?P<esc>[\x20-\x2f]" + _BODY + r")(?P<esc_end>[\x30-\x7e])?"
)
_KINDS = ("csi", "osc", "str", "esc")

# Erase in line (CSI Ps K) by parameter: 0 = cursor to end, 1 = start to cursor, 2 = whole line.
_ERASE_MODES = {"": 0, "0": 0, "1": 1, "2": 2}


class TerminalNormalizer:
    """Turns raw terminal text of one stream into the lines a terminal would show."""

    def __init__(self) -> None:
        # The open line is `_base` overwritten, from column `_start`, by the pieces in `_tail`;
        # the cursor sits at `_start + _tail_len`. Plain writes only append a piece, so a long
        # line fed in many chunks is joined once, when it is read; a cursor move first
        # settles the pieces into `_base`.
        self._base = ""
        self._start = 0
        self._tail: list[str] = []
        self._tail_len = 0
        # An escape sequence cut off by the end of the last chunk, read again with the next.
        self._pending = ""

    def feed(self, text: str) -> list[str]:
        """Consume a chunk; return the lines completed by it (without the trailing "\\n")."""
        lines: list[str] = []
        if self._pending:
            text = self._pending + text
            self._pending = ""
        if CONTROL.search(text) is None:
            self._write(text, lines)
            return lines
        position = 0
        while True:
            control = CONTROL.search(text, position)
            found = len(text) if control is None else control.start()
            segment = text[position:found]
            if control is not None and text[found] in "\x1b\r":
                run = _GROUND_RUN.match(text, found)
                assert run is not None  # the pattern matches the empty string
                if run.end() > found:
                    segment = _INERT.sub("", text[position : run.end()])
                    found = run.end()
            if segment:
                self._write(segment, lines)
            if found == len(text):
                return lines
            char = text[found]
            position = found + 1
            if char == "\r":
                self._settle()
                self._start = 0
            elif char == "\b":
                self._settle()
                if self._start:
                    self._start -= 1
            elif char in INTRODUCERS:
                resume = self._sequence(text, found)
                if resume is None:
                    self._pending = text[found:]
                    return lines
                position = resume
            # Any other control character (a lone ST included) is dropped.

    @property
    def open_line(self) -> str:
        """The unterminated current line as it renders right now ("" if none)."""
        self._settle()
        return self._base

    def flush(self) -> str | None:
        """End of stream: return the open line if it is non-empty (and reset), else None."""
        line = self._take_line()
        self._pending = ""  # an escape sequence the stream never finished shows nothing
        return line or None

    def _write(self, text: str, lines: list[str]) -> None:
        """Write text free of control characters except `\\n` and `\\t` at the cursor."""
        if "\n" not in text:
            self._append(text)
            return
        parts = text.split("\n")
        self._append(parts[0])
        lines.append(self._take_line())
        lines.extend(parts[1:-1])  # whole lines on a fresh line render as themselves
        self._append(parts[-1])

    def _append(self, piece: str) -> None:
        if piece:
            self._tail.append(piece)
            self._tail_len += len(piece)

    def _render(self) -> str:
        if not self._tail:
            return self._base
        body = "".join(self._tail)
        # Text written past the end of the line (possible after an erase) is preceded by blanks.
        head = self._base[: self._start].ljust(self._start)
        return head + body + self._base[self._start + self._tail_len :]

    def _settle(self) -> None:
        """Fold the written pieces into `_base`, before the cursor moves or the line is read."""
        if self._tail:
            self._base = self._render()
            self._start += self._tail_len
            self._tail = []
            self._tail_len = 0

    def _take_line(self) -> str:
        line = self._render()
        self._base = ""
        self._start = 0
        self._tail = []
        self._tail_len = 0
        return line

    def _sequence(self, text: str, at: int) -> int | None:
        """Consume the escape sequence opening at `at`: where to read on, or None if incomplete."""
        match = _SEQUENCE.match(text, at)
        assert match is not None  # every introducer opens an alternative whose body may be empty
        kind = next(kind for kind in _KINDS if match.start(kind) >= 0)
        body_start, body_end = match.span(kind)
        if body_end - body_start > MAX_SEQUENCE_BODY:
            return body_start + MAX_SEQUENCE_BODY  # garbage: see MAX_SEQUENCE_BODY
        end = match.group(kind + "_end")
        if end is not None:
            if kind == "csi" and end == "K":
                mode = _ERASE_MODES.get(match.group("csi"))
                if mode is not None:
                    self._erase(mode)
            return match.end()
        if body_end == len(text):
            return None
        # Aborted, as a terminal does: the sequence so far vanishes and the character that
        # broke it (a control, or the ESC of a new sequence) is read on its own. An ESC that
        # ends a string is thus over either way: if a `\` follows, the pair is an ST, removed.
        return body_end

    def _erase(self, mode: int) -> None:
        """Erase in line; the cursor stays where it is, even past the end of what is left."""
        self._settle()
        cursor = self._start
        if mode == 0:
            self._base = self._base[:cursor]
        elif mode == 1:
            blanks = min(cursor + 1, len(self._base))
            self._base = " " * blanks + self._base[blanks:]
        else:
            self._base = ""
