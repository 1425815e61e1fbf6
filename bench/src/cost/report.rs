//! The cost tables: per stage (what was measured and what it costs per million photos), the
//! requests behind them, and per scenario against the targets in docs/cost.md.

use super::Options;
use super::bill::{Sizing, StageBill, bill, price};
use super::proxy::{StageCounts, Tally};

/// What a million photos are, in the bill.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// New crawled photos: downloaded, processed, stored, linked, and one day collected.
    New,
    /// URLs already downloaded, in offers that changed: linked, nothing downloaded.
    KnownUrls,
    /// Offers re-sent unchanged.
    Unchanged,
    /// Offers deleted.
    Deleted,
}

/// The bill's rows: a scenario, its title, its target ($ per million photos, without S3
/// PUTs), and the stages it adds up. A new crawled photo's target is the bill as it stood
/// before the results feed, webhooks and hot images were added ($3.913): what they cost is won
/// back elsewhere, not added to the bill.
const SCENARIOS: [(Scenario, &str, Option<f64>, &[&str]); 5] = [
    (
        Scenario::New,
        "new crawled photos",
        Some(3.913),
        &[
            "intake",
            "fetch",
            "process",
            "settle",
            "results",
            "webhooks",
            "ttl-cleanup",
        ],
    ),
    (
        Scenario::KnownUrls,
        "URL-dedup hits in changed offers",
        Some(2.0),
        &["intake", "results", "webhooks"],
    ),
    (
        Scenario::Unchanged,
        "photos of re-sent unchanged offers",
        Some(0.20),
        &["intake", "results", "webhooks"],
    ),
    (
        Scenario::Deleted,
        "photos unlinked by deleting an offer, still linked elsewhere",
        None,
        &[STILL_LINKED],
    ),
    (
        Scenario::Deleted,
        "photos unlinked by deleting their last offer (orphans)",
        None,
        &[LAST_LINK],
    ),
];

/// The deletion stages: photos another offer still links, and photos left orphaned.
pub const STILL_LINKED: &str = "delete offer, still linked";
pub const LAST_LINK: &str = "delete offer, last link";

impl Scenario {
    fn prefix(self) -> &'static str {
        match self {
            Self::New => "new",
            Self::KnownUrls => "known URLs",
            Self::Unchanged => "unchanged",
            Self::Deleted => "deleted",
        }
    }

    /// The tally's name of one of this scenario's stages.
    pub fn stage(self, stage: &str) -> String {
        format!("{}: {stage}", self.prefix())
    }
}

