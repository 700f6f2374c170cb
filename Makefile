# Strand — see README.md.
GO            ?= go
BIN           := bin/strand
# GOTAGS: build tags of make build and make image. Empty for every binary
# anyone runs; the drill scripts build with GOTAGS=planted (BIN=bin/strand-planted,
# IMAGE=strand:planted) only when PLANTED_BUGS asks for fixed bugs put back:
# a binary built without the tag never reads STRAND_PLANTED_BUGS, and its
# strand server refuses to start when it is set (internal/planted).
GOTAGS        ?=
# IMAGE: the tag make image gives the image (deploy/docker-compose.yml runs
# $${STRAND_IMAGE:-strand:dev}).
IMAGE         ?= strand:dev
PROTOC_GEN_GO := google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
PROTOC_GEN_GRPC := google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
GOBIN         ?= $(shell $(GO) env GOPATH)/bin
FUZZTIME      ?= 2m
# FUZZ_SHORT is what make test gives each fuzz target (13 targets, about a minute with start-up). It is
# a count, not a duration: Go 1.26's fuzz coordinator can fail a duration-bounded run with a bare
# "context deadline exceeded" as its time runs out (golang/go#75804, fixed in Go 1.27); a count never
# arms that deadline. A long FUZZTIME run can still meet it: a failure that wrote no input under
# testdata/fuzz is that race, not a finding.
FUZZ_SHORT    ?= 3000x
# STRAND_FRANZ_REQUIRE_848=1: make franz-suite (and so make test) fails unless the nodes serve KIP-848
# (ConsumerGroupHeartbeat v1) and franz-go's KIP-848 tests run and pass; at 0 they may skip while it is
# not served, and must pass once it is.
STRAND_FRANZ_REQUIRE_848 ?= 1
# package:target, one per fuzz target (make fuzz runs each for FUZZTIME).
FUZZ_TARGETS  := ./record:FuzzDecode ./record:FuzzValidateBatch \
	./record:FuzzReadControlBatch ./record:FuzzParseControlRecord \
	./coordinator/txn:FuzzTxnLogKey ./coordinator/txn:FuzzTxnLogValue \
	./coordinator/group:FuzzGroupKey ./coordinator/group:FuzzGroupLoadRecord \
	./broker/storage:FuzzProducerSnapshot ./broker/storage:FuzzOffsetCheckpoint \
	./broker/storage:FuzzEpochCheckpoint ./broker/storage:FuzzTxnIndex ./api:FuzzRequests \
	./api/kafka:FuzzDecode

.PHONY: sim all build test test-short fuzz lint proto run demo stop clean image drill drill-ci drill-kafka drill-upgrade soak bench-compare bench-scale bench-failover readme-check grow certs franz-suite

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -tags '$(GOTAGS)' -o $(BIN) ./cmd/strand

## test: the whole suite as CI runs it (lint, race-enabled tests, franz-go's own
## integration suite against a three-node cluster (make franz-suite), 100 fresh seeds
## and one long scenario of the cluster simulation (make sim), a short fuzz run (FUZZ_SHORT per target), the short fault drill through the gRPC front door and
## a shorter one through the Kafka listeners (three drills): compose cluster if Docker works, else a
## process cluster; the rolling-upgrade drill (make drill-upgrade); then the README's commands, about a minute: not their
## Docker blocks, since the drill has just built the same image and run the
## same compose file, nor `go test`, whose examples ran above; skipped with
## a message when the cluster of make run holds the README's ports)
test: lint
	$(GO) test -race -count=1 -timeout 20m ./...
	$(MAKE) franz-suite
	$(MAKE) sim SIM_SEEDS=100 SIM_LONG=1
	$(MAKE) fuzz FUZZTIME=$(FUZZ_SHORT)
	$(MAKE) drill-ci
	$(MAKE) drill-kafka DURATION=60s DRILLS=kill-leader,kill-coordinator,kill-controller
	$(MAKE) drill-upgrade
	README_CHECK_DOCKER=no README_CHECK_SKIP='^go test ' README_CHECK_IF_BUSY=skip ./scripts/readme-check.sh

