//! Where records, files and queues live: the description the settings parse and the one place
//! that builds the ports matches on (the adapter crates take their part of it).

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

/// SQS's maximum `DelaySeconds`: messages delayed longer wait as [`LongWaits`] says.
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
    /// `IMGEST_SQS_MAX_DELAY` (15m, at most 15m): longer delays are long waits. Shorter only
    /// to exercise that path in tests.
    pub sqs_max_delay: Duration,
    /// `IMGEST_LONG_WAITS`: how a message delayed beyond `sqs_max_delay` waits.
    pub long_waits: LongWaits,
    /// `IMGEST_CDN_DISTRIBUTION_ARN`'s distribution id: the CloudFront distribution in front
    /// of `public/`, told of erasures (`None`: no CDN).
    pub cdn_distribution_id: Option<String>,
    /// Where every AWS API is reached instead of the standard endpoints. Not a variable:
    /// `None` lets the AWS environment decide (`AWS_ENDPOINT_URL` included); benchmarks set it
    /// to put a request-counting proxy in front of an emulator.
    pub endpoint_url: Option<String>,
}

/// How a message delayed beyond SQS's 15 minutes (a retry after a day-long `Retry-After`, a
/// webhook delivery's late retry) waits (`IMGEST_LONG_WAITS`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LongWaits {
    /// `step-functions` (the template's default): one execution of the delayed-send state
    /// machine (`IMGEST_DELAY_STATE_MACHINE_ARN`) per message, which waits, then sends it. A
    /// wait costs its execution's state transitions, and the account's open executions
    /// (1,000,000 by default) bound how many wait at once.
    StepFunctions { state_machine_arn: String },
    /// `sqs-chain` (the default without a state machine): sent with SQS's longest delay and
    /// the instant it is due; its queue's handler sends it on at each hop until it is due. A
    /// few queue requests per hop, no bound on how many wait.
    SqsChain,
}
