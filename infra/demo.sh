#!/usr/bin/env bash
# The guided tour of the main job (`imgest demo`, see the README) on a fresh machine: installs
# the build tools that are missing (infra/setup.sh), then builds the CLI and runs the tour.
# Arguments go to `imgest demo` (e.g. --data-dir DIR).
#
# The tour builds with the dev profile: the photo codecs and the pipeline are optimised there
# too (Cargo.toml), which is all a tour of a few photos needs, and it compiles in a fraction of
# the release build's time (fat LTO and one codegen unit, which the Lambda artifacts need and a
# tour does not; docs/benchmarks.md#build-times). The test command reuses what it built.
set -euo pipefail
cd "$(dirname "$0")/.."
infra/setup.sh
exec cargo run --quiet -p imgest -- demo "$@"
