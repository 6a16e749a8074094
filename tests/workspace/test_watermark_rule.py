"""The input watermark rule a derivative's transform records when it is added or redefined
(``TransformSql.inputWatermarks``): recorded for a new derivative, the dataset's own rule kept
by a redefinition that names none, so an existing dataset computes as before."""
from __future__ import annotations

import dataclasses

from coordinator.metadata import objects as o
from coordinator.metadata.timestamps import now_utc
from coordinator.workspace import Workspace
from coordinator.workspace.catalog import AddAction, add_datasets
from tests.repository.conftest import make_root

ROOT, DERIVED = "com.example.root", "com.example.derived"
QUERY = f"SELECT * FROM `{ROOT}`"


def derivative(query: str = QUERY, rule: o.InputWatermarks | None = None) -> o.DatasetSnapshot:
    transform = o.TransformSql(engine="spark", query=query, input_watermarks=rule)
    return o.DatasetSnapshot(id=DERIVED, source=o.DatasetSourceDerivative(inputs=[ROOT], transform=transform))


def rule_in_force(ws: Workspace) -> o.InputWatermarks | None:
    source = ws.dataset(DERIVED).state().source
    assert isinstance(source, o.DatasetSourceDerivative)
    return source.transform.input_watermarks


def added_before_the_rule(ws: Workspace) -> None:
    """A derivative as coord add wrote it before the rule existed: no rule in its transform."""
    make_root(ws, ROOT, slices=1)
    with ws.dataset(DERIVED).writer() as w:
        w.commit(o.MetadataBlock(system_time=now_utc(), source=derivative().source))


def test_a_new_derivative_records_the_recorded_rule(ws):
    make_root(ws, ROOT, slices=1)
    [added] = add_datasets(ws, [derivative()])
    assert added.action is AddAction.ADDED
    assert rule_in_force(ws) is o.InputWatermarks.RECORDED


def test_a_new_derivative_keeps_the_rule_its_manifest_names(ws):
    make_root(ws, ROOT, slices=1)
    add_datasets(ws, [derivative(rule=o.InputWatermarks.EVENT_TIMES)])
    assert rule_in_force(ws) is o.InputWatermarks.EVENT_TIMES


def test_the_same_manifest_again_leaves_a_dataset_added_before_the_rule_unchanged(ws):
    added_before_the_rule(ws)
    [again] = add_datasets(ws, [derivative()], replace=True)
    assert again.action is AddAction.UNCHANGED
    assert rule_in_force(ws) is None


def test_a_new_query_for_a_dataset_added_before_the_rule_keeps_its_rule(ws):
    added_before_the_rule(ws)
    [changed] = add_datasets(ws, [derivative(QUERY + " WHERE true")], replace=True)
    assert changed.action is AddAction.UPDATED
    assert rule_in_force(ws) is None


def test_a_manifest_naming_the_recorded_rule_moves_an_older_dataset_to_it(ws):
    added_before_the_rule(ws)
    [moved] = add_datasets(ws, [derivative(rule=o.InputWatermarks.RECORDED)], replace=True)
    assert moved.action is AddAction.UPDATED
    assert rule_in_force(ws) is o.InputWatermarks.RECORDED


def test_a_roots_preprocess_records_no_rule(ws):
    make_root(ws, ROOT, slices=0)
    root = ws.dataset(ROOT).state().source
    preprocess = o.TransformSql(engine="spark", query="SELECT * FROM input")
    add_datasets(ws, [o.DatasetSnapshot(id=ROOT, source=dataclasses.replace(root, preprocess=preprocess))],
                 replace=True)
    source = ws.dataset(ROOT).state().source
    assert isinstance(source, o.DatasetSourceRoot) and source.preprocess == preprocess
