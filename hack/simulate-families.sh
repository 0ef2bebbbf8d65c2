#!/usr/bin/env bash
# Simulates three headroom policies on a day of each synthetic trace family
# (berth trace generate, seed 1) on config/simulate/cluster.yaml and prints
# the tables docs/simulate.md quotes. Usage: hack/simulate-families.sh [OUTDIR]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-$(mktemp -d)}
mkdir -p "$out"
go build -o bin/berth ./cmd/berth
for family in diurnal ci batch mix; do
  bin/berth trace generate --family "$family" --seed 1 --out "$out/$family.jsonl" 2>/dev/null
  echo "### $family"
  /usr/bin/time -f "(%e s, %M KB)" bin/berth simulate --trace "$out/$family.jsonl" --cluster config/simulate/cluster.yaml \
    --policy no-headroom --policy config/simulate/units-8.yaml --policy config/simulate/auto-10.yaml \
    -o html --out "$out/$family.html" 2>&1 | grep -v '^wrote'
  bin/berth simulate --trace "$out/$family.jsonl" --cluster config/simulate/cluster.yaml \
    --policy no-headroom --policy config/simulate/units-8.yaml --policy config/simulate/auto-10.yaml
  echo
done
