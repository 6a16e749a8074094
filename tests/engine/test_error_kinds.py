"""The wire's ``Error.Kind`` becomes the port's ``EngineErrorKind`` of the same name (no engine)."""
from __future__ import annotations

from coordinator.engine.client import _engine_error, pb
from coordinator.engine.port import EngineError, EngineErrorKind


def test_every_kind_on_the_wire_is_an_engine_error_kind_printed_as_its_name():
    for name, number in pb.Error.Kind.items():
        error = _engine_error(pb.Error(kind=number, message="it broke"))
        assert error.kind is EngineErrorKind[name]
        assert str(error) == f"{name}: it broke"


def test_a_kind_given_by_its_text_is_the_enum_member():
    assert EngineError("UNAVAILABLE", "gone").kind is EngineErrorKind.UNAVAILABLE
