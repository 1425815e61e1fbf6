//! The model's checks: its formulas against figures worked out by hand, the default scenario
//! (seed 001's peak on the template's defaults) against the breaches it has and against the
//! template itself, and scenarios that do not parse.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

fn repo(path: &str) -> String {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    std::fs::read_to_string(format!("{root}/{path}")).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn measured() -> Measured {
    Measured::load(&repo(DEFAULT_PROFILE), &repo(DEFAULT_CONTENTION)).unwrap()
}

fn scenario(path: &str) -> Scenario {
    Scenario::parse(&repo(path)).unwrap()
}

fn row<'a>(report: &'a Report, item: &str) -> &'a model::Row {
    report
        .rows
        .iter()
        .find(|r| r.item == item)
        .unwrap_or_else(|| panic!("no row {item:?}"))
}

#[test]
fn a_scenario_with_an_unknown_field_is_refused() {
    let mut json: serde_json::Value = serde_json::from_str(&repo(DEFAULT_SCENARIO)).unwrap();
    json["load"]["photos_per_hours"] = 1.into();
    let err = Scenario::parse(&json.to_string()).unwrap_err();
    assert!(err.to_string().contains("photos_per_hours"), "{err}");
}

#[test]
fn a_scenario_with_an_unknown_route_is_refused() {
    let mut json: serde_json::Value = serde_json::from_str(&repo(DEFAULT_SCENARIO)).unwrap();
    json["deployment"]["api"]["routes"]["POST /v1/image"] = serde_json::json!([10, 20]);
    let err = Scenario::parse(&json.to_string()).unwrap_err();
    assert!(err.to_string().contains("\"POST /v1/image\""), "{err}");
    json["deployment"]["api"]["routes"]
        .as_object_mut()
        .unwrap()
        .remove("POST /v1/image");
    assert!(Scenario::parse(&json.to_string()).is_ok());
}

#[test]
fn a_client_throttled_below_its_demand_is_a_breach_that_says_how_its_backlog_drains() {
    let mut s = scenario(DEFAULT_SCENARIO);
    s.deployment.biggest_client_rpm = 0.0;
    let report = model(&s, &measured()).unwrap();
    let client = row(
        &report,
        "the biggest client: downloads started/min vs its configured rate",
    );
    assert!(client.breach);
    assert_eq!(client.limit, Some(s.deployment.client_rpm));
    assert!(client.trace.contains("never drains"), "{}", client.trace);
    // At a rate above the off-peak demand, the backlog drains, and the row says when.
    s.deployment.biggest_client_rpm = client.value * (s.load.offpeak_share + 1.0) / 2.0;
    let report = model(&s, &measured()).unwrap();
    let client = row(
        &report,
        "the biggest client: downloads started/min vs its configured rate",
    );
    assert!(client.breach);
    assert!(client.trace.contains("h later"), "{}", client.trace);
}

#[test]
fn a_split_rate_limits_counter_is_read_by_its_share_of_the_instances_unless_the_client_is_held() {
    let m = measured();
    let s = scenario("docs/capacity/ten-times.suggested.json");
    let item = "rate limit of the biggest client: read units/s per counter";
    let demand = row(
        &model(&s, &m).unwrap(),
        "the biggest client: downloads started/min vs its configured rate",
    )
    .value;
    let under = model(&s, &m).unwrap();
    let instances: f64 = ["fetch-0", "fetch-1", "fetch-2"]
        .iter()
        .map(|f| row(&under, &format!("{f}: concurrency vs reserved")).value)
        .sum();
    let counters = imgest_aws::dynamodb::rate_limit_shards(
        s.deployment.biggest_client_rpm as u32,
        std::time::Duration::from_secs(60),
    ) as f64;
    assert!(counters > 1.0 && demand < s.deployment.biggest_client_rpm);
    // Under its rate: each counter's home instances, and one more counter each (a bound).
    let read = row(&under, item).value;
    assert!(
        (read - instances / counters * 2.0).abs() < 1.0,
        "{read} vs {instances}"
    );
    assert!(!row(&under, item).breach);
    // Held at a rate below its demand (still split): every instance reads every counter.
    let mut held = s.clone();
    held.deployment.biggest_client_rpm = demand * 0.9;
    let report = model(&held, &m).unwrap();
    assert!((row(&report, item).value - instances).abs() < 1.0);
    assert!(
        row(&report, item)
            .trace
            .contains("every instance walks every counter")
    );
}

#[test]
fn revalidations_are_routed_over_the_tiers_as_downloads_are() {
    let mut s = scenario(DEFAULT_SCENARIO);
    s.load.unchanged_past_window_share = 0.0;
    let without = model(&s, &measured()).unwrap();
    s.load.unchanged_past_window_share = 0.5;
    let with = model(&s, &measured()).unwrap();
    for t in 0..3 {
        let item = format!("fetch-{t}: messages in flight");
        assert!(
            row(&with, &item).value > row(&without, &item).value,
            "{item}: revalidations reach tier {t}"
        );
    }
}

