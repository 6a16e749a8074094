"""Loading YAML manifests in either form a file may be written in:

- ODF 0.18's, ``apiVersion: 1``, ``kind: <ObjectName>``, ``content: {...}``: checked against the
  JSON Schemas in ``metadata/schemas/`` before any object is built;
- the current ODF's (the reference's), ``kind: <ObjectName>``, ``version: <n>``, ``content``:
  loaded by ``odf39.manifests``; a DatasetSnapshot is then adapted to the 0.18 snapshot a
  workspace holds (``odf39.adapt``) and checked against the same schemas.

The form is told by the document: ``version`` without ``apiVersion`` is the current one. Either
way every mistake is reported as ``<file>: <path>: <message>`` with the path inside the file as
written (``content.source.merge.primaryKey``, ``content.metadata[0].merge.primaryKey``) and a
message a user can act on.
"""
from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator, ValidationError
from referencing import Registry, Resource

from ..errors import Invalid
from . import objects
from .odf39 import events as odf39
from .odf39.adapt import STREAM_MERGES, Adapted, adapt_snapshot
from .odf39.manifests import from_document
from .yaml_codec import DecodeError, from_dict, load_untrusted_yaml, load_yaml, to_dict

SCHEMAS_DIR = Path(__file__).resolve().parent / "schemas"  # package data: a plain install has them
MANIFEST_SUFFIXES = (".yaml", ".yml")
# What a manifest may be at most: metadata (queries, schemas, steps), not data. Text cannot be
# hashed before it is parsed, so these bounds and the loader's (yaml_codec.MAX_DEPTH,
# MAX_VALUES) are what limit the parser's work. A block manifest comes from someone else's
# store (kamu-cli of the ODF 0.18 era stored blocks as YAML) and is read alias-free.
MAX_MANIFEST = 4 << 20
MAX_BLOCK_MANIFEST = 1 << 20


class ManifestError(Invalid, ValueError):
    """A manifest that cannot be loaded; ``path`` is the place inside the file (may be empty)."""

    def __init__(self, file: str, path: str, message: str):
        self.file = file
        self.path = path
        self.message = message
        super().__init__(f"{file}: {path}: {message}" if path else f"{file}: {message}")


@dataclass(frozen=True)
class ManifestFile:
    """A manifest file as loaded: its object, the form it was written in, and what adapting
    it to the workspace's model left out."""

    name: str
    content: Any  # a 0.18 DatasetSnapshot or MetadataBlock, or an ODF 0.39 MetadataBlock
    odf: str = "0.18"  # the ODF version of the form the file is written in
    adapted: Adapted | None = None  # a current-form DatasetSnapshot: how it became ``content``

    @property
    def notes(self) -> tuple[str, ...]:
        """What was left out, one line each (``<file>: <place>: ...``)."""
        return tuple(f"{self.name}: {place}: {what}" for place, what in
                     (self.adapted.notes if self.adapted else ()))

    def error(self, path: str, message: str) -> ManifestError:
        """An error at the 0.18 ``path`` of ``content``, named where the file says it."""
        return ManifestError(self.name, self.adapted.place(path) if self.adapted else path, message)


def load_manifest(path: str | Path, *, unsealed: bool = False):
    """Load one manifest file into its object (a DatasetSnapshot or a MetadataBlock)."""
    return read_manifest(path, unsealed=unsealed).content


def read_manifest(path: str | Path, *, unsealed: bool = False, target: str = "0.18") -> ManifestFile:
    """Load one manifest file, in either form.

    ``unsealed`` accepts a 0.18 MetadataBlock without its ``blockHash`` (about to be hashed);
    ``target``: the ODF version of the dataset it defines (``adapt_snapshot``).
    """
    return parse_manifest(_text(read_bounded(path), str(path), MAX_MANIFEST), str(path),
                          unsealed=unsealed, target=target)


def read_bounded(path: str | Path) -> bytes:
    """The bytes of a file that holds metadata: at most one more than ``MAX_MANIFEST``, so a
    caller can tell a file that is too large."""
    try:
        with open(path, "rb") as f:
            return f.read(MAX_MANIFEST + 1)
    except OSError as e:
        raise ManifestError(str(path), "", e.strerror or str(e)) from None


def parse_manifest(text: str, name: str, *, unsealed: bool = False, adapt: bool = True,
                   target: str = "0.18") -> ManifestFile:
    """A manifest's text (of the file ``name``), in either form; ``adapt=False`` keeps a
    current-form DatasetSnapshot as it is written (for a caller that only wants its kind);
    ``target``: the ODF version of the dataset it defines (a "0.39" one may stream-merge)."""
    doc = _document(text, name, load_yaml)
    if isinstance(doc, dict) and "version" in doc and "apiVersion" not in doc:
        return _current(doc, name, adapt, target)
    return ManifestFile(name, _object(doc, name, unsealed=unsealed))


