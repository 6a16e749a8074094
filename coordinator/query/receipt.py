"""Query receipts: an answer anyone can check later, offline, from the datasets alone
(``coord sql --receipt``, ``coord verify-receipt``; the format is ``schemas/RECEIPT.md``).

A receipt names the query, each dataset it read with the block it was read at, the engine,
the answer's ``arrow0-sha3-256`` (and its rows when they are few), the time, and is signed
with the workspace key. Checking it re-runs the query at exactly those blocks.

Invariants:

- A receipt is made and checked by the same path: the query's inputs, each read as its chain
  stood at one block (``read_at``: the chain walked from that block back to its Seed, every
  block's bytes hashed against its name before they are parsed, every slice checked against
  its block before it is read), in a session that holds only them, by the names the query
  gives them, on one DuckDB thread (parallel sums of floats could add in another order); the
  answer hashed whole in the query's row order (``data.arrow_digest.record_digest``).
- A query whose answer could depend on anything but its inputs is refused before it runs,
  from DuckDB's parse tree (``json_serialize_sql``), never from its text: a function DuckDB
  itself marks not consistent in every form (volatile, or consistent within a query only:
  the clock, chance, the session's settings and variables) and DuckDB's macros over one;
  ``current_timestamp``, ``current_date`` and the like, which parse as column names; a
  sample; a table function that reads anything but its arguments; ``SHOW``; a ``LIMIT``
  without an ``ORDER BY`` beside it. After it runs, one whose row order is not the query's:
  more than one row and no ``ORDER BY``, or an ``ORDER BY`` of output columns under which two
  different rows tie. A refusal is one line and nothing is written.
- The signature is Ed25519 by the workspace key over ``DOMAIN`` then the receipt without its
  ``signature`` member in RFC 8785 canonical JSON (``canonical_json``); the signer's key is
  one of the signed members.
- A receipt is checked in this order, and the first that fails is the verdict (``cannot
  check``): its shape and version, its signature, a dataset of this workspace holding each
  input block, the signer accepted by ``trust.require`` (trusted, or pinned for one of those
  datasets), each input read at its block; then the query is run and the verdict is
  ``confirmed`` (the same hash, and the same rows where the receipt shows them) or
  ``different answer``.
"""
from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from functools import reduce
from typing import TYPE_CHECKING, Any

from ..errors import CoordError, Invalid
from ..metadata.did import DatasetId, InvalidDid
from ..metadata.multiformats import MultiformatError, Multihash
from ..metadata.timestamps import format_timestamp, now_utc, parse_timestamp
from ..store import layout as store_layout
from ..store.dataset import CurrentDataset
from ..store.read import DatasetState, build, walk
from ..workspace import Dataset, Workspace
from ..workspace.config import OdfVersion
from .sql import AsAt, DatasetRead, SqlError, SqlSession, Statement, current_read, dataset_read, split_script
from .state import STATE_SUFFIX

if TYPE_CHECKING:
    import pyarrow as pa

KIND = "QueryReceipt"
VERSION = 1
DOMAIN = b"coord query receipt v1\n"  # what the signed bytes start with: no block hash does
ENGINE = "duckdb"
FIELDS = ("kind", "version", "query", "asOf", "inputs", "engine", "answer", "time", "signer", "signature")
INPUT_FIELDS = ("name", "id", "odf", "block")
ANSWER_FIELDS = ("columns", "rowCount", "hash", "rows")
SHOWN_ROWS = 1000  # an answer of more rows is in the receipt by its hash alone
SHOWN_BYTES = 1 << 20  # nor one whose rows' JSON is longer
DIFFERENCES = 5  # rows that differ shown at most

# what a function of these reads, as a refusal words it (DuckDB marks each not consistent)
CLOCK = frozenset({"now", "current_date", "current_time", "current_timestamp", "today",
                   "get_current_time", "get_current_timestamp", "transaction_timestamp",
                   "current_localtime", "current_localtimestamp", "localtime", "localtimestamp"})
CHANCE = frozenset({"random", "uuid", "uuidv4", "uuidv7", "gen_random_uuid", "setseed"})
# the SQL words DuckDB parses as a column and binds to the clock when no column has the name
CLOCK_WORDS = frozenset({"current_timestamp", "current_date", "current_time", "localtime",
                         "localtimestamp"})
# table functions that compute from their arguments only
STEADY_TABLE_FUNCTIONS = frozenset({"range", "generate_series", "unnest", "repeat", "repeat_row",
                                    "json_each", "json_tree"})