#[test]
fn stage_times_follow_the_scenarios_latencies_and_the_functions_vcpu_share() {
    let s = scenario(DEFAULT_SCENARIO);
    let base = model(&s, &measured()).unwrap();
    // Slow enough that the waits outlast the intake function's CPU at its quota (below that,
    // they hide behind the throttling).
    let mut slow = s.clone();
    slow.latency_ms.dynamodb *= 20.0;
    slow.latency_ms.dynamodb_batch *= 20.0;
    let slow = model(&slow, &measured()).unwrap();
    let mut small = s.clone();
    small.deployment.intake.memory_mb /= 2.0;
    let small = model(&small, &measured()).unwrap();
    let item = "intake: concurrency vs its queues' maximum";
    assert!(row(&slow, item).value > row(&base, item).value);
    assert!(row(&small, item).value > row(&base, item).value);
    let gc = "GC: records collected/s vs orphans expiring";
    let mut small_gc = s.clone();
    small_gc.deployment.gc.memory_mb /= 2.0;
    let small_gc = model(&small_gc, &measured()).unwrap();
    assert!(row(&small_gc, gc).value < row(&base, gc).value);
}

#[test]
fn a_measured_chain_depth_sets_the_waits_at_the_mean_latency_of_the_mix() {
    let mut m = measured();
    let stage = "new: intake";
    let latency = scenario(DEFAULT_SCENARIO).latency_ms;
    let unmeasured = m.stage_time(stage, 1769.0, &latency, 1.0).unwrap();
    let s = m.cost.stages.get_mut(stage).unwrap();
    s.request_rounds_per_invocation = 4.0;
    let per_inv = s.items as f64 / s.invocations as f64;
    let mut slow = latency.clone();
    slow.dynamodb *= 2.0;
    slow.dynamodb_batch *= 2.0;
    slow.transaction *= 2.0;
    slow.sqs *= 2.0;
    slow.s3 *= 2.0;
    slow.s3_put *= 2.0;
    slow.cloudfront *= 2.0;
    let deep = m.stage_time(stage, 1769.0, &latency, 1.0).unwrap();
    let deep_slow = m.stage_time(stage, 1769.0, &slow, 1.0).unwrap();
    // Four requests deep, shared by the invocation's items, and twice as long at twice the
    // latencies; CPU as before.
    assert!(deep.wait_s > 0.0 && deep.wait_s * per_inv < 4.0 * 0.1);
    assert!((deep_slow.wait_s / deep.wait_s - 2.0).abs() < 1e-9);
    assert_eq!(deep.cpu_s, unmeasured.cpu_s);
    assert!(deep.source.contains("4.00 rounds/inv"), "{}", deep.source);
}

#[test]
fn results_are_held_against_the_regions_sns_quota() {
    let mut s = scenario(DEFAULT_SCENARIO);
    let item = "results: messages published/s vs SNS's publish quota";
    assert_eq!(
        row(&model(&s, &measured()).unwrap(), item).limit,
        Some(30_000.0)
    );
    s.region = "ap-southeast-2".into();
    assert_eq!(
        row(&model(&s, &measured()).unwrap(), item).limit,
        Some(1_500.0)
    );
    s.limits.sns_publish_per_s = 4_000.0;
    assert_eq!(
        row(&model(&s, &measured()).unwrap(), item).limit,
        Some(4_000.0)
    );
}

#[test]
fn the_default_scenario_is_carried_without_a_breach() {
    let report = model(&scenario(DEFAULT_SCENARIO), &measured()).unwrap();
    let breaches: Vec<&str> = report
        .rows
        .iter()
        .filter(|r| r.breach)
        .map(|r| r.item.as_str())
        .collect();
    assert_eq!(breaches, Vec::<&str>::new());
    for item in [
        "rate limit of the biggest client: write units/s vs a hot partition",
        "rate limit of the biggest client: writes per successful update",
        "the biggest host's health: write units/s vs a hot partition",
        "the biggest host's health: writes per successful update",
        "the biggest (client, host)'s tiers: writes per successful update",
        "the popular URL's record: size with every offer waiting",
        "the popular URL's waiters: write units/s on a group's partition",
        "the popular URL's group end marks: read units/s on a group's partition",
        "the popular URL's record: read units/s from joins",
        "the popular URL: writes per join",
        "the popular URL: waiters told in one invocation",
        "fetch-0: concurrency vs reserved",
        "fetch-1: concurrency vs reserved",
        "fetch-2: concurrency vs reserved",
        "fetch-0: bodies in flight vs body pool",
        "fetch-2: bodies in flight vs body pool",
        "account: concurrency at peak",
        "table: write units/s vs its warm throughput",
        "GC: records collected/s vs orphans expiring",
        "sweep: files judged/s vs a pass in sweep_pass_days",
        "backfill: photos/s vs a full backfill in backfill_days",
        "backfill: instances at BackfillRate vs BackfillConcurrency",
        "backfill: tasks queued/s vs BackfillRate",
        "table: write units/s with a backfill running vs its warm throughput",
        "fetch-2: invocation length vs timeout",
        "process: concurrency vs its queue's maximum",
        "intake: concurrency vs its queues' maximum",
        "a shard prefix: PUT/s",
        "POST /v1/images: requests/s vs throttle",
        "GET /v1/uploads/{upload_id}: requests/s vs throttle",
    ] {
        assert!(!row(&report, item).breach, "{item} should not breach");
    }
    assert!(report.rows.iter().all(|r| GROUPS.contains(&r.group)));
}

