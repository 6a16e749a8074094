"""Two workspaces exchange a current-ODF (0.39) dataset through the ODF Smart Transfer Protocol
(``odf+http://``): one runs ``coord serve`` on loopback, the other pulls from it, pulls again
the blocks added since, and pushes back blocks of its own; every block and object is checked
by the receiving side, verify passes on both, a tampered object is refused, a push needs
``--allow-writes`` and the token, and a transfer cut short leaves the previous head."""
from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from websockets.sync.client import ClientConnection, connect

from coordinator.repository.smart import pack_blocks
from coordinator.store import layout
from coordinator.store.dataset import CurrentDataset
from coordinator.store.verify import verify_folder
from coordinator.workspace import Workspace

from ..repository.test_current_odf import THIRD, add_batch, current_ws, files_of, records
from ..support.cli import coord
from .conftest import serving
from .test_simple_transfer import make_origin

FOURTH = [(THIRD[0][0].replace(month=4), "Delhi", 33_807_403)]


@pytest.fixture
def origin(tmp_path) -> Workspace:
    return make_origin(tmp_path)


@pytest.fixture
def other(tmp_path) -> Workspace:
    return current_ws(tmp_path / "other")


def smart(url: str) -> str:
    return "odf+" + url


def trusts(origin: Workspace, *pushers: Workspace) -> None:
    """``origin`` accepts blocks its ``cities`` receives signed by ``pushers`` (a pinned dataset
    otherwise refuses another signer, pushed or pulled)."""
    for ws in pushers:
        coord("trust", "add", ws.public_key.hex(), "--dataset", "cities", cwd=origin.root)


