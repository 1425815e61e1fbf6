# Sourced by infra/test.sh (or by hand): `corpus_install` fetches the public corpus the
# pipeline's corpus test runs (shared/pipeline/tests/corpus.rs) and renders its reference
# pictures, once, under ${IMGEST_TOOLS_DIR:-~/.cache/imgest-tools}/corpus, then exports
# IMGEST_CORPUS_DIR.
#
# The corpus: Pillow's own test images (Tests/images of the Pillow 13.0.0 source distribution on
# PyPI, `pip download`; about 1,000 files of every format Pillow reads, odd and broken ones
# included; MIT-CMU licence). The references: each file as Pillow 13.0.0 (its wheel) shows it,
# turned upright, converted to sRGB, flattened over white (infra/corpus_reference.py). The
# first run takes a few minutes (the 47 MB download, then the rendering).
CORPUS_PILLOW_VERSION="13.0.0"

corpus_install() {
    # shellcheck source=infra/venv.sh
    source infra/venv.sh
    venv_install corpus "pillow==$CORPUS_PILLOW_VERSION" || return 1
    local dir="${IMGEST_TOOLS_DIR:-$HOME/.cache/imgest-tools}/corpus/pillow-$CORPUS_PILLOW_VERSION"
    local stamp
    stamp="$dir/.complete-$(cksum <infra/corpus_reference.py | cut -d' ' -f1)"
    if [ ! -f "$stamp" ]; then
        echo "corpus: fetching Pillow $CORPUS_PILLOW_VERSION's test images (PyPI sdist) into $dir" >&2
        rm -rf "$dir"
        mkdir -p "$dir/download"
        "$venv/bin/python" -m pip download --quiet --disable-pip-version-check --no-deps \
            --no-binary :all: "pillow==$CORPUS_PILLOW_VERSION" -d "$dir/download" || return 1
        tar -xzf "$dir/download/pillow-$CORPUS_PILLOW_VERSION.tar.gz" -C "$dir/download" \
            "pillow-$CORPUS_PILLOW_VERSION/Tests/images" || return 1
        mv "$dir/download/pillow-$CORPUS_PILLOW_VERSION/Tests/images" "$dir/images"
        rm -rf "$dir/download"
        echo "corpus: rendering the references with Pillow" >&2
        "$venv/bin/python" infra/corpus_reference.py "$dir/images" "$dir/reference" \
            shared/pipeline/profiles/FOGRA39L.icc || return 1
        touch "$stamp"
    fi
    export IMGEST_CORPUS_DIR="$dir"
}