#[test]
fn fetch_concurrency_is_arrivals_per_batch_times_the_invocation_length() {
    let s = scenario(DEFAULT_SCENARIO);
    let m = measured();
    let report = model(&s, &m).unwrap();
    // Seed 001: 4 M photos an hour, 40/40/20 over the tiers, 1.1 attempts per photo; and the
    // revalidations, routed over the tiers as the downloads are: 10 unchanged photos re-sent
    // per new one, 14.3 % of them past the URL window.
    let p = 4_000_000.0 / 3600.0;
    let revalidations = p * 10.0 * 0.143;
    let lambda = [
        0.4 * (p + revalidations) + 0.1 * p,
        0.4 * (p + revalidations),
        0.2 * (p + revalidations),
    ];
    let new = [0.4 * p, 0.4 * p, 0.2 * p];
    let c = m.cpu_ms_per_item("new: fetch").unwrap().value;
    // A fetch invocation's own requests: its measured depth at the scenario's latencies.
    let (waits, _) = m.invocation_waits_s("new: fetch", &s.latency_ms).unwrap();
    assert!(waits > 0.0);
    for (t, lambda) in lambda.into_iter().enumerate() {
        let fx = &s.deployment.fetch[t];
        // Batches of 100 fill within each tier's window (1, 2 and 3 s) at these rates, five
        // pollers gathering them.
        assert!(lambda * fx.window_s / 5.0 >= 100.0, "tier {t}");
        let batch = 100.0;
        let success = new[t] / lambda;
        let vcpu = fx.memory_mb / 1769.0;
        // The later of the deadline (a task that outlasts it) and the answers plus the batch's
        // processing at the function's share of a vCPU, with its requests partly hidden.
        let cpu = batch * success * 0.9 * c / 1000.0;
        let span = ((cpu / vcpu).max(cpu + waits) * (cpu / vcpu + waits)).sqrt();
        let length = s.deployment.fetch_tiers_s[t].max(s.load.tier_mean_answer_s[t] + span);
        let expected = lambda / batch * length;
        let got = row(&report, &format!("fetch-{t}: concurrency vs reserved")).value;
        assert!(
            (got - expected).abs() < 1e-6 * expected,
            "tier {t}: {got} vs {expected}"
        );
        assert_eq!(
            row(&report, &format!("fetch-{t}: tasks per batch")).value,
            batch
        );
    }
    // With batches of 10 (the deployment before), the slowest tier alone needed over 600
    // instances for its 10 reserved.
    let mut before = s.clone();
    for fx in &mut before.deployment.fetch {
        (fx.batch, fx.memory_mb, fx.reserved) = (10.0, 256.0, 10.0);
    }
    let before = model(&before, &m).unwrap();
    assert!(row(&before, "fetch-2: concurrency vs reserved").value > 600.0);
    assert!(row(&before, "fetch-2: concurrency vs reserved").breach);
}

#[test]
fn a_read_then_write_item_is_held_against_half_its_round_trip_ceiling() {
    let s = scenario(DEFAULT_SCENARIO);
    let m = measured();
    let report = model(&s, &m).unwrap();
    // A host's learning as it was measured when it was read, then written on a condition: 16
    // write requests per update and outcomes lost. A read then a conditional write, 5 ms
    // each: at most 100 commits a second; hot at half.
    let mut rmw = measured();
    let host = rmw.contention.targets.get_mut("host").unwrap();
    host.write_requests_per_update = 16.08;
    host.lost = 570;
    // On the deployment of then: batches of 10, a flush of learning per invocation.
    let mut then = s.clone();
    for fx in &mut then.deployment.fetch {
        (fx.batch, fx.memory_mb) = (10.0, 256.0);
    }
    let before = model(&then, &rmw).unwrap();
    let ceiling = "the biggest host's health: commits/s vs half its read-then-write ceiling";
    assert_eq!(row(&before, ceiling).limit, Some(50.0));
    assert!(row(&before, ceiling).breach);
    // As measured now (adds to counts, 1.00 write request per update): no ceiling row.
    assert!(!report.rows.iter().any(|r| r.item == ceiling));
    // A popular image's unlinks are decrements (1.01 write requests per update measured): no
    // ceiling row, its write units held to the hot partition's instead.
    assert!(
        !report
            .rows
            .iter()
            .any(|r| r.item == "the popular image: changes/s vs half its read-then-write ceiling")
    );
    // Each change writes one of the hot image's shards in a transaction (two units), and its
    // item hardly ever.
    let shards = f64::from(imgest_aws::dynamodb::LINK_SHARDS);
    let shard = row(
        &report,
        "the popular image: write units/s on one of its link shards",
    );
    assert!(!shard.breach);
    assert_eq!(
        shard.value,
        2.0 * s.load.popular_image.changes_per_s / shards
    );
    let item = row(&report, "the popular image: write units/s on its item");
    assert!(
        item.value < 0.05 * s.load.popular_image.changes_per_s,
        "{item:?}"
    );
    // A popular URL's drain links every waiter to its hot image: spread over the shards, but
    // each link reads the image's item first, which one partition serves.
    let reads = m.contention("image").unwrap().0.reads_per_update;
    let drain = row(
        &report,
        "the popular URL's drain: seconds to tell every waiter",
    );
    assert!(drain.value >= s.load.popular_url.offers * reads / (0.5 * 3000.0) * 0.999);
    // The rate limit is written once per update (a conditional ADD): no ceiling row, its
    // write requests per update held to 1.05 instead.
    assert!(!report.rows.iter().any(|r| {
        r.item
            .starts_with("rate limit of the biggest client: commits/s")
    }));
    // Grants: a batch's writes for the client grow with its tasks in the batch, measured on
    // batches of one client's tasks (about 100): 30 % of a batch of 100 makes that share.
    let w = m
        .writes_per_invocation("new: fetch", "ratelimit")
        .unwrap()
        .value;
    let wcu = m.wcu_per_write("new: fetch", "ratelimit").unwrap().value;
    let p = 4_000_000.0 / 3600.0;
    let r = p * 10.0 * 0.143;
    let per_tier = [0.4 * (p + r) + 0.1 * p, 0.4 * (p + r), 0.2 * (p + r)];
    let fetch = m.stage("new: fetch").unwrap();
    let measured_batch = fetch.items as f64 / fetch.invocations as f64;
    let part = (0.3 * 100.0 / measured_batch).min(1.0);
    let expected: f64 = per_tier
        .iter()
        .map(|lambda| lambda / 100.0 * part * w * wcu)
        .sum();
    let got = row(
        &report,
        "rate limit of the biggest client: write units/s vs a hot partition",
    )
    .value;
    assert!(
        (got - expected).abs() < 1e-6 * expected,
        "{got} vs {expected}"
    );
}

