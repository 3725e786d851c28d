# The Makefile only delegates: to cargo for the Rust workspace, to Maven for java/ (when present),
# and to scripts for the demo and the benchmarks.
CARGO ?= cargo
MVN   ?= mvn
JAVA_POM := $(wildcard java/pom.xml)

.PHONY: build test demo bench dist clean

build:
	$(CARGO) build --release --workspace
ifneq ($(JAVA_POM),)
	$(MVN) -q -B -f java/pom.xml -DskipTests install
endif

test: build
	$(CARGO) test --workspace
ifneq ($(JAVA_POM),)
	$(MVN) -q -B -f java/pom.xml verify
endif

demo: build
	scripts/demo.sh

bench: build
	bench/run.sh

dist: build
	scripts/dist.sh

clean:
	$(CARGO) clean
ifneq ($(JAVA_POM),)
	$(MVN) -q -B -f java/pom.xml clean
endif
