"""The rules of an ODF 0.39 chain (``odf39/chain.py``): valid root and derivative chains pass,
and each rule, broken once, is refused naming the block."""
from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from coordinator.metadata.odf39 import codec
from coordinator.metadata.odf39 import data as d
from coordinator.metadata.odf39 import events as e
from coordinator.metadata.odf39 import source as s
from coordinator.metadata.odf39.chain import (
    FEED_IN_CHAIN,
    ChainRuleError,
    ChainState,
    check_chain,
    reference_refusals,
)
from tests.metadata.odf39_vectors import NOON, seeded_dataset_id, sha3

SCHEMA = e.SetDataSchema(schema=d.DataSchema(fields=[d.DataField(name="a", type=d.DataTypeInt64())]))
SOURCE = e.AddPushSource(source_name="default", read=s.ReadStepNdJson(),
                         merge=s.MergeStrategyAppend())
IN1, IN2 = seeded_dataset_id(b"input1"), seeded_dataset_id(b"input2")


def slice_(start: int, end: int) -> e.DataSlice:
    return e.DataSlice(logical_hash=sha3(b"l%d" % start), physical_hash=sha3(b"p%d" % start),
                       offset_interval=e.OffsetInterval(start=start, end=end), size=100)


def chain(*events, kind=e.DatasetKind.ROOT):
    """Blocks linked as a writer links them: a Seed, then ``events``, a minute apart."""
    out, prev = [], None
    for n, event in enumerate((e.Seed(dataset_id=seeded_dataset_id(b"me"), dataset_kind=kind), *events)):
        b = e.MetadataBlock(system_time=NOON + timedelta(minutes=n), prev_block_hash=prev,
                            sequence_number=n, event=event)
        prev = codec.seal(b).hash
        out.append((prev, b))
    return out


ROOT = [SOURCE, SCHEMA,
        e.AddData(new_data=slice_(0, 9), new_checkpoint=e.Checkpoint(physical_hash=sha3(b"c1"), size=1),
                  new_watermark=NOON),
        e.AddData(prev_offset=9, prev_checkpoint=sha3(b"c1"), new_data=slice_(10, 19),
                  new_watermark=NOON + timedelta(hours=1))]

TRANSFORM = e.SetTransform(inputs=[e.TransformInput(dataset_ref=str(IN1), alias="a"),
                                   e.TransformInput(dataset_ref=str(IN2), alias="b")],
                           transform=s.TransformSql(engine="spark",
                                                    queries=[s.SqlQueryStep(query="SELECT * FROM a")]))
STEP1 = e.ExecuteTransform(query_inputs=[
    e.ExecuteTransformInput(dataset_id=IN1, new_block_hash=sha3(b"a1"), new_offset=4),
    e.ExecuteTransformInput(dataset_id=IN2, new_block_hash=sha3(b"b1")),
], new_data=slice_(0, 2), new_watermark=NOON)
STEP2 = e.ExecuteTransform(query_inputs=[
    e.ExecuteTransformInput(dataset_id=IN1, prev_block_hash=sha3(b"a1"), new_block_hash=sha3(b"a2"),
                            prev_offset=4, new_offset=7),
    e.ExecuteTransformInput(dataset_id=IN2, prev_block_hash=sha3(b"b1")),
], prev_offset=2, new_data=slice_(3, 3), new_watermark=NOON)
DERIVATIVE = [TRANSFORM, SCHEMA, STEP1, STEP2]


def test_a_valid_root_chain_passes_and_ends_at_its_head():
    blocks = chain(*ROOT)
    state = check_chain(blocks)
    assert state.head == blocks[-1][0] and state.sequence_number == 4


def test_a_valid_derivative_chain_passes():
    check_chain(chain(*DERIVATIVE, kind=e.DatasetKind.DERIVATIVE))


def refused(blocks, message: str, at: int):
    """Checking ``blocks`` fails with ``message`` at ``blocks[at]``, named by number and hash."""
    with pytest.raises(ChainRuleError, match=message) as caught:
        check_chain(blocks)
    block_hash, block = blocks[at]
    assert caught.value.sequence_number == block.sequence_number
    assert f"block {block.sequence_number} ({block_hash})" in str(caught.value)


