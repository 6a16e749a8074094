"""A gzip bomb pushed to ``coord serve --allow-writes`` over the smart protocol: the service
inflates the batch no further than ``MAX_UNPACKED`` bytes, answers the protocol's ``Err``
naming the bound and closes the socket with 1009 ("too big"), grows its memory by less than
that bound, moves nothing, and goes on serving."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from coordinator.repository.smart import MAX_UNPACKED
from coordinator.store.dataset import CurrentDataset
from coordinator.workspace import Workspace

from ..repository.test_hostile_servers import gzip_bomb
from .conftest import serving
from .test_simple_transfer import make_origin


@pytest.fixture
def origin(tmp_path) -> Workspace:
    return make_origin(tmp_path)


def peak_memory(pid: int) -> int:
    """A live process's peak resident memory so far, in bytes (Linux)."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))) * 1024


def test_a_pushed_gzip_bomb_is_refused_and_the_service_goes_on(origin):
    head = CurrentDataset(origin, "cities").head()
    bomb = gzip_bomb(64)  # 1 GiB inflated, ~1 MiB of gzip
    with serving(origin.root, "--allow-writes") as served:
        before = peak_memory(served.proc.pid)
        with connect(served.url.replace("http://", "ws://") + "/cities/push",
                     additional_headers={"x-odf-smtp-version": "1"}) as socket:
            socket.send(json.dumps({"current_head": str(head), "transfer_plan": {
                "num_blocks": 64, "num_objects": 0, "num_records": 0, "bytes_in_raw_blocks": 0,
                "bytes_in_raw_objects": 0}, "force_update_if_diverged": False}))
            assert json.loads(socket.recv()) == {"Ok": {}}
            socket.send(json.dumps({"new_blocks": bomb}))
            refused = json.loads(socket.recv())["Err"]["Internal"]
            with pytest.raises(ConnectionClosed):
                socket.recv()
        assert refused["phase"] == {"Push": "MetadataRequest"}
        assert refused["error_message"] == (f"push to cities: the metadata batch holds more than "
                                            f"{MAX_UNPACKED >> 20} MiB unpacked; refused (nothing was "
                                            "transferred)")
        assert socket.close_code == 1009
        assert peak_memory(served.proc.pid) - before < MAX_UNPACKED
        served.dataset("cities")  # a 200: still serving
        staged = origin.meta / "run" / "push"
        served.wait_for(lambda: not any(p.is_file() for p in staged.rglob("*")),
                        what="the push's staging removed")
    assert CurrentDataset(origin, "cities").head() == head
