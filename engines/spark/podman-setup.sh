#!/usr/bin/env bash
# Install rootful Podman and start its Docker-compatible API service.
# Idempotent and non-interactive: safe from a Makefile, from CI (CI=true) and from tests.
# Prints the API socket path (only that) on stdout; progress goes to stderr.
#
#   SOCK=/run/coord-podman/podman.sock   where the API service listens
set -euo pipefail

SOCK="${SOCK:-/run/coord-podman/podman.sock}"
log() { echo "podman-setup: $*" >&2; }

if [ "$(id -u)" != 0 ]; then
    log "must run as root (rootful Podman)"; exit 1
fi

# 1. Packages. debootstrap is for build-image.sh (no registry is reachable: the base image is
#    built locally); catatonit is the container init (signals, zombie reaping).
PKGS=(podman runc catatonit debootstrap)
missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # Wait for, rather than fail on, another apt run holding the lock.
    apt-get -o DPkg::Lock::Timeout=300 update -qq >&2
    apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends "${PKGS[@]}" >&2
fi

# 2. runc, not crun: crun fails here with "cgroups in hybrid mode not supported".
#    Merge into an existing containers.conf instead of overwriting it.
CONF=/etc/containers/containers.conf
mkdir -p /etc/containers
python3 - "$CONF" <<'EOF'
import re, sys
from pathlib import Path

path = Path(sys.argv[1])
text = path.read_text() if path.exists() else ""
lines = text.splitlines()
want = 'runtime = "runc"'
section, engine_at, done = None, None, False
for i, line in enumerate(lines):
    m = re.match(r"\s*\[([^\]]+)\]\s*$", line)
    if m:
        section = m.group(1).strip()
        if section == "engine":
            engine_at = i
        continue
    if section == "engine" and re.match(r"\s*runtime\s*=", line):
        lines[i], done = want, True
if not done:
    if engine_at is None:
        lines += ["", "[engine]", want]
    else:
        lines.insert(engine_at + 1, want)
new = "\n".join(lines).lstrip("\n") + "\n"
if new != text:
    path.write_text(new)
EOF

# 3. The API service (the docker SDK talks to it). Started detached so it outlives a Makefile
#    recipe's shell; --time=0 keeps it up with no idle timeout.
answers() {
    python3 - "$1" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(2)
try:
    s.connect(sys.argv[1])
    s.sendall(b"GET /_ping HTTP/1.0\r\nHost: d\r\n\r\n")
    sys.exit(0 if b" 200 " in s.recv(256) else 1)
except OSError:
    sys.exit(1)
EOF
}

if ! answers "$SOCK"; then
    mkdir -p "$(dirname "$SOCK")"
    rm -f "$SOCK"
    log "starting podman system service on $SOCK"
    # From /: the service and the conmon of every container it starts inherit its working
    # folder, and conmon fails every start once that folder is gone (a removed checkout).
    # Every descriptor of the background subshell is redirected (not only the service's): a
    # caller reading this script's output to its end is not held open by it.
    (cd / && exec setsid nohup podman system service --time=0 "unix://$SOCK") \
        >"$(dirname "$SOCK")/service.log" 2>&1 </dev/null &
    for _ in $(seq 1 100); do
        answers "$SOCK" && break
        sleep 0.2
    done
    if ! answers "$SOCK"; then
        log "API service did not answer; log follows"
        cat "$(dirname "$SOCK")/service.log" >&2 || true
        exit 1
    fi
fi
echo "$SOCK"