def _current(doc: dict, name: str, adapt: bool, target: str) -> ManifestFile:
    try:
        obj = from_document(doc)
        if not (adapt and isinstance(obj, odf39.DatasetSnapshot)):
            return ManifestFile(name, obj, "0.39")
        adapted = adapt_snapshot(obj, target)
    except DecodeError as e:
        raise ManifestError(name, e.path, e.message) from None
    loaded = ManifestFile(name, adapted.snapshot, "0.39", adapted)
    # what the 0.18 schemas require of the result too (dataset ids), named as the file has it
    content = to_dict(adapted.snapshot)
    if adapted.snapshot.source is not None:
        _validate_content(content, name, loaded.error)
    pushed = [i for i, event in enumerate(obj.metadata) if isinstance(event, odf39.AddPushSource)]
    for i, push in zip(pushed, adapted.push_sources, strict=True):
        # a push source's steps as a root's (its fetch stands in for the push, to be checked)
        steps = {"kind": "root", "fetch": {"kind": "url", "url": "push:"}, "read": to_dict(push.read),
                 "merge": to_dict(push.merge)}
        if push.preprocess is not None:
            steps["preprocess"] = to_dict(push.preprocess)

        def at(path: str, message: str, i: int = i) -> ManifestError:
            return ManifestError(name, path.replace("content.source", f"content.metadata[{i}]"),
                                 message)

        _validate_content({**content, "source": steps}, name, at)
    return loaded


def _validate_content(content: dict, name: str, error) -> None:
    merge = content.get("source", {}).get("merge", {})
    if merge.get("kind") in {m.KIND for m in STREAM_MERGES}:  # the 0.18 schemas have none:
        merge = {"kind": "ledger", "primaryKey": merge.get("primaryKey")}  # a key checked as a ledger's
        content = {**content, "source": {**content["source"], "merge": merge}}
    if content.get("source", {}).get("fetch", {}).get("kind") == objects.FetchStepContainer.KIND:
        # nor a container fetch (a 0.39 root's, its fields checked as the 0.39 step decoded)
        content = {**content, "source": {**content["source"],
                                         "fetch": {"kind": "url", "url": "container:"}}}
    try:
        validate_document({"apiVersion": 1, "kind": "DatasetSnapshot", "content": content}, name)
    except ManifestError as e:
        raise error(e.path, e.message) from None


def load_block_manifest(data: bytes, name: str) -> objects.MetadataBlock:
    """A MetadataBlock manifest read from a repository: bounded, alias-free, schema-checked."""
    block = _object(_document(_text(data, name, MAX_BLOCK_MANIFEST), name, load_untrusted_yaml), name)
    if not isinstance(block, objects.MetadataBlock):
        raise ManifestError(name, "kind", "expected a MetadataBlock")
    return block


def _text(data: bytes, name: str, limit: int) -> str:
    if len(data) > limit:
        raise ManifestError(name, "", f"larger than {limit} bytes ({limit >> 20} MiB): a manifest "
                            "holds metadata; data belongs in the files it names")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ManifestError(name, "", f"not UTF-8 text (byte {e.start})") from None


def _document(text: str, name: str, load) -> Any:
    try:
        return load(text)
    except yaml.YAMLError as e:
        raise _yaml_error(name, e) from None


def _object(doc: Any, name: str, *, unsealed: bool = False):
    """The 0.18 object of a parsed 0.18 manifest."""
    if (unsealed and isinstance(doc, dict) and doc.get("kind") == "MetadataBlock"
            and isinstance(doc.get("content"), dict)):
        doc["content"].setdefault("blockHash", "00" * 32)
    _temporal_table_names(doc)
    validate_document(doc, name)
    try:
        return from_dict(objects.MANIFEST_KINDS[doc["kind"]], doc["content"], "content")
    except DecodeError as e:  # what a schema cannot say, e.g. 2020-02-30 or nanoseconds
        raise ManifestError(name, e.path, e.message) from None


def _temporal_table_names(doc) -> None:
    """A temporal table may say ``name`` (the current ODF's word) for the 0.18 ``id``."""
    content = doc.get("content") if isinstance(doc, dict) else None
    source = content.get("source") if isinstance(content, dict) else None
    transform = source.get("transform") if isinstance(source, dict) else None
    tables = transform.get("temporalTables") if isinstance(transform, dict) else None
    for table in tables if isinstance(tables, list) else []:
        if isinstance(table, dict) and "name" in table and "id" not in table:
            table["id"] = table.pop("name")


