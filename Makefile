# voicesvc: `make run` starts the service on the embedded defaults; `make test`
# runs every test. Both install what is missing first.
SHELL   := /bin/bash
export PATH := /usr/local/go/bin:$(HOME)/go/bin:$(PATH)
export CGO_ENABLED := 1
GO      ?= go
BIN     := bin/voicesvc
ADDR    ?= 127.0.0.1:8080
DB      ?= sqlite://./data/voicesvc.db

.PHONY: deps build run test test-go test-e2e bench fuzz vet clean chaos chaos-fast soak install

deps:
	@bash scripts/deps.sh

# espeak-layout first: it writes where the history variables of the
# libespeak-ng.a being linked sit (engine/espeak/layouts/<its sha256>.json),
# which the binary embeds, so that it needs no archive at run time.
build: deps
	$(GO) run ./cmd/espeak-layout
	$(GO) build -o $(BIN) ./cmd/voicesvc

# Builds, makes (or reuses) a development workspace and key in ./data, prints
# the key and a curl line, then serves in the foreground.
run: build
	@ADDR=$(ADDR) DB=$(DB) bash scripts/run.sh

test: build test-go test-e2e

test-go:
	@unformatted=$$("$$($(GO) env GOROOT)/bin/gofmt" -l $$(find . -name '*.go' -not -path './e2e/node_modules/*' -not -path './e2e/*/node_modules/*')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 12m ./...
	@if [ -z "$$VOICESVC_TEST_PG" ]; then \
	  echo "NOTE: the Postgres store and e2e suites were SKIPPED (VOICESVC_TEST_PG is unset);"; \
	  echo "      run them with VOICESVC_TEST_PG=postgres://postgres@127.0.0.1:5432/test?sslmode=disable make test (CI does)."; \
	else echo "Postgres suites ran against $${VOICESVC_TEST_PG%%\?*}"; fi
	# A deployment built without the MP3 encoder (docs/api.md#compatible-speech).
	$(GO) vet -tags nomp3 ./codec/... ./gateway/...
	$(GO) test -count=1 -tags nomp3 ./codec/...
	$(GO) test -count=1 -tags nomp3 -run 'NoMP3|Unsupported' ./gateway/...

test-e2e: build
	@if [ -f e2e/package.json ]; then \
	  npm ci --prefix examples --no-audit --no-fund --loglevel=error && \
	  cd e2e && npm ci --no-audit --no-fund --loglevel=error && VOICESVC_BIN=$(CURDIR)/$(BIN) npm test; \
	fi
	@# The ElevenLabs dialect's official client, its sockets over ws and LiveKit's plugin, in a folder of their own.
	@if [ -f e2e/elevenlabs/package.json ]; then \
	  cd e2e/elevenlabs && npm ci --no-audit --no-fund --loglevel=error && VOICESVC_BIN=$(CURDIR)/$(BIN) npm test; \
	fi
	@# The Cartesia dialect's official clients, in a folder of their own (LiveKit's plugin pins its agents).
	@if [ -f e2e/cartesia/package.json ]; then \
	  cd e2e/cartesia && npm ci --no-audit --no-fund --loglevel=error && VOICESVC_BIN=$(CURDIR)/$(BIN) npm test; \
	fi
	@if [ -f e2e/deepgram/package.json ]; then \
	  cd e2e/deepgram && npm ci --no-audit --no-fund --loglevel=error && VOICESVC_BIN=$(CURDIR)/$(BIN) npm test; \
	fi

# The fixed benchmark suite, once with the real engine and once with the
# reference engine, against servers it starts on loopback (scripts/bench.sh;
# README "Benchmarks"). Writes bench/results/<timestamp>/ and links latest.
bench: build
	@BIN=$(BIN) bash scripts/bench.sh

# Short fuzzing of every parser; seeds found are kept in testdata.
fuzz:
	@for t in $$(grep -rhoE '^func (Fuzz[A-Za-z0-9_]+)' --include='*_test.go' . | sed 's/func //'); do \
	  pkg=$$(grep -rlE "^func $$t\(" --include='*_test.go' . | head -1 | xargs dirname); \
	  echo "fuzz $$pkg $$t"; $(GO) test -run XXX -fuzz "^$$t$$" -fuzztime 20s $$pkg || exit 1; \
	done

vet:
	$(GO) vet ./...

# Installs the binary, the systemd unit (deploy/voicesvc.service, pointed at
# this PREFIX) and the README. DESTDIR stages a package root.
PREFIX ?= /usr/local
install: build
	install -D -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/voicesvc
	install -D -m 0644 deploy/voicesvc.service $(DESTDIR)$(PREFIX)/lib/systemd/system/voicesvc.service
	sed -i 's#/usr/local/bin/voicesvc#$(PREFIX)/bin/voicesvc#; s#/usr/local/share/doc#$(PREFIX)/share/doc#' \
	  $(DESTDIR)$(PREFIX)/lib/systemd/system/voicesvc.service
	install -D -m 0644 README.md $(DESTDIR)$(PREFIX)/share/doc/voicesvc/README.md

clean:
	rm -rf bin

# The hardening suite (README "Chaos and soak"): every probe against the real
# binary on loopback, a table and "N passed, M failed"; at most 10 minutes.
CHAOS_FLAGS ?=
chaos: build
	$(GO) run ./cmd/voicesvc-chaos -bin $(BIN) -timeout 10m $(CHAOS_FLAGS)

# The fast probes (about 30 s, no root), as a Go test; make test runs it.
chaos-fast: build
	VOICESVC_BIN=$(CURDIR)/$(BIN) $(GO) test -count=1 -timeout 5m -run TestChaosFast ./chaos

# Steady mixed traffic for SOAK_DURATION (default 1h), sampling the server's
# RSS, goroutines and fds each minute; CSV and summary in chaos/results/.
# Fails on a dead server, a 500, or RSS, goroutines or fds more than 10%
# over their values after the first 5 minutes (a sixth of a shorter run).
# SOAK_FAULTS=1: fault mode, the upstream faults (endless body, endless
# headers, endless header line, drip, garbage, huge Content-Length) and a
# SQLite lock held by another process, injected in turn under the load.
SOAK_DURATION ?= 1h
SOAK_FAULTS ?=
soak: build
	$(GO) run ./cmd/voicesvc-chaos soak -bin $(BIN) -duration $(SOAK_DURATION) -out chaos/results $(if $(filter 1 yes true,$(SOAK_FAULTS)),-faults)
