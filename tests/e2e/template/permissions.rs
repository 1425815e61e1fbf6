//! Least privilege as data: what each function (and the delayed-send state machine) may do,
//! one table. `template.yaml`'s `Policies` are generated from it (a block per function,
//! rewritten with `IMGEST_BLESS=1`), and rules over the table say what no grant may be: a
//! policy widened in the template, or in the table, fails here.
//!
//! The rules, and why:
//! - no wildcard action or resource, and none of the actions that could lose data for good
//!   (deleting the table, object versions, changing the bucket's configuration);
//! - every DynamoDB grant names the key prefixes it may touch (`dynamodb:LeadingKeys`), but
//!   `Scan`, which cannot: a scan may read only the attributes its enumeration needs
//!   (`Select: SPECIFIC_ATTRIBUTES`, `dynamodb:Attributes`: the adapters' projections);
//! - `s3:ListBucket` only under the prefixes a function walks (S3 then answers a read of a
//!   missing key with 403, which the S3 adapter reads as missing);
//! - only the collectors and the erasure delete under `originals/` (the one copy of each
//!   photo; the bucket keeps deleted versions for a while too), and only the erasure lists and
//!   deletes object versions (an erasure reaches every version);
//! - a dead-letter queue is sent to only by its queues' consumers (with the reasons of what
//!   they gave up on);
//! - the delayed-send state machine reaches the fetch queues only, and only a function that may
//!   send to them may start it (the machine is no path to a queue the function could not
//!   reach); with `LongWaits=sqs-chain` the grant names no state machine.

use imgest_aws::dynamodb::{IMAGE_SCAN_ATTRIBUTES, OFFER_SCAN_ATTRIBUTES};

/// What a grant applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Res {
    /// The records table.
    Table,
    /// The table's indexes.
    TableIndexes,
    /// The files bucket itself (listing).
    Bucket,
    /// The files bucket's objects under a prefix.
    Objects(&'static str),
    /// An SQS queue, by its logical id.
    Queue(&'static str),
    /// An SNS topic, by its logical id.
    Topic(&'static str),
    /// The delayed-send state machine with `LongWaits=step-functions` (with `sqs-chain`, an
    /// ARN that names no state machine).
    StateMachine,
    /// The CloudFront distribution `CdnDistributionArn` names (without one, an ARN that names
    /// no distribution: a statement must name a resource).
    Distribution,
}

/// A grant's condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cond {
    None,
    /// `dynamodb:LeadingKeys`: the partition keys it may touch (`image#*`, ...).
    LeadingKeys(&'static [&'static str]),
    /// `s3:prefix`: the prefixes it may list.
    Prefixes(&'static [&'static str]),
    /// A `Scan` that reads only these attributes (and the key).
    Attributes(&'static [&'static [&'static str]]),
}

/// One statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    /// Why the function needs it (the statement's comment in the template).
    pub why: &'static str,
    pub actions: &'static [&'static str],
    pub resources: &'static [Res],
    pub condition: Cond,
}

const ITEM_RW: &[&str] = &[
    "dynamodb:GetItem",
    "dynamodb:UpdateItem",
    "dynamodb:PutItem",
    "dynamodb:ConditionCheckItem",
    "dynamodb:BatchGetItem",
];
const ITEM_RWD: &[&str] = &[
    "dynamodb:GetItem",
    "dynamodb:UpdateItem",
    "dynamodb:PutItem",
    "dynamodb:ConditionCheckItem",
    "dynamodb:BatchGetItem",
    "dynamodb:DeleteItem",
];
/// A hot image's link shards (`linkdelta#`, beside its `image#` item: see the DynamoDB
/// adapter's `hot_links`): read wherever its record is, to count its links.
const LINK_SHARDS_READ: Grant = grant(
    "A hot image's link shards, read to count its links (its record's count is its item's plus theirs).",
    &["dynamodb:BatchGetItem"],
    &[Res::Table],
    Cond::LeadingKeys(&["linkdelta#*"]),
);
/// Written where offers' links change: created when an image turns hot, added to by each link
/// and unlink, deleted when it cools.
const LINK_SHARDS_WRITE: Grant = grant(
    "A hot image's link shards: created when it turns hot, added to by its offers' links and unlinks, read to count them, deleted when it cools.",
    ITEM_RWD,
    &[Res::Table],
    Cond::LeadingKeys(&["linkdelta#*"]),
);
/// The audit's correction of a hot image folds its shards into its item.
const LINK_SHARDS_FOLD: Grant = grant(
    "A hot image's link shards, read to count its links, deleted when the audit's correction folds them into its item.",
    &["dynamodb:BatchGetItem", "dynamodb:DeleteItem"],
    &[Res::Table],
    Cond::LeadingKeys(&["linkdelta#*"]),
);
const FILES: &[Res] = &[Res::Objects("public/"), Res::Objects("originals/")];
const VARIANTS: &[Res] = &[Res::Objects("public/")];
const FILE_PREFIXES: Cond = Cond::Prefixes(&["public/*", "originals/*"]);
const FETCH_QUEUES: &[Res] = &[
    Res::Queue("FetchQueue0"),
    Res::Queue("FetchQueue1"),
    Res::Queue("FetchQueue2"),
];
const KEY: &[&str] = &["pk", "sk"];

