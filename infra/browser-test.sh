#!/usr/bin/env bash
# The page in a real headless Chromium: starts the local runner (`imgest serve`, checking tokens
# against a JWKS that `imgest token` writes) over a fresh data directory, opens the page with a
# token the way a seller's browser gets one (`/#token=...`), and drives it through Chromium's
# WebDriver with selenium (infra/browser_test.py): upload two photos, reorder them, save the
# offer, reload, and find the order kept; then add a stored photo again and find it was not
# sent; save the offer with that photo only, and browse the stored images to find the other one
# the only orphan; upload two copies of one picture and find each listed as the other's
# near-duplicate (the runner indexes them: IMGEST_SIMILAR=index). Asserts on the page's DOM;
# keeps a screenshot in target/browser-test/.
#
# Needs Chromium and its WebDriver (infra/setup.sh tests installs Debian's chromium and
# chromium-driver), python3 with venv and the PyPI registry. The first run installs selenium
# into a venv under ${IMGEST_TOOLS_DIR:-~/.cache/imgest-tools} (a few seconds). infra/test.sh
# runs this after `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."

# The release the test is written against. Bump deliberately.
SELENIUM_VERSION="4.50.0"

say() { echo "browser-test.sh: $*" >&2; }

infra/setup.sh tests
source infra/venv.sh
source infra/runner.sh
venv_install selenium "selenium==$SELENIUM_VERSION"
runner_prepare browser

# A partner's token that is also the operator's (it saves offers and browses every image), the
# one the page is opened with.
runner_tokens "$work" imgest-browser-test browser-test "imgest:upload imgest:offers imgest:operator" \
    browser-test
export IMGEST_DATA_DIR="$work/data"
# The request log is how the test sees which photos the page sent.
export IMGEST_LOG=info
# New photos are filed in the near-duplicate index, which the page's stored images look up.
export IMGEST_SIMILAR=index

runner_start "$work/serve.log"
say "driving Chromium against $base"
artefacts="$PWD/target/browser-test"
mkdir -p "$artefacts"
status=0
"$venv/bin/python" infra/browser_test.py --base "$base" --token "$token" \
    --log "$work/serve.log" --screenshot "$artefacts/page.png" \
    --near-pair samples/garden-portrait.jpg samples/garden-portrait-exif6.jpg \
    samples/storm.jpg samples/dune.jpg || status=$?
if [ "$status" != 0 ]; then
    say "the runner's log (last 40 lines):"
    tail -n 40 "$work/serve.log" >&2 || true
fi
exit "$status"
