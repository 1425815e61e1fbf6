//! Who may send what, as the template declares it: every queue but the intake queue (partners)
//! and the process queue (the bucket's notifications too) takes sends from the stack's roles
//! only, every dead-letter queue too; the functions know every role of the stack
//! (`IMGEST_STACK_ROLES`) and no other; originals are written once; only the stack subscribes
//! to the results. Each rule is a function of the template's text, so each test also shows the
//! rule catching a template that breaks it.

use super::permissions::PERMISSIONS;

/// The queues partners send to (and S3, for the process queue): guarded otherwise.
const PUBLIC_QUEUES: &[&str] = &["IntakeQueue", "ProcessQueue"];

/// The logical ids of the resources of `kind` (`AWS::SQS::Queue`), in template order.
fn resources_of(template: &str, kind: &str) -> Vec<String> {
    let lines: Vec<&str> = template.lines().collect();
    lines
        .windows(2)
        .filter(|pair| pair[1].trim() == format!("Type: {kind}"))
        .filter_map(|pair| {
            let name = pair[0].strip_prefix("  ")?.strip_suffix(':')?;
            (!name.starts_with(' ')).then(|| name.to_owned())
        })
        .collect()
}

/// The text of the resource `name`: its line to the next top-level entry of its section.
fn resource<'a>(template: &'a str, name: &str) -> &'a str {
    let start = template
        .find(&format!("\n  {name}:\n"))
        .unwrap_or_else(|| panic!("template.yaml has no resource {name}"))
        + 1;
    let rest = &template[start..];
    let mut end = 0;
    for (i, line) in rest.split_inclusive('\n').enumerate() {
        let top = !line.starts_with("   ")
            && !line.trim().is_empty()
            && !line.trim_start().starts_with('#');
        if i > 0 && top {
            break;
        }
        end += line.len();
    }
    &rest[..end]
}

/// The queues no send policy guards: each must be listed in a queue policy that denies every
/// sender but the stack's roles.
fn unguarded_queues(template: &str) -> Vec<String> {
    let guards: Vec<&str> = resources_of(template, "AWS::SQS::QueuePolicy")
        .iter()
        .map(|p| resource(template, p))
        .filter(|policy| {
            policy.contains("Effect: Deny")
                && policy.contains("Action: sqs:SendMessage")
                && policy.contains(r#"aws:PrincipalArn: !Sub "arn:${AWS::Partition}:iam::${AWS::AccountId}:role/${AWS::StackName}-*""#)
        })
        .collect();
    resources_of(template, "AWS::SQS::Queue")
        .into_iter()
        .filter(|q| !PUBLIC_QUEUES.contains(&q.as_str()))
        .filter(|q| {
            !guards.iter().any(|g| {
                g.contains(&format!("- !Ref {q}\n")) && g.contains(&format!("!GetAtt {q}.Arn"))
            })
        })
        .collect()
}

#[test]
fn every_internal_and_dead_letter_queue_takes_only_the_stacks_sends() {
    let template = super::text();
    assert_eq!(unguarded_queues(&template), Vec::<String>::new());
    // The process queue: the bucket's notifications and the stack's roles only.
    let process = resource(&template, "ProcessQueuePolicy");
    assert!(
        process.contains("Sid: OnlyTheStackAndTheBucketSend"),
        "{process}"
    );
    // A queue left out of its policy is caught.
    let planted = template.replacen("        - !Ref SettleQueue\n", "", 1);
    assert_eq!(unguarded_queues(&planted), ["SettleQueue"]);
}

/// The roles `IMGEST_STACK_ROLES` lists (their logical ids).
fn stack_roles(template: &str) -> Vec<String> {
    let start = template
        .find("        IMGEST_STACK_ROLES: !Join")
        .expect("the Globals set IMGEST_STACK_ROLES");
    template[start..]
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with("          "))
        .filter_map(|l| {
            l.trim()
                .trim_start_matches("- ")
                .strip_prefix("!GetAtt ")?
                .strip_suffix(".RoleId")
                .map(str::to_owned)
        })
        .collect()
}

#[test]
fn the_functions_know_every_role_of_the_stack_and_no_other() {
    let template = super::text();
    let mut listed = stack_roles(&template);
    listed.sort();
    let mut roles: Vec<String> = PERMISSIONS
        .iter()
        .map(|(f, _)| format!("{f}Role"))
        .collect();
    roles.sort();
    assert_eq!(listed, roles);
    let planted = template.replacen("            - !GetAtt ProcessFunctionRole.RoleId\n", "", 1);
    assert!(!stack_roles(&planted).contains(&"ProcessFunctionRole".to_owned()));
}

#[test]
fn an_original_is_written_once_and_only_the_stack_subscribes_to_the_results() {
    let template = super::text();
    let bucket = resource(&template, "FilesBucketPolicy");
    let once = &bucket[bucket
        .find("Sid: OriginalsAreWrittenOnce")
        .expect("the write-once rule")..];
    for line in [
        "Effect: Deny",
        "Action: s3:PutObject",
        r#"Resource: !Sub "${FilesBucket.Arn}/originals/*""#,
        "s3:if-none-match: \"true\"",
    ] {
        assert!(once.contains(line), "{line}: {once}");
    }
    let topic = resource(&template, "ResultsTopicPolicy");
    for line in [
        "Sid: OnlyTheStackSubscribes",
        "Effect: Deny",
        "- sns:Subscribe",
        "aws:CalledVia: cloudformation.amazonaws.com",
    ] {
        assert!(topic.contains(line), "{line}: {topic}");
    }
    // A subscription is a stack of its own (the topic refuses any other), filtered on its one
    // client; the main template declares none, so it needs no transform `sam build` lacks.
    let subscription = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../infra/results-subscription.yaml"),
    )
    .expect("infra/results-subscription.yaml");
    assert!(
        subscription.contains(
            "FilterPolicyScope: MessageAttributes\n      FilterPolicy:\n        client_id:\n          - !Ref ClientId"
        ),
        "{subscription}"
    );
    assert!(
        !template.contains("Fn::ForEach"),
        "sam build cannot read Fn::ForEach"
    );
}
