//! End-to-end tests: the local runner's HTTP API on a real socket, over real SQLite and a real
//! directory, driven through `TestApp`'s verbs. Test names are sentences.

mod support;

mod audit;
mod aws;
mod backfill;
mod backfill_aws;
mod bad_input;
mod bootstraps;
mod browse;
mod concurrency;
mod concurrency_aws;
mod crawl;
mod crawl_aws;
mod dlq;
mod docs;
mod erasure;
mod feed;
mod give_up;
mod identity;
mod identity_aws;
mod images;
mod intake_senders;
mod intake_senders_aws;
mod inventory;
mod learning_aws;
mod lifecycle;
mod model;
mod offers;
mod placeholders;
mod presigned;
mod reference;
mod restore_aws;
mod results_aws;
mod retries_aws;
mod revalidation_aws;
mod scenario;
mod similar;
mod stats;
mod strong_hash;
mod sweep_aws;
mod template;
mod trust_aws;
mod watermark_aws;
mod webhooks;
