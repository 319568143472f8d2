"""ImageStore owns the images of one execution: what each image is, and where its bytes are kept.

`decode_image` turns one base64 entry of a display bundle into an `Image` when its bytes really
are the format it claims: PNG, JPEG, WEBP, or a GIF with a single frame (the formats MCP hosts
show a model). Anything else gets a short reason instead, for the note that replaces it.

An `ImageStore` keeps an execution's images by ordinal (1, 2, ... in the order they were
shown). Like an `OutputLog`, it keeps bytes in memory while the execution's images are small
and writes each further image to a spill file of its own (mode 0600, in the same private
directory, counted by the same `Spill.on_write`), so the output limit covers images too. An
image whose file cannot be written (a full disk) stays in memory (the cell's output cap bounds
it) and `Spill.on_full` is told. `drop()` frees them; every later read raises `OutputDropped`.
"""

from __future__ import annotations

import base64
import binascii
import struct
from collections.abc import Callable
from dataclasses import dataclass

# The output log's spill file: written once here, read through a fresh descriptor each time.
from warmkernel.execution.spill import FileBody, OutputDropped, Spill

IMAGE_TYPES = ("image/png", "image/jpeg", "image/webp", "image/gif")
"""The formats delivered as images, in the order one is chosen from a bundle holding several."""


@dataclass(frozen=True)
class Image:
    mime: str
    data: bytes
    width: int | None = None
    height: int | None = None
    """Pixel size read from the header; None when the header does not say it plainly."""


@dataclass(frozen=True)
class StoredImage:
    """What is known about an image without reading its bytes."""

    ordinal: int
    """1-based, in the order the execution showed its images."""
    mime: str
    size: int
    """Bytes of the decoded image."""
    width: int | None
    height: int | None

    @property
    def caption(self) -> str:
        """The line that stands for the image in the `result` stream."""
        pixels = f" {self.width}x{self.height}" if self.width is not None and self.height is not None else ""
        return f"[image {self.ordinal}: {self.mime}{pixels}, {self.size:,} bytes]"


def decode_image(mime: str, value: object) -> Image | str:
    """The image a bundle entry holds, or why it is not one that can be delivered."""
    if not isinstance(value, str):
        return "not base64 text"
    try:
        data = base64.b64decode(value)  # line breaks and other non-alphabet characters are skipped
    except (binascii.Error, ValueError):
        return "not valid base64"
    sniff = _SNIFFERS.get(mime)
    if sniff is None:
        return "not an image format that can be shown"
    facts = sniff(data)
    if facts is None:
        return f"its bytes are not {mime}"
    if isinstance(facts, str):
        return facts
    return Image(mime, data, *facts)


def decode_png(data: bytes) -> Image | None:
    """PNG bytes a renderer made, as an image; None when they are not a PNG."""
    facts = _png(data)
    return Image("image/png", data, *facts) if facts is not None else None


_Pixels = tuple[int | None, int | None]


def _png(data: bytes) -> _Pixels | None:
    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        return None
    if len(data) >= 24 and data[12:16] == b"IHDR":
        return struct.unpack(">II", data[16:24])
    return None, None


