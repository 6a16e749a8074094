"""The stored source state (``workspace/source_state.py``): the format as the dict-based code
wrote it, read and written back byte for byte; a state not as coord writes it, or of another
kind than the fetch step that wrote it, refused in one line naming the dataset and the file."""
from __future__ import annotations

import dataclasses

import pytest

from coordinator.build.status import Reason, dataset_status
from coordinator.ingest import pull_root
from coordinator.ingest.fetch import fetch
from coordinator.metadata import objects as o
from coordinator.metadata.manifest import load_manifest
from coordinator.metadata.timestamps import now_utc, parse_timestamp
from coordinator.workspace import layout
from coordinator.workspace.catalog import add_datasets
from coordinator.workspace.fsutil import atomic_write
from coordinator.workspace.source_state import (
    FeedState,
    FileIdentity,
    FilesGlobState,
    Resume,
    SourceState,
    SourceStateError,
    UrlState,
    fingerprint,
)
from tests.build.test_status import LOCAL_FILE
from tests.ingest.conftest import add_dataset, write

# Written by the code before the typed state (json.dumps(state_dict, sort_keys=True)), taken
# from real pulls: a filesGlob by event time and by name, a file:// url, an out-of-core
# snapshot, a partitioned File Feed, each split into blocks by a 1 MiB slice limit.
OLD = {
    "glob: a first pull stopped within its first file":
        '{"resume": {"file": "d-2024-01-01.csv", "of": {"mtime_ns": 1700000000123456789, '
        '"size": 2797756, "state": {"fetch": "a3628dc362b841f5", '
        '"last_event_time": "2024-01-01T00:00:00Z", "last_file": "d-2024-01-01.csv"}}, '
        '"records": 45095}}',
    "glob by event time, stopped within the second file":
        '{"fetch": "a3628dc362b841f5", "last_event_time": "2024-01-01T00:00:00Z", '
        '"last_file": "d-2024-01-01.csv", "resume": {"file": "d-2024-01-02.csv", '
        '"of": {"mtime_ns": 1700000000123456789, "size": 2860025, '
        '"state": {"fetch": "a3628dc362b841f5", "last_event_time": "2024-01-02T00:00:00Z", '
        '"last_file": "d-2024-01-02.csv"}}, "records": 22310}}',
    "glob by event time":
        '{"fetch": "a3628dc362b841f5", "last_event_time": "2024-01-03T00:00:00Z", '
        '"last_file": "d-2024-01-03.csv"}',
    "glob by name":
        '{"fetch": "22e51d6d8c42b2b1", "last_file": "b.csv"}',
    "file url: stopped within the file":
        '{"resume": {"file": "one.csv", "of": {"mtime_ns": 1700000000123456789, "size": 5657770, '
        '"state": {"fetch": "7abd745a77314d90", "mtime_ns": 1700000000123456789, '
        '"sha256": "3d67c7765790478ad18b8afd156a361c95081171a4192c962fb35cd750f9c177", '
        '"size": 5657770}}, "records": 45095}}',
    "file url":
        '{"fetch": "7abd745a77314d90", "mtime_ns": 1700000000123456789, '
        '"sha256": "3d67c7765790478ad18b8afd156a361c95081171a4192c962fb35cd750f9c177", '
        '"size": 5657770}',
    "snapshot out of core: a first snapshot's blocks before its last":
        '{}',
    "feed: stopped within an update":
        '{"resume": {"file": "p=b/20240101.000000/part-2.csv", "of": {"size": 577791, '
        '"state": {"consumed": {"p=b/20240101.000000": 3}, "fetch": "c4c6512171a66d6f", '
        '"files": ["part-0.csv", "part-1.csv", "part-2.csv"], "superseded": [], '
        '"update": "p=b/20240101.000000"}}, "records": 0}}',
    "feed":
        '{"consumed": {"p=b/20240101.000000": 3}, "fetch": "c4c6512171a66d6f", '
        '"files": ["part-0.csv", "part-1.csv", "part-2.csv"], "superseded": [], '
        '"update": "p=b/20240101.000000"}',
    "feed, partitioned: a superseded update":
        '{"consumed": {"p=a/20240102.000000": 2, "p=a/20240103.000000": 1, '
        '"p=b/20240101.000000": 3}, "fetch": "c4c6512171a66d6f", "files": ["part-0.csv"], '
        '"superseded": ["p=a/20240101.000000"], "update": "p=a/20240103.000000"}',
    # over http: what the dict-based code kept of the response (no None values)
    "http url":
        '{"etag": "\\"v1\\"", "fetch": "0123456789abcdef", "last_modified": '
        '"Wed, 21 Oct 2015 07:28:00 GMT", "sha256": "' + "ab" * 32 + '"}',
    "http url, no validators": '{"fetch": "0123456789abcdef", "sha256": "' + "cd" * 32 + '"}',
}