/// Whoever sends a retry or a re-check to a fetch queue may have to wait longer than SQS's 15
/// minutes.
const LONG_WAITS: Grant = grant(
    "Waits longer than SQS's 15 minutes (a retry after a day-long Retry-After), with LongWaits=step-functions: an execution of the delayed-send state machine each, which sends only to the fetch queues.",
    &["states:StartExecution"],
    &[Res::StateMachine],
    Cond::None,
);

const RESULTS: Grant = grant(
    "The results of the crawls it settles, each with its client (subscriptions filter on it).",
    &["sns:Publish"],
    &[Res::Topic("ResultsTopic")],
    Cond::None,
);
/// Whoever sends results queues each one's delivery to its client's webhook endpoint, if the
/// client registered one.
const WEBHOOK_DELIVERIES: Grant = grant(
    "The webhook deliveries of the results it sends, for the clients that registered an endpoint.",
    &["sqs:SendMessage"],
    &[Res::Queue("WebhookQueue")],
    Cond::None,
);

const fn grant(
    why: &'static str,
    actions: &'static [&'static str],
    resources: &'static [Res],
    condition: Cond,
) -> Grant {
    Grant {
        why,
        actions,
        resources,
        condition,
    }
}

/// The crawls that joined a URL's download, filed beside its record (`PutItem` under `rec#`),
/// read a page at a time and deleted once told (or by the joiner that found the download over).
const JOINERS: Grant = grant(
    "The crawls that joined a URL's download, filed beside its record: read a page at a time, deleted once told.",
    &["dynamodb:Query", "dynamodb:BatchWriteItem"],
    &[Res::Table],
    Cond::LeadingKeys(&["rec#waiter#*"]),
);
/// What hosts taught: the outcome counts, read as a range of time buckets.
const READ_COUNTS: Grant = grant(
    "The hosts' and the (client, host)s' outcome counts, read as a range of time buckets.",
    &["dynamodb:Query"],
    &[Res::Table],
    Cond::LeadingKeys(&["ctr#host#*", "ctr#route#*"]),
);

/// A dead letter too large for its queue's messages keeps its body in storage (the
/// consumers of queues).
const DEAD_LETTER_BODIES: Grant = grant(
    "A dead letter too large for a message keeps its body under dead-letters/.",
    &["s3:PutObject"],
    &[Res::Objects("dead-letters/")],
    Cond::None,
);

const LIST_FILES: Grant = grant(
    "Lists a generation's files to delete them (no other listing: a read of a missing key then answers 403, read as missing).",
    &["s3:ListBucket"],
    &[Res::Bucket],
    FILE_PREFIXES,
);
const CONFIGURATION: Grant = grant(
    "The deployment's configuration, read once at start-up: the watermark (WatermarkKey, under config/).",
    &["s3:GetObject"],
    &[Res::Objects("config/")],
    Cond::None,
);

const API: &[Grant] = &[
    LINK_SHARDS_WRITE,
    CONFIGURATION,
    grant(
        "Images, offers, uploads, the crawls' records (POST /v1/crawl runs intake) and the sellers' upload budgets; DeleteItem only abandons a failed upload's claim.",
        ITEM_RWD,
        &[Res::Table],
        Cond::LeadingKeys(&[
            "image#*",
            "offer#*",
            "upload#*",
            "rec#*",
            "ratelimit#upload/*",
        ]),
    ),
    grant(
        "The sellers' upload budgets: the buckets of a window, read once a bucket.",
        &["dynamodb:Query"],
        &[Res::Table],
        Cond::LeadingKeys(&["ratelimit#upload/*"]),
    ),
    JOINERS,
    grant(
        "A seller's erasure: the image's uploaders, read and the caller's removed.",
        &["dynamodb:Query", "dynamodb:BatchWriteItem"],
        &[Res::Table],
        Cond::LeadingKeys(&["rec#uploader#*"]),
    ),
    READ_COUNTS,
    grant(
        "Files of uploads processed inline; signs presigned PUTs to incoming/.",
        &["s3:PutObject"],
        &[
            Res::Objects("public/"),
            Res::Objects("originals/"),
            Res::Objects("incoming/"),
        ],
        Cond::None,
    ),
    grant(
        "The variants its failed uploads leave (the original is left to the sweep).",
        &["s3:DeleteObject"],
        VARIANTS,
        Cond::None,
    ),
    LIST_FILES,
    grant(
        "The downloads POST /v1/crawl starts.",
        &["sqs:SendMessage"],
        FETCH_QUEUES,
        Cond::None,
    ),
    LONG_WAITS,
    RESULTS,
    WEBHOOK_DELIVERIES,
];

