//! The watermark as a deployed stack has it: a PNG under `config/` in the files bucket
//! (`WatermarkKey`), named by `IMGEST_WATERMARK=s3://…` and read once at start-up, on the
//! emulator. (The process bootstrap's smoke test runs the same through the built function.)

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use imgest_core::ports::ManualClock;
use imgest_settings::Settings;

use crate::support::{TestApp, fixture};

/// The key the tests put the watermark under, as an operator would.
const KEY: &str = "config/watermark.png";

/// Puts the test watermark (a magenta box, `tests/fixtures/watermark.png`) in `bucket` and
/// answers its `IMGEST_WATERMARK`.
pub(crate) async fn put_watermark(test: &str, bucket: &str) -> String {
    put_object(test, bucket, KEY, fixture("watermark.png")).await;
    format!("s3://{bucket}/{KEY}")
}

/// Whether `p` is the test watermark's magenta (220, 0, 160), after JPEG.
pub(crate) fn magenta(p: &image::Rgb<u8>) -> bool {
    p.0[0] > 180 && p.0[1] < 50 && p.0[2] > 120
}

async fn put_object(test: &str, bucket: &str, key: &str, body: Vec<u8>) {
    let config = imgest_testing::aws::sdk_config(test).await.unwrap();
    let s3 = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&config)
            .force_path_style(true)
            .build(),
    );
    s3.put_object()
        .bucket(bucket)
        .key(key)
        .body(body.into())
        .send()
        .await
        .unwrap();
}

#[tokio::test]
async fn a_watermark_in_s3_is_read_at_start_up_and_marks_the_variants_it_names() {
    let test = "watermark in s3";
    let Some(first) = TestApp::start_aws(test, &[]).await else {
        return;
    };
    let (bucket, table) = first.aws.clone().unwrap();
    let source = put_watermark(test, &bucket).await;
    let app = TestApp::start_aws_in(
        &[
            ("IMGEST_WATERMARK", &source),
            ("IMGEST_WATERMARK_OPACITY", "1"),
            ("IMGEST_WATERMARK_VARIANTS", "thumb"),
        ],
        (bucket, table),
    )
    .await;
    let r = app.upload(&fixture("photo.jpg")).await;
    assert_eq!(r.status, 201, "{}", r.json);
    let decoded = |name: &'static str| {
        let url = r.json["variants"][name]["url"].as_str().unwrap().to_owned();
        let app = &app;
        async move {
            let (status, bytes) = app.get_bytes(&url).await;
            assert_eq!(status, 200, "{name}");
            image::load_from_memory(&bytes).unwrap().to_rgb8()
        }
    };
    // The 64x32 logo, scaled to a quarter of the 200-pixel thumbnail at a 4-pixel margin: its
    // magenta box is in the bottom-right corner.
    let thumb = decoded("thumb").await;
    assert!(
        magenta(thumb.get_pixel(190, 185)),
        "{:?}",
        thumb.get_pixel(190, 185)
    );
    assert!(!magenta(thumb.get_pixel(20, 20)));
    // The variants it does not name carry none.
    let medium = decoded("medium").await;
    let (w, h) = medium.dimensions();
    let corner = medium.get_pixel(w - 10, h - 7);
    assert!(!magenta(corner), "{corner:?}");
}

#[tokio::test]
async fn a_watermark_that_cannot_be_read_stops_the_start_up_with_its_name() {
    let test = "watermark missing in s3";
    let Some(first) = TestApp::start_aws(test, &[]).await else {
        return;
    };
    let (bucket, table) = first.aws.clone().unwrap();
    let start = |key: &str| {
        let vars = [
            ("IMGEST_BACKEND", "aws".to_owned()),
            ("IMGEST_BUCKET", bucket.clone()),
            ("IMGEST_TABLE", table.clone()),
            ("IMGEST_S3_FORCE_PATH_STYLE", "true".to_owned()),
            ("IMGEST_WATERMARK", format!("s3://{bucket}/{key}")),
        ];
        let map = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        let settings = Settings::from_map(&map).unwrap();
        async move {
            let clock = Arc::new(ManualClock::starting_now());
            imgest_local::app::service(&settings, "http://127.0.0.1", clock)
                .await
                .err()
                .map(|e| e.to_string())
        }
    };
    // Missing: no service without its watermark (it would make unmarked variants).
    let err = start("config/missing.png").await.unwrap();
    assert!(err.contains("config/missing.png"), "{err}");
    // Over the bound on its size (a logo is kilobytes): refused before it is read whole.
    let huge = "config/huge.png";
    let limit = usize::try_from(imgest_flows::configure::MAX_WATERMARK_BYTES).unwrap();
    put_object(test, &bucket, huge, vec![0; limit + 1]).await;
    let err = start(huge).await.unwrap();
    assert!(err.contains("over"), "{err}");
    // Not a PNG: refused as a watermark, named.
    let text = "config/not-a-png.png";
    put_object(test, &bucket, text, b"not a png".to_vec()).await;
    let err = start(text).await.unwrap();
    assert!(err.contains("watermark"), "{err}");
}