#[test]
fn a_batch_holds_an_entity_with_the_complement_of_missing_it_every_time() {
    assert_eq!(model::in_batch(0.0, 10.0), 0.0);
    assert_eq!(model::in_batch(1.0, 10.0), 1.0);
    assert!((model::in_batch(0.3, 10.0) - (1.0 - 0.7_f64.powi(10))).abs() < 1e-12);
    assert!((model::in_batch(0.5, 1.0) - 0.5).abs() < 1e-12);
}

#[test]
fn a_deployment_sized_past_the_peak_passes_the_rows_it_sizes() {
    let mut s = scenario(DEFAULT_SCENARIO);
    for fx in &mut s.deployment.fetch {
        fx.reserved = 800.0;
    }
    s.deployment.intake.max_concurrency = 100.0;
    s.deployment
        .api
        .routes
        .insert("default".into(), [1000.0, 2000.0]);
    let report = model(&s, &measured()).unwrap();
    for item in [
        "fetch-1: concurrency vs reserved",
        "fetch-2: concurrency vs reserved",
        "intake: concurrency vs its queues' maximum",
        "POST /v1/images: requests/s vs throttle",
    ] {
        assert!(!row(&report, item).breach, "{item}");
    }
    // Raising reserved concurrency alone passes the account's limit instead.
    assert!(
        row(
            &report,
            "account: reserved concurrency vs what may be reserved"
        )
        .breach
    );
}

