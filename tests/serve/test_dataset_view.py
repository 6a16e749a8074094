"""What the API shows of a served dataset changes in one step: a build's new records never
show beside the error that build cleared.

A real service on a real workspace, in this process, so that the API's answer can be read at
the worst moment: right after a pull committed and before the service took in its outcome.
"""
from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable

from coordinator.build.pull import pull_one
from coordinator.serve import build_service
from coordinator.serve.answers import Answers
from coordinator.serve.build_service import BuildService
from coordinator.serve.events import EventBus
from coordinator.workspace import Workspace

from .conftest import add_root, drop_csv, init_workspace

EMPTY = "t.empty"


def until(check: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"no {what} within {timeout:g} s"
        time.sleep(0.05)


def test_the_answer_read_between_a_commit_and_its_outcome_is_the_previous_view_whole(tmp_path, monkeypatch):
    home = init_workspace(tmp_path)
    add_root(home, EMPTY, "empty")  # no file yet: its pulls fail until one comes
    ws = Workspace.open(home)
    service = BuildService(ws, ws.config().serve, EventBus())
    answers = Answers(ws, service)
    read_between: list[dict] = []

    def pull_then_read(ws_, dataset_id, engine):
        outcome = pull_one(ws_, dataset_id, engine)
        if outcome.blocks:  # committed: the head on disk is new, the service has not heard yet
            read_between.append(json.loads(asyncio.run(answers.dataset(dataset_id))))
        return outcome

    monkeypatch.setattr(build_service, "pull_one", pull_then_read)
    service.start()
    try:
        until(lambda: (v := service.view(EMPTY)) is not None and v.failure is not None, "failed pull")
        drop_csv(home / "empty", "a.csv", [(9, "zed")])
        service.request(EMPTY)
        until(lambda: json.loads(asyncio.run(answers.dataset(EMPTY)))["records"] == 1, "new record")
    finally:
        service.stop()

    [between] = read_between
    assert (between["records"], between["state"]) == (0, "running")
    assert "no files match" in between["lastError"]["message"]
    after = json.loads(asyncio.run(answers.dataset(EMPTY)))
    assert (after["records"], after["lastError"], after["head"]) == (1, None, ws.dataset(EMPTY).head().hex())