def failed(*args: str, cwd: Path, env: dict | None = None) -> str:
    """The one line a refused ``coord ARGS`` prints about it."""
    done = coord(*args, cwd=cwd, env=env, check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_a_dataset_is_pulled_updated_and_pushed_back_over_the_smart_protocol(origin, other, tmp_path):
    with serving(origin.root, "--allow-writes") as served:
        out = coord("pull", f"{smart(served.url)}/cities", "--as", "towns", cwd=other.root).stdout
        assert "towns: new dataset: pulling 5 blocks" in out
        assert f"5 blocks signed by {origin.public_key.hex()}" in out  # our signature route
    add_batch(origin, THIRD, 40, tmp_path / "more")  # while stopped: its build service holds it
    trusts(origin, other)
    with serving(origin.root, "--allow-writes") as served:
        url = f"{smart(served.url)}/cities"
        again = coord("pull", url, "--as", "towns", cwd=other.root).stdout
        assert "towns: local is 1 block behind; pulling" in again
        assert "up to date" in coord("pull", "towns", cwd=other.root).stdout  # from where it came
        mine = CurrentDataset(other, "towns")
        with mine.writer() as w:  # one more block, committed by the other workspace
            mine_head = _append(w, other, tmp_path / "mine")
        pushed = coord("push", "towns", "--to", f"{smart(served.url)}/cities", cwd=other.root).stdout
        assert f"pushed 1 block to {smart(served.url)}/cities" in pushed
        assert "up to date" in coord("push", "towns", cwd=other.root).stdout
    theirs = CurrentDataset(origin, "cities")
    assert theirs.head() == mine_head == mine.head()
    assert verify_folder(mine.root) == [] and verify_folder(theirs.root) == []
    assert coord("verify", "towns", cwd=other.root).returncode == 0
    assert coord("verify", "cities", cwd=origin.root).returncode == 0
    assert records(other, "towns") == records(origin, "cities")
    assert (theirs.root / layout.signature_file(mine_head)).read_bytes() == \
        (mine.root / layout.signature_file(mine_head)).read_bytes()
    assert [r["city"] for r in records(origin, "cities")][-2:] == ["Tokyo", "Delhi"]


def _append(writer, ws: Workspace, scratch: Path):
    """``add_batch``'s AddData of FOURTH, through a writer already held."""
    from ..repository.test_current_odf import at, e, rows, slice_file

    prev = writer.state.last_offset
    path, new_data = slice_file(rows(FOURTH), at(50), prev, scratch)
    event = e.AddData(prev_offset=prev, new_data=new_data, new_watermark=FOURTH[0][0])
    return writer.append(event, system_time=at(50), data=path)


def test_a_tampered_object_is_refused_and_nothing_is_pulled(origin, other):
    ds = CurrentDataset(origin, "cities")
    data = ds.root / layout.data_file(ds.state().slices[-1].slice.physical_hash)
    stored = data.read_bytes()
    data.chmod(0o644)
    data.write_bytes(stored[:100] + bytes([stored[100] ^ 1]) + stored[101:])  # same size
    with serving(origin.root) as served:
        line = failed("pull", f"{smart(served.url)}/cities", cwd=other.root)
    assert "its bytes hash to" in line and "not to its name" in line and "nothing was pulled" in line
    assert not CurrentDataset(other, "cities").exists()


def test_a_push_needs_writes_enabled_and_the_token(origin, other, tmp_path):
    trusts(origin, other)
    with serving(origin.root) as served:
        coord("pull", f"{smart(served.url)}/cities", cwd=other.root)
        url = f"{smart(served.url)}/cities"
        with CurrentDataset(other, "cities").writer() as w:
            _append(w, other, tmp_path / "mine")
        line = failed("push", "cities", "--to", url, cwd=other.root)
        assert "HTTP 403 this service is read-only (start it with --allow-writes)" in line
    token = tmp_path / "token"
    token.write_text("s3cret-token-of-16+\n")
    token.chmod(0o600)
    head = CurrentDataset(origin, "cities").head()
    with serving(origin.root, "--allow-writes", "--token-file", str(token)) as served:
        url = f"{smart(served.url)}/cities"
        assert "HTTP 401" in failed("push", "cities", "--to", url, cwd=other.root)
        assert "HTTP 401" in failed("push", "cities", "--to", url, cwd=other.root,
                                    env={"COORD_TOKEN": "wrong-token-of-16+"})
        assert CurrentDataset(origin, "cities").head() == head
        out = coord("push", "cities", "--to", url, cwd=other.root,
                    env={"COORD_TOKEN": "s3cret-token-of-16+"}).stdout
        assert f"pushed 1 block to {url}" in out
    assert CurrentDataset(origin, "cities").head() == CurrentDataset(other, "cities").head()


def test_a_push_racing_another_is_refused_in_one_line(origin, other, tmp_path):
    with serving(origin.root, "--allow-writes") as served:
        url = f"{smart(served.url)}/cities"
        coord("pull", url, cwd=other.root)
        third = current_ws(tmp_path / "third")
        coord("pull", url, cwd=third.root)
        trusts(origin, other, third)
        with CurrentDataset(other, "cities").writer() as w:
            _append(w, other, tmp_path / "mine")
        add_batch(third, THIRD, 40, tmp_path / "theirs")
        coord("push", "cities", "--to", url, cwd=third.root)  # the other push read the old head
        line = failed("push", "cities", "--to", url, cwd=other.root)
        assert "pull first" in line
    assert CurrentDataset(origin, "cities").head() == CurrentDataset(third, "cities").head()


def test_a_pull_killed_midway_keeps_the_previous_head_and_the_next_one_finishes(origin, other, tmp_path):
    with serving(origin.root) as served:
        coord("pull", f"{smart(served.url)}/cities", cwd=other.root)
    before = CurrentDataset(other, "cities").head()
    add_batch(origin, THIRD, 40, tmp_path / "more")
    with serving(origin.root) as served:
        url = f"{smart(served.url)}/cities"
        killed = coord("pull", url, cwd=other.root, env={"COORD_CRASH_AT": "odf-block-written"},
                       check=False)
        assert killed.returncode != 0
        assert CurrentDataset(other, "cities").head() == before
        assert verify_folder(CurrentDataset(other, "cities").root) == []
        assert "local is 1 block behind" in coord("pull", url, cwd=other.root).stdout
    assert files_of(CurrentDataset(other, "cities").root) == files_of(CurrentDataset(origin, "cities").root)


@contextmanager
def pushing(url: str, head, mine: CurrentDataset, new) -> Iterator[ClientConnection]:
    """A push of ``mine``'s block ``new`` onto ``head``, in frames as kamu-cli sends them, up
    to the accepted metadata."""
    with connect(url.replace("http://", "ws://") + "/cities/push",
                 additional_headers={"x-odf-smtp-version": "1"}) as socket:
        socket.send(json.dumps({"current_head": str(head), "transfer_plan": {
            "num_blocks": 1, "num_objects": 1, "num_records": 1, "bytes_in_raw_blocks": 0,
            "bytes_in_raw_objects": 0}, "force_update_if_diverged": False,
            "visibility_for_created_dataset": "Private"}))
        assert json.loads(socket.recv()) == {"Ok": {}}
        socket.send(json.dumps({"new_blocks": pack_blocks(
            [(new, (mine.root / layout.block_file(new)).read_bytes())])}))
        assert json.loads(socket.recv()) == {"Ok": {}}
        yield socket


def pulled_and_one_block_more(served, origin, other, tmp_path):
    """``other`` pulls ``origin``'s cities over the smart protocol and appends a block of its
    own: (the node's head, ``other``'s dataset, its new block)."""
    coord("pull", f"{smart(served.url)}/cities", cwd=other.root)
    before = CurrentDataset(origin, "cities").head()
    mine = CurrentDataset(other, "cities")
    with mine.writer() as w:
        new = _append(w, other, tmp_path / "mine")
    return before, mine, new


def test_a_push_whose_connection_drops_midway_leaves_the_head(origin, other, tmp_path):
    """The socket closes after the blocks, before any object."""
    trusts(origin, other)
    with serving(origin.root, "--allow-writes") as served:
        before, mine, new = pulled_and_one_block_more(served, origin, other, tmp_path)
        with pushing(served.url, before, mine, new):
            pass  # the socket closes here
        assert CurrentDataset(origin, "cities").head() == before
        staged = origin.meta / "run" / "push"
        served.wait_for(lambda: staged.is_dir() and not any(p.is_file() for p in staged.rglob("*")),
                        what="the push's staging removed")
        out = coord("push", "cities", "--to", f"{smart(served.url)}/cities", cwd=other.root).stdout
        assert "pushed 1 block" in out
    assert CurrentDataset(origin, "cities").head() == new
    assert verify_folder(CurrentDataset(origin, "cities").root) == []


def test_a_pushed_object_that_does_not_hash_to_its_name_is_refused(origin, other, tmp_path):
    trusts(origin, other)
    with serving(origin.root, "--allow-writes") as served:
        before, mine, new = pulled_and_one_block_more(served, origin, other, tmp_path)
        data = mine.state().slices[-1].slice
        with pushing(served.url, before, mine, new) as socket:
            socket.send(json.dumps({"object_files": [{"object_type": "DataSlice", "physical_hash":
                                    str(data.physical_hash), "size": data.size}], "is_truncated": False}))
            [strategy] = json.loads(socket.recv())["Ok"]["object_transfer_strategies"]
            assert strategy["push_strategy"] == "HttpUpload"
            stored = (mine.root / layout.data_file(data.physical_hash)).read_bytes()
            put = httpx.put(strategy["upload_to"]["url"], content=stored[:-1] + bytes([stored[-1] ^ 1]))
            assert put.status_code == 400 and "do not hash to its name" in put.json()["error"]
            socket.send(json.dumps({"details": "Complete"}))
            socket.send(json.dumps({}))
            refused = json.loads(socket.recv())["Err"]["Internal"]
            assert refused["phase"] == {"Push": "CompleteRequest"}
            assert "was not uploaded (nothing was pushed)" in refused["error_message"]
        assert CurrentDataset(origin, "cities").head() == before
        assert verify_folder(CurrentDataset(origin, "cities").root) == []


def test_a_socket_without_the_protocol_version_is_refused(origin):
    with serving(origin.root) as served:
        ws_url = served.url.replace("http://", "ws://") + "/cities/pull"
        with pytest.raises(Exception, match="HTTP 400"):
            connect(ws_url)


def test_an_unreachable_node_is_one_line(other):
    line = failed("pull", "odf+http://127.0.0.1:1/cities", cwd=other.root)
    assert "odf+http://127.0.0.1:1/cities/pull: ConnectionRefusedError" in line


def test_a_push_creates_a_dataset_the_node_lacks(origin, other):
    with serving(origin.root, "--allow-writes") as served:
        coord("pull", f"{smart(served.url)}/cities", "--as", "towns", cwd=other.root)
        out = coord("push", "towns", "--to", f"{smart(served.url)}/towns", cwd=other.root).stdout
        assert f"pushed 5 blocks to {smart(served.url)}/towns" in out
    towns = CurrentDataset(origin, "towns")
    assert towns.head() == CurrentDataset(origin, "cities").head()
    assert verify_folder(towns.root) == []
    assert records(origin, "towns") == records(origin, "cities")
