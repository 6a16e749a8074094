"""Query receipts: ``coord sql --receipt FILE`` writes a signed receipt of the answer and
``coord verify-receipt FILE`` checks it, offline, by running the query again at exactly the
blocks it names (schemas/RECEIPT.md).

The workspace is a current-ODF one (what ``coord init`` makes) with a ledger root of cities
pulled from a Parquet file twice (two blocks of data), built once and copied for each test;
the commands run as the user runs them (``coord_here``: the CLI's ``main`` in this process)."""
from __future__ import annotations

import hashlib
import json
import shutil
import struct
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from coordinator.metadata.multiformats import Multihash
from coordinator.query.receipt import (
    canonical_json,
    load_receipt,
    receipt_bytes,
    sign,
    signature_holds,
    signed_bytes,
)
from coordinator.store import layout
from coordinator.store.dataset import CurrentDataset
from coordinator.workspace import Workspace
from tests.support.cli import ROOT, coord_here
from tests.support.tamper import flip_a_byte

CITIES = "org.example.cities"
FIRST = [("Lima", "PE", 10_000_000), ("Oslo", "NO", 700_000), ("Pune", "IN", 3_000_000)]
SECOND = [("Bergen", "NO", 290_000), ("Cusco", "PE", 430_000)]
MANIFEST = f"""
apiVersion: 1
kind: DatasetSnapshot
content:
  id: {CITIES}
  source:
    kind: root
    fetch: {{kind: url, url: cities.parquet}}
    read: {{kind: parquet, schema: ["city STRING", "country STRING", "pop BIGINT"]}}
    merge: {{kind: ledger, primaryKey: [city]}}
"""
BY_CITY = f'SELECT city, pop FROM "{CITIES}" ORDER BY city'


def write_cities(folder: Path, rows: list[tuple]) -> None:
    pq.write_table(pa.table({"city": [r[0] for r in rows], "country": [r[1] for r in rows],
                             "pop": [r[2] for r in rows]}), folder / "cities.parquet")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """A workspace whose cities were pulled twice: the first three, then two more; and
    ``first.json``, a receipt of ``BY_CITY`` made between the two pulls."""
    folder = tmp_path_factory.mktemp("receipts") / "origin"
    folder.mkdir()
    coord_here("init", cwd=folder)
    (folder / "cities.yaml").write_text(MANIFEST)
    write_cities(folder, FIRST)
    coord_here("add", "cities.yaml", cwd=folder)
    coord_here("pull", CITIES, cwd=folder)
    coord_here("sql", "--receipt", "first.json", "-c", BY_CITY, cwd=folder)
    write_cities(folder, FIRST + SECOND)
    coord_here("pull", CITIES, cwd=folder)
    return folder


@pytest.fixture
def home(built, tmp_path) -> Path:
    """``built``, copied for one test."""
    return Path(shutil.copytree(built, tmp_path / "origin"))


def receipt_of(home: Path, query: str, *args: str, name: str = "receipt.json") -> dict:
    coord_here("sql", "--receipt", name, "-c", query, *args, cwd=home)
    return json.loads((home / name).read_text())


def verified(home: Path, receipt: Path | str):
    return coord_here("verify-receipt", str(receipt), cwd=home, check=False)


def resigned(home: Path, doc: dict, name: str = "edited.json") -> Path:
    """``doc`` signed again by the workspace at ``home``, written to ``name`` there."""
    path = home / name
    path.write_bytes(receipt_bytes(sign(Workspace.open(home), doc)))
    return path


def block_file(home: Path, block: str) -> Path:
    return CurrentDataset(Workspace.open(home), CITIES).root / layout.block_file(Multihash.parse(block))


# --- writing and confirming ------------------------------------------------------------------


def test_a_receipt_is_written_beside_the_answer_and_confirmed(home):
    plain = coord_here("sql", "-o", "json", "-c", BY_CITY, cwd=home).stdout
    answered = coord_here("sql", "-o", "json", "--receipt", "r.json", "-c", BY_CITY, cwd=home)
    receipt = json.loads((home / "r.json").read_text())

    assert answered.stdout == plain
    ws = Workspace.open(home)
    state = CurrentDataset(ws, CITIES).state()
    assert receipt["inputs"] == [{"name": CITIES, "id": str(state.id), "odf": "0.39",
                                  "block": str(state.head)}]
    assert receipt["signer"] == ws.public_key.hex()
    assert receipt["answer"]["rows"] == [[c, p] for c, _, p in sorted(FIRST + SECOND)]
    checked = verified(home, "r.json")
    assert checked.returncode == 0, checked.stdout
    assert checked.stdout.startswith("confirmed: the query gives the receipt's answer at its blocks (5 rows")
    assert "(trusted: this workspace)" in checked.stdout


