"""YAML text as ``yaml_codec.dump_yaml`` writes it: the direct writer (``yaml_text._BlockWriter``)
writes exactly what PyYAML writes with the same dumper, or declines and PyYAML writes it.

The expected text is always PyYAML's own (``yaml.dump`` with the module's dumpers), never the
code under test's; the documents are drawn (any block of either ODF version, plain data whose
strings are made of YAML's indicators, quotes, spaces, line breaks and unicode) or picked for
one rule each.
"""
from __future__ import annotations

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator.metadata import yaml_text
from coordinator.metadata.odf39.manifests import KINDS
from coordinator.metadata.yaml_codec import dump_yaml, manifest_to_dict, to_dict
from tests.metadata.strategies import blocks, blocks39

DUMPERS = {False: yaml_text._Dumper, True: yaml_text._PlainTimesDumper}


def pyyaml(data, plain_times: bool) -> str:
    return yaml.dump(data, Dumper=DUMPERS[plain_times], sort_keys=False, allow_unicode=True, width=100)


def written(data, plain_times: bool) -> str | None:
    """The direct writer's text (None: declined)."""
    return yaml_text._BlockWriter(DUMPERS[plain_times]).document(data)


# strings that meet each of PyYAML's rules: what a plain scalar may not start with, contain or
# end with, what reads back as another type, line folding at the width, keys near 128
WORDS = ["", "a", "true", "No", "on", "null", "~", "123", "-5", "0x1F", "1.5", "1e5", ".inf", "<<", "=",
         "12:30", "2024-01-02", "2024-01-02T00:00:00Z", "---", "...", "-", "- a", "?", "? a", ":a", "a:",
         "a: b", "a:b", "a::b", "a #b", "#a", "a#b", "'q'", '"q"', "it's", "%x", "@x", "`x", "!x", "&x", "*x",
         "|x", ">x", "[x]", "{x}", "x,y", " lead", "trail ", "two  spaces", "tab\there", "é", "中文",
         "\ufeffbom", "nb\xa0sp", "nul\x00", "bell\x07", "emoji😀", "line\nbreak", "cr\rx", "nel\x85x",
         "ls\u2028x", "f1620abc", "did:odf:fed01", "http://h/p?q=1&r", "SELECT * FROM t WHERE a = 'x'",
         "word " * 30, "x" * 99 + " y", "k" * 122, "k" * 123]
scalars = (st.sampled_from(WORDS) | st.text(st.sampled_from(list(set("".join(WORDS)) | {" ", ":", "-"})),
                                            max_size=120)
           | st.integers(-(2**70), 2**70) | st.booleans() | st.none())
documents = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                         | st.dictionaries(st.sampled_from(WORDS) | st.text(max_size=8), inner, max_size=4),
                         max_leaves=25)


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(WORDS), documents, max_size=5) | st.lists(documents, max_size=4),
       st.booleans())
def test_what_the_writer_writes_is_what_pyyaml_writes(data, plain_times):
    text = written(data, plain_times)
    if text is not None:
        assert text == pyyaml(data, plain_times)
    assert dump_yaml(data, plain_times=plain_times) == pyyaml(data, plain_times)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(blocks39)
def test_a_current_odf_block_manifest_is_written_as_pyyaml_writes_it(block):
    doc = {"kind": "MetadataBlock", "version": KINDS["MetadataBlock"][2], "content": to_dict(block)}
    text = written(doc, True)
    if text is not None:
        assert text == pyyaml(doc, True)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(blocks)
def test_an_odf_0_18_block_manifest_is_written_as_pyyaml_writes_it(block):
    doc = manifest_to_dict(block)
    text = written(doc, False)
    if text is not None:
        assert text == pyyaml(doc, False)


@pytest.mark.parametrize("word", WORDS)
@pytest.mark.parametrize("plain_times", [False, True])
def test_each_rule_alone_as_a_key_a_value_and_an_item(word, plain_times):
    for data in ({"content": {"k": word, "l": [word, {"a": word}], "e": [], "m": {}}}, {word: 1}, [word]):
        text = written(data, plain_times)
        if text is not None:
            assert text == pyyaml(data, plain_times)


def test_the_common_case_is_written_directly():
    doc = {"kind": "MetadataBlock", "version": 3, "content": {
        "systemTime": "2024-01-02T03:04:05.123Z", "prevBlockHash": "f1620" + "ab" * 32, "sequenceNumber": 7,
        "event": {"kind": "AddData", "newWatermark": "2024-01-02T00:00:00Z", "inputs": [],
                  "flags": [True, None], "note": "a sentence with spaces: and a colon", "empty": ""}}}
    assert written(doc, True) == pyyaml(doc, True)


@pytest.mark.parametrize("data", [
    {"query": "SELECT *\nFROM t"},  # a line break: the literal style
    {"v": 1.5},  # a float
    {"v": ("a", "b")},  # a type the safe representer refuses
    {"k" * 123: 1},  # too long for a simple key
], ids=["literal", "float", "tuple", "long-key"])
def test_what_the_writer_does_not_write_pyyaml_does(data):
    assert written(data, False) is None
    if not isinstance(data.get("v"), tuple):
        assert dump_yaml(data) == pyyaml(data, False)


def test_a_container_met_twice_is_left_to_pyyaml_which_writes_an_alias():
    shared = {"a": 1}
    data = {"x": shared, "y": shared}
    assert written(data, False) is None
    assert "&id001" in dump_yaml(data) and dump_yaml(data) == pyyaml(data, False)