const INTAKE: &[Grant] = &[
    LINK_SHARDS_WRITE,
    grant(
        "URL and crawl records, and what settling a crawl at once links; no files.",
        ITEM_RW,
        &[Res::Table],
        Cond::LeadingKeys(&["rec#*", "image#*", "offer#*"]),
    ),
    JOINERS,
    READ_COUNTS,
    grant(
        "Downloads, and the crawl requests it gives up on (with their reasons).",
        &["sqs:SendMessage"],
        &[
            Res::Queue("FetchQueue0"),
            Res::Queue("FetchQueue1"),
            Res::Queue("FetchQueue2"),
            Res::Queue("CrawlDeadLetterQueue"),
        ],
        Cond::None,
    ),
    LONG_WAITS,
    RESULTS,
    WEBHOOK_DELIVERIES,
    DEAD_LETTER_BODIES,
];

const FETCH: &[Grant] = &[
    LINK_SHARDS_READ,
    CONFIGURATION,
    grant(
        "URL, crawl and host records, the clients' rate limits, and the images of photos processed here (DeleteItem abandons a failed claim); no offer: a crawl that settles here is finished by the intake function, and no crawl's seal: what a crawl asked for is intake's.",
        ITEM_RWD,
        &[Res::Table],
        Cond::LeadingKeys(&[
            "rec#url#*",
            "rec#crawl#*",
            "rec#host#*",
            "ratelimit#*",
            "image#*",
        ]),
    ),
    grant(
        "The clients' rate limits: the buckets of a window, read once a bucket.",
        &["dynamodb:Query"],
        &[Res::Table],
        Cond::LeadingKeys(&["ratelimit#*"]),
    ),
    JOINERS,
    grant(
        "Adds its downloads' outcomes to the hosts' and the (client, host)s' counts (ADD, no condition), and reads them as a range of time buckets.",
        &["dynamodb:UpdateItem", "dynamodb:Query"],
        &[Res::Table],
        Cond::LeadingKeys(&["ctr#host#*", "ctr#route#*"]),
    ),
    grant(
        "A new photo that fits this function's memory is processed here (its files); one that does not waits under fetched/ for the process function.",
        &["s3:PutObject"],
        &[
            Res::Objects("fetched/"),
            Res::Objects("public/"),
            Res::Objects("originals/"),
        ],
        Cond::None,
    ),
    grant(
        "The variants a failed processing wrote (the original is left to the sweep).",
        &["s3:DeleteObject"],
        VARIANTS,
        Cond::None,
    ),
    LIST_FILES,
    grant(
        "Photos for the process function, retries and tier moves, settled crawls for the intake function to finish, and the tasks it gives up on (with their reasons).",
        &["sqs:SendMessage"],
        &[
            Res::Queue("ProcessQueue"),
            Res::Queue("FetchQueue0"),
            Res::Queue("FetchQueue1"),
            Res::Queue("FetchQueue2"),
            Res::Queue("SettleQueue"),
            Res::Queue("CrawlDeadLetterQueue"),
        ],
        Cond::None,
    ),
    LONG_WAITS,
    DEAD_LETTER_BODIES,
];

const PROCESS: &[Grant] = &[
    LINK_SHARDS_READ,
    CONFIGURATION,
    grant(
        "Images (DeleteItem abandons a failed claim), uploads and the URL and crawl records; no offer: a crawl that settles here is finished by the intake function, and no crawl's seal: what a crawl asked for is intake's.",
        ITEM_RWD,
        &[Res::Table],
        Cond::LeadingKeys(&["image#*", "upload#*", "rec#url#*", "rec#crawl#*"]),
    ),
    JOINERS,
    grant(
        "Reads the bodies waiting for it.",
        &["s3:GetObject"],
        &[Res::Objects("incoming/"), Res::Objects("fetched/")],
        Cond::None,
    ),
    grant("The image's files.", &["s3:PutObject"], FILES, Cond::None),
    grant(
        "The bodies once processed, and the variants a failed processing wrote (the original is left to the sweep).",
        &["s3:DeleteObject"],
        &[
            Res::Objects("incoming/"),
            Res::Objects("fetched/"),
            Res::Objects("public/"),
        ],
        Cond::None,
    ),
    LIST_FILES,
    grant(
        "Settled crawls for the intake function to finish, and the messages it gives up on (with their reasons).",
        &["sqs:SendMessage"],
        &[
            Res::Queue("SettleQueue"),
            Res::Queue("ProcessDeadLetterQueue"),
        ],
        Cond::None,
    ),
    DEAD_LETTER_BODIES,
];

