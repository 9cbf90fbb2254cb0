"""A REST API that shows what reaches it byte for byte, and redirects the way common servers do,
on the standard library only: the request path is logged as sent (no decoding, no dot-segment
removal), so a test can tell `/v1/files/../image` from `/v1/files/%2E%2E/image`.

- `GET /openapi.json`: the API's description, server `<base>/v1`:
  `GET /files/{name}/image` (`get_image`), `GET /users/{username}` (`get_user`),
  `GET /moved/{id}` (`get_moved`: 302 to `/v2/secret`, another path on the same origin),
  `GET /slash` (`get_slash`: 301 to `/v1/slash/`, the same path with a trailing `/`).
- `GET /v1/users/...`: as Go's `http.ServeMux` does, a path that is not clean once decoded
  (`/v1/users/..` is `/v1`) is answered 301 to the cleaned path.
- Every other `GET` answers `{"path": <the raw path>}`; under `/v2/` with `"secret": true` too.

Every request's raw path is appended to `--log` as one JSON line (`{"path": ...}`). Prints
`listening on <base>` once ready.

Usage: path_rest_server.py --port 0 --log requests.jsonl
"""

from __future__ import annotations

import argparse
import json
import posixpath
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOG = ""
BASE = ""


def description() -> dict:
    def op(op_id: str, params: list[str]) -> dict:
        return {
            "get": {
                "operationId": op_id,
                "parameters": [{"name": p, "in": "path", "required": True, "schema": {"type": "string"}} for p in params],
                "responses": {"200": {"description": "ok"}},
            }
        }

    return {
        "openapi": "3.0.3",
        "info": {"title": "Paths", "version": "1"},
        "servers": [{"url": f"{BASE}/v1"}],
        "paths": {
            "/files/{name}/image": op("get_image", ["name"]),
            "/users/{username}": op("get_user", ["username"]),
            "/moved/{id}": op("get_moved", ["id"]),
            "/slash": op("get_slash", []),
        },
    }


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *_args) -> None:  # noqa: ANN002
        pass

    def answer(self, status: int, body: dict | None = None, location: str | None = None) -> None:
        data = json.dumps(body or {}).encode()
        self.send_response(status)
        if location:
            self.send_header("Location", location)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802
        raw = self.path.split("?", 1)[0]
        with open(LOG, "a", encoding="utf-8") as f:
            f.write(json.dumps({"path": self.path}) + "\n")
        if raw == "/openapi.json":
            return self.answer(200, description())
        if raw.startswith("/v1/moved/"):
            return self.answer(302, location="/v2/secret")
        if raw == "/v1/slash":
            return self.answer(301, location="/v1/slash/")
        decoded = urllib.parse.unquote(raw)
        if raw.startswith("/v1/users/") and posixpath.normpath(decoded) != decoded:
            return self.answer(301, location=posixpath.normpath(decoded))
        body = {"path": self.path}
        if raw.startswith("/v2/"):
            body["secret"] = True
        return self.answer(200, body)


def main() -> None:
    global LOG, BASE
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--log", required=True)
    args = parser.parse_args()
    LOG = args.log
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    BASE = f"http://127.0.0.1:{server.server_address[1]}"
    print(f"listening on {BASE}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
