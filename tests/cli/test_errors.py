"""How the CLI words failures: the user's errors as one line, our bugs as internal errors."""
from __future__ import annotations

import pytest

from coordinator.cli.main import INTERNAL_ERROR, main
from coordinator.errors import CoordError
from coordinator.workspace import DatasetNotFound


def run(argv, capsys) -> tuple[int, str]:
    with pytest.raises(SystemExit) as e:
        main(argv)
    return e.value.code, capsys.readouterr().err


def test_a_domain_error_is_one_line_with_exit_1(tmp_path, capsys):
    code, err = run(["-w", str(tmp_path), "list"], capsys)
    assert code == 1 and err.startswith("coord: error: ") and err.count("\n") == 1


def test_every_domain_error_is_a_coord_error():
    assert issubclass(DatasetNotFound, CoordError)


def test_a_bug_is_reported_as_an_internal_error_with_its_own_exit_code(tmp_path, capsys, monkeypatch):
    import coordinator.cli.list as list_command

    def broken(ctx):
        raise KeyError("oops")

    monkeypatch.setattr(list_command, "workspace", broken)
    code, err = run(["-w", str(tmp_path), "list"], capsys)
    assert code == INTERNAL_ERROR
    assert err.startswith("coord: internal error: KeyError: 'oops'") and "--debug" in err
