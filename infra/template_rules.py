"""The template's data-safety rules, read from template.yaml (run by infra/check-template.sh):

- the files bucket keeps deleted versions (versioning on, noncurrent versions expiring after
  DeletedOriginalsRetentionDays) and the table refuses deletion;
- a body under incoming/ or fetched/ outlives every dead-letter queue's retention, so a
  redriven message finds it;
- every alarm notifies the alarm topic (the one the stack makes, or AlarmTopicArn).
"""

import sys

from cfnlint.decode import cfn_yaml

DAY = 86400


def main(path):
    t = cfn_yaml.load(path)
    r = t["Resources"]
    bad = []

    bucket = r["FilesBucket"]["Properties"]
    if bucket.get("VersioningConfiguration", {}).get("Status") != "Enabled":
        bad.append("FilesBucket: versioning must be Enabled")
    rules = bucket["LifecycleConfiguration"]["Rules"]
    if not any(
        rule.get("NoncurrentVersionExpiration", {}).get("NoncurrentDays")
        == {"Ref": "DeletedOriginalsRetentionDays"}
        and rule.get("Prefix", "") in ("", "originals/")
        for rule in rules
    ):
        bad.append("FilesBucket: deleted originals must expire after DeletedOriginalsRetentionDays")
    if r["RecordsTable"]["Properties"].get("DeletionProtectionEnabled") is not True:
        bad.append("RecordsTable: DeletionProtectionEnabled must be true")

    dead_letter_days = max(
        res["Properties"].get("MessageRetentionPeriod", 345600) / DAY
        for name, res in r.items()
        if res.get("Type") == "AWS::SQS::Queue" and name.endswith("DeadLetterQueue")
    )
    for prefix in ("incoming/", "fetched/"):
        days = [x.get("ExpirationInDays") for x in rules if x.get("Prefix") == prefix]
        if not days or days[0] <= dead_letter_days:
            bad.append(
                f"FilesBucket: {prefix} must expire after more than {dead_letter_days:g} days "
                f"(the dead-letter queues' retention), not {days}"
            )

    topic = {"Fn::If": ["CreateAlarmTopic", {"Ref": "AlarmTopic"}, {"Ref": "AlarmTopicArn"}]}
    for name, res in r.items():
        if res.get("Type") == "AWS::CloudWatch::Alarm":
            if res["Properties"].get("AlarmActions") != [topic]:
                bad.append(f"{name}: AlarmActions must be the alarm topic ({topic})")

    for line in bad:
        print(f"check-template: {line}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "template.yaml"))