@pytest.mark.parametrize("text", OLD.values(), ids=OLD.keys())
def test_a_state_the_old_code_wrote_reads_and_writes_back_byte_for_byte(text):
    assert SourceState.from_json(text.encode(), where="w").to_json() == text.encode()


def test_the_typed_state_holds_the_facts_the_old_keys_held():
    glob = SourceState.from_json(OLD["glob by event time, stopped within the second file"].encode(),
                                 where="w")
    assert glob.fetched == FilesGlobState("a3628dc362b841f5", "d-2024-01-01.csv",
                                          parse_timestamp("2024-01-01T00:00:00Z"))
    assert glob.resume == Resume("d-2024-01-02.csv", 22310, FileIdentity(
        FilesGlobState("a3628dc362b841f5", "d-2024-01-02.csv",
                       parse_timestamp("2024-01-02T00:00:00Z")), 2860025, 1700000000123456789))
    feed = SourceState.from_json(OLD["feed, partitioned: a superseded update"].encode(), where="w")
    assert isinstance(feed.fetched, FeedState) and feed.resume is None
    assert dict(feed.fetched.consumed) == {"p=a/20240102.000000": 2, "p=a/20240103.000000": 1,
                                           "p=b/20240101.000000": 3}
    assert feed.fetched.superseded == ("p=a/20240101.000000",)
    first = SourceState.from_json(OLD["glob: a first pull stopped within its first file"].encode(),
                                  where="w")
    assert first.fetched is None and first.resume is not None and first.resume.records == 45095
    assert SourceState.from_json(b"{}", where="w") == SourceState(None)


def test_a_state_made_from_the_facts_is_written_as_the_old_code_wrote_it():
    http = UrlState("0123456789abcdef", sha256="ab" * 32, etag='"v1"',
                    last_modified="Wed, 21 Oct 2015 07:28:00 GMT")
    assert SourceState(http).to_json() == OLD["http url"].encode()
    feed = FeedState("c", "p=a/2", ("part-0.csv",), (("p=b/1", 3), ("p=a/2", 1)), ("p=a/1",))
    assert feed == FeedState("c", "p=a/2", ("part-0.csv",), (("p=a/2", 1), ("p=b/1", 3)),
                             ("p=a/1",))  # one form for the same facts, in any order
    assert SourceState(feed).to_json() == (
        b'{"consumed": {"p=a/2": 1, "p=b/1": 3}, "fetch": "c", "files": ["part-0.csv"], '
        b'"superseded": ["p=a/1"], "update": "p=a/2"}')


SOURCE = o.DatasetSourceRoot(fetch=o.FetchStepUrl(url="file:///dev/null"),
                             read=o.ReadStepCsv(header=True), merge=o.MergeStrategyAppend())


def stored(ws, text: bytes):
    """A dataset whose block carries ``text`` as its state file, as an earlier coord left it."""
    ds = ws.dataset("t.stored")
    with ds.writer() as w:
        h = w.commit(o.MetadataBlock(system_time=now_utc(), source=SOURCE))
    atomic_write(ds.state_path(h), text)
    return ds, ds.state_path(h)


@pytest.mark.parametrize("text", [OLD["file url: stopped within the file"], OLD["glob by name"],
                                  OLD["feed"]], ids=["url", "glob", "feed"])
def test_a_workspace_made_before_reads_the_same_and_writes_the_same_bytes(ws, text):
    ds, _ = stored(ws, text.encode())  # a glob or feed state: the fetch step was another once
    state = ds.source_state()
    assert state == SourceState.from_json(text.encode(), where="w")
    with ds.writer() as w:
        h = w.commit(o.MetadataBlock(system_time=now_utc(), output_watermark=now_utc()),
                     source_state=state)
    assert ds.state_path(h).read_bytes() == text.encode()
    assert ds.state_path(h).parent == ws.meta / layout.cache_dir(ds.id, layout.STATE)


