"""Caption readers (see :mod:`capaudit.io.readers.base`)."""

from capaudit.io.readers.base import READERS, detect_format, get_reader

__all__ = ["READERS", "detect_format", "get_reader"]
