//! Where records, files and queues live: the description the settings parse and the one place
//! that builds the ports matches on (the adapter crates take their part of it).

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

/// SQS's maximum `DelaySeconds`: messages delayed longer are chained (sent on at each hop until
/// they are due).
pub const MAX_SQS_DELAY: Duration = Duration::from_secs(900);

/// Where records, files and queues live (`IMGEST_BACKEND`), parsed by the settings and
/// matched once, where the ports are built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    /// One SQLite file (records and queues) and a directory of files under `data_dir`
    /// (`IMGEST_DATA_DIR`, default `./imgest-data`): the default.
    Embedded { data_dir: PathBuf },
    /// S3, DynamoDB, SQS and SNS; credentials, region and endpoint come from the
    /// standard AWS variables.
    Aws(AwsBackend),
}

/// The AWS resources the functions use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsBackend {
    /// `IMGEST_BUCKET`: originals, variants, incoming uploads and fetched bodies.
    pub bucket: String,
    /// `IMGEST_TABLE`: every record.
    pub table: String,
    /// `IMGEST_S3_FORCE_PATH_STYLE`: path-style S3 URLs (emulators need them).
    pub force_path_style: bool,
    /// `IMGEST_QUEUES` (`name=url,…`): the SQS queue URL of each logical queue the flows
    /// send to (empty: none; sending to a name not listed fails).
    pub queues: HashMap<String, String>,
    /// `IMGEST_SQS_MAX_DELAY` (15m, at most 15m): longer delays are chained, a hop of this
    /// long each. Shorter only to exercise that path in tests.
    pub sqs_max_delay: Duration,
    /// `IMGEST_CDN_DISTRIBUTION_ARN`'s distribution id: the CloudFront distribution in front
    /// of `public/`, told of erasures (`None`: no CDN).
    pub cdn_distribution_id: Option<String>,
    /// Where every AWS API is reached instead of the standard endpoints. Not a variable:
    /// `None` lets the AWS environment decide (`AWS_ENDPOINT_URL` included); benchmarks set it
    /// to put a request-counting proxy in front of an emulator.
    pub endpoint_url: Option<String>,
}
