"""Push and pull of current-ODF (0.39) datasets through folder and S3 repositories, in the
reference's layout: a repository the reference wrote is pulled and verified, a dataset this
coordinator wrote round-trips through a repository into another workspace, and a damaged
repository is refused before anything of it is parsed or installed.

The origin workspace and the reference's repository are written once for the module and copied
for each test; the commands run in the test process (``coord_here``) but for the pulls of the
reference's repository and the killed ones, which run as ``coord`` processes."""
from __future__ import annotations

import shutil
from pathlib import Path

import boto3
import pyarrow.parquet as pq
import pytest

from coordinator.metadata.multiformats import Multihash
from coordinator.metadata.odf39 import events as e
from coordinator.store import layout
from coordinator.store.append import CRASH_POINTS
from coordinator.store.dataset import CurrentDataset, new_dataset_key
from coordinator.store.verify import verify_folder
from coordinator.workspace import Workspace
from coordinator.workspace.config import OdfVersion

from ..support.cli import coord, coord_here
from ..support.odf39_datasets import (
    BATCHES,
    at,
    define_derivative,
    rows,
    slice_file,
    write_derivative,
    write_root,
)
from ..support.tamper import flip_a_byte
from .conftest import BUCKET, make_root, with_repo

THIRD = [(at(0).replace(year=2025, month=3, day=1), "Tokyo", 14_094_034)]


def current_ws(root: Path) -> Workspace:
    return Workspace.init(root, odf=OdfVersion.V039)


@pytest.fixture(scope="module")
def written_origin(tmp_path_factory) -> Path:
    """A workspace holding ``cities`` (current ODF), written and signed by this coordinator."""
    home = tmp_path_factory.mktemp("origin")
    ws = current_ws(home / "origin")
    ds = CurrentDataset(ws, "cities")
    write_root(ds.root, ds.lock_path.parent, home / "scratch", key=new_dataset_key(), signer=ws.signing_key)
    return ws.root


@pytest.fixture
def origin(written_origin, tmp_path) -> Workspace:
    """A copy of ``written_origin`` for one test."""
    shutil.copytree(written_origin, tmp_path / "origin")
    return Workspace.open(tmp_path / "origin")


@pytest.fixture
def other(tmp_path) -> Workspace:
    return current_ws(tmp_path / "other")


def add_batch(ws: Workspace, batch: list[tuple], minutes: int, scratch: Path) -> Multihash:
    """One more AddData of ``batch`` on ``cities``, through the dataset's writer (signed)."""
    with CurrentDataset(ws, "cities").writer() as w:
        prev = w.state.last_offset
        path, new_data = slice_file(rows(batch), at(minutes), prev, scratch)
        event = e.AddData(prev_offset=prev, new_data=new_data, new_watermark=max(r[0] for r in batch))
        return w.append(event, system_time=at(minutes), data=path)


