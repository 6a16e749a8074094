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
from coordinator.metadata.odf39.chain import ChainRuleError, ChainState, check_chain
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
                           transform=s.TransformSql(engine="spark", query="SELECT * FROM a"))
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
    refused(chain(dataclasses.replace(SOURCE, read=both)), "both a DDL schema and an ODF schema", 1)


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
    refused(chain(by_name, kind=e.DatasetKind.DERIVATIVE), "must be a did:odf id", 1)
    no_alias = e.SetTransform(inputs=[e.TransformInput(dataset_ref=str(IN1))], transform=TRANSFORM.transform)
    refused(chain(no_alias, kind=e.DatasetKind.DERIVATIVE), "needs an alias", 1)


def test_a_block_can_be_checked_against_the_state_of_its_chain_before_commit():
    blocks = chain(*ROOT)
    state = check_chain(blocks)
    nxt = e.MetadataBlock(system_time=NOON + timedelta(hours=2), prev_block_hash=state.head,
                          sequence_number=5, event=e.AddData(prev_offset=19, new_data=slice_(20, 29),
                                                             new_watermark=NOON + timedelta(hours=2)))
    assert state.append(codec.seal(nxt).hash, nxt).sequence_number == 5
    with pytest.raises(ChainRuleError):
        ChainState().append(codec.seal(nxt).hash, nxt)
