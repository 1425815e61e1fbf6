//! Uploads racing on DynamoDB's conditional writes, as on the embedded backend: the same new
//! bytes uploaded twelve times at once are decoded once, and an upload behind a claim another
//! request holds answers `503 still_processing` within `IMGEST_DEDUP_WAIT`.

use crate::support::TestApp;

/// Whether the emulator makes concurrent conditional writes atomic (`infra/test.sh`'s does:
/// it serialises DynamoDB requests); a race on one that does not proves nothing.
fn races_are_sound(test: &str) -> bool {
    let sound = std::env::var("IMGEST_TEST_DYNAMODB_CONCURRENCY").is_ok_and(|v| v == "1");
    if !sound {
        eprintln!(
            "{test}: skipped; set IMGEST_TEST_DYNAMODB_CONCURRENCY=1 on an emulator with atomic writes"
        );
    }
    sound
}

#[tokio::test]
async fn concurrent_uploads_of_the_same_new_bytes_decode_once_on_dynamodb() {
    let test = "upload race on aws";
    if !races_are_sound(test) {
        return;
    }
    let Some(app) = TestApp::start_aws(test, &[]).await else {
        return;
    };
    crate::concurrency::concurrent_uploads_of_the_same_new_bytes_decode_once_on(&app).await;
}

#[tokio::test]
async fn a_same_bytes_upload_behind_a_claim_held_on_dynamodb_answers_503_in_time() {
    let vars = [("IMGEST_DEDUP_WAIT", "1s")];
    let Some(app) = TestApp::start_aws("503 waiter on aws", &vars).await else {
        return;
    };
    crate::concurrency::a_same_bytes_upload_behind_a_held_claim_answers_503_on(&app).await;
}
