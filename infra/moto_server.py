"""moto's server, with DynamoDB requests serialised.

moto's DynamoDB is not safe under concurrent requests: conditional writes check and write
without a lock, and a cancelled transaction restores a snapshot of the whole table, wiping out
writes made meanwhile. Real DynamoDB makes each request atomic, and the contract suites rely on
it (e.g. 16 concurrent claims of one id yield exactly one winner). Serialising only DynamoDB
keeps S3, SQS long polls and Step Functions concurrent.

Usage: python moto_server.py PORT  (binds 127.0.0.1)
"""

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
    # moto's Step Functions executions call the other services through this server, on the
    # port named here (as moto_server sets it).
    os.environ.setdefault("MOTO_PORT", str(port))
    app = DomainDispatcherApplication(create_backend_app)
    run_simple(
        "127.0.0.1",
        port,
        serialise_dynamodb(app),
        threaded=True,
        request_handler=MotoRequestHandler,
    )
