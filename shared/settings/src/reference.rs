//! Every environment variable imgest reads, declared once: who reads it, its values and their
//! bounds, its default, whether the SAM template sets it, and what it means.
//!
//! The list is held to the code from both sides: the tests below parse each default and each
//! bound with [`Settings::from_map`](super::Settings::from_map) (a default that differs, or a
//! bound the parser does not keep, fails naming the variable), and `tests/e2e/reference.rs`
//! fails on a variable the code reads that is not declared here (or declared and read nowhere),
//! on one the template sets that is not declared (or declared as set and not set), and
//! generates `docs/configuration.md`'s table from this list and the template
//! (`IMGEST_BLESS=1` rewrites it). Adding a setting is adding it here.

/// One variable.
#[derive(Debug, Clone, Copy)]
pub struct Variable {
    pub name: &'static str,
    /// Where it is read.
    pub place: Place,
    /// What reads it.
    pub parser: Parser,
    /// Its values and their bounds.
    pub value: Value,
    /// What it is when unset.
    pub default: DefaultValue,
    /// `None` when the template sets it (where is read from `template.yaml`); else why it does
    /// not.
    pub template_leaves: Option<&'static str>,
    /// The variables it is read with (its default and bounds are checked with these set).
    pub with: &'static [(&'static str, &'static str)],
    /// What it means (Markdown).
    pub meaning: &'static str,
}

/// Where a variable is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// The local runner and the CLI.
    Local,
    /// The Lambda functions (and the CLI with `IMGEST_BACKEND=aws`).
    Aws,
    Both,
}

impl Place {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Local => "local",
            Self::Aws => "AWS",
            Self::Both => "both",
        }
    }
}

/// What reads a variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parser {
    /// [`Settings`](super::Settings), parsed once at start (this crate).
    Settings,
    /// Another source file of the workspace (read at start by the telemetry).
    File(&'static str),
}

/// A bound, in the variable's own syntax; `shown` names it when it follows another setting
/// (`value` is then what it is with every other variable at its default).
#[derive(Debug, Clone, Copy)]
pub struct Bound {
    pub value: &'static str,
    pub shown: Option<&'static str>,
}

const fn at(value: &'static str) -> Option<Bound> {
    Some(Bound { value, shown: None })
}

const fn following(value: &'static str, shown: &'static str) -> Option<Bound> {
    Some(Bound {
        value,
        shown: Some(shown),
    })
}

/// A variable's values.
#[derive(Debug, Clone, Copy)]
pub enum Value {
    /// A whole number.
    Number { least: u64, most: u64 },
    /// A duration (`90s`, `24h`, `14d`); `positive`: zero is refused.
    Duration {
        positive: bool,
        least: Option<Bound>,
        most: Option<Bound>,
    },
    /// A byte size (`20MB`, `512KiB`), more than zero.
    Size {
        least: Option<Bound>,
        most: Option<Bound>,
    },
    /// A count (`50M`, `500K`), more than zero.
    Count,
    /// A share, `10%` or `10`, from 0 to 100.
    Percent,
    /// `true` or `false` (`1`, `0`).
    Flag,
    /// One of these words.
    OneOf(&'static [&'static str]),
    /// Text in the syntax its meaning gives (a list, pairs, a path, a URL), checked by its
    /// parser's own tests.
    Text,
}