#[test]
fn the_default_scenario_matches_the_templates_defaults() {
    let s = scenario(DEFAULT_SCENARIO);
    let template = repo("template.yaml");
    let d = &s.deployment;
    // Long waits go through the state machine by default.
    assert_eq!(d.long_waits, scenario::LongWaits::StepFunctions);
    assert!(
        template.contains(
            "    Default: step-functions\n    AllowedValues: [step-functions, sqs-chain]"
        ),
        "the template's LongWaits default is not the scenario's long_waits"
    );
    let expect = |what: &str, found: String, value: f64| {
        let found: f64 = found
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("template {what}: {found:?}: {e}"));
        assert_eq!(found, value, "template {what}");
    };
    let reserved = parameter_default(&template, "FetchConcurrency");
    let tiers = parameter_default(&template, "FetchTiers");
    for (t, fx) in d.fetch.iter().enumerate() {
        let function = format!("FetchFunction{t}");
        expect(
            &format!("FetchConcurrency[{t}]"),
            reserved.split(',').nth(t).unwrap_or_default().to_owned(),
            fx.reserved,
        );
        expect(
            &format!("FetchTiers[{t}]"),
            tiers
                .split(',')
                .nth(t)
                .unwrap_or_default()
                .trim_end_matches('s')
                .to_owned(),
            d.fetch_tiers_s[t],
        );
        for (property, value) in [
            ("MemorySize", fx.memory_mb),
            ("Timeout", fx.timeout_s),
            ("BatchSize", fx.batch),
            ("MaximumBatchingWindowInSeconds", fx.window_s),
        ] {
            expect(
                &format!("{function}.{property}"),
                resource_property(&template, &function, property),
                value,
            );
        }
    }
    for (function, f) in [
        ("IntakeFunction", &d.intake),
        ("ProcessFunction", &d.process),
        ("WebhooksFunction", &d.webhooks),
    ] {
        expect(
            &format!("{function}.MemorySize"),
            resource_property(&template, function, "MemorySize"),
            f.memory_mb,
        );
        expect(
            &format!("{function}.BatchSize"),
            resource_property(&template, function, "BatchSize"),
            f.batch,
        );
    }
    // The maintenance runs: their length (the timeout less the handler's margin), how often
    // they start, and what GC does at once.
    expect(
        "ScheduledGcFunction.Timeout",
        resource_property(&template, "ScheduledGcFunction", "Timeout"),
        d.sweep.run_s + imgest_lambda::scheduled_gc::MARGIN.as_secs_f64(),
    );
    assert_eq!(
        parameter_default(&template, "GcSchedule"),
        "rate(15 minutes)"
    );
    assert_eq!(d.sweep.period_s, 900.0);
    // GC and the sweep run side by side on that schedule, each for its whole run: GC's duty is
    // a run's share of the period, and two instances run at once.
    assert!(d.gc.beside_sweep);
    // GC's parts: one by default, each a schedule of its own.
    expect(
        "GcParts",
        parameter_default(&template, "GcParts")
            .trim_matches('"')
            .to_owned(),
        d.gc.jobs,
    );
    assert!(
        template
            .contains("Input: !Sub '{\"job\": \"collect\", \"part\": 0, \"parts\": ${GcParts}}'")
    );
    assert!(
        template
            .contains("Input: !Sub '{\"job\": \"collect\", \"part\": 15, \"parts\": ${GcParts}}'")
    );
    expect(
        "SweepParts",
        parameter_default(&template, "SweepParts")
            .trim_matches('"')
            .to_owned(),
        d.sweep.jobs,
    );
    assert!(
        template
            .contains("Input: !Sub '{\"job\": \"sweep\", \"part\": 0, \"parts\": ${SweepParts}}'")
    );
    assert!(
        template
            .contains("Input: !Sub '{\"job\": \"sweep\", \"part\": 15, \"parts\": ${SweepParts}}'")
    );
    assert!((d.gc.duty - d.sweep.run_s / d.sweep.period_s).abs() < 1e-3);
    assert_eq!(d.maintenance_instances, 2.0);
    assert_eq!(d.gc.concurrency, imgest_flows::gc::GC_CONCURRENCY as f64);
    assert_eq!(d.sweep.checkpoint, scenario::Checkpoint::Page);
    // The one parameter the scenario sets beyond the defaults: at 10⁹ images the audit is the
    // inventory's comparison (the listing audit's segment would not fit a function).
    assert_eq!(d.audit.mode, scenario::AuditMode::Inventory);
    assert_eq!(parameter_default(&template, "AuditMode"), "listing");
    assert!(template.contains("AllowedValues: [listing, inventory]"));
    let mut listing = s.clone();
    listing.deployment.audit.mode = scenario::AuditMode::Listing;
    let listing = model(&listing, &measured()).unwrap();
    assert!(row(&listing, "audit: a segment's records in memory").breach);
    expect(
        "BackfillFunction.MemorySize",
        resource_property(&template, "BackfillFunction", "MemorySize"),
        d.backfill.memory_mb,
    );
    expect(
        "ApiFunction.MemorySize",
        resource_property(&template, "ApiFunction", "MemorySize"),
        d.api.memory_mb,
    );
    expect(
        "ScheduledGcFunction.MemorySize",
        resource_property(&template, "ScheduledGcFunction", "MemorySize"),
        d.gc.memory_mb,
    );
    expect(
        "ErasureFunction.MemorySize",
        resource_property(&template, "ErasureFunction", "MemorySize"),
        d.erasure_memory_mb,
    );
    // The other parameter the scenario sets: its biggest client's own rate. ClientRpm stays
    // the bound for a partner nobody sized.
    assert_eq!(parameter_default(&template, "ClientRpmOverrides"), "");
    assert!(d.biggest_client_rpm > d.client_rpm);
    for (name, value) in [
        ("ClientRpm", d.client_rpm),
        ("UploadRpm", d.upload_rpm),
        ("HostConcurrency", d.host_concurrency),
        ("IntakeConcurrency", d.intake.max_concurrency),
        ("ProcessMaxConcurrency", d.process.max_concurrency),
        ("WebhookReservedConcurrency", d.webhooks.max_concurrency),
        ("ApiConcurrency", d.api.reserved),
        ("BackfillRate", d.backfill.rate),
        ("BackfillReservedConcurrency", d.backfill.reserved),
        ("BackfillConcurrency", d.backfill.concurrency),
        ("BackfillSegments", d.backfill.segments),
        ("TableWarmWriteUnits", d.warm_wcu),
        ("TableWarmReadUnits", d.warm_rcu),
    ] {
        expect(name, parameter_default(&template, name), value);
    }
    // The upload routes throttled on their own (the HttpApi's `RouteSettings`), every other
    // route by the default.
    let upload_routes = [
        "POST /v1/images",
        "POST /v1/uploads",
        "GET /v1/uploads/{upload_id}",
    ];
    let mut throttled: Vec<&str> = d.api.routes.keys().map(String::as_str).collect();
    throttled.sort_unstable();
    let mut expected: Vec<&str> = upload_routes.iter().copied().chain(["default"]).collect();
    expected.sort_unstable();
    assert_eq!(throttled, expected, "routes throttled on their own");
    let settings = route_settings(&template);
    assert_eq!(settings, upload_routes, "the template's RouteSettings");
    for (route, rate_param, burst_param) in upload_routes
        .iter()
        .map(|r| {
            (
                *r,
                "ApiUploadThrottlingRateLimit",
                "ApiUploadThrottlingBurstLimit",
            )
        })
        .chain([(
            "default",
            "ApiThrottlingRateLimit",
            "ApiThrottlingBurstLimit",
        )])
    {
        let [rate, burst] = d.api.routes[route];
        expect(
            &format!("{route}: {rate_param}"),
            parameter_default(&template, rate_param),
            rate,
        );
        expect(
            &format!("{route}: {burst_param}"),
            parameter_default(&template, burst_param),
            burst,
        );
    }
}