# marked volatile, yet the same answer every time: error() fails the query, whatever it is given
STEADY_ANYWAY = frozenset({"error"})
UNKNOWN_PLACE = 2**64 - 1  # DuckDB's query_location when the node has none


class NotReproducible(SqlError):
    """A query a receipt cannot hold: its answer would not be the same when checked."""


class NotAReceipt(Invalid):
    """A file that is not a receipt of a version this coord reads."""


class CannotCheck(CoordError):
    """What a receipt's check needs and does not have (a block, a trusted signer, ...)."""


@dataclass(frozen=True)
class Input:
    """One dataset a query read: the name it gave it, its ``did:odf`` (None for ODF 0.18,
    which has none), the version it is stored in and the block it was read at (a current-ODF
    block's multihash ``f1620...``, a 0.18 block's SHA3-256 in hex)."""

    name: str
    id: str | None
    odf: str
    block: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "id": self.id, "odf": self.odf, "block": self.block}

    def describe(self) -> str:
        return f"{self.name} at block {self.block}"


# --- the query -------------------------------------------------------------------------------


def receipt_statement(text: str) -> tuple[Statement, dict[str, Any]]:
    """The one query of ``text`` and DuckDB's parse tree of it, refused (``NotReproducible``,
    or ``SqlError`` as ``coord sql`` refuses it) if a receipt cannot hold it."""
    statements = split_script(text)
    if len(statements) != 1:
        raise NotReproducible(f"a receipt holds one query; this text has {len(statements)} statements")
    statement = statements[0]
    if statement.kind != "SELECT":
        raise NotReproducible(f"a receipt holds a query's answer, not an {statement.kind}'s "
                              "(its plan is the engine's, not the datasets')")
    tree = _parse_tree(statement.text)
    problems = sorted(_unsteady_uses(tree))
    if problems:
        place, what = problems[0]
        raise NotReproducible(f"{_place(text, statement, place)}{what}, so a receipt of its answer "
                              "could not be checked (--receipt holds only answers that the data "
                              "alone decides)")
    return statement, tree


def _parse_tree(query: str) -> dict[str, Any]:
    tree = json.loads(_parser().execute("SELECT json_serialize_sql(?)", [query]).fetchone()[0])
    if tree.get("error"):
        raise NotReproducible(f"DuckDB cannot show the query's parts ({tree.get('error_message')}); "
                              "a receipt holds a plain query (SELECT, WITH, VALUES)")
    return tree


_PARSER: Any = None


def _parser() -> Any:
    """A DuckDB connection of its own for parsing (it reads nothing)."""
    global _PARSER
    if _PARSER is None:
        import duckdb

        _PARSER = duckdb.connect(config={"autoinstall_known_extensions": False,
                                         "autoload_known_extensions": False,
                                         "enable_external_access": False})
    return _PARSER


_UNSTEADY: dict[str, str] | None = None


def unsteady_functions() -> dict[str, str]:
    """Function name -> what it reads besides its arguments ("the clock", "chance", "the
    session"), for every function DuckDB marks not consistent (volatile, or consistent
    within one query only) in all its forms, and DuckDB's macros that call one of them."""
    global _UNSTEADY
    if _UNSTEADY is not None:
        return _UNSTEADY
    con = _parser()
    found: dict[str, str] = {}
    for name, stabilities in con.execute(
            "SELECT function_name, list(DISTINCT stability) FROM duckdb_functions() "
            "WHERE function_type IN ('scalar', 'aggregate') GROUP BY function_name").fetchall():
        if stabilities and all(s in ("VOLATILE", "CONSISTENT_WITHIN_QUERY") for s in stabilities) \
                and name.lower() not in STEADY_ANYWAY:
            found[name.lower()] = _reads(name.lower())
    for word in CLOCK_WORDS:
        found.setdefault(word, "the clock")
    macros = con.execute("SELECT function_name, function_type, macro_definition FROM duckdb_functions() "
                         "WHERE function_type IN ('macro', 'table_macro') "
                         "AND macro_definition IS NOT NULL").fetchall()
    changed = True
    while changed:  # a macro over a macro over one
        changed = False
        for name, kind, definition in macros:
            if name.lower() in found or not any(f in definition.lower() for f in found):
                continue  # the names are DuckDB's own: only a definition naming one is parsed
            query = definition if kind == "table_macro" else f"SELECT {definition}"
            try:
                tree = json.loads(con.execute("SELECT json_serialize_sql(?)", [query]).fetchone()[0])
            except Exception:  # noqa: BLE001 (a definition DuckDB cannot serialize: not called in a query)
                continue
            called = [found[n] for n in _called(tree) if n in found]
            if called:
                found[name.lower()] = called[0]
                changed = True
    _UNSTEADY = found
    return found


