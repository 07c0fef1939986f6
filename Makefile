# Doppio's two commands for a newcomer: `make run` and `make test`.
GO ?= go
# An execution count, not a duration: a -fuzztime duration races Go 1.26's
# fuzz coordinator at its deadline (golang/go#75804, fixed in Go 1.27) and
# fails with a bare "context deadline exceeded" on a loaded machine.
FUZZTIME ?= 30000x
# FuzzRequest sends each input over HTTP to a real node: fewer executions.
FUZZTIME_HTTP ?= 15000x

.PHONY: run build test unit fuzz bench release

# What `doppio version` says: the nearest v* tag (else the CHANGELOG's
# next version, marked -dev), the commit and its time (reproducible).
VERSION ?= $(or $(patsubst v%,%,$(shell git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null)),0.1.0-dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
DATE ?= $(shell TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null)
BUILDINFO := github.com/doppio-db/doppio/internal/buildinfo
LDFLAGS := -X $(BUILDINFO).version=$(VERSION) -X $(BUILDINFO).commit=$(COMMIT) -X $(BUILDINFO).date=$(DATE)
RELEASE_PLATFORMS ?= linux/amd64 linux/arm64

# The end-to-end cluster tests (three or more nodes, routers, the
# controller, the smart client, expansion, failover, change streams,
# backup and restore, datastreams) that unit runs a second time in secure
# mode: TLS and authentication on every link, every request as root by
# its client certificate (DOPPIO_E2E_SECURE=1, e2e/mode_test.go).
E2E_SECURE_TESTS := TestClusterFailoverLosesNoAcknowledgedWrite
E2E_SECURE_TESTS += TestDeadNodesAreReplacedAndTheControllerFailsOver
E2E_SECURE_TESTS += TestRouterSendsEveryRequestToItsLeaderThroughAFailover
E2E_SECURE_TESTS += TestSmartClientSendsEachRequestToItsLeader
E2E_SECURE_TESTS += TestExpandDrainAndRemoveUnderLoad
E2E_SECURE_TESTS += TestRollingRestartFailsNoRequest
E2E_SECURE_TESTS += TestChangeStreamAcrossACluster
E2E_SECURE_TESTS += TestBackupAndRestoreIntoAnotherCluster
E2E_SECURE_TESTS += TestDatastreamDeliversEveryTransactionAcrossANodeKill
E2E_SECURE_TESTS += TestExportReadsFollowersOfACluster
empty :=
space := $(empty) $(empty)
E2E_SECURE_RUN = ^($(subst $(space),|,$(strip $(E2E_SECURE_TESTS))))$$

# Ctrl-C reaches make and doppio alike; make must not report the
# interrupted recipe as a failure, so the recipe itself traps SIGINT. The
# binary is built first: `go run` exits 1 when interrupted, whatever
# doppio's own status.
run: build
	@trap 'exit 0' INT; ./bin/doppio dev --data ./doppio-data --http 127.0.0.1:8080

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/doppio ./cmd/doppio

# dist/doppio-VERSION-OS-ARCH.tar.gz (the static binary, LICENSE,
# CHANGELOG.md, README.md, the systemd unit) for each platform, and
# dist/SHA256SUMS over them.
release:
	rm -rf dist && mkdir -p dist
	set -e; for p in $(RELEASE_PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; name=doppio-$(VERSION)-$$os-$$arch; \
		mkdir -p dist/$$name; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o dist/$$name/doppio ./cmd/doppio; \
		cp LICENSE CHANGELOG.md README.md packaging/doppio.service dist/$$name/; \
		tar -C dist --sort=name --owner=0 --group=0 --numeric-owner --mtime='$(DATE)' -czf dist/$$name.tar.gz $$name; \
		rm -rf dist/$$name; \
	done
	cd dist && sha256sum *.tar.gz > SHA256SUMS

# The whole suite: vet, every package's tests with the race detector
# (end-to-end tests run the built binary), then each fuzz target briefly.
test: unit fuzz

# The fault suite (./torture) runs on its own after the other packages:
# its nemeses and the end-to-end cluster tests both time elections and
# failovers, and sharing two CPUs made each starve the other. bench/ is a
# module of its own (its dependencies stay out of the server's go.mod).
unit:
	$(GO) vet ./...
	cd bench && $(GO) vet ./...
	$(GO) test -race -count=1 -timeout 20m $$($(GO) list ./... | grep -v '/torture$$')
	DOPPIO_E2E_SECURE=1 $(GO) test -race -count=1 -timeout 10m -run '$(E2E_SECURE_RUN)' ./e2e
	cd bench && $(GO) test -race -count=1 -timeout 20m ./...
	$(GO) test -race -count=1 -timeout 20m ./torture

fuzz:
	$(GO) test -run='^$$' -fuzz='^FuzzTuple$$' -fuzztime=$(FUZZTIME) ./internal/keys
	$(GO) test -run='^$$' -fuzz='^FuzzApplyPatch$$' -fuzztime=$(FUZZTIME) -fuzzminimizetime=3s ./internal/schema
	$(GO) test -run='^$$' -fuzz='^FuzzDecodeJSON$$' -fuzztime=$(FUZZTIME) -fuzzminimizetime=3s ./internal/schema
	$(GO) test -run='^$$' -fuzz='^FuzzDecodeBinary$$' -fuzztime=$(FUZZTIME) -fuzzminimizetime=3s ./internal/schema
	$(GO) test -run='^$$' -fuzz='^FuzzParseJSON$$' -fuzztime=$(FUZZTIME) -fuzzminimizetime=3s ./internal/schema
	$(GO) test -run='^$$' -fuzz='^FuzzRequest$$' -fuzztime=$(FUZZTIME_HTTP) -fuzzminimizetime=3s ./internal/api
	$(GO) test -run='^$$' -fuzz='^FuzzParse$$' -fuzztime=$(FUZZTIME) -fuzzminimizetime=3s ./internal/query
	$(GO) test -run='^$$' -fuzz='^FuzzParseCheckpoint$$' -fuzztime=$(FUZZTIME) -fuzzminimizetime=3s ./internal/changes
	$(GO) test -run='^$$' -fuzz='^FuzzParseDifferential$$' -fuzztime=$(FUZZTIME) -fuzzminimizetime=3s ./internal/http1
	$(GO) test -run='^$$' -fuzz='^FuzzCredentials$$' -fuzztime=$(FUZZTIME) -fuzzminimizetime=3s ./internal/auth

# HTTP benchmarks of the document API next to a no-op handler (the ceiling).
bench:
	cd bench && $(GO) test -run='^$$' -bench=. -benchtime=3s .

# The MailboxDB benchmark of the Espresso paper's Figure 7: Doppio, Bleve and
# PostgreSQL under the same mailbox workload; writes docs/benchmarks/mailbox.{md,png,json}.
# MAILBOX_FLAGS=-quick for a smoke run; `cd bench && go run ./mailbox -h` lists the sizes.
.PHONY: bench-mailbox
bench-mailbox:
	cd bench && $(GO) run ./mailbox $(MAILBOX_FLAGS)

# The failover benchmark of the Espresso paper's Figures 4 and 5: kill -9 of
# a node leading partitions, per-partition time until writes are accepted
# again, spread placement against sharded-MySQL placement, 64 to 1024
# partitions; writes docs/benchmarks/failover.{md,png}.
# FAILOVER_FLAGS=-quick for a smoke run; `cd bench && go run ./failover -h` lists the flags.
.PHONY: bench-failover
bench-failover:
	cd bench && $(GO) run ./failover $(FAILOVER_FLAGS)

# Online cluster expansion, the Espresso paper's Figure 6: a loaded 3-node
# cluster grown by 1, 2 and 3 nodes, serially and in parallel, under load;
# writes docs/benchmarks/expand.{md,png}. EXPAND_FLAGS=-quick for a smoke run.
.PHONY: bench-expand
bench-expand:
	cd bench && $(GO) run ./expand $(EXPAND_FLAGS)

# Placement at scale (issue 32): one placement.Compute call, initial and
# after each event, 6 to 1,000 nodes, against the package at an earlier
# commit; writes docs/benchmarks/placement.{md,png}.
# PLACEMENT_FLAGS=-quick for a smoke run; `cd bench && go run ./placement -h` lists the flags.
.PHONY: bench-placement
bench-placement:
	cd bench && $(GO) run ./placement $(PLACEMENT_FLAGS)

# Metadata at scale (issue 32): etcd bytes written and bytes a router's
# watch receives per event (a node joins, goes down; a database is created)
# at 10,000 and 100,000 replicas, against a real etcd and controller;
# prints the section of docs/benchmarks/scale.md. METADATA_FLAGS=-quick for a smoke run.
.PHONY: bench-metadata
bench-metadata:
	cd bench && $(GO) run ./metadata $(METADATA_FLAGS)

# The cache tier (issue 31): profile-like reads and updates through a router
# with no tier, the hot-key cache, and the hot-key cache plus Redis, next to
# PostgreSQL with Redis in front by hand; writes docs/benchmarks/cache.{md,png}.
# CACHE_FLAGS=-quick for a smoke run; `cd bench && go run ./cache -h` lists the flags.
.PHONY: bench-cache
bench-cache:
	cd bench && $(GO) run ./cache $(CACHE_FLAGS)

# Bulk load and export (issue 29): the MailboxDB messages (2 GB of JSON)
# through the document API, by `doppio bulk build` and a bulk load into 3
# nodes, and by PostgreSQL's COPY with its indexes; export against COPY
# TO; a foreground workload's p99 during a throttled load. Writes
# docs/benchmarks/bulk.{md,png}. BULK_FLAGS=-quick for a smoke run;
# `cd bench && go run ./bulk -h` lists the flags.
.PHONY: bench-bulk
bench-bulk:
	cd bench && $(GO) run ./bulk $(BULK_FLAGS)

# Derived tables (issue 30): 10 million key-value records built by the Go
# builder and by Spark (local mode), pushed to 3 nodes, swapped and rolled
# back under reads, against PostgreSQL's COPY and ANALYZE and its reads at
# equal p99. Needs Java 17 (Spark comes from PyPI, cached). Writes
# docs/benchmarks/derived.{md,png}. DERIVED_FLAGS=-quick for a smoke run.
.PHONY: bench-derived
bench-derived:
	cd bench && $(GO) run ./derived $(DERIVED_FLAGS)

# The control-plane simulator (internal/controlsim): the controller's and the
# partition leaders' real decisions over simulated time, replayed exactly from
# its seed; sizes and results in docs/benchmarks/scale.md. E.g.
# SIM_FLAGS='-scenario zone-loss -seed 7 -nodes 60 -replicas 6000'; -list lists the scenarios.
.PHONY: sim
sim:
	$(GO) run ./internal/controlsim/cmd/controlsim $(SIM_FLAGS)

# The fault-injection suite (needs root: network namespaces): every nemesis
# against every workload on a fresh cluster of real processes; see
# docs/reliability.md. E.g. TORTURE_FLAGS='-nemesis all -duration 60s -report docs/reliability.md'
# or '-nemesis partition -workload register -nodes 5 -seed 42' to replay;
# -secure runs the nodes in secure mode (TLS on every link, authentication).
.PHONY: torture
torture:
	$(GO) run ./torture/cmd/torture $(TORTURE_FLAGS)

# YCSB A-F against Doppio (1 node; 3 nodes x 3 replicas), PostgreSQL and
# MariaDB in one run, durable settings; needs Java 17 + Maven (installs the
# databases with apt-get when absent); writes docs/benchmarks/ycsb/, then
# runs again with the client under SCHED_BATCH into docs/benchmarks/ycsb/client-batch/.
# YCSB_FLAGS=-quick for a smoke run; `cd bench && go run ./ycsb -h` lists the flags.
.PHONY: bench-ycsb
bench-ycsb:
	cd bench && $(GO) run ./ycsb $(YCSB_FLAGS)
	cd bench && $(GO) run ./ycsb -client-sched batch -out docs/benchmarks/ycsb/client-batch $(YCSB_FLAGS)
