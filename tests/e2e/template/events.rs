//! What the functions' triggers must say, and where the alarms go, as the template writes them:
//! every batch trigger reports partial batch failures (else one bad message fails, and
//! redelivers, its whole batch), each SQS function gives up on a message on its queue's last
//! receive (its `IMGEST_MAX_RECEIVES` is the queue's `maxReceiveCount`, so that SQS never moves
//! a message without the function's reason), and the alarm topic reaches someone.

/// One trigger of a function (an entry of its `Events`).
#[derive(Debug)]
struct Trigger {
    function: String,
    name: String,
    kind: String,
    text: String,
}

/// Every template function's triggers, read as text: the keys one level below `Events:`.
fn triggers(template: &str) -> Vec<Trigger> {
    let mut out = Vec::new();
    for function in super::resources_of(template, "AWS::Serverless::Function") {
        let text = super::resource(template, &function);
        let mut lines = text.lines().skip_while(|l| l.trim() != "Events:");
        let Some(events) = lines.next() else {
            continue;
        };
        let events_indent = events.len() - events.trim_start().len();
        let mut current: Option<Trigger> = None;
        for line in lines {
            let trimmed = line.trim_start();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let indent = line.len() - trimmed.len();
            if indent <= events_indent {
                break;
            }
            if indent == events_indent + 2 {
                out.extend(current.take());
                current = Some(Trigger {
                    function: function.clone(),
                    name: trimmed.trim_end_matches(':').to_owned(),
                    kind: String::new(),
                    text: String::new(),
                });
            } else if let Some(t) = current.as_mut() {
                if indent == events_indent + 4
                    && let Some(kind) = trimmed.strip_prefix("Type: ")
                {
                    t.kind = kind.trim().to_owned();
                }
                t.text.push_str(trimmed);
                t.text.push('\n');
            }
        }
        out.extend(current);
    }
    out
}

#[test]
fn every_batch_trigger_reports_partial_batch_failures() {
    let template = super::text();
    let triggers = triggers(&template);
    let batches: Vec<&Trigger> = triggers
        .iter()
        .filter(|t| matches!(t.kind.as_str(), "SQS" | "DynamoDB" | "Kinesis"))
        .collect();
    assert!(
        batches.iter().any(|t| t.kind == "DynamoDB"),
        "no stream trigger found: {triggers:?}"
    );
    for t in &batches {
        assert!(
            t.text
                .contains("FunctionResponseTypes: [ReportBatchItemFailures]"),
            "{}'s trigger {} ({}) does not report partial batch failures \
             (`FunctionResponseTypes: [ReportBatchItemFailures]`): one bad message would fail \
             its whole batch",
            t.function,
            t.name,
            t.kind
        );
    }
}

#[test]
fn each_sqs_function_knows_its_queues_receive_limit() {
    let template = super::text();
    let triggers = triggers(&template);
    let sqs: Vec<&Trigger> = triggers.iter().filter(|t| t.kind == "SQS").collect();
    assert!(!sqs.is_empty(), "no SQS trigger found");
    for t in sqs {
        let queue = t
            .text
            .lines()
            .find_map(|l| l.strip_prefix("Queue: !GetAtt "))
            .unwrap_or_else(|| panic!("{}'s trigger {} names no queue", t.function, t.name))
            .trim_end_matches(".Arn");
        let limit = super::value_of(&super::resource(&template, queue), "maxReceiveCount")
            .unwrap_or_else(|| panic!("{queue} has no maxReceiveCount"));
        let told = super::value_of(
            &super::resource(&template, &t.function),
            "IMGEST_MAX_RECEIVES",
        )
        .unwrap_or_else(|| {
            panic!(
                "{} consumes {queue} and does not set IMGEST_MAX_RECEIVES (its \
                     maxReceiveCount, {limit})",
                t.function
            )
        });
        assert_eq!(
            told, limit,
            "{}'s IMGEST_MAX_RECEIVES is not {queue}'s maxReceiveCount",
            t.function
        );
    }
}

/// The topic every alarm notifies: the stack's own, or the operator's.
const ALARM_TOPIC: &str = "!If [CreateAlarmTopic, !Ref AlarmTopic, !Ref AlarmTopicArn]";

#[test]
fn the_alarms_reach_someone() {
    let template = super::text();
    let subscription = super::resource(&template, "AlarmEmailSubscription");
    for (key, value) in [
        ("Type", "AWS::SNS::Subscription"),
        ("Condition", "HasAlarmEmail"),
        ("Protocol", "email"),
        ("Endpoint", "!Ref AlarmEmail"),
        ("TopicArn", ALARM_TOPIC),
    ] {
        assert_eq!(
            super::value_of(&subscription, key).as_deref(),
            Some(value),
            "AlarmEmailSubscription's {key}"
        );
    }
    let topic = super::resource(&template, "AlarmTopic");
    assert_eq!(
        super::value_of(&topic, "Condition").as_deref(),
        Some("CreateAlarmTopic")
    );
    // A stack whose alarms would reach no one does not deploy.
    let rules = template
        .split_once("\nRules:\n")
        .expect("template.yaml has Rules")
        .1;
    let rule: String = rules
        .lines()
        .take_while(|l| l.is_empty() || l.starts_with(' '))
        .collect::<Vec<_>>()
        .join("\n");
    for condition in [
        "!Not [!Equals [!Ref AlarmEmail, \"\"]]",
        "!Not [!Equals [!Ref AlarmTopicArn, \"\"]]",
    ] {
        assert!(
            rule.contains("- Assert: !Or") && rule.contains(condition),
            "the rule that an alarm reaches someone lacks {condition}: {rule}"
        );
    }
    // And every alarm notifies that topic.
    let alarms = super::resources_of(&template, "AWS::CloudWatch::Alarm");
    assert!(alarms.len() > 10, "{alarms:?}");
    for alarm in alarms {
        assert_eq!(
            super::value_of(&super::resource(&template, &alarm), "AlarmActions").as_deref(),
            Some(format!("[{ALARM_TOPIC}]").as_str()),
            "{alarm} does not notify the alarm topic"
        );
    }
}

#[test]
fn the_trigger_reader_finds_each_trigger_and_its_settings() {
    let template = "Resources:\n  Fn:\n    Type: AWS::Serverless::Function\n    Properties:\n      Events:\n        Requests:\n          Type: SQS\n          Properties:\n            Queue: !GetAtt Q.Arn\n            FunctionResponseTypes: [ReportBatchItemFailures]\n        # a comment\n        Tick:\n          Type: Schedule\n      LoggingConfig:\n        LogGroup: !Ref G\n";
    let found = triggers(template);
    assert_eq!(found.len(), 2, "{found:?}");
    assert_eq!(
        (found[0].name.as_str(), found[0].kind.as_str()),
        ("Requests", "SQS")
    );
    assert!(found[0].text.contains("Queue: !GetAtt Q.Arn"));
    assert_eq!(
        (found[1].name.as_str(), found[1].kind.as_str()),
        ("Tick", "Schedule")
    );
}
