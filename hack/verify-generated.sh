#!/usr/bin/env bash
# Fails when `make generate` changes any generated file, i.e. when the
# committed (or working-tree) generated files are stale. It compares
# checksums before and after generation, so it works on a dirty tree too.
set -euo pipefail
cd "$(dirname "$0")/.."

generated() {
  { find api -name 'zz_generated*.go'; find config -name '*.yaml'; find charts -type f; find docs/reference -type f; } | sort | xargs -r sha256sum
}

before=$(generated)
make --no-print-directory generate >/dev/null
after=$(generated)
if [ "$before" != "$after" ]; then
  echo "generated files were stale; 'make generate' changed:"
  diff <(echo "$before") <(echo "$after") | grep '^[<>]' | awk '{print "  " $3}' | sort -u
  echo "commit the regenerated files."
  exit 1
fi
echo "generated files are up to date"
