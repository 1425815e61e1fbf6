#!/usr/bin/env bash
# The guided tour of the main job (`imgest demo`, see the README) on a fresh machine: installs
# the build tools that are missing (infra/setup.sh), then builds the CLI in release mode and
# runs the tour. Arguments go to `imgest demo` (e.g. --data-dir DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
infra/setup.sh
exec cargo run --release --quiet -p imgest -- demo "$@"
