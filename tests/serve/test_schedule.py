"""Roots polled on a schedule: every N seconds or at the times of a cron expression (UTC).

Next poll times are checked against times worked out by hand; one service, with its wall
clock set just before a cron time, shows a file is ingested at that time and not before."""
from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from coordinator.serve.build_service import BuildService
from coordinator.serve.events import EventBus
from coordinator.workspace import Workspace
from coordinator.workspace.config import Config, ConfigError, Schedule, ServeConfig

from .conftest import add_root, drop_csv, init_workspace

AT = datetime(2026, 11, 24, 12, 3, 20, tzinfo=UTC)


@pytest.mark.parametrize(("cron", "seconds"), [
    ("*/5 * * * *", 100),  # 12:05:00
    ("15 6 * * *", 18 * 3600 + 11 * 60 + 40),  # 06:15 the next day
    ("0 12 * * 1", 6 * 86400 - 200),  # Monday 12:00 (the 24th is a Tuesday)
])
def test_a_cron_schedule_fires_at_its_next_time(cron, seconds):
    assert Schedule(cron=cron).next_delay(AT) == seconds


def test_an_interval_schedule_fires_after_its_interval():
    assert Schedule(every_s=30.0).next_delay(AT) == 30.0


def test_a_cron_poll_is_read_from_the_config_and_written_back():
    doc = {"serve": {"poll": "10m", "datasets": {"a.root": {"poll": {"cron": "15  6 * * *"}}}}}
    settings = Config.from_dict(doc).serve
    assert settings.poll_of("a.root") == Schedule(cron="15 6 * * *")
    assert settings.poll_of("b.root") == Schedule(every_s=600.0)
    assert Config.from_dict(Config.from_dict(doc).to_dict()).serve == settings


@pytest.mark.parametrize("cron", ["*/5 * * *", "61 * * * *", "every monday", 5, "* * * * * *"])
def test_a_bad_cron_expression_names_the_setting(cron):
    with pytest.raises(ConfigError, match=r"config.yaml: serve.datasets.a.root.poll.cron: expected 5 fields"):
        Config.from_dict({"serve": {"datasets": {"a.root": {"poll": {"cron": cron}}}}})


def test_a_root_on_a_cron_schedule_is_polled_at_that_time_and_not_before(tmp_path):
    home = init_workspace(tmp_path)
    add_root(home, "t.people", "people")
    drop_csv(home / "people", "a.csv", [(1, "ann")])
    began = time.monotonic()
    fires = datetime(2026, 11, 24, 12, 5, tzinfo=UTC)
    start = fires - timedelta(seconds=8)  # the service's wall clock starts 8 s before 12:05
    wall = lambda: start + timedelta(seconds=time.monotonic() - began)  # noqa: E731
    settings = ServeConfig(poll=Schedule(every_s=3600.0),
                           poll_per_dataset={"t.people": Schedule(cron="*/5 * * * *")})
    ws = Workspace.open(home)
    service = BuildService(ws, settings, EventBus(), wall=wall)
    records = lambda: ws.dataset("t.people").state().num_records  # noqa: E731
    service.start()
    try:
        _wait(lambda: records() == 1, until=fires - timedelta(seconds=3), wall=wall)  # pulled at start
        drop_csv(home / "people", "b.csv", [(2, "bob")])
        while wall() < fires - timedelta(seconds=0.5):
            assert records() == 1  # not before 12:05
            time.sleep(0.05)
        _wait(lambda: records() == 2, until=fires + timedelta(seconds=10), wall=wall)
        drop_csv(home / "people", "c.csv", [(3, "cid")])
        time.sleep(2)
        assert records() == 2  # the next time is 12:10
    finally:
        service.stop()


def _wait(check, until: datetime, wall) -> None:
    while not check():
        assert wall() < until, f"not by {until:%H:%M:%S}"
        time.sleep(0.05)
