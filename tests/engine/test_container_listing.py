"""Listing a workspace's engine containers while one of them is being removed (the reaper, at
every command): Podman answers the inspection of the removed one with 500, not Docker's 404."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import docker
import pytest

from coordinator.engine.container import workspace_containers

GONE = "container 4bd2e58b does not exist in database: no such container"


class Containers:
    """The SDK's ``containers`` of an API that fails the first ``fails`` listings."""

    def __init__(self, fails: int, explanation: str = GONE):
        self.fails, self.explanation, self.calls = fails, explanation, 0

    def list(self, **filters):
        self.calls += 1
        if self.calls <= self.fails:
            raise docker.errors.APIError("500 Server Error", explanation=self.explanation)
        return ["engine-1"]


def test_a_container_removed_while_listed_is_listed_again_without_it():
    containers = Containers(fails=1)
    assert workspace_containers(SimpleNamespace(containers=containers), Path("/ws")) == ["engine-1"]
    assert containers.calls == 2


def test_another_api_error_is_not_hidden():
    client = SimpleNamespace(containers=Containers(fails=1, explanation="disk full"))
    with pytest.raises(docker.errors.APIError, match="disk full"):
        workspace_containers(client, Path("/ws"))


def test_an_api_that_keeps_failing_is_not_asked_forever():
    containers = Containers(fails=10)
    with pytest.raises(docker.errors.APIError):
        workspace_containers(SimpleNamespace(containers=containers), Path("/ws"))
    assert containers.calls == 3
