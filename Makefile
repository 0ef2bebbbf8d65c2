# berth — see README.md. Every tool is pinned in hack/tools/go.mod and run with
# `go tool`; the control plane is built from hack/controlplane/go.mod.

SHELL := /usr/bin/env bash -o pipefail
GO ?= go
TOOLS := $(GO) tool -modfile=hack/tools/go.mod
# Helm and helm-docs have their own module (their Kubernetes libraries need
# not agree with golangci-lint's).
HELM := $(GO) tool -modfile=hack/helm/go.mod
CHART := charts/berth
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
IMAGE_TAR ?= bin/berth-image.tar
BERTH := bin/berth
TEST_TIMEOUT ?= 25m
BENCH ?= .
BENCH_COUNT ?= 6
FIDELITY_CASES ?= 3000

.PHONY: all build run test unit generate verify lint chromium controlplane bench bench-karpenter e2e-scale e2e-large e2e-clusterapi chaos clusterapi fidelity clean help fuzz race image chart-lint

all: build

help: ## List the targets.
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

build: ## Build bin/berth.
	$(GO) build -o $(BERTH) ./cmd/berth

controlplane: build ## Build etcd, kube-apiserver, kube-scheduler, kube-controller-manager and kwok (cached by version).
	$(BERTH) dev build

run: build controlplane ## Start the local control plane, install the demo and run the controller in the foreground.
	$(BERTH) dev up
	$(BERTH) dev demo
	$(BERTH) controller --kubeconfig .berth/dev/kubeconfig --leader-elect=false \
		--metrics-bind-address 127.0.0.1:8080 --metrics-secure=false --health-probe-bind-address 127.0.0.1:8081 \
		--webhook-bind-address 127.0.0.1:9443 --webhook-url https://127.0.0.1:9443 --zap-devel

test: controlplane clusterapi ## Run unit, controller and end-to-end tests (incl. the chart's render and install tests and Cluster API), the image test, the scheduler fidelity test and the bench module's checks.
	$(GO) test -timeout $(TEST_TIMEOUT) ./...
	cd hack/image && $(GO) test -timeout $(TEST_TIMEOUT) ./...
	cd test/fidelity && $(GO) test -timeout $(TEST_TIMEOUT) ./... -args -cases $(FIDELITY_CASES)
	cd test/monitoring && $(GO) test ./...
	cd bench && GOTOOLCHAIN=auto $(GO) test -run TestCataloguesAgree ./...
	$(MAKE) fuzz

# A count of executions, not a duration: with a duration, Go's fuzzing
# coordinator can fail a target with a bare "context deadline exceeded"
# when a starved worker misses the deadline (golang/go#75804; seen in
# make test on this 2-core machine under load).
FUZZ_TIME ?= 20000x
fuzz: ## Run each fuzz target (scenario loader, cron schedules, prices and quantities) for FUZZ_TIME executions.
	$(GO) test -run '^$$' -fuzz '^FuzzLoadAndPlan$$' -fuzztime $(FUZZ_TIME) ./internal/scenario/
	$(GO) test -run '^$$' -fuzz '^FuzzScheduleActive$$' -fuzztime $(FUZZ_TIME) ./internal/headroom/
	$(GO) test -run '^$$' -fuzz '^FuzzPricesAndQuantities$$' -fuzztime $(FUZZ_TIME) ./internal/planner/scaleup/

race: ## Run the unit tests (no control plane) with the race detector.
	$(GO) test -short -race ./...

e2e-scale: build controlplane ## Measure 1000 pending pods -> Running (and a no-autoscaler baseline), and a burst of 200 gated companion workloads, on the real control plane.
	BERTH_E2E_SCALE=1 $(GO) test -count=1 -v -timeout 30m -run 'TestThroughput1000Pods|TestCompanionBurst200' ./test/e2e/

e2e-large: build controlplane ## Measure a large cluster (~15 min): 1,000 KWOK nodes x 30 running pods (BERTH_E2E_LARGE_NODES), idle round read/plan time and RSS, a 500-pod burst to all Running against the scheduler alone.
	BERTH_E2E_LARGE=1 $(GO) test -count=1 -v -timeout 60m -run 'TestLargeCluster' ./test/e2e/

chaos: build controlplane ## Chaos soak (~10 min): berth behind a fault-injecting proxy and killed at random while workloads scale 0 -> up -> down -> 0 three times; prints the invariants' figures (BERTH_CHAOS_SEED, BERTH_CHAOS_CYCLES).
	BERTH_E2E_CHAOS=1 $(GO) test -count=1 -v -timeout 40m -run 'TestChaos' ./test/e2e/

e2e-target: build controlplane ## Headroom from a wait-time goal on the real control plane (~8 min): periodic bursts wait for a node until berth has learned them, then get capacity within the target.
	BERTH_E2E_TARGET=1 $(GO) test -count=1 -v -timeout 20m -run 'TestTargetLearnsPeriodicBursts' ./test/e2e/