/// The route keys under the HttpApi's `RouteSettings`, in order (read as text: no YAML crate).
fn route_settings(template: &str) -> Vec<String> {
    let header = "\n      RouteSettings:\n";
    let start = template
        .find(header)
        .unwrap_or_else(|| panic!("template.yaml has no RouteSettings"));
    template[start + header.len()..]
        .lines()
        .take_while(|l| l.starts_with("        ") || l.trim().starts_with('#'))
        .filter(|l| !l.starts_with("          ") && !l.trim().starts_with('#'))
        .map(|l| l.trim().trim_end_matches(':').trim_matches('"').to_owned())
        .collect()
}

/// The `Default:` of a template parameter (read as text: no YAML crate).
fn parameter_default(template: &str, name: &str) -> String {
    let header = format!("\n  {name}:\n");
    let start = template
        .find(&header)
        .unwrap_or_else(|| panic!("template.yaml has no parameter {name}"));
    template[start + header.len()..]
        .lines()
        .take_while(|l| l.starts_with("    "))
        .find_map(|l| l.trim().strip_prefix("Default:"))
        .map(|v| v.trim().trim_matches('"').to_owned())
        .unwrap_or_else(|| panic!("parameter {name} has no default"))
}

/// The first `property:` line inside a template resource (read as text: no YAML crate).
fn resource_property(template: &str, resource: &str, property: &str) -> String {
    let header = format!("\n  {resource}:\n");
    let start = template
        .find(&header)
        .unwrap_or_else(|| panic!("template.yaml has no resource {resource}"));
    let prefix = format!("{property}:");
    template[start + header.len()..]
        .lines()
        .take_while(|l| l.starts_with("    ") || l.trim().is_empty())
        .find_map(|l| l.trim().strip_prefix(prefix.as_str()))
        .map(|v| v.trim().to_owned())
        .unwrap_or_else(|| panic!("resource {resource} has no {property}"))
}

#[test]
fn erasures_are_held_against_their_partition_their_function_and_the_cdn_quota() {
    let m = measured();
    // The optional fields: a scenario without them reads with no erasures.
    let mut json: serde_json::Value = serde_json::from_str(&repo(DEFAULT_SCENARIO)).unwrap();
    json["load"]
        .as_object_mut()
        .unwrap()
        .remove("erasures_per_s");
    json["latency_ms"].as_object_mut().unwrap().remove("s3");
    json["limits"]
        .as_object_mut()
        .unwrap()
        .remove("cdn_paths_in_progress");
    let without = Scenario::parse(&json.to_string()).unwrap();
    assert_eq!(without.load.erasures_per_s, 0.0);
    assert_eq!(without.latency_ms.s3, 20.0);
    assert_eq!(without.limits.cdn_paths_in_progress, 3000.0);
    // Ten a second: three public files each, two minutes in progress, is 3,600 paths, over
    // CloudFront's 3,000; the function's runs still carry them (32 at once, 460 ms each, or
    // their CPU at a seventh of a vCPU if longer).
    let mut busy = scenario(DEFAULT_SCENARIO);
    busy.load.erasures_per_s = 10.0;
    let report = model(&busy, &m).unwrap();
    let cdn = row(
        &report,
        "CDN: invalidation paths in progress vs the distribution's quota",
    );
    assert!((cdn.value - 3600.0).abs() < 1e-9 && cdn.breach, "{cdn:?}");
    let runs = row(
        &report,
        "erasure function: erasures/s its runs get through vs erasures filed",
    );
    let cpu = m
        .sweep_costs(crate::cost::SWEEP_STAGE)
        .unwrap()
        .cpu_ms_per_request;
    let wave_s = 0.46_f64.max(32.0 * 12.0 * cpu / (256.0 / 1769.0) / 1000.0);
    assert!(
        (runs.value - 32.0 * 0.9 / wave_s).abs() < 1e-6 && !runs.breach,
        "{runs:?}"
    );
    // Far more: past what its runs get through.
    busy.load.erasures_per_s = 100.0;
    let report = model(&busy, &m).unwrap();
    assert!(
        row(
            &report,
            "erasure function: erasures/s its runs get through vs erasures filed"
        )
        .breach
    );
}

