"""Fetch step: file and HTTP urls with validators, caching, globs, event times."""
import os
from datetime import UTC, datetime

import pytest

from coordinator.ingest import IngestError
from coordinator.ingest.fetch import fetch
from coordinator.metadata.objects import (
    EventTimeSourceFromMetadata,
    EventTimeSourceFromPath,
    FetchStepFilesGlob,
    FetchStepUrl,
    SourceCachingForever,
    SourceOrdering,
)
from coordinator.workspace.source_state import FetchState

from .conftest import write

JAN = datetime(2020, 1, 1, tzinfo=UTC)


def fetch_all(step, tmp_path, state=None):
    return fetch(step, root=tmp_path, scratch=tmp_path, state=state)


def test_http_fetch_downloads_and_remembers_etag(tmp_path, site):
    url = site.put("/a.csv", b"a\n1\n", etag='"v1"')
    [f] = fetch_all(FetchStepUrl(url=url), tmp_path)
    assert f.path.read_bytes() == b"a\n1\n" and f.state.etag == '"v1"'


def test_http_304_means_nothing_new(tmp_path, site):
    url = site.put("/a.csv", b"a\n", etag='"v1"')
    [f] = fetch_all(FetchStepUrl(url=url), tmp_path)
    assert fetch_all(FetchStepUrl(url=url), tmp_path, f.state) == []
    assert site.requests[-1]["If-None-Match"] == '"v1"'


def test_http_last_modified_is_sent_back_and_gives_the_event_time(tmp_path, site):
    url = site.put("/a.csv", b"a\n", modified=JAN.timestamp())
    step = FetchStepUrl(url=url, event_time=EventTimeSourceFromMetadata())
    [f] = fetch_all(step, tmp_path)
    assert f.event_time == JAN
    assert fetch_all(step, tmp_path, f.state) == []
    assert "If-Modified-Since" in site.requests[-1]


def test_http_same_bytes_without_validators_is_nothing_new(tmp_path, site):
    url = site.put("/a.csv", b"a\n")
    [f] = fetch_all(FetchStepUrl(url=url), tmp_path)
    assert fetch_all(FetchStepUrl(url=url), tmp_path, f.state) == []


def test_http_cache_forever_fetches_once_ever(tmp_path, site):
    url = site.put("/a.csv", b"a\n")
    step = FetchStepUrl(url=url, cache=SourceCachingForever())
    [f] = fetch_all(step, tmp_path)
    site.put("/a.csv", b"changed\n")
    assert fetch_all(step, tmp_path, f.state) == [] and len(site.requests) == 1


def test_http_error_is_reported(tmp_path, site):
    with pytest.raises(IngestError, match=r"fetch .*/missing.csv: HTTP 404"):
        fetch_all(FetchStepUrl(url=site.url + "/missing.csv"), tmp_path)


def fetched_state(step, tmp_path) -> FetchState:
    """What a pull of the file stores: the state once the file has been read."""
    [f] = fetch_all(step, tmp_path)
    return f.source_state()


def test_file_url_is_fetched_again_only_when_changed(tmp_path):
    path = write(tmp_path / "a.csv", "a\n")
    step = FetchStepUrl(url=path.as_uri())
    state = fetched_state(step, tmp_path)
    assert fetch_all(step, tmp_path, state) == []
    path.write_text("a\n2\n")
    assert len(fetch_all(step, tmp_path, state)) == 1


def test_file_url_touched_with_the_same_bytes_is_nothing_new(tmp_path):
    path = write(tmp_path / "a.csv", "a\n1\n")
    step = FetchStepUrl(url=path.as_uri())
    state = fetched_state(step, tmp_path)
    os.utime(path, (JAN.timestamp(), JAN.timestamp()))
    assert fetch_all(step, tmp_path, state) == []


def test_file_url_with_other_bytes_of_the_same_size_is_fetched(tmp_path):
    path = write(tmp_path / "a.csv", "a\n1\n")
    step = FetchStepUrl(url=path.as_uri())
    state = fetched_state(step, tmp_path)
    path.write_text("a\n2\n")
    os.utime(path, (JAN.timestamp(), JAN.timestamp()))
    [again] = fetch_all(step, tmp_path, state)
    assert again.source_state().sha256 != state.sha256