CAPI_VERSION = $(shell cd hack/clusterapi && $(GO) list -m -f '{{.Version}}' sigs.k8s.io/cluster-api)
CAPI_BIN = .cache/clusterapi/$(CAPI_VERSION)/cluster-api-core

clusterapi: ## Build Cluster API's core manager from hack/clusterapi/go.mod (cached by version; about 6 minutes cold).
	@test -x $(CAPI_BIN) || { mkdir -p $(dir $(CAPI_BIN)) && cd hack/clusterapi && \
		CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o ../../$(CAPI_BIN).tmp sigs.k8s.io/cluster-api/core && mv ../../$(CAPI_BIN).tmp ../../$(CAPI_BIN); }

e2e-clusterapi: build controlplane clusterapi ## Only the Cluster API end-to-end test: berth against real Cluster API core controllers with a KWOK-backed infrastructure provider.
	$(GO) test -count=1 -v -timeout 20m -run 'TestClusterAPI' ./test/e2e/

fidelity: ## Compare berth's filters with kube-scheduler's on FIDELITY_CASES random clusters (verbose).
	cd test/fidelity && $(GO) test -v -timeout 60m ./... -args -cases $(FIDELITY_CASES)

unit: ## Run the tests that need no control plane.
	$(GO) test -short ./...

generate: ## Regenerate deepcopy functions, CRDs and RBAC, the chart's copies of them and its values table, the API and CLI references (docs/reference).
	$(TOOLS) controller-gen object:headerFile=hack/boilerplate.go.txt paths=./api/... \
		crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(GO) run ./hack/crdbounds config/crd/bases
	$(GO) run ./hack/crdversions config/crd/bases
	$(TOOLS) controller-gen rbac:roleName=berth-controller paths=./internal/controller/... output:rbac:artifacts:config=config/rbac
	$(GO) run ./hack/chartgen
	$(HELM) helm-docs --log-level warning --chart-search-root charts --template-files README.md.gotmpl
	$(TOOLS) crd-ref-docs --source-path=./api --config=hack/crd-ref-docs/config.yaml --renderer=markdown \
		--output-path=docs/reference/api.md --log-level=ERROR
	@# crd-ref-docs links a named map type's element as "#map[string]x"; point it at x's heading.
	sed -i -E 's/\[map\[string\]([A-Za-z0-9]+)\]\(#map\[string\][a-z0-9]+\)/map[string][\1](#\L\1)/g' docs/reference/api.md
	$(GO) run ./hack/clidocs -o docs/reference/cli.md

verify: ## Fail if generated files (deepcopy, CRDs, RBAC, the chart's copies and values table, docs/reference) or go.mod files are stale, or the pure brain depends on clients.
	hack/verify-generated.sh
	hack/check-layering.sh
	@for m in . hack/tools hack/helm hack/image hack/controlplane hack/clusterapi test/fidelity test/monitoring bench; do \
		(cd $$m && GOTOOLCHAIN=auto $(GO) mod tidy -diff >/dev/null) || { echo "$$m/go.mod is not tidy: run 'go mod tidy' there"; exit 1; }; done

lint: chart-lint ## Run golangci-lint (with the package layering rules), go vet and helm lint.
	$(GO) vet ./...
	$(TOOLS) golangci-lint run ./...
	cd hack/image && $(GO) vet ./... && $(GO) tool -modfile=../tools/go.mod golangci-lint run ./...

chromium: ## Install Debian's Chromium for the dashboard's browser test (apt-get; needs root). Without it that test skips, except in CI.
	@command -v chromium >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }
	@chromium --version

chart-lint: ## helm lint the chart (strict).
	$(HELM) helm lint --strict $(CHART) --namespace berth-system

image: ## Build the multi-arch (amd64, arm64) OCI image tarball IMAGE_TAR from Go, without Docker.
	cd hack/image && $(GO) run . -root ../.. -o ../../$(IMAGE_TAR) -version $(VERSION) -revision $(REVISION)

bench: ## Run berth's benchmarks BENCH_COUNT times and summarise them with benchstat.
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -count $(BENCH_COUNT) ./internal/... | tee bench.out
	$(TOOLS) benchstat bench.out

bench-karpenter: ## berth vs Karpenter on the same workload (bench/ module; slow: Karpenter at 20000 pods takes minutes).
	cd bench && GOTOOLCHAIN=auto $(GO) test -run '^$$' -bench '$(BENCH)' -benchtime 1x -count 3 -timeout 120m . | tee ../bench-karpenter.out
	$(TOOLS) benchstat bench-karpenter.out

clean: ## Stop the local control plane and remove build outputs (not the control-plane cache).
	-$(BERTH) dev down
	rm -rf bin bench.out bench-karpenter.out
