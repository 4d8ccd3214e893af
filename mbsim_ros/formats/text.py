"""Model file bytes -> text, or a ModelError naming the file, line and byte offset."""
from __future__ import annotations

from ..model import ModelError


def decode_text(data: bytes, path: str, encodings=("utf-8",), what="text") -> str:
    """`data` decoded by the first of `encodings` that fits (a UTF-8 byte order mark is
    dropped); where none does, a ModelError at the first byte UTF-8 cannot decode."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    for encoding in encodings:
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            pass
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        at = exc.start
        line = data.count(b"\n", 0, at) + 1
        raise ModelError(f"{path}:{line}: byte 0x{data[at]:02x} at byte offset {at} is not "
                         f"{' or '.join(e.upper().replace('_', '-') for e in encodings)} text; expected a "
                         f"{what} file in UTF-8") from None
    raise AssertionError("unreachable: the UTF-8 decode above failed first")
