#!/usr/bin/env bash
# The reference's examples/leaderboard/init.sh (kamu-cli v0.265), its push half, with coord:
# the leaderboard derivative (leaderboard.yaml, kept as the reference has it) needs what coord
# lacks: an input aliased by another name (player_scores), the RisingWave engine, and a
# top-2 whose earlier rows are retracted (op 1), which coord does not write yet (issue 34).
set -euo pipefail

[ -d .coord ] || coord init --odf 0.39
coord add player-scores.yaml

for file in `ls ./data/ | sort -g`; do
    echo "coord ingest player-scores data/$file"
    coord ingest player-scores data/$file
done
