# p2pc — the poor man's supercomputer. `just` lists the recipes.

set shell := ["bash", "-euo", "pipefail", "-c"]

# The staticcheck release (2026.2.2, module v0.8.2) `lint` and .ci/run use.
staticcheck := "v0.8.2"

# List the recipes.
default:
    @just --list

# Build the p2pc binary into ./bin.
build:
    mkdir -p bin
    go build -o bin/p2pc ./cmd/p2pc

# Cross-build dist/p2pc-* for linux, darwin, windows x amd64, arm64 (or the OS/ARCH named) with plain go build.
release *targets:
    .ci/release {{targets}}

# The module folders: the root and the plugin SDK (plugins/sdk, a module of its own that
# the root's ./... does not include).
modules := ". plugins/sdk"

# Run the test suite of both modules, the second whatever the first's result (README's command; go test flags may follow).
test *flags:
    go run ./harness/testall {{flags}}

# Run the test suite of both modules with the race detector.
test-race:
    go run ./harness/testall -race

# Check formatting, vet and staticcheck of both modules, and of the packages the test build's tag changes (p2pcfault, .ci/faultpkgs; the release pinned at the top, as in .ci/run).
lint:
    test -z "$(gofmt -l $(git ls-files '*.go'))" || { gofmt -l $(git ls-files '*.go'); exit 1; }
    for m in {{modules}}; do (cd $m && go vet ./... && go run honnef.co/go/tools/cmd/staticcheck@{{staticcheck}} ./...); done
    pkgs=$(.ci/faultpkgs) && go vet -tags p2pcfault $pkgs && go run honnef.co/go/tools/cmd/staticcheck@{{staticcheck}} -tags p2pcfault $pkgs

# Regenerate the protobuf code (needs protoc, protoc-gen-go, protoc-gen-go-grpc).
proto:
    cd plugins/sdk/pluginpb && protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative plugin.proto
    protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative internal/transfer/transferpb/blocks.proto
    cd internal/peerpb && protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative peer.proto
    cd internal/swarmjobs/swarmjobspb && protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative jobs.proto

# Render the Mandelbrot demo job on this machine (README's command: built with the plugins' settings).
demo:
    CGO_ENABLED=0 go run -trimpath ./cmd/p2pc run examples/mandelbrot.yaml --no-mdns

# Run the quick Go benchmarks (plugin host round trip against bare gRPC).
bench:
    go test -run '^$' -bench 'Echo|Warm|Bare' -benchtime 2000x -count 3 ./benchmarks/ ./internal/pluginhost/

# Each hand-tuned mechanism against its plain alternative; fails below its margin, figures into results/bench-guard.md (about 1.5 minutes; the bulk path's real-process check needs root; not part of `test`).
bench-guard count="5":
    go run ./harness/benchguard -count {{count}}

# Dispatch latency and tiny-task throughput with real peers (issue 4).
bench-dispatch:
    go test -run '^$' -bench 'Dispatch|TinyTask' -benchtime 5x -timeout 30m ./benchmarks/

# Verification overhead on an honest swarm (issue 5).
bench-verify:
    go test -run '^$' -bench . -benchtime 1x -timeout 30m ./benchmarks/verify/

# What the web view costs a 100,000-task job (issue 18; run on a quiet machine).
bench-webui tasks="100000" rounds="5":
    TASKS={{tasks}} ROUNDS={{rounds}} benchmarks/webui/run.sh

# Reproduce the seed papers' experiments and publish them into results/ (needs root: namespaces, cgroups).
bench-papers setups="2,3,4":
    go run ./cmd/p2pc bench --setups {{setups}} --publish

# The chaos suite: every fault scenario `runs` times, published into results/chaos/ (needs root).
bench-chaos runs="10":
    go run ./cmd/p2pc bench --suite chaos --runs {{runs}} --publish

# Run the hostile-plugin suite and write results/sandbox/hostile.md (run as root for the task-user and netns cases).
hostile-report:
    mkdir -p results/sandbox
    P2PC_HOSTILE_REPORT=$PWD/results/sandbox/hostile.md go test -count=1 -run TestHostile ./internal/pluginhost/

# Fuzz the spec parser for a while (default 60s).
fuzz seconds="60":
    go test ./spec -run '^$' -fuzz FuzzParse -fuzztime {{seconds}}s
