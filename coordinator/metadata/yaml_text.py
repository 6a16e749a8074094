"""The YAML text side of ``yaml_codec``: PyYAML's dumpers and the bounded loader, imported when
text is first written or read (``yaml_codec.dump_yaml``, ``load_yaml``, ``load_untrusted_yaml``
are the functions to call; their docstrings say what the text is).

Invariants:

- ``dump`` writes exactly the text ``yaml.dump`` writes with this module's dumpers (block style,
  width 100, keys in their order, unicode as is). ``_BlockWriter`` writes the common case
  itself, a port of PyYAML's emitter for the nodes a manifest is made of (non-empty mappings and
  lists in block style, empty ones as ``{}`` / ``[]``, ints, bools, None and strings written
  plain or single-quoted); for anything else (a string with a line break, one PyYAML would
  double-quote, a float, a type the safe representer does not take, a container met twice)
  it declines and PyYAML writes the whole document. PyYAML's own emitter costs about half a
  millisecond per block, most of ``coord log``'s time on a long chain.
"""
from __future__ import annotations

import re
from typing import Any

import yaml
from yaml._yaml import CParser
from yaml.composer import Composer, ComposerError
from yaml.constructor import SafeConstructor
from yaml.emitter import Emitter
from yaml.resolver import Resolver

WIDTH = 100


def dump(data, *, plain_times: bool = False) -> str:
    """``yaml_codec.dump_yaml``: PyYAML's text, written by ``_BlockWriter`` when it can (a
    block's manifest, ``coord log`` writes a thousand of them), else by PyYAML."""
    dumper = _PlainTimesDumper if plain_times else _Dumper
    text = _BlockWriter(dumper).document(data)
    if text is not None:
        return text
    return yaml.dump(data, Dumper=dumper, sort_keys=False, allow_unicode=True, width=WIDTH)


class _Dumper(yaml.SafeDumper):
    pass


_YAML_BREAKS = ("\x85", "\u2028", "\u2029", "\r")


def _str_presenter(dumper, data: str):
    if any(ch in data for ch in _YAML_BREAKS):
        style = '"'  # YAML folds these line breaks in other styles; escape them
    elif "\n" in data:
        style = "|"  # multi-line SQL stays readable
    else:
        style = None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _str_presenter)


class _PlainTimesDumper(_Dumper):
    pass


_PlainTimesDumper.yaml_implicit_resolvers = {
    ch: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for ch, resolvers in _Dumper.yaml_implicit_resolvers.items()
}


def load(text: str, *, aliases: bool, max_depth: int, max_values: int):
    """``yaml_codec.load_yaml`` (``aliases``), else ``yaml_codec.load_untrusted_yaml``, with
    their bounds (``yaml_codec.MAX_DEPTH``, ``MAX_VALUES``: given, as this module imports none
    of the codec's)."""
    # what yaml.load does, whose stubs know only PyYAML's loaders
    loader = (_Loader if aliases else _NoAliasLoader)(text, max_depth, max_values)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


class _Loader(Composer, CParser, SafeConstructor, Resolver):
    """PyYAML's SafeLoader with libyaml's parser (a tenth of the pure-Python parser's time per
    byte) under PyYAML's own composer, whose hooks check each node as it is made.

    An alias costs nothing to parse but stands for its anchor's whole tree, which later passes
    walk in full (a few bytes of nested aliases make billions of values): each alias counts the
    values of its anchor, so the count is the size of the document those passes see.
    """

    def __init__(self, stream, max_depth: int, max_values: int):
        CParser.__init__(self, stream)
        self._max_depth, self._max_values = max_depth, max_values
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)
        self._depth = 0
        self._values = 0
        self._sizes: dict[int, int] = {}  # id of an anchored node -> its values, aliases expanded

    def compose_node(self, parent, index):
        mark = self.peek_event().start_mark
        if self.check_event(yaml.AliasEvent):
            node = super().compose_node(parent, index)
            size = self._sizes.get(id(node))
            if size is None:  # its anchor is still open: the alias is inside itself
                raise ComposerError(None, None, "an alias inside its own anchor", mark)
            self._count(size, mark)
            return node
        anchor = self.peek_event().anchor
        self._depth += 1
        if self._depth > self._max_depth:
            raise ComposerError(None, None, f"nested more than {self._max_depth} levels deep", mark)
        self._count(1, mark)
        before = self._values - 1
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if anchor is not None:
            self._sizes[id(node)] = self._values - before
        return node

    def _count(self, values: int, mark) -> None:
        self._values += values
        if self._values > self._max_values:
            raise ComposerError(None, None, f"more than {self._max_values:,} values (an alias counts "
                                "as the values it stands for)", mark)

    def compose_mapping_node(self, anchor):
        node = super().compose_mapping_node(anchor)
        first: dict[tuple[str, str], Any] = {}  # key -> where it is first
        for key, _ in node.value:
            if isinstance(key, yaml.ScalarNode):
                seen = first.setdefault((key.tag, key.value), key.start_mark)
                if seen is not key.start_mark:
                    raise ComposerError(None, None, f"duplicate key {key.value!r} (first on line "
                                        f"{seen.line + 1})", key.start_mark)
        return node