@pytest.mark.parametrize("text, problem", [
    (b"{\"fetch\": ", "not JSON"),
    (b"[]", "the state is not a JSON object"),
    (b'{"fetch": "f", "last_file": "a.csv", "colour": "red"}', "unknown fields 'colour'"),
    (b'{"fetch": "f", "last_file": 3}', "'last_file' is not a string"),
    (b'{"fetch": "f", "last_file": "a.csv", "etag": "e"}', "it has those of url and filesGlob"),
    (b'{"fetch": "f"}', "it has none"),
    (b'{"last_file": "a.csv"}', "has no 'fetch'"),
    (b'{"fetch": "f", "last_file": "a", "last_event_time": "yesterday"}', "'last_event_time'"),
    (b'{"fetch": "f", "update": "u", "files": [], "consumed": {"u": "2"}, "superseded": []}',
     "'consumed' does not map updates to numbers of files"),
    (b'{"resume": {"file": "a.csv", "records": 1}}', "'resume' has no 'of'"),
    (b'{"resume": {"file": "a.csv", "records": true, "of": {"size": 1, "state": '
     b'{"fetch": "f", "last_file": "a.csv"}}}}', "'records' is not an integer"),
])
def test_a_state_not_as_coord_writes_it_is_refused_in_one_line_naming_the_file(ws, text, problem):
    ds, path = stored(ws, text)
    with pytest.raises(SourceStateError) as e:
        ds.source_state()
    message = str(e.value)
    assert "\n" not in message and message.startswith(f"t.stored: {path}: ")
    assert problem in message


def test_a_state_of_another_kind_written_for_this_very_step_is_refused(ws):
    wrong = SourceState(FilesGlobState(fingerprint(SOURCE.fetch), "a.csv")).to_json()
    ds, path = stored(ws, wrong)
    with pytest.raises(SourceStateError, match=rf"^t.stored: {path}: .*a filesGlob state for "
                                               r"the source's own fetch step, which is url"):
        ds.source_state()


def test_a_state_of_another_kind_from_an_earlier_step_is_kept_and_no_longer_applies(ws, tmp_path):
    old = SourceState(FilesGlobState("0123456789abcdef", "z.csv"))  # the source was a glob once
    ds, _ = stored(ws, old.to_json())
    assert ds.source_state() == old
    (tmp_path / "a.csv").write_text("a\n1\n")
    step = o.FetchStepUrl(url=(tmp_path / "a.csv").as_uri())
    assert [f.name for f in fetch(step, root=tmp_path, scratch=tmp_path, state=old.fetched)] == \
        ["a.csv"]


def test_fetch_refuses_a_state_of_another_kind_for_its_step(tmp_path):
    step = o.FetchStepFilesGlob(path="in/*.csv")
    with pytest.raises(SourceStateError, match="fetch filesGlob: the source state is a url state"):
        fetch(step, root=tmp_path, scratch=tmp_path, state=UrlState(fingerprint(step), "ab"))


def test_a_damaged_state_stops_a_pull_and_leaves_the_source_unchecked_by_status(ws):
    write(ws.root / "in" / "data.csv", "id,name\n1,a\n")
    add_dataset(ws, LOCAL_FILE, "t.local")
    pull_root(ws, "t.local")
    ds = ws.dataset("t.local")
    head = ds.head()
    path = ds.state_path(ds.state().fetch_state_block)
    path.write_text('{"fetch": ')
    with pytest.raises(SourceStateError, match=rf"^t.local: {path}: not a source state"):
        pull_root(ws, "t.local")
    assert ds.head() == head
    st = dataset_status(ws, ds)
    assert st.reasons == [Reason.NOT_CHECKED] and st.unchecked.startswith(f"t.local: {path}: ")


def test_a_url_source_redefined_as_a_glob_takes_every_file_again(ws):
    write(ws.root / "in" / "data.csv", "id,name\n1,a\n")
    add_dataset(ws, LOCAL_FILE, "t.local")
    pull_root(ws, "t.local")
    write(ws.root / "in" / "b.csv", "id,name\n2,b\n")
    add_dataset(ws, LOCAL_FILE.replace('url, url: "in/data.csv"', 'filesGlob, path: "in/*.csv"'),
                "t.local2")
    manifest = load_manifest(ws.root / "t.local2.yaml")  # coord add --replace, for t.local
    add_datasets(ws, [dataclasses.replace(manifest, id="t.local")], replace=True)
    assert isinstance(ws.dataset("t.local").source_state().fetched, UrlState)  # kept, stale
    assert pull_root(ws, "t.local").num_records == 2  # as before: a new step starts over
    assert ws.dataset("t.local").source_state() == SourceState(FilesGlobState(
        fingerprint(o.FetchStepFilesGlob(path="in/*.csv")), "data.csv"))  # by name: b, data
