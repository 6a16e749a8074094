"""How the CLI words failures: the user's errors as one line, our bugs as internal errors."""
from __future__ import annotations

import pytest

from coordinator.cli.main import INTERNAL_ERROR, main
from coordinator.errors import CoordError
from coordinator.workspace import DatasetNotFound, Workspace
from coordinator.workspace.config import OdfVersion

from ..support.cli import coord_here
from ..support.manifests import derivative_manifest
from ..support.odf39_datasets import write_root


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


def test_a_query_refused_at_add_replace_names_the_manifest_its_place_and_the_dataset(tmp_path):
    ws = Workspace.init(tmp_path, OdfVersion.V039)
    write_root(ws.meta / "datasets" / "cities", ws.meta / "locks", tmp_path / "scratch")
    manifest = tmp_path / "big.yaml"
    manifest.write_text(derivative_manifest("big", ["cities"], "SELECT event_time, city FROM cities"))
    coord_here("add", str(manifest), cwd=tmp_path)
    coord_here("pull", "big", cwd=tmp_path, fake_engine=True)
    manifest.write_text(derivative_manifest("big", ["cities"], "SELECT event_time, town FROM cities"))
    refused = coord_here("add", "--replace", str(manifest), cwd=tmp_path, fake_engine=True, check=False)
    assert refused.returncode == 1
    assert refused.stderr.startswith(f"coord: error: {manifest}: content.source.transform: dataset "
                                     "big: the engine refuses the new query (INVALID_QUERY")
    assert refused.stderr.rstrip().endswith("the dataset keeps its query: fix this one and add the "
                                            "manifest again")
    assert refused.stderr.count("\n") == 1