class _NoAliasLoader(_Loader):
    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            raise ComposerError(None, None, "aliases are not accepted here", self.peek_event().start_mark)
        return super().compose_node(parent, index)


# drop the implicit timestamp resolver: '2020-01-01' must stay a string for exact parsing
_Loader.yaml_implicit_resolvers = {
    ch: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for ch, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


# --- the common case, written directly (see the module doc) ------------------------------------

_STR, _INT, _BOOL, _NULL = (f"tag:yaml.org,2002:{t}" for t in ("str", "int", "bool", "null"))
# Strings PyYAML's analysis certainly lets be plain in block context (``Emitter.analyze_scalar``:
# no indicator first, no ``: `` or `` #``, no space, no ``:`` last, printable ASCII): the rest
# are analyzed by PyYAML's own function.
_SURELY_PLAIN = re.compile(r"[A-Za-z0-9_/][A-Za-z0-9_./+=()-]*(?::+[A-Za-z0-9_./+=()-]+)*")
_BREAKS = re.compile("[\n\r\x85\u2028\u2029]")  # _str_presenter's styles (literal, double)
# the style of each string met as a key or a value, by dumper: a chain repeats most of them
_STYLES: dict[tuple[type[yaml.SafeDumper], str, bool], str | None] = {}


class _Declined(Exception):
    """A node ``_BlockWriter`` does not write: PyYAML writes the document."""


class _Analysis:
    """``Emitter.analyze_scalar``'s caller: its ``allow_unicode`` as ``dump`` sets it."""

    allow_unicode = True


class _BlockWriter:
    """PyYAML's emitter (``yaml.emitter.Emitter``) for a document of block mappings and lists
    and plain or single-quoted scalars: the same state, its functions of the same names, the
    branches they take for these nodes. ``document`` gives None for any other document."""

    def __init__(self, dumper: type[yaml.SafeDumper]):
        self.dumper = dumper
        self.out: list[str] = []
        self.column = 0
        self.whitespace = True
        self.indention = True
        self.indent: int | None = None
        self.indents: list[int | None] = []
        self.mapping_context = False
        self.simple_key_context = False
        self.seen: set[int] = set()

    def document(self, data) -> str | None:
        if type(data) not in (dict, list):
            return None
        try:
            self.node(data)
        except _Declined:
            return None
        self.write_indent()  # the document's end
        return "".join(self.out)

    # --- nodes (expect_node and the states it starts)

    def node(self, value, *, mapping: bool = False) -> None:
        self.mapping_context = mapping
        self.simple_key_context = False
        kind = type(value)
        if kind is dict or kind is list:
            if id(value) in self.seen:  # the representer would write an anchor and an alias
                raise _Declined
            self.seen.add(id(value))
            if not value:  # an empty collection is written in flow style
                self.write_indicator("{" if kind is dict else "[", True, whitespace=True)
                self.increase_indent(flow=True)
                self.indent = self.indents.pop()
                self.write_indicator("}" if kind is dict else "]", False)
            elif kind is dict:
                self.block_mapping(value)
            else:
                self.block_sequence(value)
        elif kind is str:
            self.scalar(value, self.string_style(value))
        elif kind is bool:
            self.implicit("true" if value else "false", _BOOL)
        elif kind is int:
            self.implicit(str(value), _INT)
        elif value is None:
            self.implicit("null", _NULL)
        else:
            raise _Declined

    def implicit(self, text: str, tag: str) -> None:
        """A scalar the safe representer writes plain, as read back as ``tag``."""
        if self.plain_tag(text) != tag:
            raise _Declined
        self.scalar(text, "")

    def block_mapping(self, mapping: dict) -> None:
        self.increase_indent(flow=False)
        for key, value in mapping.items():
            if type(key) is not str:
                raise _Declined
            style = self.string_style(key, simple_key=True)
            self.write_indent()
            self.mapping_context, self.simple_key_context = True, True
            self.scalar(key, style)
            self.write_indicator(":", False)
            self.node(value, mapping=True)
        self.indent = self.indents.pop()

    def block_sequence(self, sequence: list) -> None:
        self.increase_indent(flow=False, indentless=self.mapping_context and not self.indention)
        for item in sequence:
            self.write_indent()
            self.write_indicator("-", True, indention=True)
            self.node(item)
        self.indent = self.indents.pop()

    def scalar(self, text: str, style: str) -> None:
        if style == "" and text and " " not in text:  # write_plain of a word: no line to fold
            if not self.whitespace:
                self.out.append(" ")
                self.column += 1
            self.out.append(text)
            self.column += len(text)
            self.whitespace = self.indention = False
            return
        self.increase_indent(flow=True)
        split = not self.simple_key_context
        if style == "":
            self.write_plain(text, split)
        else:
            self.write_single_quoted(text, split)
        self.indent = self.indents.pop()

    def string_style(self, text: str, simple_key: bool = False) -> str:
        """``choose_scalar_style`` for a string: plain (""), single-quoted, or declined."""
        key = (self.dumper, text, simple_key)
        style = _STYLES.get(key, "?")
        if style == "?":
            style = self._string_style(text, simple_key)
            if len(_STYLES) > 100_000:
                _STYLES.clear()
            _STYLES[key] = style
        if style is None:
            raise _Declined
        return style

    def _string_style(self, text: str, simple_key: bool) -> str | None:
        if _SURELY_PLAIN.fullmatch(text):
            analysis: Any = _SurelyPlain
        elif _BREAKS.search(text):
            return None
        else:
            analysis = Emitter.analyze_scalar(_Analysis(), text)  # type: ignore[arg-type]
        # check_simple_key: the tag PyYAML prepares (!!str) counts towards a key's length
        if simple_key and (len(text) + len("!!str") >= 128 or analysis.empty or analysis.multiline):
            return None
        if self.plain_tag(text) == _STR and analysis.allow_block_plain:
            return ""
        if analysis.allow_single_quoted:
            return "'"
        return None

    def plain_tag(self, value: str) -> str:
        """The tag a plain scalar would be read as (``BaseResolver.resolve``)."""
        resolvers = self.dumper.yaml_implicit_resolvers
        for tag, regexp in resolvers.get(value[:1], []) + resolvers.get(None, []):
            if regexp.match(value):
                return tag
        return _STR

    # --- writing (Emitter's functions of the same names)

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        self.indents.append(self.indent)
        if self.indent is None:
            self.indent = 2 if flow else 0
        elif not indentless:
            self.indent += 2

    def write(self, data: str) -> None:
        self.column += len(data)
        self.out.append(data)

    def write_indicator(self, indicator: str, need_whitespace: bool, whitespace: bool = False,
                        indention: bool = False) -> None:
        data = indicator if self.whitespace or not need_whitespace else " " + indicator
        self.whitespace = whitespace
        self.indention = self.indention and indention
        self.write(data)

    def write_indent(self) -> None:
        indent = self.indent or 0
        if (not self.indention or self.column > indent
                or (self.column == indent and not self.whitespace)):
            self.out.append("\n")
            self.whitespace, self.indention, self.column = True, True, 0
        if self.column < indent:
            self.whitespace = True
            self.write(" " * (indent - self.column))

    def write_plain(self, text: str, split: bool) -> None:
        if not text:
            return
        if not self.whitespace:
            self.write(" ")
        self.whitespace = False
        self.indention = False
        if " " not in text:
            self.write(text)
            return
        spaces = False
        start = end = 0
        while end <= len(text):
            ch = text[end] if end < len(text) else None
            if spaces:
                if ch != " ":
                    if start + 1 == end and self.column > WIDTH and split:
                        self.write_indent()
                        self.whitespace = False
                        self.indention = False
                    else:
                        self.write(text[start:end])
                    start = end
            elif ch is None or ch == " ":
                self.write(text[start:end])
                start = end
            if ch is not None:
                spaces = ch == " "
            end += 1

    def write_single_quoted(self, text: str, split: bool) -> None:
        self.write_indicator("'", True)
        spaces = False
        start = end = 0
        while end <= len(text):
            ch = text[end] if end < len(text) else None
            if spaces:
                if ch is None or ch != " ":
                    if (start + 1 == end and self.column > WIDTH and split
                            and start != 0 and end != len(text)):
                        self.write_indent()
                    else:
                        self.write(text[start:end])
                    start = end
            elif ch is None or ch == " " or ch == "'":
                if start < end:
                    self.write(text[start:end])
                    start = end
            if ch == "'":
                self.write("''")
                start = end + 1
            if ch is not None:
                spaces = ch == " "
            end += 1
        self.write_indicator("'", False)


class _SurelyPlain:
    """The analysis of a string ``_SURELY_PLAIN`` matches (what ``analyze_scalar`` finds)."""

    empty = multiline = False
    allow_block_plain = allow_single_quoted = True
