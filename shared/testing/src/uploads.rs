//! The contract of `UploadRecords` and `Checkpoints`.

use std::time::Duration;

use super::{BASE, UploadPorts, unique_name};
use imgest_core::domain::{ImageId, Owner, UploadId};
use imgest_core::ports::{StoreError, UploadRecord, UploadState};

contract_suite!($ uploads_contract_tests, uploads, UploadPorts;
    an_upload_is_created_once_read_back_and_finished,
    finishing_an_unknown_upload_is_not_found,
    checkpoints_are_saved_and_overwritten,
);

fn pending(id: &UploadId) -> UploadRecord {
    UploadRecord {
        owner: Some(Owner::of_subject("seller-1")),
        id: id.clone(),
        size: 12_000_000,
        state: UploadState::Pending,
        created_at: BASE,
        expires_at: BASE.plus(Duration::from_secs(86_400)),
    }
}

pub async fn an_upload_is_created_once_read_back_and_finished(ports: UploadPorts) {
    let records = ports.uploads.as_ref();
    let id = UploadId::random();
    assert_eq!(records.get_upload(&id).await.unwrap(), None);
    records.create_upload(&pending(&id)).await.unwrap();
    assert!(matches!(
        records.create_upload(&pending(&id)).await,
        Err(StoreError::Conflict(_))
    ));
    assert_eq!(records.get_upload(&id).await.unwrap(), Some(pending(&id)));

    let done = UploadState::Done {
        image_id: ImageId::of_bytes(b"photo"),
        deduplicated: true,
    };
    records.finish_upload(&id, &done).await.unwrap();
    records.finish_upload(&id, &done).await.unwrap();
    let got = records.get_upload(&id).await.unwrap().unwrap();
    assert_eq!(got.state, done);
    assert_eq!(got.size, 12_000_000);

    let failed = UploadState::Failed {
        kind: "corrupt_image".into(),
        request_id: "5f0c2a9e7b3d4a61".into(),
    };
    let other = UploadId::random();
    records.create_upload(&pending(&other)).await.unwrap();
    records.finish_upload(&other, &failed).await.unwrap();
    assert_eq!(
        records.get_upload(&other).await.unwrap().unwrap().state,
        failed
    );
}

pub async fn finishing_an_unknown_upload_is_not_found(ports: UploadPorts) {
    let r = ports
        .uploads
        .finish_upload(&UploadId::random(), &UploadState::Pending)
        .await;
    assert!(matches!(r, Err(StoreError::NotFound(_))), "{r:?}");
}

pub async fn checkpoints_are_saved_and_overwritten(ports: UploadPorts) {
    let checkpoints = ports.checkpoints.as_ref();
    let name = unique_name("sweep");
    assert_eq!(checkpoints.load_checkpoint(&name).await.unwrap(), None);
    checkpoints.save_checkpoint(&name, "3f").await.unwrap();
    assert_eq!(
        checkpoints.load_checkpoint(&name).await.unwrap().as_deref(),
        Some("3f")
    );
    checkpoints.save_checkpoint(&name, "40").await.unwrap();
    assert_eq!(
        checkpoints.load_checkpoint(&name).await.unwrap().as_deref(),
        Some("40")
    );
}