/// What a variable is when unset.
#[derive(Debug, Clone, Copy)]
pub enum DefaultValue {
    /// This value, in the variable's syntax (checked: setting it changes nothing).
    Value(&'static str),
    /// Nothing: the feature it enables is off.
    Unset,
    /// An empty list.
    Empty,
    /// Worked out at start (described).
    Computed(&'static str),
    /// Required where its meaning says.
    Required,
}

const AWS: &[(&str, &str)] = &[
    ("IMGEST_BACKEND", "aws"),
    ("IMGEST_BUCKET", "b"),
    ("IMGEST_TABLE", "t"),
];
/// The AWS backend with a delayed-send state machine (what `step-functions` needs).
const AWS_STATE_MACHINE: &[(&str, &str)] = &[
    ("IMGEST_BACKEND", "aws"),
    ("IMGEST_BUCKET", "b"),
    ("IMGEST_TABLE", "t"),
    (
        "IMGEST_DELAY_STATE_MACHINE_ARN",
        "arn:aws:states:eu-west-1:123456789012:stateMachine:delayed-send",
    ),
];
const WATERMARK: &[(&str, &str)] = &[("IMGEST_WATERMARK", "wm.png")];

const fn var(name: &'static str, place: Place, value: Value, default: DefaultValue) -> Variable {
    Variable {
        name,
        place,
        parser: Parser::Settings,
        value,
        default,
        template_leaves: None,
        with: &[],
        meaning: "",
    }
}

impl Variable {
    const fn means(mut self, meaning: &'static str) -> Self {
        self.meaning = meaning;
        self
    }

    const fn left(mut self, why: &'static str) -> Self {
        self.template_leaves = Some(why);
        self
    }

    const fn with(mut self, with: &'static [(&'static str, &'static str)]) -> Self {
        self.with = with;
        self
    }

    const fn read_in(mut self, file: &'static str) -> Self {
        self.parser = Parser::File(file);
        self
    }
}

use DefaultValue::{Computed, Empty, Required, Unset};
use Place::{Aws, Both, Local};
use Value::{Count, Flag, Number, OneOf, Percent, Text};

const fn duration(least: Option<Bound>, most: Option<Bound>) -> Value {
    Value::Duration {
        positive: false,
        least,
        most,
    }
}

const fn positive_duration(most: Option<Bound>) -> Value {
    Value::Duration {
        positive: true,
        least: None,
        most,
    }
}

const fn size(least: Option<Bound>, most: Option<Bound>) -> Value {
    Value::Size { least, most }
}

const fn default(value: &'static str) -> DefaultValue {
    DefaultValue::Value(value)
}

/// Every variable, in the order the reference lists them.
pub const VARIABLES: &[Variable] = &[
    var("IMGEST_AUTH", Both, Text, Unset)
        .means("who checks callers: unset (with `IMGEST_JWKS_FILE`, `jwt`; without, `serve` runs open on loopback only), `jwt`, `gateway` (the API function behind API Gateway's JWT authorizer), `off` (open on purpose, locally). On AWS Lambda every function refuses to start unless it is `gateway` or `jwt` (unset or `off` would open the API and put every client's crawls in one namespace)"),
    var("IMGEST_JWKS_FILE", Local, Text, Unset)
        .left("API Gateway reads the issuer's keys")
        .means("a JSON Web Key Set file with the token issuer's public keys (RS256, ES256), re-read when it changes"),
    var("IMGEST_JWT_ISSUER", Local, Text, Required)
        .left("the authorizer's `JwtIssuer`")
        .means("the `iss` tokens must carry (required with `IMGEST_JWKS_FILE`)"),
    var("IMGEST_JWT_AUDIENCE", Both, Text, Required)
        .means("the `aud` tokens must carry (required with `IMGEST_JWKS_FILE` and with `IMGEST_AUTH=gateway`)"),
    var("IMGEST_UPLOAD_RPM", Both, Number { least: 1, most: 1_000_000 }, default("120"))
        .means("uploads per minute per token subject (`429 too_many_requests` past it)"),
    var("IMGEST_BACKEND", Both, OneOf(&["embedded", "aws"]), default("embedded"))
        .with(&[("IMGEST_BUCKET", "b"), ("IMGEST_TABLE", "t")])
        .means("`embedded` (SQLite + a directory) or `aws` (S3, DynamoDB, SQS; region, credentials and `AWS_ENDPOINT_URL` from the standard AWS variables)"),
    var("IMGEST_DATA_DIR", Local, Text, default("./imgest-data"))
        .left("no embedded store")
        .means("the embedded store: `imgest.sqlite3` and `files/`"),
    var("IMGEST_LISTEN", Local, Text, default("127.0.0.1:8080"))
        .left("API Gateway listens")
        .means("the address `serve` listens on"),
    var("IMGEST_PUBLIC_URL", Both, Text, Computed("`http://{IMGEST_LISTEN}`; on AWS the bucket's URL"))
        .means("the base of the file URLs the API returns (on AWS a CDN in front of the bucket): an `http` or `https` URL with a host, without credentials, query or fragment (anything else stops the start). An open runner answers to its host too, so one that is not loopback needs `IMGEST_ALLOW_OPEN_PUBLIC_URL`"),
    var("IMGEST_ALLOW_OPEN_PUBLIC_URL", Local, Flag, default("false"))
        .left("local only: every function checks tokens")
        .means("let an open runner (no `IMGEST_JWKS_FILE`) answer to an `IMGEST_PUBLIC_URL` that is not loopback (`localhost`, `127.0.0.0/8`, `[::1]`): whoever reaches that URL (a proxy in front of the runner) may then do everything. Without it such a runner does not start: set `IMGEST_JWKS_FILE` to check tokens instead"),
    var("IMGEST_GC_INTERVAL", Local, duration(None, None), default("1h"))
        .left("`GcSchedule` schedules the scheduled-gc function")
        .means("how often `serve` runs GC"),
    var("IMGEST_BUCKET", Aws, Text, Required)
        .means("the S3 bucket (required with `IMGEST_BACKEND=aws`)"),
    var("IMGEST_TABLE", Aws, Text, Required)
        .means("the DynamoDB table (required with `IMGEST_BACKEND=aws`)"),
    var("IMGEST_QUEUES", Aws, Text, Empty)
        .with(AWS)
        .means("`name=url,…`: the SQS queue URL of each logical queue the functions send to (`intake`, `fetch-0..2`, `process`, `backfill`, `settle`, `webhooks`), `{name}.dead=url` its dead-letter queue (else the one its redrive policy names), and `results=arn:aws:sns:…`: the results topic's ARN; sending to a name not listed fails. The CLI on AWS (`backfill`, `dlq`) needs it too"),
    var("IMGEST_MAX_RECEIVES", Aws, Number { least: 1, most: 1000 }, default("5"))
        .means("the receive limit (`maxReceiveCount`) of the queue the function consumes: a message still failing on that receive is sent to the dead letters with its reason (rather than moved by SQS without one); a test holds it to each queue's"),
    var("IMGEST_INTAKE_SENDERS", Aws, Text, Empty)
        .means("who may send crawl requests to the intake queue, for which clients: `SENDER_ID=client,client;SENDER_ID=*`, the id SQS reports as `SenderId` (an IAM user's `AIDA…`, a role's `AROA…`, any session); empty: none. Any other's request goes to the dead letters as `forbidden` (see [deployment](deployment.md#sending-feeds-and-reading-results))"),
    var("IMGEST_REDRIVERS", Aws, Text, Empty)
        .means("`ID,ID`: the operators whose `imgest dlq redrive` keeps each message's original sender (the intake queue then takes a crawl request as its original sender's; an internal queue a function's message as that function's)"),
    var("IMGEST_INTAKE_REDRIVERS", Aws, Text, Empty)
        .left("its earlier name, read for stacks deployed before `IMGEST_REDRIVERS`")
        .means("the earlier name of `IMGEST_REDRIVERS`, still read: the two lists are joined"),
    var("IMGEST_STACK_ROLES", Aws, Text, Empty)
        .means("`ID,ID`: the unique ids of the stack's roles (the template lists every function's and the state machine's); the internal queues (fetch, process, settle, backfill, webhooks) take only their messages, and read `imgest.*` attributes only from them. Empty: no internal queue takes anything"),
    var("IMGEST_CDN_DISTRIBUTION_ARN", Aws, Text, Unset)
        .means("the CloudFront distribution in front of `public/` (`arn:aws:cloudfront::ACCOUNT:distribution/ID`): an erasure invalidates the erased image's public files there, each by its path, and its receipt names the invalidation. Unset or empty: no CDN is told. Read by the erasure function and the CLI's `imgest erase`"),
    var("IMGEST_SQS_MAX_DELAY", Aws, positive_duration(at("15m")), default("15m"))
        .with(AWS)
        .left("tests only")
        .means("the longest delay sent as an SQS message delay (SQS's own limit is 15 minutes); a longer one is a long wait (`IMGEST_LONG_WAITS`). Shorter only to exercise that path against an emulator"),
    var("IMGEST_LONG_WAITS", Aws, OneOf(&["step-functions", "sqs-chain"]), Unset)
        .with(AWS_STATE_MACHINE)
        .left("the template sets the state machine's ARN, or none, from `LongWaits`")
        .means("how a message delayed beyond `IMGEST_SQS_MAX_DELAY` waits: `step-functions`, one execution of the delayed-send state machine (`IMGEST_DELAY_STATE_MACHINE_ARN`, required) each, which waits, then sends it (to the fetch queues; other queues' long waits are chained); `sqs-chain`, sent with SQS's longest delay and its due instant (`imgest.due`), and sent on by its queue's handler at each hop until it is due. Unset: `step-functions` if the ARN is set, else `sqs-chain`"),
    var("IMGEST_DELAY_STATE_MACHINE_ARN", Aws, Text, Unset)
        .with(AWS)
        .means("the delayed-send state machine (`arn:aws:states:REGION:ACCOUNT:stateMachine:NAME`) long waits go through with `IMGEST_LONG_WAITS=step-functions`; not read with `sqs-chain`. Read by the functions that send to the fetch queues (API, intake, fetch)"),
    var("IMGEST_S3_FORCE_PATH_STYLE", Aws, Flag, default("false"))
        .with(AWS)
        .left("emulators only")
        .means("path-style S3 URLs"),
    var("IMGEST_VARIANTS", Both, Text, default("large=fit:1280x1280,medium=fit:640x640,thumb=cover:200x200"))
        .means("`name=fit:WxH` scales down to fit the box; `name=cover:WxH` fills it and crops the centre. Either may name its file format and quality after it: `:jpeg` (the default), `:webp` or `:avif`, then `:1`–`:100`, e.g. `large_avif=fit:1280x1280:avif` or `thumb=cover:200x200:webp:70`. Without a quality, JPEG takes `IMGEST_JPEG_QUALITY`, WebP 88 and AVIF 83 (the butteraugli distance of JPEG at 82: [benchmarks](benchmarks.md#output-formats)). The API lists each variant's `format` and URL (`.jpg`, `.webp`, `.avif`); AVIF costs many times JPEG's CPU ([cost](cost.md#an-avif-variant)). A size dropped from the set is deleted by the sweep only once `imgest variants confirm` records the new set ([operations](operations.md#a-size-dropped-from-the-variants))"),
    var("IMGEST_JPEG_QUALITY", Both, Number { least: 1, most: 100 }, default("82"))
        .means("quality of the JPEG variants (4:2:0) that name none"),
    var("IMGEST_ORIGINAL_METADATA", Both, OneOf(&["strip-private", "keep", "strip-all"]), default("strip-private"))
        .left("the default: no location or identity metadata is stored")
        .means("what a stored original keeps of the photo's metadata: `strip-private` (orientation, ICC profile and the EXIF fields that describe the capture; no GPS, XMP, maker notes, serial numbers, comments or thumbnails), `strip-all` (orientation and profile only) or `keep` (as sent). The id and strong hash stay those of the bytes sent; `imgest backfill start` rewrites existing originals under a new generation ([operations](operations.md#erasure-and-privacy))"),
    var("IMGEST_SIMILAR", Both, OneOf(&["off", "index", "report"]), default("off"))
        .means("near-duplicate detection ([API](api.md#near-duplicates)): every stored photo gets a perceptual signature either way; `index` also files new photos in the near-duplicate index (`GET /v1/images/{image_id}/similar`, `imgest similar`); `report` also looks each new photo up as it is stored (and keeps its lookup points for a day, for the crawl's settle), and the upload answer and the crawl result name its near-duplicates under other clients' offers. Photos stored before indexing was on are filed by `imgest backfill start`"),
    var("IMGEST_MAX_BODY", Both, size(None, None), default("20MB"))
        .means("larger uploads get `413 too_large` (checked against Content-Length and while streaming)"),
    var("IMGEST_MAX_PIXELS", Both, Count, default("50M"))
        .means("decoded width × height, read from the header before decoding (`422 too_many_pixels`)"),
    var("IMGEST_MAX_PHOTOS_PER_OFFER", Both, Number { least: 1, most: 1000 }, default("50"))
        .means("longer lists get `422 too_many_photos`"),
    var("IMGEST_ORPHAN_TTL", Both, duration(at("1h"), None), default("14d"))
        .means("how long an unlinked image is kept after its last use; at least `IMGEST_UPLOAD_URL_TTL` + `IMGEST_CLAIM_TTL` too (a presigned upload and its processing end before its image may expire)"),
    var("IMGEST_SWEEP_GRACE", Both, duration(at("1h"), None), default("24h"))
        .means("the sweep never deletes a file younger than this (a file is written up to 15 minutes, a function's longest run, before its record)"),
    var("IMGEST_SWEEP_MAX_SHARE", Both, Percent, default("10%"))
        .means("the share of a shard's files a sweep may delete as garbage (files of no record, of a variant no record lists, keys that are not image files); a sweep that would delete more stops at that shard and reports it (`imgest sweep` exits with status 2; the scheduled-gc function fails, raising `FunctionErrorsAlarm`) until `imgest sweep --shard SHARD --go-on` deletes them once checked ([operations](operations.md#a-sweep-that-stopped))"),
    var("IMGEST_UNSAFE_SHORT_WINDOWS", Local, Flag, default("false"))
        .left("refused on Lambda")
        .means("lifts the lower bounds of `IMGEST_ORPHAN_TTL`, `IMGEST_SWEEP_GRACE` and `IMGEST_CLAIM_TTL` for tests and demos (seconds-long windows); refused on AWS Lambda, where short windows would let GC and the sweep delete live data"),
    var("IMGEST_BACKFILL_RATE", Both, Number { least: 0, most: 100_000 }, default("20"))
        .means("photos a backfill re-processes per second at most, in all (its tasks are queued due at this rate, at most a minute ahead); `0`: as fast as its decode slots (locally) or `BackfillConcurrency` (AWS) allow"),
    var("IMGEST_BACKFILL_SEGMENTS", Both, Number { least: 1, most: 64 }, default("4"))
        .means("parts of the image index a backfill enumerates side by side (DynamoDB's parallel scan segments)"),
    var("IMGEST_AUDIT_SEGMENTS", Aws, Number { least: 1, most: 1024 }, default("16"))
        .means("with `AuditMode=listing` (the template's default; `inventory` turns the scheduled audit off: [the audit at scale](operations.md#the-audit-at-scale)), the scheduled audit (`AuditSchedule`, every 6 hours) covers one of this many segments of the image index a run, from a checkpoint (`imgest audit` covers them all)"),
    var("IMGEST_CLAIM_TTL", Both, duration(following("30s", "30s (and `IMGEST_DEDUP_WAIT`)"), None), default("2m"))
        .means("a processing claim older than this is taken over by the next upload of the same bytes"),
    var("IMGEST_DEDUP_WAIT", Both, duration(at("1s"), at("25s")), default("8s"))
        .left("the default fits API Gateway's 30 s")
        .means("how long an upload of bytes another request is processing waits for it before answering `503 still_processing` with `Retry-After` (API Gateway gives up on a request after 30 s)"),
    var("IMGEST_UPLOAD_URL_TTL", Both, duration(None, None), default("15m"))
        .means("how long a presigned upload URL is valid"),
    var("IMGEST_PROCESS_CONCURRENCY", Both, Number { least: 1, most: 4096 }, Computed("the number of cores"))
        .means("photos decoded at once"),
    var("IMGEST_MEMORY_BUDGET", Both, size(following("147108864", "64 MiB + 4 × `IMGEST_MAX_BODY`"), None), Computed("on Lambda seven eighths of the function's memory (`AWS_LAMBDA_FUNCTION_MEMORY_SIZE`: the eighth left is for what the budget does not model); locally a quarter of the machine's (or cgroup's), at least 256 MiB"))
        .left("each function's `MemorySize`")
        .means("the memory the process should stay within: 64 MiB for itself, a quarter of the rest for bodies (uploads, downloads, objects read back), three quarters for decoding; see [Hostile photos](api.md#hostile-photos)"),
    var("IMGEST_MAX_PENDING_UPLOADS", Both, Number { least: 0, most: 1_000_000 }, default("64"))
        .means("new uploads that may wait for a decode slot (each holds its body in memory); beyond that, `429 too_many_requests` with `Retry-After` (dedup hits are never refused). A downloaded photo waits its turn instead: its body is already held in the memory budget (`IMGEST_FETCH_RESERVE`)"),
    var("IMGEST_SWEEP_SHARDS_PER_RUN", Aws, Number { least: 1, most: 256 }, default("32"))
        .means("shards (of 256) one scheduled sweep covers at most, within its run's time (the run's time left after GC; a shard larger than that is swept over several runs); the next run resumes from the page saved (`imgest sweep` covers them all)"),
    var("IMGEST_WATERMARK", Both, Text, Unset)
        .means("a PNG overlay; enables watermarking. A path, or `s3://bucket/key` with `IMGEST_BACKEND=aws` (the template: `s3://<files bucket>/<WatermarkKey>`): read once at start-up (at most 4 MiB); a process that cannot read or decode it does not start, rather than make unmarked variants. Changing it changes the variant set: a backfill re-makes stored photos"),
    var("IMGEST_WATERMARK_POSITION", Both, OneOf(&["top-left", "top-right", "bottom-left", "bottom-right", "center"]), default("bottom-right"))
        .with(WATERMARK)
        .means("where the watermark goes"),
    var("IMGEST_WATERMARK_OPACITY", Both, Text, default("0.5"))
        .with(WATERMARK)
        .means("0.0 – 1.0, multiplies the overlay's alpha"),
    var("IMGEST_WATERMARK_VARIANTS", Both, Text, default("large,medium"))
        .with(WATERMARK)
        .means("variants (of `IMGEST_VARIANTS`) that get the watermark"),
    var("IMGEST_URL_TTL", Both, positive_duration(None), default("7d"))
        .means("a photo URL downloaded successfully within this is not downloaded again (never longer than `IMGEST_ORPHAN_TTL`)"),
    var("IMGEST_REVALIDATION_DELAY", Both, positive_duration(at("1d")), default("15m"))
        .left("the default")
        .means("an offer re-sent with its last crawl's URLs after `IMGEST_URL_TTL` is answered at once from its crawl record (its photos are still linked) and crawled again in the background: its downloads (conditional requests) are queued half this long to this long later, off the client's pacing; only a photo replaced or definitely gone at its URL (not a transient failure) changes the offer and sends a new result"),
    var("IMGEST_FETCH_TIERS", Both, Text, default("1s,5s,30s"))
        .means("the whole-request deadline (connect, headers, redirects, body) of each download tier, 1 to 8 increasing durations; the template has three tiers"),
    var("IMGEST_FETCH_WORKERS", Local, Text, default("32,16,8"))
        .left("`FetchConcurrency` caps each tier's function")
        .means("concurrent downloads per tier, one count (1 to 1024) per tier"),
    var("IMGEST_FETCH_TIER", Aws, Text, default("0"))
        .means("the tier a fetch function serves (an index into `IMGEST_FETCH_TIERS`)"),
    var("IMGEST_TIER_ROUTING", Both, Flag, default("true"))
        .means("start downloads in the tier the (client, host)'s tier statistics predict (`false`: always the first)"),
    var("IMGEST_RETRY_BASE", Both, positive_duration(None), default("1s"))
        .means("the first backoff of a transient download failure (exponential, full jitter; `Retry-After` is a floor, up to 24 h)"),
    var("IMGEST_RETRY_CAP", Both, positive_duration(None), default("1h"))
        .means("the longest backoff of a transient download failure (not less than `IMGEST_RETRY_BASE`)"),
    var("IMGEST_MAX_ATTEMPTS", Both, Number { least: 1, most: 100 }, default("5"))
        .means("downloads of a URL per crawl for transient failures"),
    var("IMGEST_RECHECK_BASE", Both, positive_duration(None), default("1h"))
        .means("a URL that failed permanently is downloaded again only after 1×, 2×, 4×… this (capped at 24 h)"),
    var("IMGEST_TRANSIENT_RECHECK_BASE", Both, positive_duration(None), default("10m"))
        .means("a URL that failed transiently through every retry (or past the last tier) is downloaded again only after 1×, 2×, 4×… this (capped at 24 h)"),
    var("IMGEST_CIRCUIT_MIN_REQUESTS", Both, Number { least: 1, most: 1_000_000 }, default("20"))
        .means("a host's circuit opens (its URLs settle as `host_unavailable`, with no request) only once its recent requests are at least this many, and `IMGEST_CIRCUIT_FAILURE_PERCENT` of them failed"),
    var("IMGEST_CIRCUIT_FAILURE_PERCENT", Both, Number { least: 1, most: 100 }, default("50"))
        .means("the share of a host's recent requests (at least `IMGEST_CIRCUIT_MIN_REQUESTS`) that failed for its circuit to open"),
    var("IMGEST_CIRCUIT_WINDOW", Both, positive_duration(None), default("60s"))
        .means("a host's requests and failures count half after this long"),
    var("IMGEST_CIRCUIT_COOL_DOWN", Both, positive_duration(None), default("30s"))
        .means("an open circuit waits this long before one probe (doubled by each failed probe, up to 32×); the circuit is shared by every process through the host's record"),
    var("IMGEST_HASH_HEADERS", Both, Text, Empty)
        .means("`host=header,…`: hosts trusted to send their body's MD5 (`content-md5`: base64; another header such as `etag`: hex); a response naming a known image is not downloaded"),
    var("IMGEST_CLIENT_RPM", Both, Number { least: 1, most: 1_000_000 }, default("600"))
        .means("downloads per client per rate window"),
    var("IMGEST_CLIENT_RPM_OVERRIDES", Both, Text, Empty)
        .means("`client=rpm,…`: other limits for some clients"),
    var("IMGEST_RATE_WINDOW", Both, positive_duration(None), default("60s"))
        .means("the window the client limit counts in"),
    var("IMGEST_WEBHOOK_TIMEOUT", Both, positive_duration(at("60s")), default("10s"))
        .means("how long a client's webhook endpoint has to answer a delivery (connect, send, the answer's headers); a timeout is retried like a 5xx"),
    var("IMGEST_WEBHOOK_CONCURRENCY", Both, Number { least: 1, most: 256 }, default("4"))
        .means("webhook deliveries at once per endpoint and process: a slow endpoint holds no more of a process's deliveries"),
    var("IMGEST_DOMAIN_CONCURRENCY", Both, Number { least: 1, most: 4096 }, default("16"))
        .means("downloads at once per host and process to start with (halved on 429, +1 per window of successes, up to 4×; shared by every process through the host's record)"),
    var("IMGEST_FETCH_RESERVE", Both, size(None, following("20MB", "`IMGEST_MAX_BODY`")), Computed("`1MiB`, or `IMGEST_MAX_BODY` if less"))
        .left("the default")
        .means("body memory a download holds in the process's memory budget (`IMGEST_MEMORY_BUDGET`'s body pool) before its request leaves, grown to the declared `Content-Length` when the headers come or as an undeclared body arrives; a download finding no room waits within its tier's deadline, then goes back on its queue without blaming its host"),
    var("IMGEST_FETCH_PORTS", Both, Text, default("80,443"))
        .means("the ports downloads may connect to, or `any` (`forbidden_address` otherwise)"),
    var("IMGEST_CLIENT_HOSTS", Both, Text, Empty)
        .means("per client, the hosts its downloads may reach: `acme=img.acme.example,*.acme-cdn.example;other=…` (`forbidden_host` otherwise; a client not listed reaches any public host)"),
    var("IMGEST_ALLOW_PRIVATE_NETWORKS", Local, Flag, default("false"))
        .left("refused on Lambda: crawl requests could then reach the VPC")
        .means("let downloads reach loopback and private networks (tests, local hosts); link-local and metadata addresses stay forbidden"),
    var("IMGEST_STRIP_PARAMS", Both, Text, Empty)
        .means("extra tracking parameters to drop from photo URLs before they are compared (`a,b`)"),
    var("IMGEST_HOST_REWRITES", Both, Text, Empty)
        .means("host rewrites for CDN mirrors of one photo (`img2.cdn.example=img.cdn.example,…`)"),
    var("IMGEST_USER_AGENT", Both, Text, Computed("`imgest/VERSION`"))
        .means("the downloads' `User-Agent`"),
    var("IMGEST_LOG", Both, Text, Computed("`info` (`serve`, the functions), `warn` (other commands)"))
        .read_in("shared/core/src/telemetry/logs.rs")
        .means("an `EnvFilter` directive for the JSON logs on stderr"),
    var("IMGEST_METRICS", Both, OneOf(&["off", "counts", "timings"]), default("counts"))
        .read_in("shared/core/src/telemetry/metrics.rs")
        .means("what each stage records: `off` (nothing, no clock read, `/metrics` answers `404 metrics_off`), `counts` (runs by outcome), `timings` (and their durations); see [operations](operations.md#metrics)"),
    var("IMGEST_METRICS_NAMESPACE", Aws, Text, default("imgest"))
        .read_in("shared/lambda/src/cloudwatch.rs")
        .means("the CloudWatch namespace of the functions' embedded-metric-format lines"),
    var("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", Aws, Text, Unset)
        .left("set by Lambda: the function's `MemorySize`")
        .means("the function's memory in MiB: the default of `IMGEST_MEMORY_BUDGET`"),
    var("AWS_LAMBDA_INITIALIZATION_TYPE", Aws, Text, Unset)
        .left("set by Lambda")
        .means("present only on Lambda: `IMGEST_ALLOW_PRIVATE_NETWORKS` and `IMGEST_UNSAFE_SHORT_WINDOWS` are refused there"),
];

/// The declaration of `name`.
pub fn variable(name: &str) -> Option<&'static Variable> {
    VARIABLES.iter().find(|v| v.name == name)
}

/// The bounds as the reference shows them: `1 – 100`, `at least 1h`, … (empty: none beyond
/// the syntax).
pub fn bounds(v: &Variable) -> String {
    let shown = |b: &Bound| match b.shown {
        Some(shown) => shown.to_owned(),
        None => format!("`{}`", b.value),
    };
    let range = |least: Option<Bound>, most: Option<Bound>, positive: bool| match (least, most) {
        (Some(l), Some(m)) => format!("{} – {}", shown(&l), shown(&m)),
        (Some(l), None) => format!("at least {}", shown(&l)),
        (None, Some(m)) if positive => format!("more than 0, at most {}", shown(&m)),
        (None, Some(m)) => format!("at most {}", shown(&m)),
        (None, None) if positive => "more than 0".to_owned(),
        (None, None) => String::new(),
    };
    match v.value {
        Value::Number { least, most } => format!("{least} – {most}"),
        Value::Duration {
            positive,
            least,
            most,
        } => range(least, most, positive),
        Value::Size { least, most } => range(least, most, true),
        Value::Count => "more than 0".to_owned(),
        Value::Percent => "0% – 100%".to_owned(),
        Value::Flag => "`true`, `false`".to_owned(),
        Value::OneOf(words) => words
            .iter()
            .map(|w| format!("`{w}`"))
            .collect::<Vec<_>>()
            .join(", "),
        Value::Text => String::new(),
    }
}

/// The default as the reference shows it.
pub fn default_shown(v: &Variable) -> String {
    match v.default {
        DefaultValue::Value(value) => format!("`{value}`"),
        DefaultValue::Unset => "unset".to_owned(),
        DefaultValue::Empty => "empty".to_owned(),
        DefaultValue::Computed(text) => text.to_owned(),
        DefaultValue::Required => "—".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::time::Duration;

    use super::*;
    use crate::{Settings, SettingsError};

    fn parse(v: &Variable, value: Option<&str>) -> Result<Settings, SettingsError> {
        let mut map: HashMap<String, String> = v
            .with
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        if let Some(value) = value {
            map.insert(v.name.to_owned(), value.to_owned());
        }
        Settings::from_map(&map)
    }

    fn accepted(v: &Variable, value: &str) {
        if let Err(e) = parse(v, Some(value)) {
            panic!(
                "{}: {value:?} is declared within bounds, and refused: {e}",
                v.name
            );
        }
    }

    fn refused(v: &Variable, value: &str) {
        match parse(v, Some(value)) {
            Err(e) if e.var == v.name => {}
            Err(e) => panic!("{}={value:?} is refused, naming {}: {e}", v.name, e.var),
            Ok(_) => panic!(
                "{}: {value:?} is declared out of bounds ({}), and accepted",
                v.name,
                bounds(v)
            ),
        }
    }

    fn settings_parsed() -> impl Iterator<Item = &'static Variable> {
        VARIABLES.iter().filter(|v| v.parser == Parser::Settings)
    }

    #[test]
    fn every_variable_is_declared_once_with_a_meaning() {
        let mut seen = std::collections::HashSet::new();
        for v in VARIABLES {
            assert!(seen.insert(v.name), "{} is declared twice", v.name);
            assert!(!v.meaning.is_empty(), "{} has no meaning", v.name);
            assert!(
                !v.meaning.contains('|'),
                "{}: a `|` breaks the table",
                v.name
            );
        }
    }

    /// Setting a variable to its declared default changes nothing.
    #[test]
    fn every_declared_default_is_the_parsers() {
        for v in settings_parsed() {
            let DefaultValue::Value(value) = v.default else {
                continue;
            };
            let unset = parse(v, None).unwrap_or_else(|e| panic!("{}: {e}", v.name));
            let set = parse(v, Some(value)).unwrap_or_else(|e| panic!("{}: {e}", v.name));
            assert_eq!(
                set, unset,
                "{}: the declared default {value:?} is not what the parser takes when unset",
                v.name
            );
        }
    }

    /// Each bound is accepted, and what lies just past it is refused, naming the variable.
    #[test]
    fn every_declared_bound_is_the_parsers() {
        for v in settings_parsed() {
            match v.value {
                Value::Number { least, most } => {
                    accepted(v, &least.to_string());
                    accepted(v, &most.to_string());
                    refused(v, &(most + 1).to_string());
                    refused(
                        v,
                        &least.checked_sub(1).map_or("-1".into(), |n| n.to_string()),
                    );
                    refused(v, "many");
                }
                Value::Duration {
                    positive,
                    least,
                    most,
                } => {
                    let parsed = |b: &Bound| {
                        humantime::parse_duration(b.value)
                            .unwrap_or_else(|e| panic!("{}: {}: {e}", v.name, b.value))
                    };
                    let shown = |d: Duration| humantime::format_duration(d).to_string();
                    if let Some(b) = least {
                        accepted(v, b.value);
                        refused(v, &shown(parsed(&b) - Duration::from_millis(1)));
                    }
                    if let Some(b) = most {
                        accepted(v, b.value);
                        refused(v, &shown(parsed(&b) + Duration::from_secs(1)));
                    }
                    if positive {
                        refused(v, "0s");
                    }
                    refused(v, "fortnight");
                }
                Value::Size { least, most } => {
                    let bytes = |b: &Bound| {
                        crate::parse::parse_size(b.value)
                            .unwrap_or_else(|| panic!("{}: {}", v.name, b.value))
                    };
                    if let Some(b) = least {
                        accepted(v, b.value);
                        refused(v, &(bytes(&b) - 1).to_string());
                    }
                    if let Some(b) = most {
                        accepted(v, b.value);
                        refused(v, &(bytes(&b) + 1).to_string());
                    }
                    refused(v, "0");
                    refused(v, "lots");
                }
                Value::Count => {
                    accepted(v, "1");
                    refused(v, "0");
                    refused(v, "lots");
                }
                Value::Percent => {
                    for ok in ["0%", "100%", "25"] {
                        accepted(v, ok);
                    }
                    refused(v, "101%");
                    refused(v, "a tenth");
                }
                Value::Flag => {
                    for ok in ["true", "false", "1", "0"] {
                        accepted(v, ok);
                    }
                    refused(v, "maybe");
                }
                Value::OneOf(words) => {
                    for w in words {
                        accepted(v, w);
                    }
                    refused(v, "something-else");
                }
                Value::Text => {}
            }
        }
    }

    /// A bound that follows another setting names it, and its value is that setting's default.
    #[test]
    fn bounds_that_follow_a_setting_name_it() {
        for v in VARIABLES {
            let (least, most) = match v.value {
                Value::Duration { least, most, .. } | Value::Size { least, most } => (least, most),
                _ => continue,
            };
            for b in [least, most].into_iter().flatten() {
                if let Some(shown) = b.shown {
                    assert!(!shown.is_empty(), "{}", v.name);
                }
            }
        }
        assert_eq!(
            bounds(variable("IMGEST_FETCH_RESERVE").unwrap()),
            "more than 0, at most `IMGEST_MAX_BODY`"
        );
        assert_eq!(
            bounds(variable("IMGEST_DEDUP_WAIT").unwrap()),
            "`1s` – `25s`"
        );
        assert_eq!(bounds(variable("IMGEST_JPEG_QUALITY").unwrap()), "1 – 100");
    }
}