def _reads(name: str) -> str:
    return "the clock" if name in CLOCK else "chance" if name in CHANCE else "the session"


def _which(reads: str) -> str:
    return "which draws at random" if reads == "chance" else f"which reads {reads}"


def _nodes(tree: Any) -> Iterator[dict[str, Any]]:
    stack = [tree]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            yield value
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)


def _called(tree: Any) -> Iterator[str]:
    """The names of the functions ``tree`` calls, and of its columns of one part."""
    for node in _nodes(tree):
        if node.get("class") in ("FUNCTION", "WINDOW", "AGGREGATE") and "function_name" in node:
            yield str(node["function_name"]).lower()
        elif node.get("class") == "COLUMN_REF" and len(node.get("column_names", [])) == 1:
            yield str(node["column_names"][0]).lower()


def _unsteady_uses(tree: dict[str, Any]) -> Iterator[tuple[int, str]]:
    """(where in the query, what) of each part of ``tree`` whose value is not the data's alone."""
    unsteady = unsteady_functions()
    for node in _nodes(tree):
        place = node.get("query_location", UNKNOWN_PLACE)
        cls, kind = node.get("class"), node.get("type")
        if cls in ("FUNCTION", "WINDOW", "AGGREGATE") and "function_name" in node:
            name = str(node["function_name"]).lower()
            if name in unsteady:
                yield place, f"the query calls {name}(), {_which(unsteady[name])}"
        elif cls == "COLUMN_REF" and len(node.get("column_names", [])) == 1:
            name = str(node["column_names"][0]).lower()
            if name in CLOCK_WORDS:
                yield place, (f"the query reads {name}, the clock (a column of that name: "
                              f"name it with its table, t.{name})")
        elif kind == "TABLE_FUNCTION":
            name = str(node.get("function", {}).get("function_name", "")).lower()
            if name not in STEADY_TABLE_FUNCTIONS:
                yield place, f"the query reads the table function {name}(), not only datasets"
        elif kind == "SHOW_REF" and node.get("show_type") not in ("DESCRIBE", "SUMMARY"):
            yield place, "the query lists what the session holds (SHOW), not a dataset's rows"
        if node.get("sample"):
            yield place, "the query samples rows (USING SAMPLE, TABLESAMPLE), which draws them by chance"
        modifiers = [m.get("type") for m in node.get("modifiers", []) if isinstance(m, dict)]
        if any(m in ("LIMIT_MODIFIER", "LIMIT_PERCENT_MODIFIER") for m in modifiers) \
                and "ORDER_MODIFIER" not in modifiers:
            yield place, ("the query has a LIMIT without an ORDER BY, which keeps rows the query "
                          "does not choose")


def _place(text: str, statement: Statement, location: int) -> str:
    if location == UNKNOWN_PLACE:
        return ""
    at = statement.offset + location
    before = text[:at]
    return f"line {before.count(chr(10)) + 1}, column {at - (before.rfind(chr(10)) + 1) + 1}: "


def table_names(tree: dict[str, Any]) -> set[str]:
    """The names of the tables ``tree`` reads (CTEs' among them)."""
    return {str(n["table_name"]) for n in _nodes(tree) if n.get("type") == "BASE_TABLE"}


def check_order(tree: dict[str, Any], answer: pa.Table) -> None:
    """Refuse an answer whose row order the query does not decide (``NotReproducible``)."""
    node = tree["statements"][0]["node"]
    orders = [m for m in node.get("modifiers", []) if m.get("type") == "ORDER_MODIFIER"]
    if answer.num_rows < 2:
        return
    if not orders:
        raise NotReproducible(f"the answer has {answer.num_rows:,} rows and the query no ORDER BY: "
                              "their order is not the query's to say, so a receipt of it could not be "
                              "checked; add an ORDER BY that orders every row")
    keys = _order_columns(orders[0].get("orders", []), answer.column_names)
    tie = _tie(answer, keys) if keys is not None else None
    if tie is not None:
        names = ", ".join(answer.column_names[k] for k in keys or [])
        raise NotReproducible(f"rows {tie + 1:,} and {tie + 2:,} of the answer tie on the ORDER BY "
                              f"({names}) but differ: the query does not say which comes first, so a "
                              "receipt of it could not be checked; order by more columns (ORDER BY ALL "
                              "orders by every one)")


