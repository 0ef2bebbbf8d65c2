#!/usr/bin/env bash
# The pure brain (simulator, planner, headroom) must not depend on API
# clients, even through another package of ours: depguard (make lint) sees
# direct imports only. This walks the transitive dependencies.
set -euo pipefail
cd "$(dirname "$0")/.."
pure=(./internal/simulator/... ./internal/planner/... ./internal/headroom/...)
forbidden='^(k8s.io/client-go|sigs.k8s.io/controller-runtime|k8s.io/kubernetes|github.com/berth-dev/berth/internal/(controller|cloudprovider|state))(/|$)'
status=0
while read -r pkg deps; do
  for d in $deps; do
    if [[ $d =~ $forbidden ]]; then
      echo "layering: pure package $pkg depends on $d (directly or through another package)" >&2
      status=1
    fi
  done
done < <(go list -f '{{.ImportPath}} {{join .Deps " "}}' "${pure[@]}")
exit $status