/// The committed scenarios (the JSON files of docs/capacity beside the profiles), each with
/// the scenario under its suggested deployment beside it (`uploads.suggested.json` for
/// `uploads.json`, written by `--suggest --out`).
fn committed_scenarios() -> Vec<String> {
    let dir = format!("{}/../docs/capacity", env!("CARGO_MANIFEST_DIR"));
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| {
            n.ends_with(".json")
                && !n.ends_with(".suggested.json")
                && n != "profile.json"
                && n != "contention.json"
                && n != "validation.json"
        })
        .collect();
    names.sort();
    names
}

#[test]
fn every_committed_scenario_passes_under_its_suggested_deployment_as_committed() {
    let names = committed_scenarios();
    assert!(names.len() >= 5, "{names:?}");
    let m = measured();
    for name in names {
        let s = scenario(&format!("docs/capacity/{name}"));
        let under = suggested(&s, &m).unwrap();
        let breaches: Vec<String> = model(&under, &m)
            .unwrap()
            .rows
            .into_iter()
            .filter(|r| r.breach)
            .map(|r| r.item)
            .collect();
        // Ten times seed 001's peak included: no limit left that no setting or quota raise
        // lifts (single items, partitions, a queue's in-flight limit, a function's own
        // throughput).
        assert!(
            breaches.is_empty(),
            "{name} under its suggestion: {breaches:?}"
        );
        let committed = name.replace(".json", ".suggested.json");
        let file = scenario(&format!("docs/capacity/{committed}"));
        assert_eq!(
            file, under,
            "docs/capacity/{committed} is not what `imgest-bench capacity --scenario docs/capacity/{name} --suggest --out` writes now"
        );
    }
}

#[test]
fn below_a_whole_vcpu_an_items_waits_hide_behind_its_cpu_quota() {
    let t = |cpu_s: f64, wait_s: f64, vcpu: f64, decode: bool| measured::StageTime {
        cpu_s,
        wait_s,
        vcpu,
        decode,
        source: String::new(),
    };
    // 10 ms of CPU on a core at a quarter of a vCPU: 40 ms; 20 ms of waits fit in the 30 ms the
    // quota leaves idle.
    assert!((t(0.040, 0.020, 0.25, false).total() - 0.040).abs() < 1e-12);
    // 50 ms of waits do not: CPU then waits.
    assert!((t(0.040, 0.050, 0.25, false).total() - 0.060).abs() < 1e-12);
    // On a whole core they add up.
    assert!((t(0.010, 0.020, 1.0, false).total() - 0.030).abs() < 1e-12);
    // A decode's waits hide only in part: between 40 ms (hidden) and 60 ms (added).
    let decode = t(0.040, 0.020, 0.25, true).total();
    assert!(
        (decode - (0.040_f64 * 0.060).sqrt()).abs() < 1e-12,
        "{decode}"
    );
    // On a whole core, the same as any other item's.
    assert!((t(0.010, 0.020, 1.0, true).total() - 0.030).abs() < 1e-12);
}

#[test]
fn a_fetch_invocation_lasts_the_later_of_its_deadline_and_its_answers_plus_processing() {
    // 5 s of CPU at 0.29 of a vCPU after answers at 0.3 s, and 0.5 s of its requests: past a
    // 1-s deadline, the requests hidden in part.
    let long = fetch_invocation_s(1.0, 0.3, 5.0, 0.29, 0.5);
    assert!((long - (0.3 + (5.0_f64 / 0.29 * (5.0 / 0.29 + 0.5)).sqrt())).abs() < 1e-9);
    // 1 s of CPU after answers at 15 s ends before a 30-s deadline.
    assert_eq!(fetch_invocation_s(30.0, 15.0, 0.29, 0.29, 0.5), 30.0);
}

#[test]
fn a_gc_round_lists_its_records_then_collects_them_side_by_side() {
    let g = measured::GcRecord {
        record: measured::StageTime {
            cpu_s: 0.001,
            wait_s: 0.030,
            vcpu: 1.0,
            decode: false,
            source: String::new(),
        },
        listing_s: 0.016,
        listing_cpu_s: 0.0,
        records_per_round: 200.0,
    };
    // 200 records: 0.2 s of CPU against ⌈200 ÷ 64⌉ = 4 waves of 31 ms chains: CPU-bound.
    let rate = gc_job_rate(&g, 64.0, 200.0);
    assert!((rate - 200.0 / (0.016 + 0.2)).abs() < 1e-6, "{rate}");
    // One at a time, the chains are the bound.
    let rate = gc_job_rate(&g, 1.0, 200.0);
    assert!(
        (rate - 200.0 / (0.016 + 200.0 * 0.031)).abs() < 1e-6,
        "{rate}"
    );
}

#[test]
fn a_sweep_page_is_its_requests_one_after_another() {
    let l = scenario(DEFAULT_SCENARIO).latency_ms;
    let page = SweepPage {
        files: 1000.0,
        batch_gets: 3.0,
        saves: 1.0,
        reads: 0.0,
    };
    // A LIST, three lookups and a checkpoint, with 0.2 ms of CPU each, on a whole core.
    let ms = l.s3 + 3.0 * l.dynamodb_batch + l.dynamodb + 5.0 * 0.2;
    let rate = sweep_job_rate(page, 0.2, 1.0, &l);
    assert!((rate - 1000.0 / (ms / 1000.0)).abs() < 1e-6, "{rate}");
}

