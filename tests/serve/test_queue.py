"""The build queue: inputs before readers, one run per dataset however often it is marked,
a failing dataset held back until its retry is due."""
from __future__ import annotations

import pytest

from coordinator.serve.build_service import WorkQueue
from coordinator.workspace.config import Config, ConfigError

ORDER = ["a.root", "b.root", "c.joined", "d.report"]  # c reads a and b, d reads c


def drain(queue: WorkQueue, now: float = 0.0) -> list[str]:
    taken = []
    while (d := queue.take(now)) is not None:
        taken.append(d)
    return taken


def test_datasets_are_taken_in_dependency_order_whatever_order_they_were_marked_in():
    queue = WorkQueue(ORDER)
    queue.mark("d.report", "c.joined", "b.root", "a.root")
    assert drain(queue) == ORDER


def test_a_dataset_marked_several_times_before_it_runs_runs_once():
    queue = WorkQueue(ORDER)
    for _ in range(3):  # three commits of its input while it waited
        queue.mark("c.joined")
    assert drain(queue) == ["c.joined"]


def test_a_dataset_held_for_a_retry_waits_while_the_others_run():
    queue = WorkQueue(ORDER)
    queue.hold("a.root", until=10.0)
    queue.mark("b.root")
    assert drain(queue, now=5.0) == ["b.root"]
    assert queue.next_retry() == 10.0
    assert drain(queue, now=10.0) == ["a.root"]


def test_datasets_the_queue_does_not_know_are_ignored():
    queue = WorkQueue(ORDER)
    queue.mark("x.pulled-from-a-repository")
    assert drain(queue) == []


def test_durations_in_the_config_are_read_with_their_units():
    settings = Config.from_dict({"serve": {"poll": "5m", "engineIdle": "500ms",
                                           "datasets": {"a.root": {"poll": 2}}}}).serve
    assert (settings.poll_of("b.root").every_s, settings.poll_of("a.root").every_s) == (300.0, 2.0)
    assert settings.engine_idle_s == 0.5


@pytest.mark.parametrize("value", ["soon", "-5s", 0, "5 days"])
def test_a_bad_duration_names_the_setting(value):
    with pytest.raises(ConfigError, match=r"config.yaml: serve.poll: expected a positive duration"):
        Config.from_dict({"serve": {"poll": value}})
