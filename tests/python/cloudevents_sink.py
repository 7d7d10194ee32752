"""A CloudEvents HTTP receiver built on the official Python SDK (PyPI `cloudevents`), used by
tests/it/python_interop.rs to check that what `imagegate source` sends parses in both content modes
with an SDK nobody here wrote.

    python cloudevents_sink.py PORT OUTPUT.jsonl

Each request is parsed with `from_http_event` (which tells binary from structured mode itself);
one JSON line per request is appended to OUTPUT.jsonl: the attributes, extensions and data as the
SDK sees them, or the parse error. It answers 202, or 400 when the SDK refuses the request.
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cloudevents.core.bindings.http import HTTPMessage, from_http_event

PORT, OUT = int(sys.argv[1]), sys.argv[2]


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - the stdlib's naming
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        headers = {k.lower(): v for k, v in self.headers.items()}
        record = {"content_type": headers.get("content-type", "")}
        try:
            event = from_http_event(HTTPMessage(headers=headers, body=body))
            attrs = dict(event.get_attributes())
            record["attributes"] = {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in attrs.items()}
            data = event.get_data()
            if isinstance(data, (bytes, bytearray)):
                data = json.loads(data)
            record["data"] = data
            code = 202
        except Exception as e:  # noqa: BLE001 - any refusal is the finding
            record["error"] = f"{type(e).__name__}: {e}"
            code = 400
        with open(OUT, "a") as f:
            f.write(json.dumps(record, default=str) + "\n")
        self.send_response(code)
        self.end_headers()

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    with open(OUT, "a"):
        pass
    ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
