#!/usr/bin/env bash
# Layering rules that depguard (make lint) cannot see, because it looks at
# direct imports only; this walks the transitive dependencies:
#  1. the pure brain (simulator, planner, headroom, podutil) depends on no
#     API client, cloud provider, controller or runtime state;
#  2. a controller depends on no other controller and not on the webhook
#     (what both need lives in a shared package: clusterread, state, ...).
set -euo pipefail
cd "$(dirname "$0")/.."
status=0

pure=(./internal/simulator/... ./internal/planner/... ./internal/headroom/... ./internal/podutil/...)
forbidden='^(k8s.io/client-go|sigs.k8s.io/controller-runtime|k8s.io/kubernetes|github.com/berth-dev/berth/internal/(controller|cloudprovider|state|clusterread|webhook))(/|$)'
while read -r pkg deps; do
  for d in $deps; do
    if [[ $d =~ $forbidden ]]; then
      echo "layering: pure package $pkg depends on $d (directly or through another package)" >&2
      status=1
    fi
  done
done < <(go list -f '{{.ImportPath}} {{join .Deps " "}}' "${pure[@]}")

prefix=github.com/berth-dev/berth/internal/controller/
while read -r pkg deps; do
  own=${pkg#"$prefix"}
  own=${own%%/*}
  for d in $deps; do
    if [[ $d == "$prefix"* ]]; then
      other=${d#"$prefix"}
      other=${other%%/*}
      if [[ $other != "$own" ]]; then
        echo "layering: controller $pkg depends on controller $d; pass a narrow interface wired in internal/cli/controller" >&2
        status=1
      fi
    elif [[ $d == github.com/berth-dev/berth/internal/webhook || $d == github.com/berth-dev/berth/internal/webhook/* ]]; then
      echo "layering: controller $pkg depends on $d; what both read lives in internal/clusterread" >&2
      status=1
    fi
  done
done < <(go list -f '{{.ImportPath}} {{join .Deps " "}}' ./internal/controller/...)
exit $status
