# agentbot: a Discord bot for AI agent sessions. `make help` lists the targets.
GO       ?= go
CONFIG   ?= config.yaml
BIN      := bin/bot
PKGS     := ./...
SOAK_SEEDS   ?= 1-40
SOAK_TIMEOUT ?= 60m

.PHONY: help build run demo test deps vet fmtcheck bench load soak fuzz lint npm dendrite clean image image-test
SHELL := /bin/bash

help: ## list targets
	@awk 'BEGIN{FS=":.*## "} /^[a-z]+:.*## /{printf "  %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## build bin/bot
	$(GO) build -o $(BIN) ./cmd/bot

run: build ## run the bot (needs DISCORD_TOKEN; copies config.example.yaml to config.yaml if missing)
	@[ -f $(CONFIG) ] || { cp config.example.yaml $(CONFIG); echo "created $(CONFIG) from config.example.yaml"; }
	@[ -n "$$DISCORD_TOKEN" ] || { echo "DISCORD_TOKEN is not set: export DISCORD_TOKEN=<your bot token> and run make run again."; echo "To see the bot work without a token: ./$(BIN) demo"; exit 2; }
	./$(BIN) run -config $(CONFIG)

demo: build ## play the scripted demo against the built-in Discord emulator (no token)
	./$(BIN) demo

test: vet fmtcheck deps ## set up what it can (deps), vet, gofmt check, the race-enabled suite; names what it skipped
	@set -o pipefail; $(GO) test -race -count=1 -timeout 15m -json $(PKGS) | $(GO) run ./internal/testreport

deps: ## install the test programs that need no root: npm packages and Dendrite into .cache (each skipped, and said so, when its tool is missing)
	@if command -v npm >/dev/null; then $(MAKE) --no-print-directory npm; else echo "deps: npm is not installed: the MCP and ACP end-to-end tests will skip (apt-get install -y nodejs npm)"; fi
	@if command -v gcc >/dev/null; then $(MAKE) --no-print-directory dendrite; else echo "deps: gcc is not installed: Dendrite cannot be built and the Matrix tests will skip (apt-get install -y gcc)"; fi

vet: ## go vet
	$(GO) vet $(PKGS)

fmtcheck: ## fail if any file is not gofmt-formatted
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
lint: vet fmtcheck ## static checks: vet, gofmt and staticcheck (fetched by version from the module proxy)
	$(GO) run $(STATICCHECK) ./...

bench: ## the performance targets (benchmarks); figures are in the issue notes
	$(GO) test -run '^$$' -bench . -benchmem -benchtime=2s ./core/... ./store/bolt/ ./store/postgres/ ./tools/mcp/
	$(GO) test -run '^$$' -bench . -benchtime=1x ./bot/ ./console/

LOAD_ARGS ?= -profile standard
load: ## the load harness's standard profile (500 conversations, 100 turns/s; ~1 min); LOAD_ARGS="-profile saturation|hot429|guilds|store"
	$(GO) run ./cmd/bot load $(LOAD_ARGS)

# Fuzz targets as "package:FuzzName"; their seed corpora (f.Add and
# testdata/fuzz) also run in `make test`.
FUZZTIME    ?= 30s
# Minimizing each new interesting input (default 60s) would eat the budget.
FUZZMINIMIZETIME ?= 5s
FUZZTARGETS := ./config/:FuzzLoadBytes \
	./adapter/discord/:FuzzSplitMessage ./adapter/discord/:FuzzSlashOptions ./adapter/discord/:FuzzInboundModelText \
	./scheduler/:FuzzParseSchedule ./core/command/:FuzzParseDuration ./adapter/matrix/:FuzzClassify ./adapter/matrix/:FuzzParseCommand \
	./acp/:FuzzSafeComponent

fuzz: ## run every fuzz target for FUZZTIME each (default 30s); a finding is saved under testdata/fuzz
	@set -e; for t in $(FUZZTARGETS); do pkg=$${t%%:*}; name=$${t##*:}; \
		echo "== $$name ($$pkg, $(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME) $$pkg; done

soak: ## long randomized scenario run; SOAK_SEEDS=1-200 picks the seeds (default 1-40)
	SOAK=1 SOAK_SEEDS=$(SOAK_SEEDS) $(GO) test -race -count=1 -timeout $(SOAK_TIMEOUT) -run '^(TestScenario|TestMatrixScenario)$$' ./bot/

NPM_PKGS := $(shell grep -v '^\#' .ci/npm-packages 2>/dev/null)
npm: ## install the npm programs some tests run (MCP servers, ACP agents; .ci/npm-packages) into .cache/npm (skipped if installed)
	@if [ -n "$(NPM_PKGS)" ]; then \
		if [ -f .cache/npm/.installed ] && [ "$$(cat .cache/npm/.installed)" = "$(NPM_PKGS)" ]; then echo "npm test programs already installed in .cache/npm"; \
		else mkdir -p .cache/npm && npm install --no-audit --no-fund --prefix .cache/npm $(NPM_PKGS) && echo "$(NPM_PKGS)" > .cache/npm/.installed; fi; fi

# Dendrite (Apache-2.0, github.com/matrix-org/dendrite; not element-hq's AGPL fork) is a test tool installed by
# version, never a module dependency: adapter/matrix's tests start it (internal/dendritetest). cgo SQLite: needs gcc.
DENDRITE_VERSION := v0.13.8
DENDRITE_BIN     := .cache/dendrite/bin
DENDRITE_CMDS    := dendrite generate-keys generate-config create-account
dendrite: ## build the Matrix homeserver the Matrix adapter's tests run (Dendrite, into .cache/dendrite; skipped if built)
	@if [ -f $(DENDRITE_BIN)/.version ] && [ "$$(cat $(DENDRITE_BIN)/.version)" = "$(DENDRITE_VERSION)" ] && \
		( for c in $(DENDRITE_CMDS); do [ -x $(DENDRITE_BIN)/$$c ] || exit 1; done ); then \
		echo "dendrite $(DENDRITE_VERSION) already built in $(DENDRITE_BIN)"; \
	else \
		mkdir -p $(DENDRITE_BIN) && \
		GOBIN=$$(pwd)/$(DENDRITE_BIN) $(GO) install $(foreach c,$(DENDRITE_CMDS),github.com/matrix-org/dendrite/cmd/$(c)@$(DENDRITE_VERSION)) && \
		echo $(DENDRITE_VERSION) > $(DENDRITE_BIN)/.version; \
	fi

ENGINE ?= $(shell command -v podman || command -v docker)
image: ## build the container image agentbot:latest (docker or podman; pulls the base images)
	$(ENGINE) build -t agentbot:latest .

image-test: ## build the image and run `bot demo` in it (slow; IMAGE_LOCAL_BASES=1 offline); not part of make test
	IMAGE_TEST=1 $(GO) test -count=1 -timeout 30m -run '^TestImageRunsDemo$$' -v ./cmd/bot/

clean: ## remove build output
	rm -rf bin
