# The Makefile only delegates: to cargo for the Rust workspace, to Maven for java/ (when present),
# and to scripts for the demo and the benchmarks.
CARGO ?= cargo
MVN   ?= mvn
JAVA_POM := $(wildcard java/pom.xml)

.PHONY: setup compile build lint check test demo bench dist image clean

# What the tests and the demo need from the machine (fuse3, chromium, …): installed when
# missing as root, else the one apt command to run is printed.
setup:
	scripts/setup.sh

build: setup compile

# The build alone, after whichever setup asked for it.
compile:
	$(CARGO) build --release --workspace
ifneq ($(JAVA_POM),)
	$(MVN) -q -B -f java/pom.xml -DskipTests install
endif

# Format, clippy, docs and the declared minimum Rust (.ci/run runs it before the tests).
lint: setup
	scripts/lint.sh

# The fast tier: every unit test, and the tests on stored recordings, logs and the layout; no
# JVM, FUSE, root or Chromium. The tests that need root are marked ignored here and run by
# `make test`.
check: setup
	$(CARGO) test --workspace --lib --bins \
		--test layout --test report_fixtures --test logs_fixtures --test logs_schema_doc \
		--test logs_cli --test recordings --test damage --test oracle --test properties --test report_jfr \
		--test format
	$(CARGO) test --workspace --doc

test: setup build
# The tests run the debug binary, which loads the stacks agent built beside it (cargo test
# builds no cdylib).
	$(CARGO) build -p stallscope-stacks
	$(CARGO) test --workspace --no-fail-fast -- --include-ignored
ifneq ($(JAVA_POM),)
	$(MVN) -q -B -f java/pom.xml verify
endif

# Only what the build and the demo need is installed first (the tests' tools are make test's).
demo:
	scripts/setup.sh --demo
	$(MAKE) compile
	scripts/demo.sh

bench: setup build
	bench/run.sh

dist: build
	scripts/dist.sh

# An OCI image archive of the dist tree, for the DaemonSet (ctr/docker/podman load it).
image: dist
	scripts/image.sh

clean:
	$(CARGO) clean
ifneq ($(JAVA_POM),)
	$(MVN) -q -B -f java/pom.xml clean
endif
