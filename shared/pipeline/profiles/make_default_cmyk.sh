#!/usr/bin/env bash
# Regenerates FOGRA39L.icc, the default CMYK profile (see README.md beside this script), from
# the FOGRA39L characterisation data Debian ships in icc-profiles-free, with ArgyllCMS's
# profiler (Debian's argyll). Run once; the committed profile is what the pipeline embeds.
#
#   apt-get install argyll icc-profiles-free   # as root
#   shared/pipeline/profiles/make_default_cmyk.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp /usr/share/color/icc/FOGRA39L.ti3 "$work/"
cd "$work"
# Medium quality tables, the ti3 data left out of the profile (-nc), a ramp black generation and
# FOGRA39's own 300 % total ink limit.
colprof -qm -nc -kr -l 300 \
    -D "FOGRA39L CMYK (imgest's default, ArgyllCMS colprof from icc-profiles-free FOGRA39L.ti3)" \
    -C "Made from FOGRA39L characterization data (Zlib licence, Debian icc-profiles-free)" \
    FOGRA39L
cp FOGRA39L.icc "$here/FOGRA39L.icc"
ls -l "$here/FOGRA39L.icc"
