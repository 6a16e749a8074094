"""The ``Container`` fetch of a current-ODF (0.39) root: the step's image run as the
reference runs it (kamu-cli v0.265 ``fetch_service/container.rs``), in the engine runtime's
container API (Podman; ``engine/container.py``), its standard output the fetched file.

Invariants:

- The image comes from the local image store only (no registry is asked): a missing one is
  refused in one line naming it and saying how to load it.
- The container has no network (``network_mode="none"``: its own loopback) unless the
  workspace lets its engines reach the network (``engine.allowNetwork``: the host's network,
  never Podman's bridge); no capabilities, the coordinator's uid:gid, the engine's ulimits, and
  of the host's files only a fresh, empty folder of the pull's scratch at ``/opt/odf/out``.
- Its environment is the reference's protocol: ``ODF_ETAG`` and ``ODF_LAST_MODIFIED`` (the
  state the last run left, RFC 3339, or empty), ``ODF_NEW_ETAG_PATH``,
  ``ODF_NEW_LAST_MODIFIED_PATH``, ``ODF_NEW_HAS_MORE_DATA_PATH`` (files under
  ``/opt/odf/out`` the image writes to leave a new state, or to ask to be run again) and
  ``ODF_BATCH_SIZE`` (10,000, the reference's records per slice, unless the step sets it), with
  the step's ``env`` (a variable without a value: the coordinator's own of that name), its
  ``command`` as the entry point and ``args`` as arguments. ``${{ env.NAME || 'default' }}`` in
  the image, args and values is replaced as the reference's templates are, from the
  coordinator's environment.
- Its standard output streams to a file, which is what the later steps read; its standard
  error is kept for the one-line error of a run that exits non-zero.
- The new state is the etag written, else the last-modified time written (RFC 3339), else
  none (each pull then runs the image again and takes all it prints, as the reference does).
  The same state as before with output is refused (the reference's protocol error), without
  output it means nothing new. A run that leaves ``new-has-more-data`` is followed by another
  from its state, each run's output a file of its own.
- The progress is stored as a URL fetch's (``UrlState``: an etag, or a last-modified time as
  an HTTP date, to the second) under a fingerprint of the container step's own
  (``container_fingerprint``), so the chain records it as the reference does (``odf/etag``,
  ``odf/last-modified``) and a changed step starts from no state.
"""
from __future__ import annotations

import email.utils
import hashlib
import json
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ..metadata.objects import FetchStepContainer
from ..metadata.yaml_codec import to_dict
from ..workspace.source_state import FetchState, UrlState
from .errors import IngestError
from .fetched import FetchedFile

OUT = "/opt/odf/out"
BATCH_SIZE = "ODF_BATCH_SIZE"
DEFAULT_BATCH_SIZE = 10_000  # kamu-cli's SourceConfig::target_records_per_slice
_TEMPLATE = re.compile(r"\$\{\{([^}]*)\}\}")
_ENV = re.compile(r"^env\.([a-zA-Z_0-9-]+)$")
_NUMBER = re.compile(r"^(-?[0-9]+(?:.[0-9]+)?)$")
_STRING = re.compile(r"^'([^']*)'$")