def _order_columns(orders: list[dict[str, Any]], names: list[str]) -> list[int] | None:
    """The output columns an ORDER BY sorts by, when each of its terms names one (a name, a
    position, ALL); None when a term is an expression (its ties are not looked for)."""
    lower = [n.lower() for n in names]
    keys: list[int] = []
    for term in orders:
        e = term.get("expression", {})
        if e.get("class") == "STAR":
            return list(range(len(names)))
        if e.get("class") == "CONSTANT" and e.get("literal", {}).get("kind") == "INTEGER":
            at = int(e["literal"]["text"]) - 1
            if not 0 <= at < len(names):
                return None
            keys.append(at)
        elif e.get("class") == "COLUMN_REF" and len(e.get("column_names", [])) == 1 \
                and str(e["column_names"][0]).lower() in lower:
            keys.append(lower.index(str(e["column_names"][0]).lower()))
        else:
            return None
    return keys


def _tie(answer: pa.Table, keys: list[int]) -> int | None:
    """The first row that ties with the next on ``keys`` but differs from it in another
    column (columns Arrow cannot compare left out of that); None if there is none."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = answer.num_rows

    def same(column: pa.ChunkedArray) -> Any:
        a, b = column.slice(0, n - 1), column.slice(1)
        equal = pc.fill_null(pc.equal(a, b), False)
        return pc.or_(equal, pc.and_(pc.is_null(a), pc.is_null(b)))

    try:
        key_same = reduce(pc.and_, [same(answer.column(k)) for k in keys])
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):
        return None
    whole = key_same
    for i, column in enumerate(answer.columns):
        if i in keys:
            continue
        try:
            whole = pc.and_(whole, same(column))
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):
            continue
    at = pc.index(pc.and_(key_same, pc.invert(whole)), True).as_py()
    return None if at < 0 else at


# --- the inputs ------------------------------------------------------------------------------


class _CurrentAt(CurrentDataset):
    """A current-ODF dataset as its chain stood at one block: the state ``state`` answers."""

    def __init__(self, ws: Workspace, name: str, at: DatasetState):
        super().__init__(ws, name)
        self._at = at

    def state(self) -> DatasetState:
        return self._at


class _DatasetAt(Dataset):
    """An ODF 0.18 dataset as its chain stood at one block: its head is that block."""

    def __init__(self, ws: Workspace, name: str, block: bytes):
        super().__init__(ws, name)
        self._block = block

    def head(self) -> bytes | None:
        return self._block


def inputs_of(ws: Workspace, tree: dict[str, Any], as_at: AsAt | None) -> list[Input]:
    """The datasets of ``ws`` the query names, each with the block it is read at (its head,
    or as at ``as_at`` as ``coord sql --as-at`` reads it); those without a block then left out."""
    wanted = set()
    for name in table_names(tree):
        low = name.lower()
        wanted |= {low, low.removesuffix(STATE_SUFFIX)}
    found = []
    for ds in ws.datasets():
        if ds.id.lower() in wanted:
            at = _block_at(ws, ds, as_at)
            if at is not None:
                found.append(at)
    return sorted(found, key=lambda i: i.name)


def _block_at(ws: Workspace, ds: Dataset, as_at: AsAt | None) -> Input | None:
    if ws.odf_of(ds.id) is OdfVersion.V039:
        state = CurrentDataset(ws, ds.id).state()
        blocks = list(state.blocks)
        if as_at is not None and as_at.dataset == ds.id:
            blocks = [b for b in blocks if b.hash.to_bytes() == as_at.block]
        elif as_at is not None:
            blocks = [b for b in blocks if b.block.system_time <= as_at.time]
        return Input(ds.id, str(state.id), OdfVersion.V039.value, str(blocks[-1].hash)) if blocks else None
    for h, block in ds.blocks():  # newest first
        if as_at is None or (h == as_at.block if as_at.dataset == ds.id else block.system_time <= as_at.time):
            return Input(ds.id, None, OdfVersion.V018.value, h.hex())
    return None


def holder(ws: Workspace, given: Input) -> str:
    """The dataset of ``ws`` that holds ``given``'s block (the one of its name first: a dataset
    pulled under another name serves as well); ``CannotCheck`` when none does."""
    candidates = sorted(ws.datasets(), key=lambda d: d.id != given.name)
    for ds in candidates:
        if given.odf == OdfVersion.V039.value and ws.odf_of(ds.id) is OdfVersion.V039:
            folder = CurrentDataset(ws, ds.id).root
            if (folder / store_layout.block_file(Multihash.parse(given.block))).exists():
                return ds.id
        elif given.odf == OdfVersion.V018.value and ws.odf_of(ds.id) is OdfVersion.V018:
            if ds.block_path(bytes.fromhex(given.block)).exists():
                return ds.id
    identity = f" ({given.id})" if given.id else ""
    raise CannotCheck(f"this workspace holds no block {given.block} of {given.name}{identity}: "
                      f"pull {given.name} from where the receipt's author publishes it (up to that "
                      "block or later) and check again")


def read_at(ws: Workspace, given: Input, local: str) -> DatasetRead | None:
    """The local dataset ``local`` as its chain stood at ``given``'s block (None: no data yet
    then): the chain walked from that block to its Seed, each block's bytes hashed against its
    name before they are parsed (a ``CoordError`` names the first that fails), its slices
    checked before anything reads them."""
    if given.odf == OdfVersion.V039.value:
        ds = CurrentDataset(ws, local)
        newest_first, problem = walk(ds.root, Multihash.parse(given.block))
        if problem is not None:
            raise CannotCheck(f"{local}: {problem}")
        state = build(newest_first[::-1])
        if given.id is not None and str(state.id) != given.id:
            raise CannotCheck(f"{local}: block {given.block} is of dataset {state.id}, not {given.id}")
        return current_read(_CurrentAt(ws, local, state))
    return dataset_read(_DatasetAt(ws, local, bytes.fromhex(given.block)))


def run_at(ws: Workspace, statement: Statement, text: str, reads: dict[str, DatasetRead],
           as_of: datetime | None, memory_limit: int | None = None) -> pa.Table:
    """The query's answer over ``reads`` (by the names the query gives them), on one thread."""
    with SqlSession(ws, as_of=as_of, reads=reads, threads=1, memory_limit=memory_limit) as session:
        return session.query(statement, text)


