//! The intake function's second queue: crawls whose URLs all settled in the fetch or process
//! functions (which may not link offers nor send results), each `{"settle": {"offer",
//! "crawl_id"}}`, finished here (the offer's photos linked, the result sent); and pages of the
//! crawls that joined a popular URL's download, `{"joiners": {"url_hash", "group", "from"}}`, told its
//! outcome here a page a message. Only the functions' own roles may send to this queue (its
//! policy), and a message another sent goes to the dead letters as `forbidden`; the intake
//! queue, which partners send to, never takes these messages (the function tells its two
//! queues apart by the event's source).

use aws_lambda_events::event::sqs::SqsEvent;

use imgest_crawl::messages::SettleQueueMessage;
use imgest_crawl::{Crawler, SETTLE_QUEUE};
use imgest_lambda::batch::{BatchResponse, ItemError, run_batch};

pub async fn handle(crawler: &Crawler, event: SqsEvent) -> BatchResponse {
    let items = imgest_lambda::sqs_items(event, &crawler.settings().senders);
    let work = items.iter().map(|item| (item.id.clone(), item)).collect();
    let outcomes = run_batch(work, |item| async move {
        item.from_the_stack()?;
        let body = item.body.as_str();
        let message: SettleQueueMessage = serde_json::from_str(body).map_err(|e| {
            ItemError::unusable(format!("not a settled crawl nor a page of joiners: {e}"))
        })?;
        match message {
            SettleQueueMessage::Crawl(m) => crawler.finish_handed_off(&m.settle).await?,
            SettleQueueMessage::Joiners(m) => crawler.tell_joiners_page(&m.joiners).await?,
        }
        Ok(())
    })
    .await;
    outcomes
        .settle(
            &items,
            &imgest_lambda::dead_letters(crawler.service(), SETTLE_QUEUE),
        )
        .await
}
