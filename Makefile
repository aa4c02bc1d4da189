# workerd-operator — see README.md. Everything a target needs it installs itself:
# the control-plane binaries (built from Go modules into $(CACHE)) and the pinned workerd
# (npm). Prerequisites: Go 1.26, git, Node.js + npm.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

IMG ?= ghcr.io/workerd-operator/workerd-operator:dev
WORKERD_VERSION ?= 1.20261117.1
WORKERD_IMG ?= ghcr.io/workerd-operator/workerd:$(WORKERD_VERSION)
K8S_VERSION ?= 1.37.2
CACHE ?= $(HOME)/.cache/workerd-operator
export WORKERD_OPERATOR_CACHE := $(CACHE)
CONTROL_PLANE := $(CACHE)/k8s/v$(K8S_VERSION)
CONTROLLER_GEN := go tool controller-gen
GO_TEST_FLAGS ?= -timeout 75m
BIN := bin/workerd-operator

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  %-18s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: ## Generate CRDs, RBAC and webhook configuration from the Go markers.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd webhook paths="./api/...;./controllers/...;./internal/webhook/..." \
		output:crd:artifacts:config=config/crd/bases \
		output:rbac:artifacts:config=config/rbac \
		output:webhook:artifacts:config=config/webhook
	@# The Helm chart renders copies of these (internal/chart TestCopiesInSync checks them).
	rm -f charts/workerd-operator/files/crds/*.yaml
	cp config/crd/bases/*.yaml charts/workerd-operator/files/crds/
	cp config/rbac/role.yaml charts/workerd-operator/files/rbac/role.yaml
	cp config/webhook/manifests.yaml charts/workerd-operator/files/webhook/manifests.yaml

.PHONY: generate
generate: ## Generate deepcopy code.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./api/..."

.PHONY: docs
docs: ## Generate docs/limits.md from internal/limits.
	@if [ -d hack/gen-limits-doc ]; then go run ./hack/gen-limits-doc > docs/limits.md; fi

.PHONY: fmt
fmt: ## go fmt.
	go fmt ./...

.PHONY: vet
vet: ## go vet.
	go vet ./...
	go vet -tags dev ./cmd/...

.PHONY: tools
tools: ## Build or reuse the control-plane binaries, the OCI registry, Prometheus' promtool, the pinned workerd, Node 22, the npm bundling tools and Playwright, and (as root) PostgreSQL, llama.cpp's llama-server (built from source once), Chromium and the real node's binaries (docs/real-node.md).
	bash hack/build-control-plane.sh
	bash hack/build-registry.sh >/dev/null
	bash hack/build-promtool.sh >/dev/null
	bash hack/install-workerd.sh >/dev/null
	bash hack/install-node.sh >/dev/null
	bash hack/install-npm-tools.sh >/dev/null
	bash hack/install-postgres.sh >/dev/null
	bash hack/install-llama.sh >/dev/null
	bash hack/install-playwright.sh >/dev/null
	bash hack/install-chromium.sh >/dev/null
	@if [ "$$(id -u)" = 0 ] && [ "$${WORKERD_OPERATOR_REALNODE:-}" != skip ]; then bash hack/build-node.sh; \
	else echo "tools: not root (or WORKERD_OPERATOR_REALNODE=skip): the real-node binaries are not built and test/realnode skips" >&2; fi

.PHONY: node-tools
node-tools: ## Build or reuse kubelet, kube-proxy and containerd; apt-get install runc, CNI plugins, iptables (root).
	bash hack/build-node.sh

.PHONY: images
images: ## Write the operator, workerd and pause images as OCI archives into dist/images (no Docker needed).
	go run ./hack/build-images --out dist/images --img $(IMG) --workerd-img $(WORKERD_IMG)

.PHONY: test
# The real-node suite, the longest package, starts at once (`go test ./...` would start it
# last), beside the other packages one at a time (-p 1: two test processes share the
# cores, as before, and timing-sensitive tests keep their margins); its output follows.
test: tools ## Run all tests: unit, envtest, real workerd, the e2e suite on the local cluster and, as root, on a real node.
	@export KUBEBUILDER_ASSETS=$(CONTROL_PLANE); pkgs=$$(go list ./... | grep -v '/test/realnode$$'); \
	log=$$(mktemp); trap 'cat "$$log"; rm -f "$$log"' EXIT; \
	go test $(GO_TEST_FLAGS) ./test/realnode >"$$log" 2>&1 & realnode=$$!; \
	go test -p 1 $(GO_TEST_FLAGS) $$pkgs && rc=0 || rc=$$?; \
	wait $$realnode && rrc=0 || rrc=$$?; \
	[ $$rc = 0 ] && [ $$rrc = 0 ]

.PHONY: bench
bench: tools ## Run the benchmarks (results go in docs/benchmarks.md).
	KUBEBUILDER_ASSETS=$(CONTROL_PLANE) go test -run '^$$' -bench . -benchtime 1x -timeout 60m ./...

.PHONY: verify
verify: manifests generate docs fmt vet ## Regenerate everything and fail on any diff.
	@git diff --exit-code -- api config docs internal charts || { echo "generated files are stale: run make manifests generate docs and commit" >&2; exit 1; }
	@test -z "$$(git status --porcelain -- api config docs internal charts)" || { git status --porcelain -- api config docs internal charts; echo "untracked generated files" >&2; exit 1; }

##@ Build

.PHONY: build
build: ## Build the binary into bin/.
	CGO_ENABLED=0 go build -trimpath -o $(BIN) ./cmd/workerd-operator

.PHONY: run
run: manifests generate ## Run the manager against the current kubeconfig.
	go run ./cmd/workerd-operator manager

.PHONY: dev
dev: tools build build-installer ## The whole fleet on one machine: local cluster, operator, samples (see README).
	CGO_ENABLED=0 go build -trimpath -tags dev -o bin/workerd-operator-dev ./cmd/workerd-operator
	WORKERD_OPERATOR_BIN=$(CURDIR)/$(BIN) bin/workerd-operator-dev dev --install dist/install.yaml --manifests config/samples --manifests config/dev/r2

.PHONY: docker-build
docker-build: ## Build the operator and workerd images (needs a Docker engine).
	docker build -t $(IMG) .
	docker build -f Dockerfile.workerd --build-arg WORKERD_VERSION=$(WORKERD_VERSION) -t $(WORKERD_IMG) .

.PHONY: build-installer
build-installer: manifests generate ## Write dist/install.yaml: CRDs, RBAC, manager, webhook.
	mkdir -p dist
	go run ./hack/build-installer --img $(IMG) --workerd-img $(WORKERD_IMG) > dist/install.yaml
