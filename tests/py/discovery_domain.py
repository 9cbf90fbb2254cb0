"""A "domain" for the discovery tests: serves JSON documents at fixed paths, the way a web server
publishes an AI Catalog (`/.well-known/ai-catalog.json`), Server Cards and a registry's server
list (`/v0.1/servers`, one page per query string). Standard library only.

The documents come from `--routes FILE`, a JSON object read again on every request (so a test can
write it once it knows the ports of the servers the documents name):
    { "/.well-known/ai-catalog.json": { "type": "application/ai-catalog+json", "json": {...} },
      "/v0.1/servers?cursor=p2": { "type": "application/json", "json": {...} } }
A path (with its query, if any) that is not there answers 404. Every request is appended to
`--log FILE` as one JSON line: method, path and the `Accept` header.

Usage: discovery_domain.py --routes FILE --log FILE [--port N]
Binds 127.0.0.1 only (port 0 = ephemeral); prints `LISTENING <port>` once ready.
"""

from __future__ import annotations

import argparse
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def handler(routes_file: str, log_file: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the standard library's name)
            with open(log_file, "a", encoding="utf-8") as log:
                log.write(json.dumps({"method": "GET", "path": self.path, "accept": self.headers.get("accept")}) + "\n")
            try:
                with open(routes_file, encoding="utf-8") as f:
                    routes = json.load(f)
            except (OSError, ValueError):
                routes = {}
            route = routes.get(self.path)
            if route is None:
                self.send_error(404)
                return
            body = json.dumps(route["json"]).encode()
            self.send_response(200)
            self.send_header("content-type", route.get("type", "application/json"))
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the standard library's name)
            pass

    return Handler


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--routes", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), handler(args.routes, args.log))
    sys.stdout.write(f"LISTENING {server.server_address[1]}\n")
    sys.stdout.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
