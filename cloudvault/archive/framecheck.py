"""Which frames of a recorded zstd frame table still decode, each on its own, from the archive as it is now."""

from __future__ import annotations

from typing import BinaryIO

import zstandard

from cloudvault.archive.reader import MAX_WINDOW
from cloudvault.archive.zip import ZipFormatError, is_record, record_chunks
from cloudvault.models import Frame

READ = 1 << 20


class _Slice:
    """n bytes of fh from where it stands: one frame's compressed bytes, as zstd's stream reader reads them."""

    def __init__(self, fh: BinaryIO, n: int) -> None:
        self._fh, self._left = fh, n

    def read(self, size: int = -1) -> bytes:
        size = self._left if size < 0 else min(size, self._left)
        data = self._fh.read(size)
        self._left -= len(data)
        return data


def _decoded_size(fh: BinaryIO, frame: Frame) -> int:
    if is_record(fh, frame):  # a zip's frames are its members' local records
        try:
            return sum(len(chunk) for chunk in record_chunks(fh, frame, check_crc=True))
        except ZipFormatError as exc:
            raise zstandard.ZstdError(f"zip member: {exc}") from None
    fh.seek(frame.comp_offset)
    dctx = zstandard.ZstdDecompressor(max_window_size=MAX_WINDOW)
    got = 0
    with dctx.stream_reader(_Slice(fh, frame.comp_size), read_across_frames=False, closefd=False) as reader:
        while chunk := reader.read(READ):
            got += len(chunk)
    return got


def frame_damage(fh: BinaryIO, frames: list[Frame], file_size: int) -> dict[int, str]:
    """frame index -> why it no longer decodes to what was recorded (cut off, a zstd error, another size); a frame
    not named decodes whole, its checksum (where it has one) checked, to its recorded size."""
    bad: dict[int, str] = {}
    for i, frame in enumerate(frames):
        if frame.comp_offset + frame.comp_size > file_size:
            bad[i] = f"cut off: the file ends at byte {file_size}"
            continue
        try:
            got = _decoded_size(fh, frame)
        except zstandard.ZstdError as exc:
            bad[i] = f"zstd: {exc}"
            continue
        if got != frame.raw_size:
            bad[i] = f"decodes to {got} bytes, {frame.raw_size} recorded"
    return bad