def replace_event(events, i, **changes):
    return [dataclasses.replace(ev, **changes) if n == i else ev for n, ev in enumerate(events)]


def test_the_first_block_must_be_a_seed():
    refused(chain(*ROOT)[1:], "the first block must be a Seed", 0)


def test_a_seed_later_in_the_chain_is_refused():
    refused(chain(SOURCE, e.Seed(dataset_id=IN1, dataset_kind=e.DatasetKind.ROOT)),
            "a Seed may only be the first block", 2)


def test_a_block_linking_another_block_is_refused():
    blocks = chain(*ROOT)
    blocks[2] = (blocks[2][0], dataclasses.replace(blocks[2][1], prev_block_hash=sha3(b"elsewhere")))
    refused(blocks, "prevBlockHash is", 2)


def test_sequence_numbers_must_be_consecutive():
    blocks = chain(*ROOT)
    blocks[3] = (blocks[3][0], dataclasses.replace(blocks[3][1], sequence_number=7))
    refused(blocks, "it must be 3", 3)


def test_system_time_must_not_go_back():
    blocks = chain(*ROOT)
    blocks[3] = (blocks[3][0], dataclasses.replace(blocks[3][1], system_time=NOON))
    refused(blocks, "system time goes back", 3)


def test_data_before_a_schema_is_refused():
    refused(chain(SOURCE, ROOT[2]), "adds data before any SetDataSchema", 2)


def test_an_empty_add_data_is_refused():
    refused(chain(*ROOT, e.AddData(prev_offset=19)), "empty AddData", 5)


def test_prev_offset_must_carry_on_from_the_chain():
    refused(chain(*replace_event(ROOT, 3, prev_offset=8)),
            "prevOffset is 8, the last offset of the chain is 9", 4)


def test_a_slice_must_start_right_after_prev_offset():
    refused(chain(*replace_event(ROOT, 3, new_data=slice_(11, 19))), "must start at 10", 4)


def test_a_slice_must_not_end_before_it_starts():
    bad = dataclasses.replace(slice_(10, 19), offset_interval=e.OffsetInterval(start=10, end=5))
    refused(chain(*replace_event(ROOT, 3, new_data=bad)), "ends .5. before it starts", 4)


def test_prev_checkpoint_must_be_the_last_checkpoint():
    refused(chain(*replace_event(ROOT, 3, prev_checkpoint=None)), "prevCheckpoint is None", 4)


def test_the_watermark_must_not_go_back():
    refused(chain(*replace_event(ROOT, 3, new_watermark=NOON - timedelta(seconds=1))),
            "watermark goes back", 4)


def test_an_add_data_changing_nothing_is_refused():
    refused(chain(*ROOT, e.AddData(prev_offset=19, new_watermark=NOON + timedelta(hours=1))),
            "changes nothing", 5)


def test_a_read_step_with_both_schemas_is_refused():
    both = s.ReadStepNdJson(ddl_schema=["a BIGINT"], schema=SCHEMA.schema)
    refused(chain(dataclasses.replace(SOURCE, read=both)),
            "Cannot specify both DDL and ODF schemas at once", 1)


def test_execute_transform_needs_a_set_transform_before_it():
    refused(chain(SCHEMA, STEP1, kind=e.DatasetKind.DERIVATIVE), "before any SetTransform", 2)


def test_execute_transform_must_name_every_input_in_order():
    swapped = dataclasses.replace(STEP1, query_inputs=STEP1.query_inputs[::-1])
    refused(chain(TRANSFORM, SCHEMA, swapped, kind=e.DatasetKind.DERIVATIVE),
            "must name the SetTransform's inputs, in its order", 3)


