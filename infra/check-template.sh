#!/usr/bin/env bash
# Checks the SAM template offline: cfn-lint, then `sam validate --lint` (SAM's own transform and
# its bundled cfn-lint), both with fake credentials and no AWS account; the data-safety rules
# of infra/template_rules.py (versioned bucket, protected table, bodies outliving their dead
# letters, alarms that notify; who may delete what is tests/e2e/template/permissions.rs's);
# and that the JSON the template and the handler tests read parses (the state machine definition, events/*.json).
# Any finding fails the check, warnings and informational ones included (cfn-lint's default
# non-zero exit for every severity): the template has none today, keep it so.
#
# Usage:
#   infra/check-template.sh                 # install the tools if needed, then check
#   infra/check-template.sh --install-only  # only install (infra/lambda-build.sh --sam uses it)
#
# Settings (environment):
#   IMGEST_TOOLS_DIR  where tools are installed (default ~/.cache/imgest-tools); the venv is
#                     $IMGEST_TOOLS_DIR/sam, reused by later runs. Installing it from PyPI
#                     takes about 40 s on a fresh machine; the checks themselves about 5 s.
set -euo pipefail
cd "$(dirname "$0")/.."

# Pinned: new releases add rules (cfn-lint) and transforms (SAM). Bump deliberately.
CFN_LINT_VERSION="1.58.0"
SAM_CLI_VERSION="1.170.0"

say() { echo "check-template: $*" >&2; }
# shellcheck source=infra/venv.sh
source infra/venv.sh

venv_install sam "cfn-lint==$CFN_LINT_VERSION" "aws-sam-cli==$SAM_CLI_VERSION"
if [ "${1:-}" = "--install-only" ]; then
    exit 0
fi

started=$SECONDS

# Offline and account-free: fake credentials in a fixed region, and no profile or config file
# that could bring real ones in; no telemetry.
export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_SESSION_TOKEN=test
export AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1
export AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null
unset AWS_PROFILE AWS_DEFAULT_PROFILE AWS_ENDPOINT_URL
export SAM_CLI_TELEMETRY=0

# JSON files: the state machine definition (DefinitionUri, which `sam validate` does not read)
# and the sample events.
"$venv/bin/python" - <<'EOF'
import glob, json, sys

bad = False
for path in ["infra/statemachine/delayed-send.asl.json"] + sorted(glob.glob("events/*.json")):
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        print(f"check-template: {path}: {e}", file=sys.stderr)
        bad = True
        continue
    if path.endswith(".asl.json") and not {"StartAt", "States"} <= doc.keys():
        print(f"check-template: {path}: not a state machine (no StartAt/States)", file=sys.stderr)
        bad = True
sys.exit(1 if bad else 0)
EOF

say "data-safety rules (infra/template_rules.py)"
"$venv/bin/python" infra/template_rules.py template.yaml

say "cfn-lint $CFN_LINT_VERSION"
"$venv/bin/cfn-lint" template.yaml infra/results-subscription.yaml

say "sam validate --lint (SAM CLI $SAM_CLI_VERSION)"
"$venv/bin/sam" validate --lint --template template.yaml --region us-east-1
"$venv/bin/sam" validate --lint --template infra/results-subscription.yaml --region us-east-1

say "ok in $((SECONDS - started))s"
