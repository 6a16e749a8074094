"""``odf39.from_odf18``: a 0.18 root's source and vocabulary as ODF 0.39 events. Read back
with ``adapt`` (the other direction) they are the 0.18 definition again; what 0.39 cannot say
is refused at its place."""
from __future__ import annotations

from pathlib import Path

import pytest

from coordinator.metadata import objects as o
from coordinator.metadata.manifest import load_manifest
from coordinator.metadata.odf39 import events as e
from coordinator.metadata.odf39 import source as s
from coordinator.metadata.odf39.adapt import adapt_snapshot
from coordinator.metadata.odf39.from_odf18 import NoCounterpart, polling_source, set_vocab

REPO = Path(__file__).resolve().parents[2]
ROOTS = [REPO / "tests/fixtures/manifests/ca.bccdc.covid19.case-details.yaml",
         REPO / "tests/fixtures/manifests/com.example.orders.yaml",
         *sorted((REPO / "examples/datasets").glob("[a-z]*.yaml"))]


def roots() -> list[o.DatasetSnapshot]:
    loaded = [load_manifest(p) for p in ROOTS]
    return [m for m in loaded if isinstance(m.source, o.DatasetSourceRoot)]


def back(event: e.SetPollingSource, vocab: e.SetVocab | None = None) -> o.DatasetSnapshot:
    metadata = [event] + ([vocab] if vocab else [])
    return adapt_snapshot(e.DatasetSnapshot(name="x", kind=e.DatasetKind.ROOT,
                                            metadata=metadata)).snapshot


@pytest.mark.parametrize("snapshot", roots(), ids=lambda m: m.id)
def test_the_roots_of_the_examples_read_back_as_themselves(snapshot):
    assert back(polling_source(snapshot.source)).source == snapshot.source


def test_a_csv_read_without_schema_infers_it_as_0_18_does():
    source = o.DatasetSourceRoot(fetch=o.FetchStepUrl(url="https://example.org/a.csv"),
                                 read=o.ReadStepCsv(header=True), merge=o.MergeStrategyAppend())
    event = polling_source(source)
    assert event.read == s.ReadStepCsv(header=True, infer_schema=True)
    assert event.fetch.event_time == s.EventTimeSourceFromSystemTime()
    assert back(event).source.read == o.ReadStepCsv(header=True, infer_schema=True)


def test_json_lines_is_nd_json_and_temporal_tables_are_named():
    source = o.DatasetSourceRoot(
        fetch=o.FetchStepFilesGlob(path="in/*.json", order=o.SourceOrdering.BY_NAME),
        read=o.ReadStepJsonLines(schema=["a BIGINT"], timestamp_format="yyyy-MM-dd"),
        preprocess=o.TransformSql(engine="spark", query="SELECT * FROM input",
                                  temporal_tables=[o.TemporalTable(id="t", primary_key=["a"])]),
        merge=o.MergeStrategyLedger(primary_key=["a"]))
    event = polling_source(source)
    assert event.read == s.ReadStepNdJson(ddl_schema=["a BIGINT"], timestamp_format="yyyy-MM-dd")
    assert event.preprocess.temporal_tables == [s.TemporalTable(name="t", primary_key=["a"])]
    assert back(event).source == source


def test_a_vocabulary_is_a_set_vocab_and_the_default_none():
    vocab = o.DatasetVocabulary(event_time_column="date")
    assert set_vocab(vocab) == e.SetVocab(event_time_column="date")
    assert set_vocab(o.DatasetVocabulary()) is None and set_vocab(None) is None


def test_a_file_feed_fetch_is_refused_at_its_place():
    source = o.DatasetSourceRoot(fetch=o.FetchStepFileFeed(url="s3://bucket/feed/"),
                                 read=o.ReadStepParquet(), merge=o.MergeStrategyAppend())
    with pytest.raises(NoCounterpart, match=r"^ds: source\.fetch: fetch kind fileFeed has no "
                                            r"counterpart in ODF 0\.39"):
        polling_source(source, "ds: source")


def test_a_snapshot_observation_name_is_refused_at_its_place():
    source = o.DatasetSourceRoot(
        fetch=o.FetchStepUrl(url="https://example.org/a.csv"), read=o.ReadStepCsv(),
        merge=o.MergeStrategySnapshot(primary_key=["a"], observation_column="seen"))
    with pytest.raises(NoCounterpart, match=r"^source\.merge\.observationColumn: the snapshot "
                                            "option observationColumn"):
        polling_source(source)
