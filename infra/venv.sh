# Sourced by the infra scripts that run a tool from PyPI: `venv_install NAME PACKAGE...`
# installs the pinned PACKAGEs into their own venv, $IMGEST_TOOLS_DIR/NAME (default
# ~/.cache/imgest-tools/NAME), once, and sets `venv` to it. The stamp names the packages and
# is written last, so an interrupted install, or a change of a pin, installs again from
# scratch. Fails (status 1) if the install does, also where the caller does not `set -e`.
venv_install() {
    local name=$1
    shift
    venv="${IMGEST_TOOLS_DIR:-$HOME/.cache/imgest-tools}/$name"
    local stamp
    stamp="$venv/.installed-$(echo "$*" | tr ' /' '_-')"
    [ -f "$stamp" ] && return 0
    echo "$name: installing $* into $venv" >&2
    local started=$SECONDS
    python3 -m venv --clear "$venv" || return 1
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$@" || return 1
    touch "$stamp"
    echo "$name: installed in $((SECONDS - started))s" >&2
}
