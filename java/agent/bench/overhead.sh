#!/usr/bin/env bash
# Overhead and accuracy of stallscope-agent.jar, each figure beside its reference from the same run:
# agent CPU in an idle and a busy JVM (beside jHiccup at the same 1 ms resolution), the busy JVM's throughput with/without the agent, and the
# agent's p99/max hiccup beside cyclictest's next to an idle JVM. Prints medians over the runs.
#
#   java/agent/bench/overhead.sh            # the real benchmark: 60 s windows, 3 runs (about 14 minutes)
#   java/agent/bench/overhead.sh --quick    # 10 s windows, 3 runs (about 3 minutes)
#   SECONDS_PER_RUN=30 RUNS=5 JAVA=/usr/lib/jvm/temurin-25-jdk-amd64/bin/java java/agent/bench/overhead.sh
#
# Needs the built agent (make build, or mvn -f java/pom.xml -DskipTests install) and cyclictest (rt-tests).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
agent_dir=$(cd "$here/.." && pwd)

window=${SECONDS_PER_RUN:-60}
runs=${RUNS:-3}
warmup=${WARMUP_SECONDS:-3}
if [[ "${1:-}" == "--quick" ]]; then
  window=${SECONDS_PER_RUN:-10}
fi

java=${JAVA:-java}
javac=${JAVAC:-javac}
jar="$agent_dir/target/stallscope-agent.jar"
hdr=$(ls "$agent_dir"/target/test-libs/HdrHistogram-2.2.*.jar 2>/dev/null | head -n 1 || true)
if [[ ! -f "$jar" || -z "$hdr" ]]; then
  echo "overhead.sh: $jar or target/test-libs/HdrHistogram-2.2.*.jar is missing; run make build first" >&2
  exit 1
fi
if ! command -v cyclictest > /dev/null; then
  echo "overhead.sh: cyclictest not found; install rt-tests (apt-get install rt-tests)" >&2
  exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/stallscope-overhead.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$javac" -nowarn --release 11 -cp "$hdr" -d "$work/classes" "$here/Workload.java" "$here/Overhead.java"
# jHiccup, the peer: built from its published source into shared/peers (see its README there).
jhiccup=$(ls "$agent_dir"/../../../shared/peers/jHiccup-*.jar 2>/dev/null | head -n 1 || true)
if [[ -z "$jhiccup" ]]; then
  echo "overhead.sh: no jHiccup jar in shared/peers beside the checkout: the agent's idle cost is measured against it" >&2
  exit 1
fi
"$java" -cp "$work/classes:$hdr" Overhead "$jar" "$java" "$(getconf CLK_TCK)" "$window" "$warmup" "$runs" "$work" "$jhiccup"
