"""One service per workspace: while it runs, the CLI reads but does not write."""
from __future__ import annotations

from ..support.cli import coord
from .conftest import add_root, drop_csv, serving


def test_cli_writes_are_refused_with_the_services_pid_while_reads_work(home):
    add_root(home, "t.people", "people")
    drop_csv(home / "people", "a.csv", [(1, "ann")])
    (home / "other.yaml").write_text((home / "t.people.yaml").read_text().replace("t.people", "t.other"))
    with serving(home) as served:
        served.wait_for(lambda: served.dataset("t.people")["records"] == 1)
        pid = served.proc.pid
        for args in (("pull", "t.people"), ("pull", "--all"), ("add", "other.yaml"),
                     ("delete", "t.people", "--yes"), ("reset", "t.people", "00")):
            result = coord(*args, cwd=home, check=False)
            assert result.returncode == 1, args
            assert result.stderr.strip().splitlines() == [
                f"coord: error: the workspace is served by PID {pid} (stop it or use its API)"], args
        assert "t.people" in coord("list", cwd=home).stdout
        assert "ann" in coord("tail", "t.people", cwd=home).stdout
        assert "up to date" in coord("status", cwd=home).stdout


def test_a_second_service_on_the_same_workspace_is_refused(home):
    with serving(home) as served:
        second = coord("serve", "--port", "0", cwd=home, check=False)
        assert second.returncode == 1
        assert f"served by PID {served.proc.pid}" in second.stderr


def test_sigterm_stops_the_service_and_frees_the_workspace(home):
    add_root(home, "t.people", "people")
    drop_csv(home / "people", "a.csv", [(1, "ann")])
    with serving(home) as served:
        served.wait_for(lambda: served.dataset("t.people")["records"] == 1)
        assert served.stop() == 0
    drop_csv(home / "people", "b.csv", [(2, "bob")])
    assert "1 new record" in coord("pull", "t.people", cwd=home).stdout