const TTL_CLEANUP: &[Grant] = &[
    LINK_SHARDS_READ,
    grant(
        "Is the removed generation back? Then its files stay.",
        &["dynamodb:GetItem"],
        &[Res::Table],
        Cond::LeadingKeys(&["image#*"]),
    ),
    grant(
        "The removed generation's files.",
        &["s3:DeleteObject"],
        FILES,
        Cond::None,
    ),
    LIST_FILES,
];

const SCHEDULED_GC: &[Grant] = &[
    LINK_SHARDS_FOLD,
    grant(
        "gc-index's entries (its keys are gc#...).",
        &["dynamodb:Query"],
        &[Res::Table, Res::TableIndexes],
        Cond::LeadingKeys(&["gc#*"]),
    ),
    grant(
        "The image records gc-index names (deleted only while still expired and unlinked), link counts corrected and damaged images rebuilt by the audit.",
        &[
            "dynamodb:GetItem",
            "dynamodb:BatchGetItem",
            "dynamodb:DeleteItem",
            "dynamodb:UpdateItem",
        ],
        &[Res::Table],
        Cond::LeadingKeys(&["image#*"]),
    ),
    grant(
        "The sweep's and the audit's checkpoints.",
        &["dynamodb:GetItem", "dynamodb:UpdateItem"],
        &[Res::Table],
        Cond::LeadingKeys(&["checkpoint#*"]),
    ),
    grant(
        "The audit: a segment of the image records and every offer's photo list (Scan takes no key condition: it reads only their attributes).",
        &["dynamodb:Scan"],
        &[Res::Table],
        Cond::Attributes(&[KEY, IMAGE_SCAN_ATTRIBUTES, OFFER_SCAN_ATTRIBUTES]),
    ),
    LIST_FILES,
    grant(
        "Collected images' files, and files no record owns.",
        &["s3:DeleteObject"],
        FILES,
        Cond::None,
    ),
    grant(
        "The audit rebuilds a record's missing files from its original.",
        &["s3:GetObject"],
        &[Res::Objects("originals/")],
        Cond::None,
    ),
    grant("The rebuilt files.", &["s3:PutObject"], FILES, Cond::None),
];

const ERASURE: &[Grant] = &[
    LINK_SHARDS_WRITE,
    grant(
        "The erasures under way (files of erased records; sellers' erasures waiting for offers): read a page at a time, each removed once done.",
        &["dynamodb:Query", "dynamodb:BatchWriteItem"],
        &[Res::Table],
        Cond::LeadingKeys(&["rec#erasing#*"]),
    ),
    grant(
        "The image's uploaders: another seller's upload within its window keeps the image.",
        &["dynamodb:Query"],
        &[Res::Table],
        Cond::LeadingKeys(&["rec#uploader#*"]),
    ),
    grant(
        "The image records: read, and deleted (on their generation, as GC does) once nothing references them; one a racing upload kept is claimed as that upload would.",
        &[
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:DeleteItem",
        ],
        &[Res::Table],
        Cond::LeadingKeys(&["image#*"]),
    ),
    grant(
        "The receipts: what each erasure removed, and when.",
        &[
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
        ],
        &[Res::Table],
        Cond::LeadingKeys(&["rec#erasure#*"]),
    ),
    grant(
        "Lists an erased image's files and every version of them.",
        &["s3:ListBucket", "s3:ListBucketVersions"],
        &[Res::Bucket],
        FILE_PREFIXES,
    ),
    grant(
        "An erased image's files and every version of them (the only function that deletes a version).",
        &["s3:DeleteObject", "s3:DeleteObjectVersion"],
        FILES,
        Cond::None,
    ),
    grant(
        "The CDN's copies of an erased image's variants (CdnDistributionArn, when set).",
        &["cloudfront:CreateInvalidation"],
        &[Res::Distribution],
        Cond::None,
    ),
];

