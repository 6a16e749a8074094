#!/usr/bin/env bash
# A plain install's `coord` (the one argument) runs a user's first steps in a fresh current-ODF
# workspace: init, add a CSV root, pull it, query it. Run by `make install-check`, with the
# `coord` of a virtual environment holding `pip install .` alone (no [dev] extras): an import
# that pyproject.toml does not declare fails here, not at a user's first pull.
set -euo pipefail
coord="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
mkdir data
printf 'event_time,city,population\n2024-01-01T00:00:00Z,Lisbon,545923\n2024-01-02T00:00:00Z,Oslo,709037\n' > data/1.csv
cat > cities.yaml <<'YAML'
apiVersion: 1
kind: DatasetSnapshot
content:
  id: cities
  source:
    kind: root
    fetch: {kind: filesGlob, path: "data/*.csv"}
    read: {kind: csv, header: true, schema: ["event_time TIMESTAMP", "city STRING", "population BIGINT"]}
    merge: {kind: snapshot, primaryKey: [city]}
YAML
"$coord" init . >/dev/null
"$coord" add cities.yaml >/dev/null
"$coord" pull cities
count="$("$coord" sql -o csv -c 'SELECT count(*) AS n FROM "cities@state"' | tail -1)"
[ "$count" = 2 ] || { echo "install-check: expected 2 cities, got '$count'" >&2; exit 1; }
"$coord" verify cities >/dev/null
echo "install-check: a plain install pulled, queried and verified a root"
