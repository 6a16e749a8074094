#!/usr/bin/env bash
# Build the Spark engine's OCI image, offline: no container registry is reachable here.
#   1. base image localhost/odf-base:bookworm from debootstrap (once; rootfs tarball cached)
#   2. wheelhouse downloaded on the host (pip inside the image can't reach/trust the index)
#   3. podman build --network none from engines/spark/Dockerfile
# Prints the image ID (sha256:..., what the coordinator records as image_digest) last on stdout.
#
#   IMAGE=...            image name (default localhost/odf-spark-engine:<engine version>,
#                        also tagged :latest, which EngineSettings.image names by default)
#   ODF_CACHE_DIR=...    cache (default ~/.cache/odf-coordinator)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"        # engines/spark
REPO="$(cd "$HERE/../.." && pwd)"
CACHE="${ODF_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/odf-coordinator}"
BASE_IMAGE=localhost/odf-base:bookworm
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
REQS="$HERE/requirements.txt"

log() { echo "build-image: $*" >&2; }
now() { date +%s.%N; }
took() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }'; }
T0=$(now)

VERSION=$(sed -nE 's/^__version__ *= *["'\'']([^"'\'']+)["'\''].*/\1/p' \
    "$HERE/odf_spark_engine/__init__.py" 2>/dev/null | head -1 || true)
VERSION="${VERSION:-0.1.0}"
IMAGE="${IMAGE:-localhost/odf-spark-engine:$VERSION}"
LATEST="${IMAGE%:*}:latest"
# Podman, runc config, debootstrap (idempotent; its stdout is the API socket path, not ours).
"$HERE/podman-setup.sh" >/dev/null
mkdir -p "$CACHE"

# --- 1. base image ---------------------------------------------------------------------
if ! podman image exists "$BASE_IMAGE"; then
    TARBALL="$CACHE/odf-base-bookworm.tar"
    if [ ! -f "$TARBALL" ]; then
        t=$(now)
        ROOTFS="$CACHE/rootfs.tmp"
        rm -rf "$ROOTFS"
        log "debootstrap bookworm (about a minute)"
        debootstrap --variant=minbase --include=openjdk-17-jre-headless,python3,python3-venv \
            bookworm "$ROOTFS" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 \
            || { tail -30 "$CACHE/debootstrap.log" >&2; exit 1; }
        # Downloaded .debs and apt lists are only dead weight in the image.
        rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/*
        tar -C "$ROOTFS" -cf "$TARBALL.tmp" .
        mv "$TARBALL.tmp" "$TARBALL"
        rm -rf "$ROOTFS"
        log "debootstrap + tarball: $(took "$t")"
    fi
    t=$(now)
    podman import --quiet "$TARBALL" "$BASE_IMAGE" >/dev/null
    log "import $BASE_IMAGE: $(took "$t")"
fi

# --- 2. wheelhouse, keyed by the requirements --------------------------------------------
[ -f "$REQS" ] || { log "missing $REQS"; exit 1; }
REQ_HASH=$(sha256sum "$REQS" | cut -c1-16)
WHEELS="$CACHE/wheelhouse-$REQ_HASH"
if [ ! -f "$WHEELS/.complete" ]; then
    t=$(now)
    rm -rf "$WHEELS"; mkdir -p "$WHEELS"
    # pyspark is published only as an sdist: build its wheel here (pure Python, so the
    # host's build is valid in the image), then let the resolver find it via --find-links.
    PYSPARK_REQ=$(grep -iE '^\s*pyspark\b' "$REQS" | head -1 | sed 's/[#;].*//; s/\[[^]]*\]//' | tr -d ' ')
    if [ -n "$PYSPARK_REQ" ]; then
        pip wheel --quiet --no-deps "$PYSPARK_REQ" -w "$WHEELS" >&2
    fi
    # Target: CPython 3.11 on bookworm (glibc 2.36): every manylinux level up to 2.36 fits,
    # so name them all (projects publish under different levels).
    PLATFORMS=()
    for p in manylinux2014_x86_64 manylinux_2_17_x86_64 manylinux_2_24_x86_64 \
             manylinux_2_27_x86_64 manylinux_2_28_x86_64 manylinux_2_31_x86_64 \
             manylinux_2_34_x86_64 manylinux_2_35_x86_64 manylinux_2_36_x86_64; do
        PLATFORMS+=(--platform "$p")
    done
    pip download --quiet -d "$WHEELS" -r "$REQS" --find-links "$WHEELS" \
        --only-binary=:all: --python-version 3.11 --implementation cp --abi cp311 \
        "${PLATFORMS[@]}" >&2
    touch "$WHEELS/.complete"
    log "wheelhouse: $(took "$t")"
fi
SPARK_VERSION=$(find "$WHEELS" -maxdepth 1 -name 'pyspark-*.whl' -printf '%f\n' | head -1 | cut -d- -f2)

# --- 3. podman build -----------------------------------------------------------------------
# Stubs are generated, maybe not committed: make them if the engine has none yet.
GEN="$HERE/odf_spark_engine/generated"
if ! ls "$GEN"/*_pb2*.py >/dev/null 2>&1 && [ -x "$REPO/proto/generate.sh" ]; then
    log "generating gRPC stubs"
    "$REPO/proto/generate.sh" >&2
fi

CTX=$(mktemp -d "${TMPDIR:-/tmp}/odf-engine-ctx.XXXXXX")
trap 'rm -rf "$CTX"' EXIT
# Hard links when on the same filesystem: staging 400 MB of wheels then costs nothing.
cp -al "$WHEELS" "$CTX/wheels" 2>/dev/null || cp -a "$WHEELS" "$CTX/wheels"
rm -f "$CTX/wheels/.complete"
cp "$REQS" "$CTX/wheels/requirements.txt"
# The wheels' names+hashes: COPYing this file ahead of the install makes the (mounted, so
# otherwise invisible to the cache) wheel set part of the layer cache key.
(cd "$CTX/wheels" && sha256sum -- * | sort -k2) >"$CTX/wheels.sha256"
cp "$HERE/Dockerfile" "$CTX/Dockerfile"
mkdir -p "$CTX/engine"
tar -C "$HERE" --exclude='__pycache__' --exclude='*.pyc' -cf - odf_spark_engine | tar -C "$CTX/engine" -xf -

OLD_ID=$(podman image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)
t=$(now)
podman build --quiet --network none --pull=never \
    --build-arg "ENGINE_VERSION=$VERSION" --build-arg "SPARK_VERSION=${SPARK_VERSION:-unknown}" \
    -t "$IMAGE" -t "$LATEST" "$CTX" >&2
log "podman build: $(took "$t")"

ID=$(podman image inspect --format '{{.Id}}' "$IMAGE")
# The image these tags named before is now untagged: drop it, unless a container still uses it.
if [ -n "$OLD_ID" ] && [ "$OLD_ID" != "$ID" ]; then
    podman rmi "$OLD_ID" >/dev/null 2>&1 || true
fi
SIZE=$(podman image inspect --format '{{.Size}}' "$IMAGE")
log "image $IMAGE, $((SIZE / 1000000)) MB, total $(took "$T0")"
echo "sha256:${ID#sha256:}"