#[test]
fn a_scenario_may_give_the_sweeps_rate_it_measured() {
    let mut s = scenario(DEFAULT_SCENARIO);
    let item = "sweep: files judged/s vs a pass in sweep_pass_days";
    let computed = row(&model(&s, &measured()).unwrap(), item).value;
    assert!(computed > 0.0);
    s.deployment.sweep.files_per_s_per_job = Some(1234.0);
    let report = model(&s, &measured()).unwrap();
    let r = row(&report, item);
    assert!(r.trace.contains("files_per_s_per_job"), "{}", r.trace);
    assert!((r.value - 1234.0 * s.deployment.sweep.jobs * (870.0 / 900.0)).abs() < 1e-6);
}

#[test]
fn observed_latencies_replace_each_class_by_its_requests_mean() {
    let l = scenario(DEFAULT_SCENARIO).latency_ms;
    let observed: std::collections::BTreeMap<String, (f64, u64)> = [
        ("dynamodb.GetItem".to_owned(), (2.0, 3)),
        ("dynamodb.PutItem".to_owned(), (6.0, 1)),
        ("s3.PUT".to_owned(), (9.0, 2)),
        ("sqs.ReceiveMessage".to_owned(), (1000.0, 5)),
    ]
    .into_iter()
    .collect();
    let o = l.observed(&observed);
    assert!((o.dynamodb - 3.0).abs() < 1e-12);
    assert!((o.s3_put - 9.0).abs() < 1e-12);
    // Nothing observed of these: the scenario's own; the trigger's receives are no class.
    assert_eq!(o.transaction, l.transaction);
    assert_eq!(o.sqs, l.sqs);
}

#[test]
fn a_part_of_gc_lists_its_share_of_the_buckets_as_deep_and_a_parts_th_of_their_cpu() {
    let s = scenario(DEFAULT_SCENARIO);
    let m = measured();
    let per = |parts: f64| {
        m.per_record(
            "gc: collect",
            s.deployment.gc.memory_mb,
            &s.latency_ms,
            s.deployment.gc.buckets,
            parts,
        )
        .unwrap()
    };
    let (whole, quarter) = (per(1.0), per(4.0));
    assert_eq!(
        whole.listing_s, quarter.listing_s,
        "its Queries in a row: as many"
    );
    assert!(quarter.listing_cpu_s < whole.listing_cpu_s);
    assert!(
        quarter.listing_cpu_s > 0.0,
        "its candidates' records are still read"
    );
    assert_eq!(
        whole.record.cpu_s, quarter.record.cpu_s,
        "a record costs what it cost"
    );
    // So four parts collect more than four times one part's share would at the whole's rate.
    let rate = |g| model::gc_job_rate(g, s.deployment.gc.concurrency, 200.0);
    assert!(rate(&quarter) >= rate(&whole));
}

#[test]
fn near_duplicate_indexing_adds_its_writes_to_the_table_and_a_report_its_reads() {
    let m = measured();
    let mut s = scenario("docs/capacity/default.json");
    let off = model(&s, &m).unwrap();
    assert!(
        !off.rows
            .iter()
            .any(|r| r.item.starts_with("near-duplicate")),
        "off by default: no row"
    );
    let table = |r: &Report, item: &str| row(r, item).value;
    s.deployment.similar = super::scenario::Similar::Index;
    let index = model(&s, &m).unwrap();
    let writes = row(&index, "near-duplicate index: write units/s").value;
    assert!(writes >= 16.0 * s.load.uploads_per_s * (1.0 - s.load.upload_dedup_share));
    let before = table(&off, "table: write units/s vs its warm throughput");
    let after = table(&index, "table: write units/s vs its warm throughput");
    assert!(
        (after - before - writes).abs() < 1e-6,
        "{before} + {writes} != {after}"
    );
    for busiest in [
        "near-duplicate index: the busiest bucket's write units/s",
        "near-duplicate index: the busiest point key's write units/s",
    ] {
        assert!(row(&index, busiest).limit.is_some(), "{busiest}");
    }
    // Points are filed beside the hashes: more than the hashes' 16 entries a new photo.
    assert!(writes > 20.0 * s.load.uploads_per_s * (1.0 - s.load.upload_dedup_share));
    assert!(
        !index
            .rows
            .iter()
            .any(|r| r.item.starts_with("near-duplicate lookups"))
    );
    s.deployment.similar = super::scenario::Similar::Report;
    let report = model(&s, &m).unwrap();
    let reads = row(&report, "near-duplicate lookups: read units/s").value;
    assert!(reads > 0.0);
    assert!(
        row(
            &report,
            "near-duplicate lookups: the busiest point key's read units/s"
        )
        .limit
        .is_some()
    );
    let before = table(&off, "table: read units/s vs its warm throughput");
    let after = table(&report, "table: read units/s vs its warm throughput");
    assert!((after - before - reads).abs() < 1e-6);
    assert!(
        row(&report, "near-duplicate index: writes, lookups, storage").value
            > row(&index, "near-duplicate index: writes, lookups, storage").value
    );
}
