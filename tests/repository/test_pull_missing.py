"""A pull of a dataset that is not where its reference points fails in one line that names the
dataset once before the reference (which names it again) and says what to check, in a 0.18
and a 0.39 workspace alike."""
from __future__ import annotations

import pytest

from ..support.cli import coord_here


@pytest.mark.parametrize("odf", ["0.18", "0.39"])
def test_a_url_with_no_dataset_fails_in_one_line_naming_it_once(tmp_path, odf):
    coord_here("init", "--odf", odf, ".", cwd=tmp_path)
    url = (tmp_path / "nowhere" / "cities").as_uri()
    failed = coord_here("pull", url, cwd=tmp_path, check=False)
    assert failed.returncode == 1
    assert failed.stdout == f"cities: failed: {url}: no dataset there (no head); check the " \
        "dataset's name and the repository's URL\n"
    assert failed.stderr == f"coord: error: cities: {url}: no dataset there (no head); check " \
        "the dataset's name and the repository's URL\n"