const BACKFILL: &[Grant] = &[
    LINK_SHARDS_READ,
    CONFIGURATION,
    grant(
        "The enumeration's parallel scan of the image records (Scan takes no key condition: it reads only their attributes).",
        &["dynamodb:Scan"],
        &[Res::Table],
        Cond::Attributes(&[KEY, IMAGE_SCAN_ATTRIBUTES]),
    ),
    grant(
        "Image records (read, pointed at their new files) and the run's checkpoint.",
        &["dynamodb:GetItem", "dynamodb:UpdateItem"],
        &[Res::Table],
        Cond::LeadingKeys(&["image#*", "checkpoint#*"]),
    ),
    grant(
        "Originals, re-processed.",
        &["s3:GetObject"],
        &[Res::Objects("originals/")],
        Cond::None,
    ),
    grant(
        "The new generation's files.",
        &["s3:PutObject"],
        FILES,
        Cond::None,
    ),
    grant(
        "The variants a failed re-processing wrote (its original is left to the sweep).",
        &["s3:DeleteObject"],
        VARIANTS,
        Cond::None,
    ),
    LIST_FILES,
    grant(
        "Its tasks, and the tasks it gives up on (with their reasons).",
        &["sqs:SendMessage"],
        &[
            Res::Queue("BackfillQueue"),
            Res::Queue("BackfillDeadLetterQueue"),
        ],
        Cond::None,
    ),
    DEAD_LETTER_BODIES,
];

const WEBHOOKS: &[Grant] = &[
    grant(
        "The clients' endpoints (read; one that answered 410 rewritten as disabled) and their cooling after a failed attempt, shared by every instance.",
        &["dynamodb:GetItem", "dynamodb:UpdateItem"],
        &[Res::Table],
        Cond::LeadingKeys(&["rec#webhook#*", "rec#webhook_health#*"]),
    ),
    grant(
        "The result a delivery posts, read from its client's feed (the message names it and nothing else).",
        &["dynamodb:Query"],
        &[Res::Table],
        Cond::LeadingKeys(&["rec#feed#*"]),
    ),
    grant(
        "Retries, long waits' next hops, and the deliveries it gives up on (with their reasons); no file: its messages are a few hundred bytes.",
        &["sqs:SendMessage"],
        &[
            Res::Queue("WebhookQueue"),
            Res::Queue("WebhookDeadLetterQueue"),
        ],
        Cond::None,
    ),
];

const DELAYED_SEND: &[Grant] = &[grant(
    "Waits, then sends a retry or a re-check to its tier's queue.",
    &["sqs:SendMessage"],
    FETCH_QUEUES,
    Cond::None,
)];

/// Every function's (and the state machine's) grants, by logical id.
pub const PERMISSIONS: &[(&str, &[Grant])] = &[
    ("DelayedSendStateMachine", DELAYED_SEND),
    ("ApiFunction", API),
    ("IntakeFunction", INTAKE),
    ("FetchFunction0", FETCH),
    ("FetchFunction1", FETCH),
    ("FetchFunction2", FETCH),
    ("ProcessFunction", PROCESS),
    ("TtlCleanupFunction", TTL_CLEANUP),
    ("ScheduledGcFunction", SCHEDULED_GC),
    ("BackfillFunction", BACKFILL),
    ("ErasureFunction", ERASURE),
    ("WebhooksFunction", WEBHOOKS),
];

/// Each dead-letter queue and the functions that consume its queues (the only ones that may
/// send to it).
const DEAD_LETTER_QUEUES: &[(&str, &[&str])] = &[
    (
        "CrawlDeadLetterQueue",
        &[
            "IntakeFunction",
            "FetchFunction0",
            "FetchFunction1",
            "FetchFunction2",
        ],
    ),
    ("ProcessDeadLetterQueue", &["ProcessFunction"]),
    ("BackfillDeadLetterQueue", &["BackfillFunction"]),
    ("WebhookDeadLetterQueue", &["WebhooksFunction"]),
];

/// The functions that parse hostile bytes (downloaded and uploaded photos): no offer of any
/// client, no result nor a result's webhook delivery, so a photo that took one over could not
/// rewrite offers or read or forge results.
const PARSERS: &[&str] = &[
    "FetchFunction0",
    "FetchFunction1",
    "FetchFunction2",
    "ProcessFunction",
];

/// The functions that collect (expired generations, unlinked images, files no record owns):
/// the only ones that may delete an original, the one copy of a photo. Everything else that
/// fails half-way leaves its original to the sweep.
const COLLECTORS: &[&str] = &[
    "TtlCleanupFunction",
    "ScheduledGcFunction",
    "ErasureFunction",
];

/// The function that erases: the only one that may list and delete object versions (an
/// erasure reaches every version; nothing else may lose a deleted original for good).
const ERASERS: &[&str] = &["ErasureFunction"];
/// What only [`ERASERS`] may do.
const ERASING: &[&str] = &["s3:DeleteObjectVersion", "s3:ListBucketVersions"];

/// Actions no grant may have: they lose data for good, or change who may do what.
const NEVER: &[&str] = &[
    "dynamodb:DeleteTable",
    "dynamodb:UpdateTable",
    "dynamodb:Delete*",
    "s3:DeleteObjectVersion",
    "s3:DeleteBucket",
    "s3:PutBucket",
    "s3:PutLifecycleConfiguration",
    "s3:PutEncryptionConfiguration",
    "iam:",
    "sqs:DeleteQueue",
    "sqs:SetQueueAttributes",
    "sqs:Purge",
];