def test_a_file_changed_while_it_was_ingested_is_fetched_again(tmp_path):
    path = write(tmp_path / "a.csv", "a\n1\n")
    step = FetchStepUrl(url=path.as_uri())
    [f] = fetch_all(step, tmp_path)
    path.write_text("a\n2\n")  # after the fetch, before the block is committed
    os.utime(path, (JAN.timestamp(), JAN.timestamp()))
    state = f.source_state()
    assert state.sha256 is None
    assert len(fetch_all(step, tmp_path, state)) == 1


def test_a_fetch_step_that_takes_something_else_forgets_old_progress(tmp_path):
    path = write(tmp_path / "a.csv", "a\n")
    state = fetched_state(FetchStepUrl(url=path.as_uri()), tmp_path)
    other = FetchStepUrl(url=path.as_uri() + "?v=2")
    assert len(fetch_all(other, tmp_path, state)) == 1


def test_a_fetch_step_changed_in_what_it_does_not_take_keeps_its_progress(tmp_path):
    """A new event time source or cache setting applies to what comes next: the content taken
    already is not taken again (an append source would hold it twice)."""
    path = write(tmp_path / "a.csv", "a\n")
    state = fetched_state(FetchStepUrl(url=path.as_uri()), tmp_path)
    other = FetchStepUrl(url=path.as_uri(), event_time=EventTimeSourceFromMetadata())
    assert fetch_all(other, tmp_path, state) == []


def test_glob_returns_files_in_name_order_relative_to_root(tmp_path):
    for name in ("b.csv", "a.csv", "c.txt"):
        write(tmp_path / "in" / name, "x\n")
    files = fetch_all(FetchStepFilesGlob(path="in/*.csv"), tmp_path)
    assert [f.name for f in files] == ["a.csv", "b.csv"]
    assert files[-1].state.last_file == "b.csv"


def test_glob_returns_only_files_after_the_last_one_ingested(tmp_path):
    write(tmp_path / "in" / "a.csv", "x\n")
    [a] = fetch_all(FetchStepFilesGlob(path="in/*.csv"), tmp_path)
    write(tmp_path / "in" / "b.csv", "x\n")
    assert [f.name for f in fetch_all(FetchStepFilesGlob(path="in/*.csv"), tmp_path, a.state)] \
        == ["b.csv"]


def test_glob_matching_nothing_is_an_error(tmp_path):
    with pytest.raises(IngestError, match=r"no files match 'in/\*.csv'"):
        fetch_all(FetchStepFilesGlob(path="in/*.csv"), tmp_path)


def test_event_time_from_path_with_default_format(tmp_path):
    write(tmp_path / "in" / "data-2020-01-01.csv", "x\n")
    step = FetchStepFilesGlob(path="in/*.csv",
                              event_time=EventTimeSourceFromPath(pattern=r"(\d{4}-\d\d-\d\d)"))
    assert fetch_all(step, tmp_path)[0].event_time == JAN


def test_event_time_from_path_with_a_format(tmp_path):
    write(tmp_path / "in" / "202001.csv", "x\n")
    source = EventTimeSourceFromPath(pattern=r"(\d{6})\.csv", timestamp_format="%Y%m")
    step = FetchStepFilesGlob(path="in/*.csv", event_time=source)
    assert fetch_all(step, tmp_path)[0].event_time == JAN


def test_event_time_from_path_that_does_not_match_is_an_error(tmp_path):
    write(tmp_path / "in" / "undated.csv", "x\n")
    step = FetchStepFilesGlob(path="in/*.csv",
                              event_time=EventTimeSourceFromPath(pattern=r"(\d{4}-\d\d-\d\d)"))
    with pytest.raises(IngestError, match="does not match"):
        fetch_all(step, tmp_path)


def test_event_time_from_file_modification_time(tmp_path):
    path = write(tmp_path / "in" / "a.csv", "x\n")
    os.utime(path, (JAN.timestamp(), JAN.timestamp()))
    step = FetchStepFilesGlob(path="in/*.csv", event_time=EventTimeSourceFromMetadata())
    assert fetch_all(step, tmp_path)[0].event_time == JAN


def test_glob_ordered_by_event_time(tmp_path):
    write(tmp_path / "in" / "a-2020-02-01.csv", "x\n")
    write(tmp_path / "in" / "b-2020-01-01.csv", "x\n")
    step = FetchStepFilesGlob(path="in/*.csv", order=SourceOrdering.BY_EVENT_TIME,
                              event_time=EventTimeSourceFromPath(pattern=r"(\d{4}-\d\d-\d\d)"))
    assert [f.name for f in fetch_all(step, tmp_path)] == ["b-2020-01-01.csv", "a-2020-02-01.csv"]
