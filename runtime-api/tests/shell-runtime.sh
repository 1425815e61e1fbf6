#!/bin/sh
# A Lambda runtime in sh and curl, for the emulator's tests. For each event it answers
# {"id", "arn", "deadline_ms", "home", "event"}, except for the events "fail" (an error
# report), "exit" (the process exits 3 with a last word), "big" (a 7 MB response) and "stray"
# (first answers a request id never handed out, then answers {"stray_status": HTTP status}). With
# INIT=fail it reports an init error instead of polling.
set -eu
api="http://$AWS_LAMBDA_RUNTIME_API/2018-06-01/runtime"
if [ "${INIT:-}" = fail ]; then
    curl -sS -X POST -H 'Lambda-Runtime-Function-Error-Type: Runtime.ConfigError' \
        -d '{"errorMessage":"missing setting"}' "$api/init/error" >/dev/null
    sleep 60
fi
headers=$(mktemp)
while true; do
    event=$(curl -sS -D "$headers" "$api/invocation/next")
    header() { grep -i "^$1:" "$headers" | cut -d' ' -f2 | tr -d '\r'; }
    id=$(header lambda-runtime-aws-request-id)
    case "$event" in
    '"fail"')
        curl -sS -X POST -H 'Lambda-Runtime-Function-Error-Type: Test.Failed' \
            -d '{"errorMessage":"asked to fail"}' "$api/invocation/$id/error" >/dev/null ;;
    '"exit"')
        echo "exiting as asked" >&2
        exit 3 ;;
    '"stray"')
        status=$(curl -sS -o /dev/null -w '%{http_code}' -X POST -d '{"not":"mine"}' \
            "$api/invocation/00000000-0000-4000-8000-ffffffffffff/response")
        printf '{"stray_status":%s}' "$status" |
            curl -sS -X POST --data-binary @- "$api/invocation/$id/response" >/dev/null ;;
    '"big"')
        head -c 7000000 /dev/zero | tr '\0' a |
            curl -sS -X POST --data-binary @- "$api/invocation/$id/response" >/dev/null || true ;;
    *)
        printf '{"id":"%s","arn":"%s","deadline_ms":%s,"home":"%s","event":%s}' \
            "$id" "$(header lambda-runtime-invoked-function-arn)" \
            "$(header lambda-runtime-deadline-ms)" "${HOME:-unset}" "$event" |
            curl -sS -X POST --data-binary @- "$api/invocation/$id/response" >/dev/null ;;
    esac
done