def test_an_input_must_carry_on_from_the_previous_step():
    inputs = list(STEP2.query_inputs)
    inputs[0] = dataclasses.replace(inputs[0], prev_block_hash=sha3(b"a0"))
    bad = dataclasses.replace(STEP2, query_inputs=inputs)
    refused(chain(TRANSFORM, SCHEMA, STEP1, bad, kind=e.DatasetKind.DERIVATIVE),
            f"input {IN1}: prevBlockHash is", 4)


def test_set_transform_inputs_must_be_ids_with_aliases():
    by_name = e.SetTransform(inputs=[e.TransformInput(dataset_ref="input1", alias="a")],
                             transform=TRANSFORM.transform)
    rule = "Transform inputs must be resolved to dataset IDs and specify aliases"
    refused(chain(by_name, kind=e.DatasetKind.DERIVATIVE), rule, 1)
    no_alias = e.SetTransform(inputs=[e.TransformInput(dataset_ref=str(IN1))], transform=TRANSFORM.transform)
    refused(chain(no_alias, kind=e.DatasetKind.DERIVATIVE), rule, 1)


def test_a_block_can_be_checked_against_the_state_of_its_chain_before_commit():
    blocks = chain(*ROOT)
    state = check_chain(blocks)
    nxt = e.MetadataBlock(system_time=NOON + timedelta(hours=2), prev_block_hash=state.head,
                          sequence_number=5, event=e.AddData(prev_offset=19, new_data=slice_(20, 29),
                                                             new_watermark=NOON + timedelta(hours=2)))
    assert state.append(codec.seal(nxt).hash, nxt).sequence_number == 5
    with pytest.raises(ChainRuleError):
        ChainState().append(codec.seal(nxt).hash, nxt)


# --- the rules added from the reference's validators (kamu-cli v0.265.0) ----------------------

QUERY_A = s.SqlQueryStep(query="SELECT * FROM a")
WIDER = e.SetDataSchema(schema=d.DataSchema(fields=[
    *SCHEMA.schema.fields, d.DataField(name="b", type=d.DataTypeOption(inner=d.DataTypeString()))]))


def with_transform(**changes) -> e.SetTransform:
    return dataclasses.replace(TRANSFORM, transform=dataclasses.replace(TRANSFORM.transform, **changes))


def derivative(*events):
    return chain(*events, kind=e.DatasetKind.DERIVATIVE)


def with_schema(*fields: d.DataField) -> e.SetDataSchema:
    return e.SetDataSchema(schema=d.DataSchema(fields=list(fields)))


def test_a_transform_stored_as_query_is_refused():
    refused(derivative(with_transform(query="SELECT * FROM a", queries=None)),
            "Transform queries must be normalized", 1)


def test_a_transform_stored_as_query_is_taken_as_legacy_and_listed_as_refused_by_the_reference():
    blocks = derivative(with_transform(query="SELECT * FROM a", queries=None), SCHEMA, STEP1)
    check_chain(blocks, legacy=True)
    [refusal] = reference_refusals(blocks)
    assert (refusal.sequence_number, refusal.reason) == (1, "Transform queries must be normalized")


def test_a_transform_with_query_and_queries_is_refused_even_as_legacy():
    with pytest.raises(ChainRuleError, match="Transform queries must be normalized"):
        check_chain(derivative(with_transform(query="SELECT * FROM a")), legacy=True)


def test_a_transform_without_a_query_is_refused():
    refused(derivative(with_transform(queries=[])), "Transform must have at least one query", 1)


def test_a_transform_whose_last_query_has_an_alias_is_refused():
    refused(derivative(with_transform(queries=[s.SqlQueryStep(alias="out", query="SELECT 1")])),
            "Last query in a transform must have no alias", 1)


def test_a_transform_with_an_unaliased_query_before_the_last_is_refused():
    refused(derivative(with_transform(queries=[QUERY_A, QUERY_A])),
            "all queries except the last one must have aliases", 1)


def test_a_preprocess_stored_as_query_is_refused():
    source = dataclasses.replace(SOURCE, preprocess=s.TransformSql(engine="spark", query="SELECT 1"))
    refused(chain(source), "Transform queries must be normalized", 1)