## sim: the cluster simulation (testkit/sim) on SIM_SEEDS fresh seeds (default 1000) and
## SIM_LONG long scenarios (default 4), plus every regression seed of testkit/sim/testdata/seeds,
## SIM_PARALLEL at once (default: the CPUs); prints each seed's line, seeds/s, and the replay
## command of any seed that failed; then puts back each fixed bug of testkit/sim/testdata/planted and
## requires a seed to find it (TestPlantedBugsFound). SIM_FIRST picks the first fresh seed (default: from the time).
SIM_SEEDS    ?= 1000
SIM_LONG     ?= 4
SIM_PARALLEL ?= $(shell nproc 2>/dev/null || echo 2)
SIM_FIRST    ?= 0
## SIM_MIX=default keeps every seed on the default fault mix; empty (make sim, make test): every
## fourth seed takes the leadership mix.
SIM_MIX      ?=
sim:
	SIM_SEEDS=$(SIM_SEEDS) SIM_LONG=$(SIM_LONG) SIM_MIX=$(SIM_MIX) bash -o pipefail -c '$(GO) test -count=1 -timeout 180m -parallel $(SIM_PARALLEL) -run "^(TestSim|TestPlantedBugsFound)$$" -v ./testkit/sim -first-seed $(SIM_FIRST) | grep -v -E "^ *(=== (RUN|PAUSE|CONT|NAME)|--- PASS: TestSim/)"'

test-short:
	$(GO) test -count=1 -short ./...

