//! IAM users on the emulator, each with an SQS client that sends as them: SQS reports the
//! sender's unique id as each message's `SenderId` (moto does with `infra/moto_server.py`'s
//! patch). The emulator's IAM API is called directly (its query protocol), so the tests need no
//! IAM SDK.

#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use aws_config::SdkConfig;

/// An IAM user, and an SQS client signing with its access key.
pub struct IamUser {
    /// Its unique id (`AIDA…`): what SQS reports as `SenderId`.
    pub id: String,
    pub sqs: aws_sdk_sqs::Client,
}

/// A new IAM user named `name` (made unique) with an access key.
pub async fn iam_user(config: &SdkConfig, name: &str) -> IamUser {
    let name = imgest_testing::aws::unique_name(name);
    let created = iam_call(&format!("Action=CreateUser&UserName={name}")).await;
    let id = element(&created, "UserId");
    let key = iam_call(&format!("Action=CreateAccessKey&UserName={name}")).await;
    let credentials = aws_sdk_sqs::config::Credentials::new(
        element(&key, "AccessKeyId"),
        element(&key, "SecretAccessKey"),
        None,
        None,
        "an IAM user on the emulator",
    );
    let sqs = aws_sdk_sqs::Client::from_conf(
        aws_sdk_sqs::config::Builder::from(config)
            .credentials_provider(credentials)
            .build(),
    );
    IamUser { id, sqs }
}

/// One IAM query-protocol call to the emulator (which reads the service from the signature's
/// scope and checks no signature): its XML answer.
async fn iam_call(params: &str) -> String {
    let endpoint = imgest_testing::aws::endpoint().expect("an emulator");
    let response = reqwest::Client::new()
        .post(format!("{endpoint}/"))
        .header("content-type", "application/x-www-form-urlencoded")
        .header(
            "authorization",
            "AWS4-HMAC-SHA256 Credential=test/20240101/us-east-1/iam/aws4_request, SignedHeaders=host, Signature=0",
        )
        .body(format!("{params}&Version=2010-05-08"))
        .send()
        .await
        .unwrap();
    let status = response.status();
    let text = response.text().await.unwrap();
    assert!(status.is_success(), "IAM {params}: {status} {text}");
    text
}

/// The text of the first `<tag>` of an XML answer.
fn element(xml: &str, tag: &str) -> String {
    let open = format!("<{tag}>");
    let start = xml
        .find(&open)
        .unwrap_or_else(|| panic!("no {tag} in {xml}"))
        + open.len();
    let end = start + xml[start..].find('<').unwrap();
    xml[start..end].to_owned()
}
