"""Reading a user's source file, the same way for every command: the bytes,
then UTF-8 (a byte-order mark is dropped).  Problems come back as short
reasons (``cannot read file: …``, ``not valid UTF-8 (…)``) that each command
prints after the file's name, never as exceptions."""

from __future__ import annotations

from typing import Optional, Tuple


def read_bytes(path: str) -> Tuple[Optional[bytes], Optional[str]]:
    """(bytes, None), or (None, why the file cannot be read)."""
    try:
        with open(path, "rb") as f:
            return f.read(), None
    except IsADirectoryError:
        return None, "is a directory"
    except OSError as exc:
        return None, f"cannot read file: {exc.strerror or exc}"


def decode(data: bytes) -> Tuple[Optional[str], Optional[str]]:
    """(text, None), or (None, where the bytes stop being UTF-8)."""
    try:
        return data.decode("utf-8-sig"), None
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        return None, (f"not valid UTF-8 (byte 0x{data[exc.start]:02x} at line {line}); "
                      f"tilelint reads UTF-8 source only")


def read_text(path: str) -> Tuple[Optional[str], Optional[str]]:
    """(text, None), or (None, why): :func:`read_bytes` then :func:`decode`."""
    data, why = read_bytes(path)
    if data is None:
        return None, why
    return decode(data)
