//! Any bytes through the photo pipeline as an upload goes: `inspect` (the header checks), then
//! `process` (decode, orient, resize, encode), with the default configuration. Errors are the
//! expected answer to most inputs; a panic, a hang (libFuzzer's `-timeout`) or a memory
//! blow-up (`-rss_limit_mb`) is a finding.
//!
//! The pipeline catches a decoder's panic and refuses the photo as corrupt, but libfuzzer-sys
//! aborts on every panic, caught or not: a panicking decoder is still reported here (a
//! third-party bug worth knowing about, which production only survives by that catch).
#![no_main]

use std::sync::LazyLock;

use imgest_pipeline::{Pipeline, PipelineConfig};
use libfuzzer_sys::fuzz_target;

/// One pipeline for the whole run, as a function instance keeps one (its working memory is
/// reused between photos, which is part of what is fuzzed).
static PIPELINE: LazyLock<Pipeline> = LazyLock::new(|| Pipeline::new(PipelineConfig::default()));

fuzz_target!(|bytes: &[u8]| {
    let inspected = PIPELINE.inspect(bytes);
    // `process` runs even when `inspect` refused the bytes: it must refuse them too.
    let Ok(processed) = PIPELINE.process(bytes) else {
        return;
    };
    // What the pipeline promises about a photo it processed: `inspect` accepts it and reads the
    // same format and the stored size (turned by a quarter for some EXIF orientations).
    let info = match inspected {
        Ok(info) => info,
        Err(e) => panic!("process accepted what inspect refused: {e}"),
    };
    assert_eq!(processed.format, info.format);
    let size = (processed.width, processed.height);
    assert!(
        size == (info.width, info.height) || size == (info.height, info.width),
        "processed {size:?}, inspected {info:?}"
    );
    assert_eq!(
        processed.variants.len(),
        PIPELINE.config().variants.specs().len()
    );
    for variant in &processed.variants {
        assert!(variant.width > 0 && variant.height > 0, "{variant:?}");
        assert!(variant.bytes.starts_with(&[0xFF, 0xD8]), "{variant:?}");
    }
});
