//! What the flows count: one counter per event, through the `metrics` facade (see
//! [`imgest_core::telemetry::counters`]), read back per service for the CLI's summaries, the
//! benchmarks and the tests.

imgest_core::counters! {
    /// The service's counters (uploads, processing, GC, the sweep, backfill).
    pub struct FlowCounters;
    /// What a service's flows did ([`Service::counts`](crate::Service::counts)).
    struct FlowCounts;
    /// Uploads (and crawled photos) of new content, processed and stored.
    uploads_new,
    /// Uploads of content already stored: nothing decoded.
    uploads_deduplicated,
    /// Photos decoded and resized: the expensive step that dedup avoids.
    pipeline_runs,
    /// Photos the pipeline refused (bad or hostile input).
    pipeline_rejections,
    /// Photos whose unusable colour profile was ignored (their pixels taken as sRGB).
    colour_profiles_ignored,
    /// Files written (originals and variants).
    files_written,
    /// Expired images collected by GC.
    gc_images_deleted,
    /// Files of collected images deleted.
    gc_files_deleted,
    /// Files no record owns, deleted by the sweep.
    sweep_files_deleted,
    /// Photos re-processed by a backfill (also counted in `pipeline_runs`).
    backfill_runs,
    /// Queue messages given up on: sent to their queue's dead letters with their reason.
    messages_dead_lettered,
    /// Record writes answered "refused" or failed that had been applied: the answer was lost.
    record_answers_lost,
    /// Bodies whose MD5 named a stored image with another SHA-256 (an MD5 collision): refused.
    hash_collisions,
    /// Images erased (a seller's erasure or an operator's purge): record, files and versions.
    images_erased,
}

imgest_core::counters! {
    /// A crawler's counters.
    pub struct CrawlCounters;
    /// What a crawler did ([`Crawler::counts`](crate::crawl::Crawler::counts)): what
    /// `imgest crawl` and the crawl benchmark report.
    struct CrawlCounts;
    /// Crawl requests taken in.
    offers_received,
    /// Crawl requests that repeated the offer's last one: settled from its crawl record.
    offers_unchanged,
    /// Of those, past the URL window: crawled again in the background (conditional requests).
    offers_revalidated,
    /// Revalidations that found every photo as told: nothing linked or sent.
    revalidations_unchanged,
    /// Revalidations that found a photo replaced or gone: linked again, a new result sent.
    revalidations_changed,
    /// Crawls whose every URL settled (the offer's photos set, the result sent).
    offers_settled,
    /// Photo URLs in crawl requests.
    urls_received,
    /// URLs settled at intake from their URL record (a recent success or a permanent failure).
    urls_from_cache,
    /// URLs that joined a download already running.
    urls_joined,
    /// Downloads queued to a tier.
    downloads_queued,
    /// Requests sent to partner hosts.
    download_attempts,
    /// Downloads that got a photo's body.
    downloads_ok,
    /// Conditional requests answered "not modified".
    not_modified,
    /// Downloads cut at their tier's deadline.
    timeouts,
    /// Downloads retried after a transient failure.
    retries,
    /// Downloads moved to a slower tier.
    tier_moves,
    /// Downloads put back because the client's budget, a host's backoff or memory said "later".
    deferrals,
    /// Downloads put back: no memory for their body yet in this process (also `deferrals`).
    memory_deferrals,
    /// URLs that failed for good in this crawl.
    urls_failed,
    /// New photos processed from downloads.
    photos_new,
    /// Downloaded photos already stored.
    photos_deduplicated,
    /// New photos processed by the process that downloaded them (not handed off).
    processed_here,
    /// Bodies not read: a trusted hash header named a known image.
    bodies_skipped,
    /// URLs settled as `host_unavailable` by an open circuit (at intake or before a download).
    circuit_refusals,
    /// Queued crawl requests whose sender may not act for their client (dead-lettered).
    crawls_forbidden,
    /// Fetch tasks and downloaded photos not of their URL's running download (dropped).
    tasks_not_leased,
    /// Settled crawls whose record or outcomes the store did not bear out (not finished).
    crawls_unverified,
    /// Results delivered to their client's webhook endpoint (a 2xx).
    webhooks_delivered,
    /// Webhook attempts that failed (an answer other than 2xx, a timeout, a failed connection).
    webhooks_failed,
}
