"""Turning failures into the contract's Error message: Spark's own words and the SQL position."""
from __future__ import annotations

import re
from collections.abc import Callable

from pyspark.errors import AnalysisException, ParseException, StreamingQueryException

from .generated import engine_pb2 as pb

Kind = pb.Error.Kind

# Spark appends the analysed logical plan to an AnalysisException's text after ";\n" (a
# streaming plan's nodes start with "~"); the user wants the sentence, not the plan.
_PLAN_SUFFIX = re.compile(r";\n['~]?[A-Z].*", re.DOTALL)
# Spark's words when an aggregation's time column carries no watermark, and what to do: the
# usual case is a second window over the first one's window.end, a plain timestamp.
_NO_WATERMARK = "aggregations without watermark"
_NO_WATERMARK_HINT = (
    " Group by a window over a column that carries a watermark: an input's event time, a join's"
    " output of one, or window_time(window) of an earlier window (not window.end)."
)
_PARSE_POSITION = re.compile(r"\(line (\d+), pos (\d+)\)")
# Where Spark's analysis error says it is, in the SQL Spark planned: the SourcePosition says it
# in the user's.
_ANALYSIS_POSITION = re.compile(r"; line \d+ pos \d+$")


class EngineFailure(Exception):
    """A failure to report to the coordinator as an Error result."""

    def __init__(self, kind: int, message: str, position: pb.SourcePosition | None = None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.position = position

    def to_proto(self) -> pb.Error:
        error = pb.Error(kind=self.kind, message=self.message)
        if self.position is not None:
            error.position.CopyFrom(self.position)
        return error


def query_failure(exc: Exception, step: int, alias: str, sql: str,
                  at: Callable[[int], int] = lambda offset: offset) -> EngineFailure:
    """An error raised while planning step ``step`` (text ``sql``) of the user's query; ``at``
    maps an offset in the SQL Spark planned (a rewrite of ``sql``) to one in ``sql``."""
    if isinstance(exc, ParseException):
        # the sentence, on one line: the position goes in the SourcePosition, and Spark's
        # "== SQL ==" picture of the statement would repeat the query in the error
        message = " ".join(str(exc).split("== SQL ==")[0].split())
        position = pb.SourcePosition(step=step, alias=alias)
        match = _PARSE_POSITION.search(message)
        if match:
            position.line, position.column = int(match.group(1)), int(match.group(2))
        return EngineFailure(Kind.INVALID_QUERY, message, position)
    if isinstance(exc, AnalysisException):
        message = _ANALYSIS_POSITION.sub("", _PLAN_SUFFIX.sub("", str(exc)).strip())
        return EngineFailure(Kind.INVALID_QUERY, message, _context_position(exc, step, alias, sql, at))
    return EngineFailure(Kind.INTERNAL, f"{type(exc).__name__}: {exc}")


def run_failure(exc: Exception) -> EngineFailure:
    """An error raised while the streaming query ran (or was being started)."""
    if isinstance(exc, StreamingQueryException):
        # The first paragraph names the cause; the rest is the query's plan.
        return EngineFailure(Kind.EXECUTION, str(exc).split("\n===")[0].strip())
    if isinstance(exc, AnalysisException):
        # Raised by start(): the query is valid SQL but not a valid streaming query
        # (for example an aggregation without a watermark).
        message = _PLAN_SUFFIX.sub("", str(exc)).strip()
        if _NO_WATERMARK in message:
            message += _NO_WATERMARK_HINT
        return EngineFailure(Kind.INVALID_QUERY, message)
    return EngineFailure(Kind.INTERNAL, f"{type(exc).__name__}: {exc}")


def _context_position(exc: AnalysisException, step: int, alias: str, sql: str, at: Callable[[int], int]):
    contexts = [c for c in exc.getQueryContext() if c.startIndex() >= 0]
    if not contexts:
        return pb.SourcePosition(step=step, alias=alias, column=-1)
    start, stop = at(contexts[0].startIndex()), at(contexts[0].stopIndex())
    line_start = sql.rfind("\n", 0, start) + 1
    return pb.SourcePosition(
        step=step,
        alias=alias,
        line=sql.count("\n", 0, start) + 1,
        column=start - line_start,
        fragment=sql[start:stop + 1],
    )
