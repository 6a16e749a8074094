"""``coord tail``: the last records, read from only the newest slices that hold them, each
checked against its block first."""
from __future__ import annotations

import json

from ..repository.conftest import make_root
from ..support.cli import coord
from ..support.tamper import flip_a_byte

DS = "org.example.events"


def test_a_changed_slice_it_reads_is_refused_in_one_line(ws):
    ds = make_root(ws, DS, slices=2, rows=5)
    newest = ds.data_files()[-1]
    flip_a_byte(newest)
    proc = coord("tail", DS, cwd=ws.root, check=False)
    assert proc.returncode == 1
    assert proc.stderr == (f"coord: error: dataset {DS}: refusing to read {newest}: physical hash "
                           "differs from the block's (the file's bytes were changed); "
                           f"run coord verify {DS} to check the whole dataset\n")


def test_only_the_slices_holding_the_last_records_are_read(ws):
    ds = make_root(ws, DS, slices=2, rows=5)
    flip_a_byte(ds.data_files()[0])
    rows = json.loads(coord("tail", DS, "-n", "5", "-o", "json", cwd=ws.root).stdout)
    assert [r["value"] for r in rows] == [f"v{i}" for i in range(5, 10)]
    assert coord("tail", DS, "-n", "6", cwd=ws.root, check=False).returncode == 1
