"""The numeric fields of tar headers and old GNU sparse maps: octal digits, or GNU base-256 (high bit set)."""

from __future__ import annotations


def parse_number(field: bytes) -> int:
    """An octal field, or GNU base-256 when the high bit of the first byte is set."""
    if field and field[0] & 0x80:
        value = int.from_bytes(field, "big") & ~(0x80 << (8 * (len(field) - 1)))
        return value - (1 << (8 * len(field) - 1)) if field[0] == 0xFF else value
    digits = field.partition(b"\0")[0].strip(b" ")
    if not digits:
        return 0
    if not digits.isdigit() or not digits.isascii():  # int() would take a sign, '_' or inner spaces
        raise ValueError(f"not an octal number: {digits[:20]!r}")
    return int(digits, 8)
