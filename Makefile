# berth — see README.md. Every tool is pinned in hack/tools/go.mod and run with
# `go tool`; the control plane is built from hack/controlplane/go.mod.

SHELL := /usr/bin/env bash -o pipefail
GO ?= go
TOOLS := $(GO) tool -modfile=hack/tools/go.mod
BERTH := bin/berth
TEST_TIMEOUT ?= 25m
BENCH ?= .
BENCH_COUNT ?= 6
FIDELITY_CASES ?= 3000

.PHONY: all build run test unit generate verify lint controlplane bench bench-karpenter e2e-scale fidelity clean help fuzz race

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
		--metrics-bind-address 127.0.0.1:8080 --metrics-secure=false --health-probe-bind-address 127.0.0.1:8081 --zap-devel

test: controlplane ## Run unit, controller and end-to-end tests, the scheduler fidelity test and the bench module's checks.
	$(GO) test -timeout $(TEST_TIMEOUT) ./...
	cd test/fidelity && $(GO) test -timeout $(TEST_TIMEOUT) ./... -args -cases $(FIDELITY_CASES)
	cd bench && GOTOOLCHAIN=auto $(GO) test -run TestCataloguesAgree ./...
	$(MAKE) fuzz

FUZZ_TIME ?= 10s
fuzz: ## Run each fuzz target (scenario loader, cron schedules, prices and quantities) for FUZZ_TIME.
	$(GO) test -run '^$$' -fuzz '^FuzzLoadAndPlan$$' -fuzztime $(FUZZ_TIME) ./internal/scenario/
	$(GO) test -run '^$$' -fuzz '^FuzzScheduleActive$$' -fuzztime $(FUZZ_TIME) ./internal/headroom/
	$(GO) test -run '^$$' -fuzz '^FuzzPricesAndQuantities$$' -fuzztime $(FUZZ_TIME) ./internal/planner/scaleup/

race: ## Run the unit tests (no control plane) with the race detector.
	$(GO) test -short -race ./...

e2e-scale: build controlplane ## Measure 1000 pending pods -> Running on the real control plane (reports wall time and controller peak memory).
	BERTH_E2E_SCALE=1 $(GO) test -count=1 -v -timeout 30m -run 'TestThroughput1000Pods' ./test/e2e/

fidelity: ## Compare berth's filters with kube-scheduler's on FIDELITY_CASES random clusters (verbose).
	cd test/fidelity && $(GO) test -v -timeout 60m ./... -args -cases $(FIDELITY_CASES)

unit: ## Run the tests that need no control plane.
	$(GO) test -short ./...

generate: ## Regenerate deepcopy functions, CRDs and RBAC.
	$(TOOLS) controller-gen object:headerFile=hack/boilerplate.go.txt paths=./api/... \
		crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(TOOLS) controller-gen rbac:roleName=berth-controller paths=./internal/controller/... output:rbac:artifacts:config=config/rbac

verify: ## Fail if generated files (deepcopy, CRDs, RBAC) or go.mod files are stale, or the pure brain depends on clients.
	hack/verify-generated.sh
	hack/check-layering.sh
	@for m in . hack/tools hack/controlplane test/fidelity; do \
		(cd $$m && $(GO) mod tidy -diff >/dev/null) || { echo "$$m/go.mod is not tidy: run 'go mod tidy' there"; exit 1; }; done

lint: ## Run golangci-lint (with the package layering rules) and go vet.
	$(GO) vet ./...
	$(TOOLS) golangci-lint run ./...

bench: ## Run berth's benchmarks BENCH_COUNT times and summarise them with benchstat.
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -count $(BENCH_COUNT) ./internal/... | tee bench.out
	$(TOOLS) benchstat bench.out

bench-karpenter: ## berth vs Karpenter on the same workload (bench/ module; slow: Karpenter at 20000 pods takes minutes).
	cd bench && GOTOOLCHAIN=auto $(GO) test -run '^$$' -bench '$(BENCH)' -benchtime 1x -count 3 -timeout 120m . | tee ../bench-karpenter.out
	$(TOOLS) benchstat bench-karpenter.out

clean: ## Stop the local control plane and remove build outputs (not the control-plane cache).
	-$(BERTH) dev down
	rm -rf bin bench.out bench-karpenter.out