def test_a_query_from_a_file_gets_a_receipt_too(home):
    (home / "report.sql").write_text(f'-- the largest\nSELECT max(pop) AS largest FROM "{CITIES}"\n')
    coord_here("sql", "--receipt", "r.json", "-f", "report.sql", cwd=home)
    receipt = json.loads((home / "r.json").read_text())
    assert receipt["query"] == (home / "report.sql").read_text()
    assert receipt["answer"]["rows"] == [[10_000_000]]
    assert verified(home, "r.json").returncode == 0


def test_the_answer_hash_is_arrow0_sha3_256_of_the_answer_in_its_row_order(home):
    """Computed here from the rows the test wrote, by schemas/ARROW-DIGEST.md: the field
    headers, then one SHA3-256 per column (its type header, then each element)."""
    def u64(n: int) -> bytes:
        return struct.pack("<Q", n)

    rows = sorted(FIRST + SECOND)
    city = hashlib.sha3_256(bytes.fromhex("0400"))  # Utf8
    pop = hashlib.sha3_256(bytes.fromhex("0100014000000000000000"))  # Int64
    for name, _, people in rows:
        city.update(u64(len(name.encode())) + name.encode())
        pop.update(struct.pack("<q", people))
    record = hashlib.sha3_256(b"".join(u64(len(n)) + n + u64(0) for n in (b"city", b"pop")))
    record.update(city.digest() + pop.digest())

    receipt = receipt_of(home, BY_CITY)

    assert receipt["answer"]["hash"] == "f9680c00120" + record.hexdigest()
    assert receipt_of(home, f'SELECT city, pop FROM "{CITIES}" ORDER BY city DESC')["answer"]["hash"] \
        != receipt["answer"]["hash"]  # the same rows in another order


def test_a_receipt_stays_confirmed_after_its_dataset_moved_on(home):
    first = json.loads((home / "first.json").read_text())
    state = CurrentDataset(Workspace.open(home), CITIES).state()
    assert first["inputs"][0]["block"] != str(state.head)  # made before the second pull
    assert first["answer"]["rowCount"] == 3

    checked = verified(home, "first.json")

    assert checked.returncode == 0, checked.stdout
    assert "(3 rows," in checked.stdout


def test_a_receipt_as_at_an_older_block_names_that_block(home):
    blocks = CurrentDataset(Workspace.open(home), CITIES).state().blocks
    older = next(b for b in reversed(blocks[:-1]) if b.block.event.__class__.__name__ == "AddData")
    receipt = receipt_of(home, BY_CITY, "--as-at", older.hash.digest.hex()[:12])
    assert receipt["inputs"][0]["block"] == str(older.hash)
    assert receipt["answer"]["rowCount"] == 3
    assert verified(home, "receipt.json").returncode == 0


