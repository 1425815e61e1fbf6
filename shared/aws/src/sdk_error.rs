//! The one translation of AWS SDK errors into [`StoreError`], for every client (S3, DynamoDB,
//! SQS, SNS), so that "may a retry help?" has one answer per error code:
//!
//! - `NoSuchKey`, or any other 404 but a missing bucket → [`StoreError::NotFound`];
//! - throttling and server errors (429, 5xx, the codes in [`RETRYABLE_CODES`]), timeouts,
//!   failed connections and unreadable responses → [`StoreError::Unavailable`] (retryable);
//! - anything else (access denied, a missing bucket, table or queue, a bad request, an item
//!   → [`StoreError::Backend`]: retrying will not fix it;
//! - DynamoDB's `ValidationException` for an item over its size limit →
//!   [`StoreError::TooLarge`] (kind `item_too_large`): never retried, dead-lettered with its
//!   reason.
//!
//! The SDK error stays the source, so logs keep every detail.

use std::error::Error as StdError;

use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};

use imgest_core::ports::StoreError;

/// Error codes that mean "try again later", across the services, and the reasons DynamoDB
/// gives for cancelling a transaction (the same conditions, without the `Exception` suffix).
pub(crate) const RETRYABLE_CODES: &[&str] = &[
    // Throttling.
    "SlowDown",
    "Throttling",
    "ThrottlingException",
    "ThrottlingError",
    "ThrottledException",
    "RequestThrottled",
    "RequestThrottledException",
    "TooManyRequestsException",
    "RequestLimitExceeded",
    "BandwidthLimitExceeded",
    "ProvisionedThroughputExceeded",
    "ProvisionedThroughputExceededException",
    "LimitExceededException",
    "ExecutionLimitExceeded",
    // CloudFront: too many invalidation paths in progress on the distribution.
    "TooManyInvalidationsInProgress",
    // Another request got there first and is still running.
    "TransactionConflict",
    "TransactionConflictException",
    "TransactionInProgressException",
    "ReplicatedWriteConflictException",
    "PriorRequestNotComplete",
    // The service's own trouble.
    "RequestTimeout",
    "RequestTimeoutException",
    "InternalError",
    "InternalFailure",
    "InternalServerError",
    "ServiceUnavailable",
    "ServiceUnavailableException",
];

/// What DynamoDB's `ValidationException` says of an item over 400 KB ("Item size has exceeded
/// the maximum allowed size", "Item size to update has exceeded …").
const ITEM_SIZE_MESSAGE: &str = "Item size";

/// Whether an error code (or a transaction's cancellation reason) says a retry may help.
pub(crate) fn is_retryable_code(code: &str) -> bool {
    RETRYABLE_CODES.contains(&code)
}

/// Translates an AWS SDK error at the adapter boundary (see the module's documentation),
/// keeping it as the source.
pub(crate) fn sdk_error<E>(context: impl Into<String>, err: SdkError<E, HttpResponse>) -> StoreError
where
    E: ProvideErrorMetadata + StdError + Send + Sync + 'static,
{
    let context = context.into();
    let message = format!("{context}: {}", DisplayErrorContext(&err));
    let retryable = match &err {
        SdkError::TimeoutError(_) | SdkError::ResponseError(_) => true,
        SdkError::DispatchFailure(failure) => !failure.is_user(),
        SdkError::ConstructionFailure(_) => false,
        SdkError::ServiceError(service) => {
            let status = service.raw().status().as_u16();
            let code = err.code().unwrap_or("");
            if code == "NoSuchKey" || (status == 404 && code != "NoSuchBucket") {
                return StoreError::NotFound(message);
            }
            if code == "ValidationException"
                && err.message().is_some_and(|m| m.contains(ITEM_SIZE_MESSAGE))
            {
                return StoreError::TooLarge {
                    what: message,
                    bytes: None,
                };
            }
            status == 429 || status >= 500 || is_retryable_code(code)
        }
        // `SdkError` is non-exhaustive: a new kind is reported, not retried.
        _ => false,
    };
    if retryable {
        StoreError::unavailable(message, err)
    } else {
        StoreError::backend(message, err)
    }
}

