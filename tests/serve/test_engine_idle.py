"""The service's warm engine stops once it has been idle for ``serve.engineIdle``: polls of
roots that find nothing new do not use it, so they do not keep it running. (The DuckDB test
engine stands in for Spark: what is tested is when the service closes its engine.)"""
from __future__ import annotations

import time

from tests.support.engines import ENV

from .conftest import add_derivative, add_root, drop_csv, init_workspace, serving


def engine_running(home) -> bool:
    return any((home / ".coord" / "run").glob("engine-*"))


def test_polls_of_roots_do_not_keep_the_idle_engine_running(tmp_path):
    home = init_workspace(tmp_path, "serve: {poll: 200ms, engineIdle: 2s}\n")
    add_root(home, "t.people", "people")
    add_derivative(home, "t.names", ["t.people"], "SELECT event_time, name FROM `t.people`")
    drop_csv(home / "people", "a.csv", [(1, "ann")])
    with serving(home, env={ENV: "fake"}) as served:
        served.wait_for(lambda: served.dataset("t.names")["records"] == 1, what="the derivative computed")
        assert engine_running(home)
        began = time.monotonic()
        served.wait_for(lambda: not engine_running(home), timeout=30, what="the idle engine stopped")
        assert time.monotonic() - began < 2 + 10  # its idle time, and room for a busy machine
        # ten polls a second of the root, none of which needed the engine


def test_each_pull_that_commits_is_a_line_of_the_services_log(tmp_path):
    home = init_workspace(tmp_path)
    add_root(home, "t.people", "people")
    drop_csv(home / "people", "a.csv", [(1, "ann"), (2, "bob")])
    with serving(home) as served:
        served.wait_for(lambda: served.dataset("t.people")["records"] == 2, what="the file ingested")
    log = served.proc.stderr.read()
    assert [line.split(" (")[0] for line in log.splitlines() if line.startswith("coord serve: t.people")] == \
        ["coord serve: t.people: 2 new records"], log