def test_a_transform_naming_an_input_twice_is_refused():
    twice = dataclasses.replace(TRANSFORM, inputs=[TRANSFORM.inputs[0], TRANSFORM.inputs[0]])
    refused(derivative(twice), f"Transform contains duplicate inputs: {IN1}", 1)


def test_a_schema_identical_to_the_one_in_force_is_refused():
    refused(chain(SOURCE, SCHEMA, SCHEMA), "New schema is identical to the current", 3)


def test_a_schema_adding_an_optional_column_is_taken():
    check_chain(chain(SOURCE, SCHEMA, WIDER))


def test_a_schema_only_reordering_its_columns_is_taken():
    check_chain(chain(SOURCE, WIDER, with_schema(*WIDER.schema.fields[::-1])))


def test_a_schema_adding_a_required_column_is_refused():
    required = with_schema(*SCHEMA.schema.fields, d.DataField(name="b", type=d.DataTypeString()))
    refused(chain(SOURCE, SCHEMA, required),
            "New schema is not compatible with the current schema: column 'b' is added as required", 3)


def test_a_schema_removing_a_column_is_refused():
    refused(chain(SOURCE, WIDER, SCHEMA), "column 'b' .String.. is removed", 3)


def test_a_schema_changing_a_column_type_is_refused():
    refused(chain(SOURCE, SCHEMA, with_schema(d.DataField(name="a", type=d.DataTypeInt32()))),
            "column 'a' changes type from Int64 to Int32", 3)


def test_a_schema_making_a_column_optional_is_refused():
    optional = with_schema(d.DataField(name="a", type=d.DataTypeOption(inner=d.DataTypeInt64())))
    refused(chain(SOURCE, SCHEMA, optional), "column 'a' becomes optional", 3)


def test_a_schema_adding_a_required_field_inside_a_struct_is_refused():
    def point(*names: str) -> e.SetDataSchema:
        fields = [d.DataField(name=n, type=d.DataTypeInt64()) for n in names]
        return with_schema(d.DataField(name="p", type=d.DataTypeStruct(fields=fields)))
    refused(chain(SOURCE, point("x"), point("x", "y")), "column 'p.y' is added as required", 3)


def test_disabling_a_polling_source_is_refused():
    refused(chain(SOURCE, e.DisablePollingSource()), "Disabling sources is not yet fully supported", 2)


def test_disabling_a_push_source_is_refused():
    refused(chain(SOURCE, e.DisablePushSource(source_name="default")),
            "Disabling sources is not yet fully supported", 2)


POLLING = e.SetPollingSource(fetch=s.FetchStepUrl(url="https://example.org/a.csv"),
                             read=s.ReadStepCsv(), merge=s.MergeStrategyAppend())


def test_a_push_source_added_while_a_polling_source_is_active_is_refused():
    refused(chain(POLLING, SOURCE), "Cannot add a push source while polling source is still active", 2)


def test_a_push_source_added_after_a_polling_source_is_taken_as_legacy():
    check_chain(chain(POLLING, SOURCE), legacy=True)


def test_a_polling_source_added_while_a_push_source_is_active_is_refused():
    refused(chain(SOURCE, POLLING),
            "Cannot add a polling source while some push sources are still active", 2)


def test_a_push_source_added_again_unchanged_is_refused():
    refused(chain(SOURCE, SOURCE), "New push source is identical to existing", 2)


def test_a_push_source_changed_under_its_name_is_taken():
    check_chain(chain(SOURCE, dataclasses.replace(SOURCE, merge=s.MergeStrategyLedger(primary_key=["a"]))))


def test_an_ethereum_source_naming_no_chain_is_refused():
    eth = dataclasses.replace(POLLING, fetch=s.FetchStepEthereumLogs(), read=s.ReadStepCsv())
    refused(chain(eth), "Eth source must specify chainId or nodeUrl", 1)


def test_a_polling_source_fetching_a_file_feed_is_refused_in_a_chain():
    feed = dataclasses.replace(POLLING, fetch=s.FetchStepFileFeed(url="file:///feed/"))
    refused(chain(feed), FEED_IN_CHAIN, 1)