/// The service error's code, if the service answered with one.
pub(crate) fn error_code<E: ProvideErrorMetadata>(e: &SdkError<E, HttpResponse>) -> Option<&str> {
    e.as_service_error().and_then(ProvideErrorMetadata::code)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
    use aws_sdk_s3::error::ErrorMetadata;
    use aws_sdk_s3::operation::get_object::GetObjectError;
    use aws_sdk_sqs::operation::send_message::SendMessageError;

    use super::*;

    fn answer(status: u16) -> HttpResponse {
        HttpResponse::new(status.try_into().unwrap(), "".into())
    }

    fn metadata(code: &str) -> ErrorMetadata {
        ErrorMetadata::builder().code(code).build()
    }

    /// How each client's error with `code` and `status` is translated.
    fn translated(code: &str, status: u16) -> [StoreError; 3] {
        let dynamodb = aws_sdk_dynamodb::error::ErrorMetadata::builder()
            .code(code)
            .build();
        let sqs = aws_sdk_sqs::error::ErrorMetadata::builder()
            .code(code)
            .build();
        [
            sdk_error(
                "s3",
                SdkError::service_error(GetObjectError::generic(metadata(code)), answer(status)),
            ),
            sdk_error(
                "dynamodb",
                SdkError::service_error(UpdateItemError::generic(dynamodb), answer(status)),
            ),
            sdk_error(
                "sqs",
                SdkError::service_error(SendMessageError::generic(sqs), answer(status)),
            ),
        ]
    }

    #[test]
    fn every_client_classifies_each_code_the_same() {
        // (code, HTTP status, the kind every client must answer)
        let table = [
            ("NoSuchKey", 404, "not_found"),
            ("SomethingNew", 404, "not_found"),
            ("NoSuchBucket", 404, "storage_error"),
            ("SlowDown", 503, "storage_unavailable"),
            ("ThrottlingException", 400, "storage_unavailable"),
            (
                "ProvisionedThroughputExceededException",
                400,
                "storage_unavailable",
            ),
            ("RequestLimitExceeded", 400, "storage_unavailable"),
            ("TransactionConflictException", 400, "storage_unavailable"),
            ("LimitExceededException", 400, "storage_unavailable"),
            ("RequestTimeout", 400, "storage_unavailable"),
            ("TooManyRequestsException", 400, "storage_unavailable"),
            ("SomethingNew", 429, "storage_unavailable"),
            ("SomethingNew", 503, "storage_unavailable"),
            ("InternalServerError", 500, "storage_unavailable"),
            ("AccessDenied", 403, "storage_error"),
            ("ResourceNotFoundException", 400, "storage_error"),
            ("ValidationException", 400, "storage_error"),
            ("ConditionalCheckFailedException", 400, "storage_error"),
            (
                "AWS.SimpleQueueService.NonExistentQueue",
                400,
                "storage_error",
            ),
        ];
        for (code, status, kind) in table {
            for error in translated(code, status) {
                assert_eq!(error.kind(), kind, "{code} {status}: {error}");
                if kind != "not_found" {
                    assert!(
                        StdError::source(&error).is_some(),
                        "{code} keeps its source"
                    );
                }
            }
        }
    }

    #[test]
    fn an_item_over_the_size_limit_is_its_own_never_succeeding_kind() {
        for message in [
            "Item size has exceeded the maximum allowed size",
            "Item size to update has exceeded the maximum allowed size",
        ] {
            let meta = aws_sdk_dynamodb::error::ErrorMetadata::builder()
                .code("ValidationException")
                .message(message)
                .build();
            let error = sdk_error(
                "writing",
                SdkError::service_error(UpdateItemError::generic(meta), answer(400)),
            );
            assert_eq!(error.kind(), "item_too_large", "{error}");
            assert!(!error.is_retryable());
        }
    }

    #[test]
    fn transaction_cancellation_reasons_read_like_the_codes() {
        for reason in [
            "ThrottlingError",
            "ProvisionedThroughputExceeded",
            "TransactionConflict",
        ] {
            assert!(is_retryable_code(reason), "{reason}");
        }
        for reason in ["ConditionalCheckFailed", "ValidationError", "None"] {
            assert!(!is_retryable_code(reason), "{reason}");
        }
    }

    #[test]
    fn timeouts_and_unreadable_answers_are_retryable_and_bad_requests_are_not() {
        let timeout: SdkError<GetObjectError, HttpResponse> =
            SdkError::timeout_error(std::io::Error::other("slow"));
        assert!(sdk_error("x", timeout).is_retryable());
        let garbled: SdkError<GetObjectError, HttpResponse> =
            SdkError::response_error(std::io::Error::other("garbled"), answer(200));
        assert!(sdk_error("x", garbled).is_retryable());
        let unbuilt: SdkError<GetObjectError, HttpResponse> =
            SdkError::construction_failure(std::io::Error::other("no bucket"));
        assert!(!sdk_error("x", unbuilt).is_retryable());
    }
}