# JPEG start-of-frame markers carry the size; C4 (Huffman), C8 and CC (arithmetic) do not.
_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def _jpeg(data: bytes) -> _Pixels | None:
    if not data.startswith(b"\xff\xd8\xff"):
        return None
    at = 2
    while at + 9 <= len(data) and data[at] == 0xFF:
        marker = data[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        if marker in _SOF:
            height, width = struct.unpack(">HH", data[at + 5 : at + 9])
            return width, height
        (length,) = struct.unpack(">H", data[at + 2 : at + 4])
        at += 2 + length
    return None, None


def _webp(data: bytes) -> _Pixels | None:
    if len(data) < 16 or data[:4] != b"RIFF" or data[8:12] != b"WEBP":
        return None
    chunk = data[12:16]
    if chunk == b"VP8 " and len(data) >= 30:
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L" and len(data) >= 25:
        (bits,) = struct.unpack("<I", data[21:25])
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X" and len(data) >= 30:
        return int.from_bytes(data[24:27], "little") + 1, int.from_bytes(data[27:30], "little") + 1
    return None, None


def _gif(data: bytes) -> _Pixels | str | None:
    if data[:6] not in (b"GIF87a", b"GIF89a") or len(data) < 13:
        return None
    frames = _gif_frames(data)
    if frames > 1:
        return f"an animated GIF ({frames}+ frames); only single-frame images are shown"
    width, height = struct.unpack("<HH", data[6:10])
    return width, height


def _gif_frames(data: bytes) -> int:
    """How many image descriptors the GIF holds, counting no further than 2."""
    at = 13 + (3 << ((data[10] & 0x07) + 1) if data[10] & 0x80 else 0)  # past the global colour table

    def skip_sub_blocks(at: int) -> int:
        while at < len(data) and data[at]:
            at += data[at] + 1
        return at + 1

    frames = 0
    while at < len(data) and frames < 2:
        block = data[at]
        if block == 0x2C:  # image descriptor: 9 bytes, a local colour table, LZW code size, data
            frames += 1
            flags = data[at + 9] if at + 9 < len(data) else 0
            at += 10 + (3 << ((flags & 0x07) + 1) if flags & 0x80 else 0)
            at = skip_sub_blocks(at + 1)
        elif block == 0x21:  # extension: label, then sub-blocks
            at = skip_sub_blocks(at + 2)
        else:  # 0x3B trailer, or bytes that are not a block
            break
    return frames


_SNIFFERS: dict[str, Callable[[bytes], _Pixels | str | None]] = {
    "image/png": _png,
    "image/jpeg": _jpeg,
    "image/webp": _webp,
    "image/gif": _gif,
}


class ImageStore:
    """An execution's images by ordinal: bytes in memory while small, in spill files past that."""

    def __init__(self, spill: Spill | None = None) -> None:
        self._spill = spill
        self._images: list[StoredImage] = []
        self._bodies: list[bytes | FileBody] = []
        self._in_memory = 0
        self._dropped = False

    def add(self, image: Image) -> StoredImage:
        """Keep an image; it gets the next ordinal."""
        if self._dropped:
            raise RuntimeError("cannot add an image to an execution whose output was dropped")
        stored = StoredImage(len(self._images) + 1, image.mime, len(image.data), image.width, image.height)
        spill = self._spill
        spill = self._spill
        over = spill is not None and self._in_memory + stored.size > spill.threshold_bytes
        body = self._spilled(spill, stored.ordinal, image.data) if spill is not None and over else None
        if body is None:
            self._bodies.append(image.data)
            self._in_memory += stored.size
        else:
            self._bodies.append(body)
        self._images.append(stored)
        return stored

    @staticmethod
    def _spilled(spill: Spill, ordinal: int, data: bytes) -> FileBody | None:
        """The image's bytes in a spill file of their own, counted; None (and no file) when the
        write fails, which `Spill.on_full` is told."""
        try:
            body = FileBody.holding(spill.directory, f"{spill.prefix}image-{ordinal}-", data)
        except OSError as exc:
            spill.on_full(exc)
            return None
        body.close()
        spill.on_write(len(data))
        return body

    @property
    def images(self) -> list[StoredImage]:
        """Every image, in ordinal order."""
        return list(self._images)

    def __len__(self) -> int:
        return len(self._images)

    def read(self, ordinal: int) -> bytes:
        """The bytes of image `ordinal` (1-based); `OutputDropped` once they were dropped."""
        if self._dropped:
            raise OutputDropped
        body = self._bodies[ordinal - 1]
        if isinstance(body, bytes):
            return body
        return bytes(body.read(0, self._images[ordinal - 1].size))

    @property
    def dropped(self) -> bool:
        return self._dropped

    def drop(self) -> int:
        """Throw every image away; returns the spill-file bytes freed."""
        self._dropped = True
        freed = 0
        for stored, body in zip(self._images, self._bodies, strict=True):
            if isinstance(body, FileBody):
                body.remove()
                freed += stored.size
        self._bodies = []
        return freed