## fuzz: every fuzz target for FUZZTIME (default 2m each; FUZZTIME=100000x for a count)
fuzz:
	@set -e; for pt in $(FUZZ_TARGETS); do \
		pkg=$${pt%%:*}; fn=$${pt#*:}; echo "fuzz $$fn ($$pkg, $(FUZZTIME))"; \
		$(GO) test -run='^$$' -fuzz="^$$fn\$$" -fuzztime=$(FUZZTIME) $$pkg/; \
	done

lint:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

## proto: install protoc and the Go plugins at pinned versions, regenerate
proto:
	@command -v protoc >/dev/null || (sudo -n true 2>/dev/null && sudo apt-get install -y protobuf-compiler || apt-get install -y protobuf-compiler)
	$(GO) install $(PROTOC_GEN_GO)
	$(GO) install $(PROTOC_GEN_GRPC)
	PATH="$(GOBIN):$$PATH" protoc -I proto --go_out=paths=source_relative:proto \
		--go-grpc_out=paths=source_relative:proto proto/strand/v1/*.proto

## run: build, start a local cluster under ./data, run the demo on it
run: build
	./scripts/run.sh

## certs: the compose cluster's TLS material in deploy/certs/ (git-ignored): a CA, a keystore per node
## (CN=broker; node1..node4), client keystores and --command-config files (admin, verify), the gossip
## key; kept when deploy/certs/ca.pem is there (strand certs --force --out deploy/certs makes new ones)
CERT_HOSTS ?= node1,node2,node3,node4,localhost,127.0.0.1
CERT_CLIENTS ?= admin,verify
certs: build
	@if [ -f deploy/certs/ca.pem ]; then echo "deploy/certs: kept (strand certs --force --out deploy/certs replaces it)"; \
	else $(BIN) certs --out deploy/certs --hosts $(CERT_HOSTS) --clients $(CERT_CLIENTS); fi

## image: a FROM-scratch image of the static binary (no registry needed)
image:
	rm -rf deploy/build && mkdir -p deploy/build/data
	CGO_ENABLED=0 $(GO) build -trimpath -tags '$(GOTAGS)' -ldflags='-s -w' -o deploy/build/strand ./cmd/strand
	cp /etc/ssl/certs/ca-certificates.crt deploy/build/
	printf 'root:x:0:0:root:/:/sbin/nologin\nstrand:x:10001:10001:strand:/data:/sbin/nologin\n' > deploy/build/passwd
	printf 'root:x:0:\nstrand:x:10001:\n' > deploy/build/group
	docker build -q -t $(IMAGE) -f deploy/Dockerfile deploy/build

## demo: the exactly-once demo on the running local cluster (make run starts one)
demo: build
	@bin/strand health --addr 127.0.0.1:9097 >/dev/null 2>&1 || ./scripts/run.sh >/dev/null
	bin/strand demo --bootstrap 127.0.0.1:9097,127.0.0.1:9107,127.0.0.1:9117

stop:
	./scripts/run.sh stop

## grow: start a fourth, broker-only node (deploy/docker-compose.grow.yml) joining the running compose cluster
grow: certs
	@if docker compose version >/dev/null 2>&1; then C="docker compose"; else C=docker-compose; fi; \
	$$C -f deploy/docker-compose.yml -f deploy/docker-compose.grow.yml up -d node4

## drill: image, compose up, strand verify with every drill (2 min), compose down
drill:
	DURATION=$${DURATION:-2m} ./scripts/drill.sh

## drill-ci: the short drill CI runs (about three minutes, every drill once)
drill-ci:
	DURATION=$${DURATION:-100s} PRODUCERS=5 MIN_COMMITTED=1000 DRILLS=$${DRILLS:-all} ./scripts/drill.sh

## drill-kafka: drill-ci with the workload's records through the Kafka listeners (franz-go)
drill-kafka:
	PROTOCOL=kafka DURATION=$${DURATION:-100s} PRODUCERS=5 MIN_COMMITTED=$${MIN_COMMITTED:-500} DRILLS=$${DRILLS:-all} ./scripts/drill.sh

## drill-upgrade: a rolling upgrade under exactly-once load through both front doors: three
## nodes on an older build (OLD, a fixed commit of this repository), replaced one at a time by
## this build (one rolled back and forward again), strand.version finalized, the old build then
## refused; strand verify must find nothing wrong and no commit gap over MAX_GAP (3s); ~5 min
drill-upgrade:
	DURATION=$${DURATION:-150s} ./scripts/drill-upgrade.sh

## soak: the drills in a loop for 30 minutes (DURATION=… to change)
soak:
	DURATION=$${DURATION:-30m} REPEAT=1 ./scripts/drill.sh

## bench-compare: Strand vs NATS JetStream R3 side by side, and against the bare replication
## limit (cmd/strand-limit), three interleaved rounds (about 14 minutes; OUT=file for the
## markdown table, default .bench/results.md; SKIP_JS=1 without JetStream, BARE_ONLY=1 the
## bare limit alone)
bench-compare:
	GO=$(GO) ./scripts/bench-compare.sh

## bench-scale: one producer on 1 vs 1 000 partitions (interleaved rounds), 100
## producers with 30 consumers in 3 groups, then scripts/bench-10k.sh and
## scripts/bench-cleaner.sh if present (about 10 minutes; QUICK=1 for a smoke
## run; OUT=file for the markdown table, default .bench/scale.md)
bench-scale:
	GO=$(GO) ./scripts/bench-scale.sh

## bench-failover: how long exactly-once commits stop when a node is killed, paused, stalled or
## restarted (the coordinator's, the controller's, the partition leader's), through both front
## doors, 5 repetitions each (REPS, FAULTS, DOORS, QUICK=1); a markdown table in .bench/failover.md
bench-failover:
	GO=$(GO) ./scripts/bench-failover.sh

## franz-suite: franz-go's own pkg/kgo integration suite (the version go.mod pins) against a fresh
## three-node cluster of race-enabled nodes on free ports, 100 000 records through its exactly-once
## chains (about three minutes; scripts/franz-suite.sh lists its knobs)
franz-suite:
	GO=$(GO) STRAND_FRANZ_REQUIRE_848=$(STRAND_FRANZ_REQUIRE_848) ./scripts/franz-suite.sh

## readme-check: run README.md's commands as written in a scratch copy
## (scripts/readme-check.sh says which; the Docker blocks when Docker works)
readme-check:
	./scripts/readme-check.sh

clean:
	rm -rf bin data deploy/build