def container_fingerprint(step: FetchStepContainer) -> str:
    """The ``fetch`` field of the states this step writes (a fingerprint of its own: the
    state is of the URL kind, the step is not)."""
    whole = json.dumps({"container": to_dict(step)}, sort_keys=True)
    return hashlib.sha256(whole.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class _Run:
    """What one run of the image left: its output file and the state it wrote."""

    output: Path
    etag: str | None
    last_modified: datetime | None
    has_more: bool


def fetch_container(step: FetchStepContainer, *, root: Path, scratch: Path,
                    state: FetchState | None) -> list[FetchedFile]:
    """The files the image prints, one per run, each with the state it leaves; empty when it
    has nothing new since ``state``."""
    from ..workspace import Workspace

    network = Workspace.open(root).config().engine.allow_network
    own = state if isinstance(state, UrlState) and state.fetch == container_fingerprint(step) \
        else None
    etag = own.etag if own is not None else None
    modified = email.utils.parsedate_to_datetime(own.last_modified) \
        if own is not None and own.last_modified else None
    files: list[FetchedFile] = []
    while True:
        run = _run(step, scratch / f"container-{len(files)}", etag, modified, network)
        unchanged = (run.etag is not None or run.last_modified is not None) and \
            (run.etag, run.last_modified) == (etag, modified)
        if unchanged:
            if run.output.stat().st_size:
                raise IngestError(f"fetch Container {step.image}: the image left the same source "
                                  "state as before but printed data; it must leave a new state "
                                  f"({OUT}/new-etag or new-last-modified) with new data")
            return files
        etag, modified = run.etag, run.last_modified
        last = email.utils.format_datetime(modified, usegmt=True) if modified else None
        files.append(FetchedFile(
            path=run.output, name=f"{step.image} (run {len(files) + 1})", event_time=None,
            state=UrlState(container_fingerprint(step), etag=etag, last_modified=last)))
        if not run.has_more:
            return files


def _run(step: FetchStepContainer, folder: Path, etag: str | None,
         modified: datetime | None, network: bool) -> _Run:
    """One run of the image with that state, its output streamed to ``folder/output``."""
    import docker

    from ..engine.container import ULIMITS, _client, _ulimit

    out = folder / "out"
    out.mkdir(parents=True)
    image = _templated(step.image, "image")
    environment = {"ODF_ETAG": etag or "",
                   "ODF_LAST_MODIFIED": modified.strftime("%Y-%m-%dT%H:%M:%SZ") if modified else "",
                   "ODF_NEW_ETAG_PATH": f"{OUT}/new-etag",
                   "ODF_NEW_LAST_MODIFIED_PATH": f"{OUT}/new-last-modified",
                   "ODF_NEW_HAS_MORE_DATA_PATH": f"{OUT}/new-has-more-data",
                   BATCH_SIZE: str(DEFAULT_BATCH_SIZE)}
    for var in step.env or []:
        environment[var.name] = _templated(var.value, f"env {var.name}") \
            if var.value is not None else _environment(var.name)
    client = _client()
    try:
        client.images.get(image)
    except docker.errors.ImageNotFound:
        raise IngestError(f"fetch Container: image {image} is not in the local image store; "
                          "load it (podman pull or podman load) and pull again") from None
    container = client.containers.create(
        image, command=[_templated(a, "args") for a in step.args or []] or None,
        entrypoint=" ".join(step.command) if step.command else None,
        environment=environment, network_mode="host" if network else "none",
        volumes={str(out): {"bind": OUT, "mode": "rw"}}, user=f"{os.getuid()}:{os.getgid()}",
        cap_drop=["ALL"], ulimits=[_ulimit(n, v) for n, v in ULIMITS.items()], init=True)
    output = folder / "output"
    try:
        container.start()
        status = container.wait()["StatusCode"]
        with open(output, "wb") as f:
            # streamed, not followed: a followed log of an exited container stops short
            for chunk in container.logs(stdout=True, stderr=False, stream=True, follow=False):
                f.write(chunk)
        if status:
            errors = container.logs(stdout=False, stderr=True).decode(errors="replace")
            last = errors.strip().splitlines()[-1] if errors.strip() else "no error output"
            raise IngestError(f"fetch Container {image}: the image exited with status {status}: "
                              f"{last}")
    finally:
        container.remove(force=True)
        client.close()
    return _Run(output, _written(out / "new-etag"), _time(out / "new-last-modified", image),
                (out / "new-has-more-data").exists())


def _written(path: Path) -> str | None:
    return path.read_text() if path.exists() else None


def _time(path: Path, image: str) -> datetime | None:
    text = _written(path)
    if text is None:
        return None
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00")).astimezone(UTC)
        return when.replace(microsecond=0)  # kept as an HTTP date: to the second
    except ValueError:
        raise IngestError(f"fetch Container {image}: new-last-modified holds {text.strip()!r}, "
                          "not an RFC 3339 time") from None


def _environment(name: str) -> str:
    value = os.environ.get(name)
    if value is None:
        raise IngestError(f"fetch Container: the step takes {name} from the environment; set "
                          f"{name} where coord runs and pull again")
    return value


def _templated(text: str, where: str) -> str:
    """``text`` with each ``${{ token || token ... }}`` replaced by its first token that has a
    value (``env.NAME``: the coordinator's environment variable; a number; a 'string'), as
    the reference's ``template_string`` does."""
    def value(m: re.Match[str]) -> str:
        for token in (t.strip() for t in m.group(1).strip().split("||")):
            if env := _ENV.match(token):
                if (found := os.environ.get(env.group(1))) is not None:
                    return found
            elif literal := _NUMBER.match(token) or _STRING.match(token):
                return literal.group(1)
            else:
                raise IngestError(f"fetch Container: {where}: {token!r} in {m.group(0)!r} is no "
                                  "env.NAME, number or 'string'")
        raise IngestError(f"fetch Container: {where}: no value for {m.group(0)!r}; set the "
                          "variable where coord runs")
    return _TEMPLATE.sub(value, text)