# --- the answer ------------------------------------------------------------------------------


def answer_of(table: pa.Table) -> dict[str, Any]:
    """The receipt's ``answer``: its columns, row count, ``arrow0-sha3-256`` and (when few)
    its rows; ``NotReproducible`` for a column the hash has no encoding for."""
    from ..data.arrow_digest import UnsupportedTypeError, multibase16, record_digest

    try:
        digest = record_digest(table)
    except UnsupportedTypeError as e:
        raise NotReproducible(f"the answer cannot be hashed: {e}") from None
    rows = shown_rows(table, SHOWN_ROWS) if table.num_rows <= SHOWN_ROWS else None
    if rows is not None and len(json.dumps(rows)) > SHOWN_BYTES:
        rows = None
    return {"columns": [{"name": f.name, "type": str(f.type)} for f in table.schema],
            "rowCount": table.num_rows, "hash": multibase16(digest), "rows": rows}


def shown_rows(table: pa.Table, limit: int) -> list[list[Any]]:
    """The first ``limit`` rows as JSON values (as ``coord sql -o json`` writes them), each a
    list in column order."""
    from .tail import json_value
    from .values import python_rows

    records = python_rows(table.slice(0, limit))
    return json.loads(json.dumps([list(r.values()) for r in records], default=json_value))


def engine() -> dict[str, str]:
    import duckdb

    return {"name": ENGINE, "version": duckdb.__version__}


# --- making one ------------------------------------------------------------------------------


def make_receipt(ws: Workspace, text: str, as_at: AsAt | None = None,
                 as_of: datetime | None = None) -> tuple[pa.Table, dict[str, Any]]:
    """The answer to the query ``text`` and its signed receipt; ``NotReproducible`` for a query
    a receipt cannot hold, before it runs or, for its row order, after."""
    table, doc = unsigned_receipt(ws, text, as_at, as_of)
    return table, sign(ws, doc)


def unsigned_receipt(ws: Workspace, text: str, as_at: AsAt | None = None, as_of: datetime | None = None,
                     memory_limit: int | None = None) -> tuple[pa.Table, dict[str, Any]]:
    """``make_receipt``'s answer and receipt, the receipt not yet signed (``sign``): a process
    that runs a stranger's query need not hold the key."""
    statement, tree = receipt_statement(text)
    inputs, reads = [], {}
    for given in inputs_of(ws, tree, as_at):
        read = read_at(ws, given, given.name)
        if read is not None:  # no data at that block: not a table a query can read
            inputs.append(given)
            reads[given.name] = read
    table = run_at(ws, statement, text, reads, as_of, memory_limit)
    check_order(tree, table)
    doc = {"kind": KIND, "version": VERSION, "query": text,
           "asOf": format_timestamp(as_of) if as_of is not None else None,
           "inputs": [i.to_json() for i in inputs], "engine": engine(), "answer": answer_of(table),
           "time": format_timestamp(now_utc()), "signer": None}  # sign() names the key
    return table, doc