/// What breaks the rules (see the module doc), one line per broken rule and grant.
pub fn violations(table: &[(&str, &[Grant])]) -> Vec<String> {
    let mut out = Vec::new();
    for (function, grants) in table {
        for g in grants.iter() {
            let mut bad = |rule: String| out.push(format!("{function}: {rule} ({:?})", g.actions));
            for action in g.actions {
                if action.contains('*') {
                    bad(format!("wildcard action {action}"));
                }
                let erasing = ERASERS.contains(function) && ERASING.contains(action);
                if NEVER.iter().any(|n| action.starts_with(n))
                    && *action != "dynamodb:DeleteItem"
                    && !erasing
                {
                    bad(format!("{action} is never granted"));
                }
                if ERASING.contains(action) && !ERASERS.contains(function) {
                    bad(format!("{action}, which only the erasure function may"));
                }
            }
            let dynamodb = g.actions.iter().any(|a| a.starts_with("dynamodb:"));
            let scan = g.actions.contains(&"dynamodb:Scan");
            if scan && g.actions.len() > 1 {
                bad("Scan in a grant with other actions".into());
            }
            if PARSERS.contains(function) {
                if let Cond::LeadingKeys(keys) = g.condition
                    && keys.iter().any(|k| k.starts_with("offer#"))
                {
                    bad("a function that parses photos may write offers".into());
                }
                if g.resources
                    .iter()
                    .any(|r| matches!(r, Res::Topic(_)) || *r == Res::Queue("WebhookQueue"))
                {
                    bad("a function that parses photos may send results".into());
                }
                if let Cond::LeadingKeys(keys) = g.condition
                    && dynamodb
                    && keys.iter().any(|k| covers(k, "rec#seal#"))
                {
                    bad("a function that parses photos may write crawls' seals".into());
                }
            }
            let kindless = |keys: &[&str]| keys.iter().any(|k| *k == "*" || !k.contains('#'));
            let wildcard =
                |lists: &[&[&str]]| lists.iter().flat_map(|l| l.iter()).any(|a| a.contains('*'));
            match g.condition {
                Cond::LeadingKeys(keys) if dynamodb && !scan && kindless(keys) => {
                    bad(format!("key prefixes {keys:?} name no kind"));
                }
                Cond::Attributes(lists) if scan && wildcard(lists) => {
                    bad("a Scan of wildcard attributes".into());
                }
                Cond::LeadingKeys(_) if dynamodb && !scan => {}
                Cond::Attributes(_) if scan => {}
                _ if scan => bad("a Scan of every attribute".into()),
                _ if dynamodb => bad("a DynamoDB grant without key prefixes".into()),
                _ => {}
            }
            if g.actions.contains(&"s3:ListBucket") || g.actions.contains(&"s3:ListBucketVersions")
            {
                match g.condition {
                    Cond::Prefixes(prefixes) if !prefixes.iter().any(|p| p.starts_with('*')) => {}
                    _ => bad("s3:ListBucket of the whole bucket".into()),
                }
            }
            if g.actions.contains(&"states:StartExecution") {
                let sends_to_fetch = grants.iter().any(|other| {
                    other.actions.contains(&"sqs:SendMessage")
                        && other.resources.iter().any(|r| FETCH_QUEUES.contains(r))
                });
                if !sends_to_fetch {
                    bad("starts the delayed send but may not send to the fetch queues".into());
                }
            }
            let deletes = g.actions.contains(&"s3:DeleteObject");
            for r in g.resources {
                match r {
                    Res::Objects("originals/") if deletes && !COLLECTORS.contains(function) => {
                        bad("deletes under originals/, which only the collectors may".into());
                    }
                    Res::Objects(prefix) if prefix.is_empty() || prefix.contains('*') => {
                        bad(format!("objects under {prefix:?}"));
                    }
                    Res::Queue(q) => {
                        if let Some((_, consumers)) =
                            DEAD_LETTER_QUEUES.iter().find(|(dlq, _)| dlq == q)
                            && !consumers.contains(function)
                        {
                            bad(format!("sends to {q}, which is not its dead-letter queue"));
                        }
                        if *function == "DelayedSendStateMachine" && !FETCH_QUEUES.contains(r) {
                            bad(format!("the delayed send reaches {q}"));
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    out
}

/// Whether the key pattern `pattern` (`rec#*`, `rec#url#*`) reaches keys that start with
/// `prefix`.
fn covers(pattern: &str, prefix: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(stem) => prefix.starts_with(stem) || stem.starts_with(prefix),
        None => pattern.starts_with(prefix),
    }
}

/// The first line of a function's generated `Policies` block.
fn begin(function: &str) -> String {
    format!(
        "        # BEGIN policy {function}: generated from tests/e2e/template/permissions.rs; rewrite with IMGEST_BLESS=1 cargo test --workspace --test e2e -- template::permissions"
    )
}

/// Its last line.
fn end(function: &str) -> String {
    format!("        # END policy {function}")
}

fn resource(r: Res) -> String {
    match r {
        Res::Table => "!GetAtt RecordsTable.Arn".into(),
        Res::TableIndexes => "!Sub \"${RecordsTable.Arn}/index/*\"".into(),
        Res::Bucket => "!GetAtt FilesBucket.Arn".into(),
        Res::Objects(prefix) => format!("!Sub \"${{FilesBucket.Arn}}/{prefix}*\""),
        Res::Queue(q) => format!("!GetAtt {q}.Arn"),
        Res::Topic(t) => format!("!Ref {t}"),
        Res::StateMachine => "!If [LongWaitsOnStepFunctions, !Ref DelayedSendStateMachine, !Sub \"arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:stateMachine:none\"]".into(),
        Res::Distribution => "!If [HasCdn, !Ref CdnDistributionArn, !Sub \"arn:${AWS::Partition}:cloudfront::${AWS::AccountId}:distribution/none\"]".into(),
    }
}

/// `text` as YAML comment lines at `indent`, wrapped before 100 columns.
fn comment(text: &str, indent: &str) -> String {
    let mut out = String::new();
    let mut line = format!("{indent}#");
    for word in text.split_whitespace() {
        if line.len() + 1 + word.len() > 98 {
            out.push_str(&line);
            out.push('\n');
            line = format!("{indent}#");
        }
        line.push(' ');
        line.push_str(word);
    }
    out.push_str(&line);
    out.push('\n');
    out
}

/// A function's `Policies` block as the template holds it.
pub fn render(function: &str, grants: &[Grant]) -> String {
    let mut out = format!("{}\n        - Statement:\n", begin(function));
    for g in grants {
        out.push_str(&comment(g.why, "            "));
        out.push_str("            - Effect: Allow\n              Action:\n");
        for action in g.actions {
            out.push_str(&format!("                - {action}\n"));
        }
        out.push_str("              Resource:\n");
        for r in g.resources {
            out.push_str(&format!("                - {}\n", resource(*r)));
        }
        match g.condition {
            Cond::None => {}
            Cond::LeadingKeys(keys) => {
                out.push_str("              Condition:\n                ForAllValues:StringLike:\n                  dynamodb:LeadingKeys:\n");
                for k in keys {
                    out.push_str(&format!("                    - \"{k}\"\n"));
                }
            }
            Cond::Prefixes(prefixes) => {
                out.push_str("              Condition:\n                StringLike:\n                  s3:prefix:\n");
                for p in prefixes {
                    out.push_str(&format!("                    - \"{p}\"\n"));
                }
            }
            Cond::Attributes(lists) => {
                out.push_str("              Condition:\n                StringEquals:\n                  dynamodb:Select: SPECIFIC_ATTRIBUTES\n                ForAllValues:StringEquals:\n                  dynamodb:Attributes:\n");
                let mut seen = Vec::new();
                for a in lists.iter().flat_map(|l| l.iter()) {
                    if !seen.contains(a) {
                        seen.push(*a);
                        out.push_str(&format!("                    - {a}\n"));
                    }
                }
            }
        }
    }
    out.push_str(&end(function));
    out.push('\n');
    out
}

#[test]
fn every_policy_in_the_template_is_the_tables() {
    for (function, grants) in PERMISSIONS {
        super::hold_block(&begin(function), &end(function), &render(function, grants));
    }
}

#[test]
fn every_function_has_its_generated_policy_and_no_other() {
    let template = super::text();
    let functions: Vec<&str> = template
        .lines()
        .zip(template.lines().skip(1))
        .filter(|(_, next)| {
            next.trim() == "Type: AWS::Serverless::Function"
                || next.trim() == "Type: AWS::Serverless::StateMachine"
        })
        .map(|(name, _)| name.trim().trim_end_matches(':'))
        .collect();
    let mut listed: Vec<&str> = PERMISSIONS.iter().map(|(f, _)| *f).collect();
    let mut found = functions.clone();
    listed.sort_unstable();
    found.sort_unstable();
    assert_eq!(
        found, listed,
        "every function and state machine is in PERMISSIONS (docs/architecture.md, \"Adding a Lambda function\", step 3)"
    );
    assert_eq!(
        template.matches("      Policies:\n").count(),
        PERMISSIONS.len(),
        "one Policies block per function"
    );
    for (function, _) in PERMISSIONS {
        let (start, _) = super::block(&template, &begin(function), &end(function))
            .unwrap_or_else(|| panic!("{function} has no generated policy"));
        let before = &template[..start];
        assert!(
            before.ends_with("      Policies:\n"),
            "{function}'s block is its Policies"
        );
        let owner = before
            .lines()
            .rev()
            .find(|l| l.starts_with("  ") && !l.starts_with("   "))
            .unwrap_or_default();
        assert_eq!(owner.trim().trim_end_matches(':'), *function);
    }
}

#[test]
fn the_table_breaks_no_rule() {
    assert_eq!(violations(PERMISSIONS), Vec::<String>::new());
}

/// A policy widened in the table breaks a rule; one widened in the template differs from the
/// table.
#[test]
fn a_widened_policy_is_caught() {
    const ANY_KEY: &[Grant] = &[grant(
        "widened",
        ITEM_RWD,
        &[Res::Table],
        Cond::LeadingKeys(&["rec#*", "*"]),
    )];
    const OFFERS_TOO: &[Grant] = &[grant(
        "widened",
        ITEM_RWD,
        &[Res::Table],
        Cond::LeadingKeys(&["rec#*", "offer#*"]),
    )];
    const RESULTS_TOO: &[Grant] = &[RESULTS];
    const WEBHOOKS_TOO: &[Grant] = &[WEBHOOK_DELIVERIES];
    const WHOLE_TABLE: &[Grant] = &[grant(
        "widened",
        &["dynamodb:Scan"],
        &[Res::Table],
        Cond::None,
    )];
    const WHOLE_BUCKET: &[Grant] = &[grant(
        "widened",
        &["s3:ListBucket"],
        &[Res::Bucket],
        Cond::None,
    )];
    const ANY_ACTION: &[Grant] = &[grant("widened", &["s3:*"], FILES, Cond::None)];
    // The process function may send to no fetch queue: the state machine would be its way.
    const STARTS_DELAYED_SEND: &[Grant] = &[LONG_WAITS];
    const TO_PROCESS: &[Grant] = &[grant(
        "widened",
        &["sqs:SendMessage"],
        &[Res::Queue("ProcessQueue")],
        Cond::None,
    )];
    const OTHERS_LETTERS: &[Grant] = &[grant(
        "widened",
        &["sqs:SendMessage"],
        &[Res::Queue("ProcessDeadLetterQueue")],
        Cond::None,
    )];
    const ORIGINALS_TOO: &[Grant] = &[grant("widened", &["s3:DeleteObject"], FILES, Cond::None)];
    const EVERY_RECORD: &[Grant] = &[grant(
        "widened",
        ITEM_RW,
        &[Res::Table],
        Cond::LeadingKeys(&["rec#*"]),
    )];
    const VERSIONS_TOO: &[Grant] = &[grant(
        "widened",
        &["s3:DeleteObjectVersion"],
        FILES,
        Cond::None,
    )];
    for (function, widened, rule) in [
        (
            "ScheduledGcFunction",
            VERSIONS_TOO,
            "only the erasure function",
        ),
        ("ProcessFunction", EVERY_RECORD, "crawls' seals"),
        ("BackfillFunction", ORIGINALS_TOO, "only the collectors"),
        ("FetchFunction0", ANY_KEY, "name no kind"),
        ("FetchFunction1", OFFERS_TOO, "may write offers"),
        ("ProcessFunction", RESULTS_TOO, "may send results"),
        ("FetchFunction2", WEBHOOKS_TOO, "may send results"),
        ("BackfillFunction", WHOLE_TABLE, "every attribute"),
        ("ProcessFunction", WHOLE_BUCKET, "whole bucket"),
        ("ApiFunction", ANY_ACTION, "wildcard action"),
        (
            "ProcessFunction",
            STARTS_DELAYED_SEND,
            "starts the delayed send",
        ),
        (
            "DelayedSendStateMachine",
            TO_PROCESS,
            "reaches ProcessQueue",
        ),
        (
            "IntakeFunction",
            OTHERS_LETTERS,
            "not its dead-letter queue",
        ),
    ] {
        let table: Vec<(&str, &[Grant])> = PERMISSIONS
            .iter()
            .map(|(f, g)| {
                if *f == function {
                    (*f, widened)
                } else {
                    (*f, *g)
                }
            })
            .collect();
        let found = violations(&table);
        assert!(
            found
                .iter()
                .any(|v| v.starts_with(function) && v.contains(rule)),
            "{function} widened: {found:?}"
        );
    }
    // The template widened by hand: one more resource in a statement.
    let (function, grants) = PERMISSIONS[3];
    let rendered = render(function, grants);
    let widened = rendered.replacen(
        "                - !GetAtt RecordsTable.Arn\n",
        "                - !GetAtt RecordsTable.Arn\n                - \"*\"\n",
        1,
    );
    let shown = super::difference(&widened, &rendered);
    assert!(shown.contains("- \"*\""), "{shown}");
}