def files_of(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def records(ws: Workspace, name: str) -> list[dict]:
    """The dataset's records, oldest slice first, read by pyarrow from its data files."""
    ds = CurrentDataset(ws, name)
    return [r for s in ds.state().slices for r in pq.read_table(ds.data_file(s.slice)).to_pylist()]


# --- a repository the reference wrote --------------------------------------------------------


@pytest.fixture(scope="module")
def written_reference_repo(tmp_path_factory) -> Path:
    """A repository folder as the reference's ``kamu push`` to ``file://`` leaves it: one
    folder per dataset named by its alias, each the reference's dataset layout (every folder of
    ``DatasetLayout::create``, even an empty one), blocks unsigned."""
    home = tmp_path_factory.mktemp("reference")
    repo = home / "reference-repo"
    scratch, locks = home / "scratch", home / "locks"
    root = write_root(repo / "cities", locks, scratch)
    write_derivative(repo / "large-cities", locks, scratch, root)
    for dataset in ("cities", "large-cities"):
        for folder in layout.FOLDERS:
            (repo / dataset / folder).mkdir(exist_ok=True)
    return repo


@pytest.fixture
def reference_repo(written_reference_repo, tmp_path) -> Path:
    """A copy of ``written_reference_repo`` for one test."""
    return shutil.copytree(written_reference_repo, tmp_path / "reference-repo")


def test_a_repository_the_reference_wrote_is_pulled_and_verifies(reference_repo, other):
    with_repo(other, reference_repo.as_uri(), "ref")
    for name in ("cities", "large-cities"):
        out = coord("pull", f"ref/{name}", cwd=other.root).stdout
        assert f"{name}: new dataset: pulling 5 blocks" in out
        assert "unsigned (older than any signature: written by a tool that does not sign)" in out
        local = CurrentDataset(other, name)
        assert verify_folder(local.root) == []
        assert files_of(local.root) == {
            rel: data for rel, data in files_of(reference_repo / name).items()}
    expected = [dict(zip(("event_time", "city", "population"), r, strict=True))
                for batch in BATCHES for r in batch]
    pulled = [{k: r[k] for k in ("event_time", "city", "population")} for r in records(other, "cities")]
    assert pulled == expected


def test_pulling_the_reference_repository_again_is_up_to_date(reference_repo, other):
    with_repo(other, reference_repo.as_uri(), "ref")
    coord_here("pull", "ref/cities", cwd=other.root)
    assert coord_here("pull", "ref/cities", cwd=other.root).stdout.strip() == "cities: up to date"


def test_refs_head_with_one_trailing_newline_is_tolerated(reference_repo, other):
    head = reference_repo / "cities" / layout.HEAD
    head.write_bytes(head.read_bytes() + b"\n")
    coord_here("pull", "ref/cities", cwd=with_repo(other, reference_repo.as_uri(), "ref").root)
    assert CurrentDataset(other, "cities").head() == Multihash.parse(head.read_text().strip())


# --- round trips through folder and S3 repositories ------------------------------------------


def test_a_pushed_dataset_is_the_reference_layout_and_pulls_trusted(origin, other, repo_url):
    pushed = coord_here("push", "cities", "--to", "shared", cwd=with_repo(origin, repo_url).root).stdout
    assert "pushed 5 blocks to shared/cities" in pushed
    local = CurrentDataset(origin, "cities")
    remote = remote_files(repo_url, "cities")
    assert remote[layout.HEAD] == (local.root / layout.HEAD).read_bytes()  # no newline
    assert remote[layout.ALIAS] == b"cities"
    # the same objects under the same names, and nothing else
    assert {k: v for k, v in remote.items() if k != layout.ALIAS} == {
        k: v for k, v in files_of(local.root).items() if k != layout.ALIAS}

    coord_here("trust", "add", origin.public_key.hex(), "--name", "origin", cwd=other.root)
    out = coord_here("pull", "shared/cities", cwd=with_repo(other, repo_url).root).stdout
    assert f"5 blocks signed by {origin.public_key.hex()} (trusted: origin)" in out
    assert verify_folder(CurrentDataset(other, "cities").root) == []
    assert records(other, "cities") == records(origin, "cities")
    assert files_of(CurrentDataset(other, "cities").root) == files_of(local.root)


def test_an_untrusted_signer_is_pinned_on_first_pull(origin, other, tmp_path):
    url = (tmp_path / "repo").as_uri()
    coord_here("push", "cities", "--to", "shared", cwd=with_repo(origin, url).root)
    out = coord_here("pull", "shared/cities", cwd=with_repo(other, url).root).stdout
    assert f"5 blocks signed by {origin.public_key.hex()} (pinned for this dataset, not trusted" in out
    assert origin.public_key.hex() in coord_here("trust", "list", cwd=other.root).stdout


def test_a_second_push_sends_only_the_new_objects_and_pulls_incrementally(origin, other, repo_url,
                                                                          tmp_path):
    with_repo(origin, repo_url)
    coord_here("push", "cities", "--to", "shared", cwd=origin.root)
    coord_here("pull", "shared/cities", cwd=with_repo(other, repo_url).root)
    new_head = add_batch(origin, THIRD, 40, tmp_path / "scratch")
    again = coord_here("push", "cities", cwd=origin.root).stdout
    assert "pushed 1 block to shared/cities (3 files" in again  # data file, signature, block
    assert remote_files(repo_url, "cities")[layout.HEAD] == str(new_head).encode()
    assert coord_here("push", "cities", cwd=origin.root).stdout.strip() == "shared/cities is up to date"

    out = coord_here("pull", "cities", cwd=other.root).stdout  # from where it came, by its name
    assert "cities: local is 1 block behind; pulling" in out
    assert CurrentDataset(other, "cities").head() == new_head
    assert verify_folder(CurrentDataset(other, "cities").root) == []


@pytest.mark.parametrize("crash_at", CRASH_POINTS)
def test_a_pull_killed_at_any_step_leaves_a_valid_prefix_and_the_next_one_finishes(
        origin, other, tmp_path, crash_at):
    url = (tmp_path / "repo").as_uri()
    coord_here("push", "cities", "--to", "shared", cwd=with_repo(origin, url).root)
    killed = coord("pull", "shared/cities", cwd=with_repo(other, url).root, env={"COORD_CRASH_AT": crash_at},
                   check=False)
    assert killed.returncode != 0
    local = CurrentDataset(other, "cities")
    if local.exists():  # the Seed went in: the head names a whole prefix of the chain
        assert verify_folder(local.root) == []
    coord_here("pull", "shared/cities", cwd=other.root)
    assert verify_folder(local.root) == []
    assert files_of(local.root) == files_of(CurrentDataset(origin, "cities").root)


def test_a_push_leaves_no_lock_file_beside_the_ref_and_removes_one_left_before(origin, tmp_path):
    # The reference writes refs/head by renaming a new file over it and keeps nothing beside it;
    # an earlier coord left an empty refs/head.lock after each push.
    repo = tmp_path / "repo"
    coord_here("push", "cities", "--to", "shared", cwd=with_repo(origin, repo.as_uri()).root)
    assert sorted(p.name for p in (repo / "cities" / "refs").iterdir()) == ["head"]

    (repo / "cities" / "refs" / "head.lock").touch()  # as an earlier version left it
    add_batch(origin, THIRD, 40, tmp_path / "scratch")
    coord_here("push", "cities", cwd=origin.root)
    assert sorted(p.name for p in (repo / "cities" / "refs").iterdir()) == ["head"]


def test_a_push_killed_before_the_head_moved_is_finished_by_the_next(origin, tmp_path):
    url = (tmp_path / "repo").as_uri()
    killed = coord("push", "cities", "--to", "shared", cwd=with_repo(origin, url).root,
                   env={"COORD_CRASH_AT": "push-metadata-uploaded"}, check=False)
    assert killed.returncode != 0
    assert not (tmp_path / "repo" / "cities" / layout.HEAD).exists()  # readers see no dataset yet
    again = coord_here("push", "cities", "--to", "shared", cwd=origin.root).stdout
    assert "pushed 5 blocks to shared/cities" in again and "files" not in again  # all were there
    assert (tmp_path / "repo" / "cities" / layout.HEAD).read_bytes() == (
        CurrentDataset(origin, "cities").root / layout.HEAD).read_bytes()


# --- refused -----------------------------------------------------------------------------------


@pytest.fixture
def pushed(origin, tmp_path) -> Path:
    """``cities`` pushed to a folder repository: the dataset's folder there."""
    coord_here("push", "cities", "--to", "shared", cwd=with_repo(origin, (tmp_path / "repo").as_uri()).root)
    return tmp_path / "repo" / "cities"


def refused_pull(other: Workspace, repo: Path) -> str:
    done = coord_here("pull", "shared/cities", cwd=with_repo(other, repo.as_uri()).root, check=False)
    assert done.returncode == 1
    assert not CurrentDataset(other, "cities").root.exists()  # nothing installed
    return next(line for line in (done.stdout + done.stderr).splitlines() if "nothing was pulled" in line)


def test_a_tampered_remote_block_is_refused_before_it_is_parsed(pushed, origin, other):
    head = CurrentDataset(origin, "cities").head()
    flip_a_byte(pushed / layout.block_file(head), at=40)
    line = refused_pull(other, pushed.parent)
    assert f"cities/blocks/{head}: block {head}: its bytes hash to" in line
    assert "nothing was pulled" in line


def test_a_tampered_remote_data_file_is_refused_and_nothing_installed(pushed, origin, other):
    first = CurrentDataset(origin, "cities").state().slices[0]
    flip_a_byte(pushed / layout.data_file(first.slice.physical_hash))
    line = refused_pull(other, pushed.parent)
    assert (f"block 3 ({first.block_hash}): cities/data/{first.slice.physical_hash}: its bytes hash "
            "to f1620") in line
    assert "nothing was pulled" in line


def test_a_missing_remote_data_file_is_refused_and_nothing_installed(origin, other, repo_url):
    coord_here("push", "cities", "--to", "shared", cwd=with_repo(origin, repo_url).root)
    last = CurrentDataset(origin, "cities").state().slices[-1]
    delete_remote_file(repo_url, f"cities/{layout.data_file(last.slice.physical_hash)}")
    done = coord_here("pull", "shared/cities", cwd=with_repo(other, repo_url).root, check=False)
    assert done.returncode == 1
    assert (f"block 4 ({last.block_hash}): cities/data/{last.slice.physical_hash}: missing in the "
            "repository (nothing was pulled)") in done.stdout
    assert not CurrentDataset(other, "cities").root.exists()


def test_a_remote_data_file_longer_than_its_block_says_is_not_read_past_it(pushed, origin, other):
    first = CurrentDataset(origin, "cities").state().slices[0]
    with open(pushed / layout.data_file(first.slice.physical_hash), "ab") as f:
        f.write(b"x" * 1000)
    line = refused_pull(other, pushed.parent)
    assert f"larger than the {first.slice.size} bytes the block records" in line


def test_a_forged_signature_is_refused(pushed, origin, other):
    head = CurrentDataset(origin, "cities").head()
    signature = pushed / layout.signature_file(head)
    other_key_doc = (pushed / layout.signature_file(CurrentDataset(origin, "cities").state().blocks[0].hash))
    signature.write_bytes(other_key_doc.read_bytes())  # a valid signature, of another block
    line = refused_pull(other, pushed.parent)
    assert f"cities/signatures/{head}: the signature does not match the block" in line


def test_a_local_dataset_with_another_seed_is_refused(pushed, other, tmp_path):
    mine = CurrentDataset(other, "cities")
    write_root(mine.root, mine.lock_path.parent, tmp_path / "mine", key=new_dataset_key(),
               signer=other.signing_key)
    before = files_of(mine.root)
    done = coord_here("pull", "shared/cities", cwd=with_repo(other, pushed.parent.as_uri()).root, check=False)
    assert done.returncode == 1
    assert "shared/cities is another dataset (did:odf:" in done.stdout + done.stderr
    assert "pull it --as another name" in done.stdout + done.stderr
    assert files_of(mine.root) == before


def test_a_diverged_push_is_refused_in_one_line(pushed, origin, other, tmp_path):
    coord_here("pull", "shared/cities", cwd=with_repo(other, pushed.parent.as_uri()).root)
    add_batch(other, THIRD, 40, tmp_path / "theirs")
    coord_here("push", "cities", "--to", "shared", cwd=other.root)
    add_batch(origin, THIRD, 41, tmp_path / "ours")
    done = coord_here("push", "cities", cwd=origin.root, check=False)
    assert done.returncode != 0
    assert "shared/cities has blocks you don't" in done.stderr and "pull first" in done.stderr


def test_push_repair_mends_a_damaged_remote_file(pushed, origin, other):
    first = CurrentDataset(origin, "cities").state().slices[0]
    flip_a_byte(pushed / layout.data_file(first.slice.physical_hash))
    out = coord_here("push", "cities", "--repair", cwd=origin.root).stdout
    assert "repaired 1 damaged file of shared/cities" in out
    coord_here("pull", "shared/cities", cwd=with_repo(other, pushed.parent.as_uri()).root)
    assert verify_folder(CurrentDataset(other, "cities").root) == []


def test_several_datasets_of_both_versions_push_in_one_command(origin, tmp_path):
    url = (tmp_path / "repo").as_uri()
    make_root(with_repo(origin, url), "events")
    out = coord_here("push", "cities", "events", "--to", "shared", cwd=origin.root).stdout.splitlines()
    assert sorted(line.split(" (")[0] for line in out) == [
        "cities: pushed 5 blocks to shared/cities", "events: pushed 3 blocks to shared/events"]


def test_push_r_brings_a_current_derivatives_inputs_first(origin, tmp_path):
    cities = CurrentDataset(origin, "cities").state().id
    define_derivative(origin, "large", {"cities": cities},
                      "SELECT event_time, city FROM cities WHERE population > 1000000")
    url = (tmp_path / "repo").as_uri()
    out = coord_here("push", "-r", "large", "--to", "shared", cwd=with_repo(origin, url).root).stdout
    assert [line.split(":")[0] for line in out.splitlines()] == ["cities", "large"]
    assert {p.name for p in (tmp_path / "repo").iterdir()} == {"cities", "large"}


def test_pull_r_brings_a_current_derivatives_inputs_by_the_id_it_reads(origin, other, tmp_path):
    cities = CurrentDataset(origin, "cities").state().id
    define_derivative(origin, "large", {"cities": cities},
                      "SELECT event_time, city FROM cities WHERE population > 1000000")
    url = (tmp_path / "repo").as_uri()
    coord_here("push", "-r", "large", "--to", "shared", cwd=with_repo(origin, url).root)
    out = coord_here("pull", "-r", "shared/large", cwd=with_repo(other, url).root).stdout
    assert [line.split(":")[0] for line in out.splitlines() if not line.startswith(" ")] == \
        ["large", "cities"]
    assert CurrentDataset(other, "cities").state().id == cities


def test_pull_r_refuses_an_input_that_is_another_dataset_than_the_one_read(origin, other, tmp_path):
    define_derivative(origin, "large", {"cities": CurrentDataset(origin, "cities").state().id},
                      "SELECT event_time, city FROM cities WHERE population > 1000000")
    url = (tmp_path / "repo").as_uri()
    coord_here("push", "large", "--to", "shared", cwd=with_repo(origin, url).root)
    impostor = current_ws(tmp_path / "impostor")  # another "cities" under the same name
    write_root(CurrentDataset(impostor, "cities").root, impostor.meta / "locks", tmp_path / "s",
               key=new_dataset_key(), signer=impostor.signing_key)
    coord_here("push", "cities", "--to", "shared", cwd=with_repo(impostor, url).root)
    done = coord_here("pull", "-r", "shared/large", cwd=with_repo(other, url).root, check=False)
    assert done.returncode == 1
    assert "shared/cities is not the dataset its reader reads" in done.stdout + done.stderr


def test_a_folder_holding_the_other_version_is_refused_both_ways(origin, tmp_path):
    url = (tmp_path / "repo").as_uri()
    make_root(with_repo(origin, url), "events")  # an ODF 0.18 dataset beside the 0.39 one
    coord_here("push", "events", "--to", "shared/old", cwd=origin.root)
    coord_here("push", "cities", "--to", "shared/new", cwd=origin.root)
    into_old = coord_here("push", "cities", "--to", "shared/old", cwd=origin.root, check=False)
    assert "shared/old holds an ODF 0.18 dataset and cities is current ODF (0.39)" in into_old.stderr
    into_new = coord_here("push", "events", "--to", "shared/new", cwd=origin.root, check=False)
    assert "shared/new holds a current-ODF (0.39) dataset and events is ODF 0.18" in into_new.stderr
    as_old = coord_here("pull", "shared/new", "--as", "events", cwd=origin.root, check=False)
    assert "the local events is ODF 0.18 (nothing was pulled)" in as_old.stdout + as_old.stderr
    as_new = coord_here("pull", "shared/old", "--as", "cities", cwd=origin.root, check=False)
    assert "shared/old is not a current-ODF (0.39) dataset and the local cities is one" in (
        as_new.stdout + as_new.stderr)


def test_pulled_as_another_name(pushed, other):
    out = coord_here("pull", "shared/cities", "--as", "towns",
                     cwd=with_repo(other, pushed.parent.as_uri()).root)
    assert "towns: new dataset: pulling 5 blocks" in out.stdout
    assert (CurrentDataset(other, "towns").root / layout.ALIAS).read_text() == "towns"
    assert verify_folder(CurrentDataset(other, "towns").root) == []


# --- helpers -----------------------------------------------------------------------------------


def delete_remote_file(url: str, rel: str) -> None:
    if url.startswith("file://"):
        (Path(url[len("file://"):]) / rel).unlink()
    else:
        boto3.client("s3", endpoint_url=f"http://{url.split('/')[2]}").delete_object(
            Bucket=BUCKET, Key=f"datasets/{rel}")


def remote_files(url: str, name: str) -> dict[str, bytes]:
    """Every file of the dataset's folder in the repository at ``url`` (folder or moto S3)."""
    if url.startswith("file://"):
        return files_of(Path(url[len("file://"):]) / name)
    endpoint = url.split("/")[2]
    s3 = boto3.client("s3", endpoint_url=f"http://{endpoint}")
    prefix = f"datasets/{name}/"
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])]
    return {k[len(prefix):]: s3.get_object(Bucket=BUCKET, Key=k)["Body"].read() for k in keys}

