"""moto's server, with DynamoDB requests serialised, a transaction's table snapshot taken once,
and SQS's SenderId and DeadLetterQueueSourceArn as AWS sets them.

moto's DynamoDB is not safe under concurrent requests: conditional writes check and write
without a lock, and a cancelled transaction restores a snapshot of the whole table, wiping out
writes made meanwhile. Real DynamoDB makes each request atomic, and the contract suites rely on
it (e.g. 16 concurrent claims of one id yield exactly one winner). Serialising only DynamoDB
keeps S3, SQS long polls and Step Functions concurrent.

moto 5.2.5 gives every SQS message one constant SenderId, whoever sent it. AWS gives the unique
id of the sender's IAM identity: an IAM user's id, or an assumed role's "RoleId:session". The
intake function decides what a crawl request may do from it (IMGEST_INTAKE_SENDERS), and
tests/e2e/intake_senders_aws.rs sends as two IAM users: sends are wrapped here to set it from
the request's access key (moto's own constant for keys no IAM user or role owns, such as the
tests' shared "test" key). This touches moto's private names: after a moto upgrade (moto.sh's
MOTO_VERSION), run that test again.

moto moves a message to its queue's dead-letter queue after maxReceiveCount receives, as SQS
does, but does not record where it came from: SQS gives such a message the system attribute
DeadLetterQueueSourceArn (the queue it was moved from), which the dead-letter tools read to
tell a moved message from a handler's letter. Receives are wrapped here to mark the messages
about to be moved and to report the attribute (tests/e2e/dlq_aws.rs relies on it).

Usage: python moto_server.py PORT  (binds 127.0.0.1)
"""

import contextvars
import os
import sys
import threading

from werkzeug.serving import run_simple
from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)

_dynamodb = threading.Lock()

# The sender of the SQS request being handled, for the messages it creates.
_sender = contextvars.ContextVar("imgest_sqs_sender", default=None)


def _sender_of(access_key):
    """The unique id AWS reports as SenderId for requests signed with `access_key`."""
    from moto.iam.models import iam_backends
    from moto.sts.models import sts_backends

    for account in list(iam_backends.keys()):
        iam = iam_backends[account]["aws"]
        for user in iam.users.values():
            if any(k.access_key_id == access_key for k in user.access_keys):
                return user.id
        for assumed in sts_backends[account]["aws"].assumed_roles:
            if assumed.access_key_id == access_key:
                role = iam.get_role_by_arn(assumed.role_arn)
                return f"{role.id}:{assumed.session_name}"
    return None


def sqs_sender_ids():
    from moto.sqs import models as sqs_models
    from moto.sqs.responses import SQSResponse

    def wrap(name):
        original = getattr(SQSResponse, name)

        def wrapped(self, *args, **kwargs):
            token = _sender.set(_sender_of(self.get_access_key()))
            try:
                return original(self, *args, **kwargs)
            finally:
                _sender.reset(token)

        setattr(SQSResponse, name, wrapped)

    for name in ("send_message", "send_message_batch"):
        wrap(name)
    init = sqs_models.Message.__init__

    def message_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.sender_id = _sender.get() or sqs_models.DEFAULT_SENDER_ID

    sqs_models.Message.__init__ = message_init


def sqs_dead_letter_sources():
    from moto.sqs import models as sqs_models
    from moto.sqs.responses import SQSResponse

    receive = sqs_models.SQSBackend.receive_message

    def marked_receive(self, queue_name, *args, **kwargs):
        queue = self.get_queue(queue_name)
        if queue.dead_letter_queue is not None and queue.redrive_policy:
            limit = queue.redrive_policy["maxReceiveCount"]
            for message in list(queue._messages):
                if message.approximate_receive_count >= limit:
                    message.imgest_dlq_source = queue.queue_arn
        return receive(self, queue_name, *args, **kwargs)

    sqs_models.SQSBackend.receive_message = marked_receive

    respond = SQSResponse.receive_message

    def with_source(self):
        result = respond(self)
        names = set(self._get_param("AttributeNames", []))
        names |= set(self._get_param("MessageSystemAttributeNames", []))
        if not ("All" in names or "DeadLetterQueueSourceArn" in names):
            return result
        queue = self.sqs_backend.get_queue(self._get_queue_name())
        sources = {
            m.id: m.imgest_dlq_source
            for m in queue._messages
            if getattr(m, "imgest_dlq_source", None)
        }
        for msg in result.result.get("Messages", []):
            source = sources.get(msg["MessageId"])
            if source:
                msg.setdefault("Attributes", {})["DeadLetterQueueSourceArn"] = source
        return result

    SQSResponse.receive_message = with_source


def dynamodb_snapshot_once():
    """A transaction snapshots each table it writes, once.

    moto 5.2.5 snapshots a table (a deep copy of all of it, its stream's records included) for
    every item of a transaction that names it, to restore it if the transaction is cancelled:
    eleven copies of the whole table for an offer of ten photos. The copies are all the same
    (DynamoDB requests are serialised, see below), so one per table restores the same state;
    and the table's stream, which grows with every write, is shared rather than copied.
    Without this, each transaction cost as much as every write before it, and the server's
    memory grew past 16 GB (the capacity model's cost benchmark, 100 offers).
    """
    import copy as _copy
    from moto.dynamodb import models as dynamodb_models

    class Once:
        """`copy` for the duration of one transaction: each object deep-copied once."""

        def __init__(self):
            self.copies = {}

        def deepcopy(self, obj, memo=None):
            key = id(obj)
            if key not in self.copies:
                memo = {} if memo is None else memo
                # A table's stream is shared with its snapshot, not copied: it only grows, and
                # copying it made every transaction cost as much as every write so far. (A
                # cancelled transaction's stream records stay; nothing here reads the stream.)
                shard = getattr(obj, "stream_shard", None)
                if shard is not None:
                    memo[id(shard)] = shard
                self.copies[key] = (obj, _copy.deepcopy(obj, memo))
            return self.copies[key][1]

    original = dynamodb_models.DynamoDBBackend.transact_write_items

    def transact_write_items(self, transact_items):
        dynamodb_models.copy = Once()
        try:
            return original(self, transact_items)
        finally:
            dynamodb_models.copy = _copy

    dynamodb_models.DynamoDBBackend.transact_write_items = transact_write_items


def serialise_dynamodb(app):
    def wrapped(environ, start_response):
        if environ.get("HTTP_X_AMZ_TARGET", "").startswith("DynamoDB"):
            with _dynamodb:
                # The whole response is produced under the lock.
                return list(app(environ, start_response))
        return app(environ, start_response)

    return wrapped


if __name__ == "__main__":
    port = int(sys.argv[1])
    # The port moto's own cross-service calls use (as moto_server sets it): Step Functions
    # executions send their messages through this server.
    os.environ.setdefault("MOTO_PORT", str(port))
    sqs_sender_ids()
    sqs_dead_letter_sources()
    dynamodb_snapshot_once()
    app = DomainDispatcherApplication(create_backend_app)
    run_simple(
        "127.0.0.1",
        port,
        serialise_dynamodb(app),
        threaded=True,
        request_handler=MotoRequestHandler,
    )