def sign(ws: Workspace, doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` signed by the workspace key (its ``signer`` set to that key)."""
    body = {k: v for k, v in doc.items() if k != "signature"}
    body["signer"] = ws.public_key.hex()
    return {**body, "signature": ws.signing_key.sign(signed_bytes(body)).signature.hex()}


def signed_bytes(doc: dict[str, Any]) -> bytes:
    """What the signature is of: ``DOMAIN`` then the receipt but its ``signature`` member, in
    canonical JSON (RFC 8785)."""
    return DOMAIN + canonical_json({k: v for k, v in doc.items() if k != "signature"}).encode()


def receipt_bytes(doc: dict[str, Any]) -> bytes:
    """The receipt as its file holds it: JSON indented by two, each answer column and row on
    a line of its own, a newline at the end (any other spelling of the same JSON checks the
    same: the signature is over its canonical form)."""
    answer = doc["answer"]
    marked = {name: f"\0{name}\0" for name in ("columns", "rows") if answer[name]}
    text = json.dumps({**doc, "answer": {**answer, **marked}}, indent=2, ensure_ascii=False)
    for name, marker in marked.items():
        items = ",\n".join("      " + json.dumps(item, ensure_ascii=False) for item in answer[name])
        text = text.replace(json.dumps(marker), "[\n" + items + "\n    ]", 1)
    return (text + "\n").encode()


def canonical_json(value: Any) -> str:
    """RFC 8785 (JCS): members sorted by their UTF-16 code units, no white space, strings
    escaped as ECMAScript's JSON.stringify does, numbers as ECMAScript writes them (integers,
    however large, in full)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _es_number(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ",".join(canonical_json(v) for v in value) + "]"
    if isinstance(value, dict):
        members = sorted(value.items(), key=lambda kv: kv[0].encode("utf-16-be"))
        return "{" + ",".join(f"{canonical_json(k)}:{canonical_json(v)}" for k, v in members) + "}"
    raise TypeError(f"{type(value).__name__} has no JSON form")


def _es_number(x: float) -> str:
    """A float as ECMAScript's Number::toString writes it (the shortest digits that read back)."""
    if not math.isfinite(x):
        raise ValueError("JSON has no NaN or infinity")
    if x == 0:
        return "0"
    if x < 0:
        return "-" + _es_number(-x)
    mantissa, _, exponent = repr(x).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    n = len(whole) + int(exponent or 0) - (len(digits) - len(digits.lstrip("0")))
    digits = digits.strip("0")
    k = len(digits)
    if k <= n <= 21:
        return digits + "0" * (n - k)
    if 0 < n <= 21:
        return digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return "0." + "0" * -n + digits
    e = n - 1
    sign = "+" if e >= 0 else "-"
    return (digits if k == 1 else digits[0] + "." + digits[1:]) + f"e{sign}{abs(e)}"


# --- checking one ----------------------------------------------------------------------------


@dataclass
class Verdict:
    """What ``verify_receipt`` found: ``outcome`` is ``confirmed``, ``different answer`` or
    ``cannot check``, ``reason`` says why in one line."""

    outcome: str
    reason: str
    signer: str | None = None
    authorship: str | None = None  # trusted (WHO), pinned for DS, not trusted
    time: str | None = None
    inputs: list[dict[str, Any]] = field(default_factory=list)  # with "readFrom": the local dataset
    differences: list[str] = field(default_factory=list)

    @property
    def confirmed(self) -> bool:
        return self.outcome == "confirmed"

    def to_json(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "reason": self.reason, "signer": self.signer,
                "authorship": self.authorship, "time": self.time, "inputs": self.inputs,
                "differences": self.differences}


def load_receipt(data: bytes) -> dict[str, Any]:
    """A receipt's JSON, its shape checked (``NotAReceipt`` says what is wrong)."""

    def members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [k for k, _ in pairs]
        if len(set(keys)) != len(keys):
            raise NotAReceipt("a member is given twice")
        return dict(pairs)

    def no_constant(word: str) -> Any:
        raise NotAReceipt(f"JSON has no {word}")

    try:
        doc = json.loads(data.decode("utf-8"), object_pairs_hook=members, parse_constant=no_constant)
    except (UnicodeDecodeError, ValueError) as e:
        raise NotAReceipt(f"not JSON ({e})") from None
    if not isinstance(doc, dict) or doc.get("kind") != KIND:
        raise NotAReceipt(f'not a query receipt (no "kind": "{KIND}")')
    if doc.get("version") != VERSION:
        raise NotAReceipt(f"receipt version {doc.get('version')!r}: this coord reads version {VERSION}")
    _members(doc, FIELDS, "the receipt")
    _of_type(doc, "query", str)
    _of_type(doc, "time", str)
    if doc["asOf"] is not None:
        _of_type(doc, "asOf", str)
    _of_type(doc, "inputs", list)
    for given in doc["inputs"]:
        _input(given)
    _of_type(doc, "engine", dict)
    _members(doc["engine"], ("name", "version"), "engine")
    _of_type(doc, "answer", dict)
    _members(doc["answer"], ANSWER_FIELDS, "answer")
    answer = doc["answer"]
    if not isinstance(answer["rowCount"], int) or not isinstance(answer["hash"], str) \
            or not isinstance(answer["columns"], list) \
            or not (answer["rows"] is None or isinstance(answer["rows"], list)):
        raise NotAReceipt("answer: rowCount, hash, columns or rows is not of its type")
    try:
        parse_timestamp(doc["time"])
        if doc["asOf"] is not None:
            parse_timestamp(doc["asOf"])
        if len(bytes.fromhex(doc["signer"])) != 32 or len(bytes.fromhex(doc["signature"])) != 64:
            raise ValueError("a key is 64 hex digits, a signature 128")
    except (ValueError, TypeError, CoordError) as e:
        raise NotAReceipt(str(e)) from None
    return doc


def _members(doc: dict[str, Any], names: tuple[str, ...], what: str) -> None:
    if set(doc) != set(names):
        extra, missing = sorted(set(doc) - set(names)), sorted(set(names) - set(doc))
        raise NotAReceipt(f"{what}: " + "; ".join(
            ([f"unknown members {', '.join(extra)}"] if extra else [])
            + ([f"missing members {', '.join(missing)}"] if missing else [])))


def _of_type(doc: dict[str, Any], name: str, kind: type) -> None:
    if not isinstance(doc[name], kind):
        raise NotAReceipt(f"{name} is not a {kind.__name__}")


def _input(given: Any) -> Input:
    if not isinstance(given, dict):
        raise NotAReceipt("an input is not an object")
    _members(given, INPUT_FIELDS, "input")
    name, identity, odf, block = (given[k] for k in INPUT_FIELDS)
    try:
        if not isinstance(name, str) or not isinstance(block, str):
            raise ValueError("an input's name and block are text")
        if odf == OdfVersion.V039.value:
            if not isinstance(identity, str):
                raise ValueError(f"input {name}: a current-ODF dataset has a did:odf id")
            DatasetId.parse(identity)
            Multihash.parse(block)
        elif odf == OdfVersion.V018.value:
            if identity is not None or len(bytes.fromhex(block)) != 32:
                raise ValueError(f"input {name}: an ODF 0.18 block is 64 hex digits and has no id")
        else:
            raise ValueError(f"input {name}: odf {odf!r} is neither 0.39 nor 0.18")
    except (ValueError, InvalidDid, MultiformatError) as e:
        raise NotAReceipt(str(e)) from None
    return Input(name, identity, odf, block)


def signature_holds(doc: dict[str, Any]) -> bool:
    """Whether ``signature`` is ``signer``'s over the rest of the receipt."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        Ed25519PublicKey.from_public_bytes(bytes.fromhex(doc["signer"])).verify(
            bytes.fromhex(doc["signature"]), signed_bytes(doc))
    except (InvalidSignature, ValueError, TypeError):
        return False
    return True


def verify_receipt(ws: Workspace, data: bytes) -> Verdict:
    """The receipt of ``data`` checked against this workspace (see the module doc)."""
    try:
        doc = load_receipt(data)
    except NotAReceipt as e:
        return Verdict("cannot check", f"not a receipt this coord reads: {e}")
    if not signature_holds(doc):
        return Verdict("cannot check", "the signature does not verify: the receipt was changed "
                                       "after it was signed, or is not whole")
    verdict = Verdict("cannot check", "", signer=doc["signer"], time=doc["time"])
    inputs = [_input(i) for i in doc["inputs"]]
    try:
        local = [holder(ws, given) for given in inputs]
    except CannotCheck as e:
        verdict.reason = str(e)
        return verdict
    verdict.inputs = [{**given.to_json(), "readFrom": name}
                      for given, name in zip(inputs, local, strict=True)]
    accepted, verdict.authorship = _judge_signer(ws, bytes.fromhex(doc["signer"]), local)
    if not accepted:
        verdict.reason = (f"signed by {doc['signer']}, which this workspace does not trust "
                          f"(coord trust add {doc['signer']} --name WHO trusts it)")
        return verdict
    try:
        statement, tree = receipt_statement(doc["query"])
        reads = {}
        for given, name in zip(inputs, local, strict=True):
            try:
                read = read_at(ws, given, name)
            except CannotCheck:
                raise
            except CoordError as e:
                raise CannotCheck(f"{name}: {e}" if not str(e).startswith(name) else str(e)) from None
            if read is None:
                raise CannotCheck(f"{given.name}: block {given.block} holds no data yet")
            reads[given.name] = read
        table = run_at(ws, statement, doc["query"],
                       reads, parse_timestamp(doc["asOf"]) if doc["asOf"] is not None else None)
        ours = answer_of(table)
    except CoordError as e:
        verdict.reason = str(e)
        return verdict
    return _compared(verdict, doc, ours, table)


def _judge_signer(ws: Workspace, key: bytes, local: list[str]) -> tuple[bool, str]:
    """Whether ``trust.require`` accepts the signer of a receipt, and how it is known: a
    trusted key, or the key pinned for one of the datasets it read (their author's)."""
    from ..trust.authorship import Authorship, pinned_keys, policy

    names = ws.trusted_key_names()
    if key in names:
        status, how = Authorship.TRUSTED, f"trusted: {names[key]}" if names[key] else "trusted"
    else:
        pinned = next((name for name in local if key in pinned_keys(ws, name)), None)
        status, how = (Authorship.PINNED, f"pinned for {pinned}") if pinned else \
            (Authorship.UNKNOWN, "not trusted")
    return policy(ws).accepts(status), how


def _compared(verdict: Verdict, doc: dict[str, Any], ours: dict[str, Any], table: pa.Table) -> Verdict:
    theirs = doc["answer"]
    shown = theirs["rows"]
    same_rows = shown is None or shown == shown_rows(table, len(shown))
    if ours["hash"] == theirs["hash"] and same_rows and ours["rowCount"] == theirs["rowCount"]:
        verdict.outcome = "confirmed"
        verdict.reason = (f"the query gives the receipt's answer at its blocks ({ours['rowCount']:,} "
                          f"row{'s' if ours['rowCount'] != 1 else ''}, {ours['hash']})")
        return verdict
    verdict.outcome = "different answer"
    verdict.reason = (f"at the receipt's blocks the query gives {_rows(ours['rowCount'])} hashing to "
                      f"{ours['hash']}, the receipt says {_rows(theirs['rowCount'])} hashing to "
                      f"{theirs['hash']}")
    verdict.differences = _differences(doc, ours, table)
    return verdict


def _rows(n: Any) -> str:
    return f"{n:,} row{'s' if n != 1 else ''}" if isinstance(n, int) else repr(n)


def _differences(doc: dict[str, Any], ours: dict[str, Any], table: pa.Table) -> list[str]:
    theirs = doc["answer"]
    lines = []
    if theirs["columns"] != ours["columns"]:
        lines.append(f"columns: the receipt's {_columns(theirs['columns'])}; now {_columns(ours['columns'])}")
    if doc["engine"] != engine():
        lines.append(f"engine: the receipt's {doc['engine'].get('name')} {doc['engine'].get('version')}, "
                     f"here {ENGINE} {engine()['version']}")
    shown = theirs["rows"]
    if shown is None:
        lines.append("the receipt holds no rows to compare (it holds the hash alone of an answer of "
                     f"more than {SHOWN_ROWS:,} rows or {SHOWN_BYTES >> 20} MiB)")
        return lines
    now = shown_rows(table, max(len(shown), 1) + DIFFERENCES)
    differ = [i for i in range(max(len(shown), len(now))) if
              (shown[i] if i < len(shown) else None) != (now[i] if i < len(now) else None)]
    for i in differ[:DIFFERENCES]:
        lines.append(f"row {i + 1}: receipt {_row(shown, i)}")
        lines.append(f"{' ' * len(f'row {i + 1}')}      now {_row(now, i)}")
    if len(differ) > DIFFERENCES:
        lines.append(f"... and {len(differ) - DIFFERENCES:,} more rows differ among the first "
                     f"{max(len(shown), len(now)):,}")
    if not differ:
        lines.append("the rows the receipt shows are the rows the query gives, but not their hash: "
                     "its hash is not of its own rows")
    return lines


def _row(rows: list[Any], i: int) -> str:
    return json.dumps(rows[i], ensure_ascii=False) if i < len(rows) else "(no such row)"


def _columns(columns: Any) -> str:
    try:
        return ", ".join(f"{c['name']} {c['type']}" for c in columns)
    except (TypeError, KeyError):
        return json.dumps(columns)