def load_manifests(paths: Iterable[str | Path]) -> list:
    """Load manifest files and directories (each *.yaml / *.yml directly inside, sorted)."""
    return [load_manifest(f) for f in manifest_files(paths)]


def manifest_files(paths: Iterable[str | Path]) -> list[Path]:
    """The manifest files of ``paths``: files as given, folders' *.yaml / *.yml, sorted."""
    found = []
    for p in map(Path, paths):
        if p.is_dir():
            found += sorted(f for f in p.iterdir() if f.suffix in MANIFEST_SUFFIXES and f.is_file())
        else:
            found.append(p)
    return found


def validate_document(doc, source_name: str) -> None:
    """Check a parsed manifest against ``metadata/schemas/Manifest.json``; raise the most specific error."""
    errors = list(_validator().iter_errors(doc))
    if errors:
        raise _describe(source_name, max(errors, key=_relevance))


@cache
def _validator() -> Draft202012Validator:
    # Schemas refer to each other by file name ("$ref": "MergeStrategy.json"), so each one is
    # registered under its file name.
    registry = Registry().with_resources(
        (p.name, Resource.from_contents(json.loads(p.read_text(encoding="utf-8"))))
        for p in SCHEMAS_DIR.glob("*.json")
    )
    return Draft202012Validator(registry.contents("Manifest.json"), registry=registry)


# --- turning a jsonschema error into a user's message -------------------------------------------

# Among errors on the same object, an unknown field usually explains a missing one (a typo).
_KEYWORD_RANK = {"additionalProperties": 2, "required": 1}


def _relevance(error: ValidationError):
    # The deepest error is the most specific one: "primaryKey: expected a list" beats "merge: ..."
    return len(error.absolute_path), _KEYWORD_RANK.get(str(error.validator), 0)


def _describe(file: str, error: ValidationError) -> ManifestError:
    path = _render_path(error.absolute_path)
    # A validator's errors always carry these; the stubs also allow `Unset` for hand-made ones.
    keyword = str(error.validator)
    value: Any = error.validator_value
    instance: Any = error.instance
    schema: Mapping[str, Any] = error.schema if isinstance(error.schema, Mapping) else {}
    if keyword == "required":
        missing = next(name for name in value if name not in instance)
        return ManifestError(file, f"{path}.{missing}" if path else missing, "is required")
    if keyword == "additionalProperties":
        known = list(schema.get("properties", {}))
        unknown = next(name for name in instance if name not in known)
        message = f"unknown field {unknown!r} (expected one of: {', '.join(known)})"
        return ManifestError(file, path, message + _did_you_mean(unknown, known))
    if keyword == "enum":
        message = f"expected one of: {', '.join(map(str, value))} (got {_show(instance)})"
        return ManifestError(file, path, message + _did_you_mean(instance, value))
    if keyword == "const":
        return ManifestError(file, path, f"expected {_show(value)} (got {_show(instance)})")
    if keyword == "type":
        return ManifestError(file, path, f"expected {_type_name(schema)} (got {_show(instance)})")
    if keyword == "pattern":
        # every pattern lives in Common.json with a title and a description of what it means
        what = schema.get("title", "value")
        hint = schema.get("description", f"must match {value}")
        return ManifestError(file, path, f"not a valid {what}: {_show(instance)} ({hint})")
    if keyword == "maxLength":
        what = schema.get("title", "value")
        return ManifestError(file, path, f"{what} longer than {value} characters ({len(instance):,}): "
                                         f"{_show(instance)}")
    if keyword == "minimum":
        return ManifestError(file, path, f"expected at least {value} (got {_show(instance)})")
    return ManifestError(file, path, error.message)  # keywords the schemas do not use yet


def _render_path(parts) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


_TYPE_NAMES = {
    "string": "a string",
    "boolean": "true or false",
    "integer": "an integer",
    "object": "a mapping",
    "array": "a list",
}


def _type_name(schema: Mapping[str, Any]) -> str:
    if schema["type"] == "array" and schema.get("items", {}).get("type") == "string":
        return "a list of strings"
    return _TYPE_NAMES.get(schema["type"], f"a {schema['type']}")


def _show(value) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return str(value).lower()
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _did_you_mean(word, choices) -> str:
    if not isinstance(word, str):
        return ""
    close = difflib.get_close_matches(word, [str(c) for c in choices], n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _yaml_error(file: str, error: yaml.YAMLError) -> ManifestError:
    mark = getattr(error, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    problem = getattr(error, "problem", None) or str(error)
    context = getattr(error, "context", None)
    return ManifestError(file, where, f"invalid YAML: {context + ', ' if context else ''}{problem}")