def test_a_receipt_is_confirmed_in_a_workspace_that_pulled_the_inputs_from_a_repository(home, tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    receipt_of(home, BY_CITY)
    coord_here("repo", "add", "shared", repo.as_uri(), cwd=home)
    coord_here("push", CITIES, "--to", "shared", cwd=home)
    other = tmp_path / "other"
    other.mkdir()
    coord_here("init", cwd=other)
    coord_here("repo", "add", "shared", repo.as_uri(), cwd=other)
    coord_here("pull", f"shared/{CITIES}", "--as", "cities", cwd=other)  # under a name of its own

    checked = verified(other, home / "receipt.json")

    assert checked.returncode == 0, checked.stdout
    assert checked.stdout.startswith("confirmed:")
    assert "(pinned for cities)" in checked.stdout  # the datasets' signer, pinned by the pull
    assert f"{CITIES} at block" in checked.stdout and "(read from cities here)" in checked.stdout


# --- what is not confirmed -------------------------------------------------------------------


def test_a_receipt_whose_answer_hash_was_edited_does_not_verify(home):
    doc = receipt_of(home, BY_CITY)
    doc["answer"]["hash"] = doc["answer"]["hash"][:-4] + "0000"
    (home / "edited.json").write_bytes(receipt_bytes(doc))

    checked = verified(home, "edited.json")

    assert checked.returncode == 1
    assert checked.stdout.splitlines()[0] == ("cannot check: the signature does not verify: the receipt "
                                              "was changed after it was signed, or is not whole")


def test_a_signed_receipt_of_another_hash_is_a_different_answer(home):
    doc = receipt_of(home, BY_CITY)
    claimed = doc["answer"]["hash"][:-4] + "0000"
    doc["answer"]["hash"] = claimed

    checked = verified(home, resigned(home, doc))

    assert checked.returncode == 1
    first = checked.stdout.splitlines()[0]
    assert first.startswith("different answer: at the receipt's blocks the query gives 5 rows hashing to ")
    assert first.endswith(f"the receipt says 5 rows hashing to {claimed}")
    assert "its hash is not of its own rows" in checked.stdout


def test_a_different_answer_shows_the_first_rows_that_differ(home):
    doc = receipt_of(home, BY_CITY)
    doc["answer"]["rows"][1] = ["Cusco", 999]  # a signer's claim the data does not support

    checked = verified(home, resigned(home, doc))

    assert checked.returncode == 1
    lines = checked.stdout.splitlines()
    assert lines[0].startswith("different answer:")
    assert '  row 2: receipt ["Cusco", 999]' in lines
    assert '             now ["Cusco", 430000]' in lines
    assert not any(line.lstrip().startswith("row 1:") for line in lines)


def test_a_receipt_cannot_be_checked_in_a_workspace_without_its_dataset(home, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    coord_here("init", cwd=other)
    doc = receipt_of(home, BY_CITY)

    checked = verified(other, home / "receipt.json")

    assert checked.returncode == 1
    assert checked.stdout.splitlines()[0] == (
        f"cannot check: this workspace holds no block {doc['inputs'][0]['block']} of {CITIES} "
        f"({doc['inputs'][0]['id']}): pull {CITIES} from where the receipt's author publishes it "
        "(up to that block or later) and check again")


def test_a_receipt_whose_block_was_tampered_with_cannot_be_checked(home):
    doc = receipt_of(home, BY_CITY)
    block = block_file(home, doc["inputs"][0]["block"])
    flip_a_byte(block, len(block.read_bytes()) // 2)

    checked = verified(home, "receipt.json")

    assert checked.returncode == 1
    first = checked.stdout.splitlines()[0]
    assert first.startswith(f"cannot check: {CITIES}: head block ({doc['inputs'][0]['block']}): ")
    assert first.endswith("the stored block is damaged")


def test_a_receipt_whose_data_file_was_tampered_with_cannot_be_checked(home):
    receipt_of(home, BY_CITY)
    ds = CurrentDataset(Workspace.open(home), CITIES)
    flip_a_byte(ds.data_file(ds.state().slices[-1].slice))

    checked = verified(home, "receipt.json")

    assert checked.returncode == 1
    assert checked.stdout.startswith(f"cannot check: {CITIES}")


def test_a_receipt_signed_by_a_key_the_workspace_does_not_trust_cannot_be_checked(home, tmp_path):
    stranger = tmp_path / "stranger"
    stranger.mkdir()
    coord_here("init", cwd=stranger)
    doc = receipt_of(home, BY_CITY)
    path = resigned(stranger, doc)
    key = Workspace.open(stranger).public_key.hex()

    checked = verified(home, path)

    assert checked.returncode == 1
    assert checked.stdout.splitlines()[0] == (
        f"cannot check: signed by {key}, which this workspace does not trust "
        f"(coord trust add {key} --name WHO trusts it)")
    coord_here("trust", "add", key, "--name", "stranger", cwd=home)
    assert verified(home, path).returncode == 0


def test_the_verdict_is_one_json_object_with_o_json(home):
    receipt_of(home, BY_CITY)
    verdict = json.loads(coord_here("verify-receipt", "receipt.json", "-o", "json", cwd=home).stdout)
    assert verdict["outcome"] == "confirmed" and verdict["inputs"][0]["readFrom"] == CITIES


# --- queries a receipt cannot hold -----------------------------------------------------------


def refused_receipt(home, query: str) -> subprocess.CompletedProcess:
    """``coord sql --receipt`` of ``query``, which must fail in one line and write no receipt."""
    proc = coord_here("sql", "--receipt", "r.json", "-c", query, cwd=home, check=False)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
    assert not (home / "r.json").exists()
    return proc


@pytest.mark.parametrize("query, why", [
    ("SELECT now() AS t", "line 1, column 8: the query calls now(), which reads the clock"),
    (f'SELECT city FROM "{CITIES}" WHERE pop > 1000000 * random() ORDER BY city',
     "line 1, column 61: the query calls random(), which draws at random"),
    (f'SELECT city, current_date AS d FROM "{CITIES}" ORDER BY city',
     "the query reads current_date, the clock"),
    (f'SELECT city, gen_random_uuid() AS id FROM "{CITIES}" ORDER BY city', "gen_random_uuid()"),
    (f'SELECT city FROM "{CITIES}" USING SAMPLE 2 ORDER BY city', "the query samples rows"),
    (f'SELECT city FROM "{CITIES}" LIMIT 1', "a LIMIT without an ORDER BY"),
    ("SELECT * FROM duckdb_settings() ORDER BY ALL", "the table function duckdb_settings()"),
])
def test_a_query_whose_answer_is_not_the_datas_alone_is_refused_before_it_runs(home, query, why):
    proc = refused_receipt(home, query)
    assert why in proc.stderr and "a receipt of its answer could not be checked" in proc.stderr
    assert proc.stdout == ""


def test_a_query_of_several_rows_without_order_by_is_refused(home):
    proc = refused_receipt(home, f'SELECT city FROM "{CITIES}"')
    assert "the answer has 5 rows and the query no ORDER BY" in proc.stderr
    assert proc.stdout == ""


def test_an_order_by_under_which_different_rows_tie_is_refused(home):
    proc = refused_receipt(home, f'SELECT country, city FROM "{CITIES}" ORDER BY country')
    assert "tie on the ORDER BY (country) but differ" in proc.stderr
    receipt_of(home, f'SELECT country, city FROM "{CITIES}" ORDER BY country, city')  # ordered


def test_a_one_row_answer_needs_no_order_by(home):
    doc = receipt_of(home, f'SELECT count(*) AS n, sum(pop) AS people FROM "{CITIES}"')
    assert doc["answer"]["rows"] == [[5, sum(p for _, _, p in FIRST + SECOND)]]


# --- the signed form -------------------------------------------------------------------------


def test_the_canonical_form_is_rfc_8785():
    """RFC 8785's own example (section 3.2.2), and its number forms (appendix B)."""
    value = {"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
             "string": "\u20ac$\u000f\nA'B\"\\\\\"/", "literals": [None, True, False]}
    assert canonical_json(value) == (
        '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
        '"string":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}')
    assert [canonical_json(x) for x in (1e21, 1e20, 1e-7, 1e-6, -0.0, 5e-324)] == \
        ["1e+21", "100000000000000000000", "1e-7", "0.000001", "0", "5e-324"]
    assert canonical_json({"\u20ac": 1, "\r": 2, "\U0001f600": 3, "\ufb33": 4}) == \
        '{"\\r":2,"\u20ac":1,"\U0001f600":3,"\ufb33":4}'


def test_the_example_of_the_format_document_is_a_receipt_whose_signature_verifies():
    text = (ROOT / "schemas" / "RECEIPT.md").read_text()
    example, canonical = (part.split("\n```", 1)[0] for part in text.split("```json\n")[1:2] +
                          text.split("after its newline, with no\nnewline at the end):\n\n```\n")[1:2])
    doc = load_receipt(example.encode())
    assert signature_holds(doc)
    assert signed_bytes(doc) == b"coord query receipt v1\n" + canonical.encode()
    assert receipt_bytes(doc).decode() == example + "\n"  # as coord writes it
    doc["answer"]["rows"][0][2] += 1
    assert not signature_holds(doc)


def test_a_receipt_of_a_state_as_of_an_event_time_keeps_that_time(home):
    query = f'SELECT city FROM "{CITIES}@state" ORDER BY city'
    doc = receipt_of(home, query, "--as-of", "2000-01-01T00:00:00Z")
    assert doc["asOf"] == "2000-01-01T00:00:00Z" and doc["answer"]["rowCount"] == 0
    assert [i["name"] for i in doc["inputs"]] == [CITIES]
    assert verified(home, "receipt.json").returncode == 0