/// How each stage's function is sized.
pub(super) fn sizing(stage: &str) -> Sizing {
    match stage {
        // An offer is deleted through the API function (a full vCPU for inline uploads).
        STILL_LINKED | LAST_LINK => Sizing::Fixed(1769),
        // Sized for the largest photo the fetch functions hand it, not for these samples
        // (template.yaml).
        "process" => Sizing::Fixed(768),
        // It processes the new photos it downloads: sized as deployed, not by this process's RSS.
        "fetch" => Sizing::Fixed(512),
        // As deployed (template.yaml): it only waits on partners' endpoints.
        "webhooks" => Sizing::Fixed(256),
        // (The results stage is the marketplace's: no invocations, so no Lambda cost.)
        _ => Sizing::Cheapest,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn per_m(dollars: f64, photos: usize) -> f64 {
    dollars / photos as f64 * 1e6
}

pub fn print(tally: &Tally, photos: usize, options: &Options) {
    println!(
        "\n{photos} photos: {} offers x {} photos; partner host answers in {} ms; per-photo figures divide by {photos}.\n",
        options.offers,
        options.photos_per_offer,
        options.host_latency.as_millis()
    );
    println!(
        "| stage | invocations | items/inv | CPU ms/inv | AWS ms/inv (modeled) | emulator ms/inv | peak RSS MB | memory MB | WCU/photo | RCU/photo | SQS req/photo | S3 PUT+LIST/photo | S3 GET/photo | $/M photos (w/o S3 PUTs) | S3 PUTs $/M |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut totals = Vec::new();
    for (scenario, title, target, stages) in SCENARIOS {
        let mut sum = StageBill::default();
        for stage in stages {
            let name = scenario.stage(stage);
            let counts = tally.stage(&name);
            let b = bill(&counts, sizing(stage));
            print_stage(&name, &counts, &b, photos);
            sum.add(&b);
        }
        totals.push((title, target, sum.scaled(1e6 / photos as f64)));
    }

    println!("\nRequests per photo, by stage:");
    for (scenario, _, _, stages) in SCENARIOS {
        for stage in stages {
            let name = scenario.stage(stage);
            let counts = tally.stage(&name);
            let list = counts
                .requests
                .iter()
                .map(|(op, n)| format!("{op} {:.3}", *n as f64 / photos as f64))
                .collect::<Vec<_>>()
                .join(", ");
            let per_photo = |units: &std::collections::BTreeMap<String, f64>| {
                units
                    .iter()
                    .map(|(kind, u)| format!("{kind} {:.2}", u / photos as f64))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let writes = per_photo(&counts.write_units_by_record);
            let reads = per_photo(&counts.read_units_by_record);
            let retried = if counts.retried > 0 {
                format!("; {} items failed and were delivered again", counts.retried)
            } else {
                String::new()
            };
            println!(
                "- {name}: {list}; write units by record: {writes}; GetItem read units by record: {reads}{retried}"
            );
        }
    }

    let largest = tally
        .largest_items()
        .iter()
        .map(|(kind, bytes)| format!("{kind} {bytes} B"))
        .collect::<Vec<_>>()
        .join(", ");
    println!("\nLargest item written, by record (a write unit is 1 KB): {largest}");

    println!(
        "\nPer million photos (list prices: Lambda arm64 ${}/GB-s + ${:.2}/M requests, DynamoDB ${:.3}/M WCU, ${:.3}/M RCU, SQS ${:.2}/M, S3 PUT ${:.0}/M, GET ${:.2}/M):\n",
        price::LAMBDA_GB_SECOND,
        price::LAMBDA_REQUEST * 1e6,
        price::DYNAMODB_WRITE_UNIT * 1e6,
        price::DYNAMODB_READ_UNIT * 1e6,
        price::SQS_REQUEST * 1e6,
        price::S3_PUT_CLASS * 1e6,
        price::S3_GET_CLASS * 1e6,
    );
    println!(
        "| per million | Lambda | DynamoDB | SQS | S3 GET | total | target | S3 PUTs on top |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for (title, target, b) in totals {
        let total = b.without_puts();
        let target = target.map_or("-".to_owned(), |t| {
            format!("≤ ${t:.2} {}", if total <= t { "met" } else { "MISSED" })
        });
        println!(
            "| {title} | ${:.3} | ${:.3} | ${:.3} | ${:.3} | **${total:.3}** | {target} | ${:.3} |",
            b.lambda, b.dynamodb, b.sqs, b.s3_gets, b.s3_puts,
        );
    }
}

fn print_stage(name: &str, c: &StageCounts, b: &StageBill, photos: usize) {
    let p = photos as f64;
    let memory = if c.invocations == 0 {
        "-".to_owned()
    } else {
        b.memory_mb.to_string()
    };
    println!(
        "| {name} | {} | {:.1} | {:.1} | {:.0} | {:.0} | {:.0} | {memory} | {:.2} | {:.2} | {:.3} | {:.3} | {:.3} | ${:.3} | ${:.3} |",
        c.invocations,
        if c.invocations == 0 {
            0.0
        } else {
            c.items as f64 / c.invocations as f64
        },
        median(c.runs.iter().map(|r| r.cpu_ms).collect()),
        median(c.runs.iter().map(|r| r.modeled_ms).collect()),
        median(c.runs.iter().map(|r| r.measured_ms).collect()),
        c.peak_rss_mb,
        c.write_units / p,
        c.read_units / p,
        c.sqs_requests as f64 / p,
        c.s3_put_class as f64 / p,
        c.s3_get_class as f64 / p,
        per_m(b.without_puts(), photos),
        per_m(b.s3_puts, photos),
    );
}
