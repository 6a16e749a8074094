"""Time formats of manifests (strftime, or Spark/Java ``DateTimeFormatter`` patterns) as strftime.

Kept apart from the Arrow converters: ``coord status`` reads event times from file names
with it and imports no Arrow.
"""
from __future__ import annotations

import re

from .errors import IngestError

# Java DateTimeFormatter letters (Spark's dateFormat/timestampFormat) → strftime
_JAVA_TOKENS = {
    "yyyy": "%Y", "yy": "%y", "MMMM": "%B", "MMM": "%b", "MM": "%m", "dd": "%d", "HH": "%H",
    "hh": "%I", "mm": "%M", "ss": "%S", "a": "%p", "EEE": "%a", "EEEE": "%A",
    "XXX": "%z", "XX": "%z", "X": "%z", "xxx": "%z", "Z": "%z", "ZZ": "%z",
}
_JAVA_PART = re.compile(r"'([^']*)'|(([A-Za-z])\3*)|(.)")


def to_strftime(fmt: str) -> str:
    """A time format as strftime; Spark/Java patterns (``yyyy-MM-dd HH:mm``) are translated."""
    if "%" in fmt:
        return fmt
    out = []
    for literal, letters, _, other in _JAVA_PART.findall(fmt):
        if letters:
            if letters not in _JAVA_TOKENS:
                raise IngestError(f"time format {fmt!r}: unsupported pattern letters {letters!r} "
                                  f"(use strftime, e.g. %Y-%m-%d, or yyyy MM dd HH mm ss)")
            out.append(_JAVA_TOKENS[letters])
        else:
            out.append(literal if literal or not other else other)
    return "".join(out)
