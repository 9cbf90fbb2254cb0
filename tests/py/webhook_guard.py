"""A guard webhook speaking mcpgate's guard contract (docs/guards.md), the way a team writes one:
a few lines of the standard library. It reads the strings of what it is sent and answers:

  request: "forbidden" in an argument -> deny; "secret-word" -> modify (masked); "slow" -> answers
           after 3 s (to try a guard's timeout)
  result:  "classified" in the result -> deny; "swap-me" -> modify (the text replaced);
           "swap-structured" -> modify with content and structuredContent, as docs/guards.md shows
  input:   a question that carries an AWS access key id ("AKIA") -> deny
  catalogue: a definition that says "exfiltrate" -> deny; any definition of an upstream whose id
             starts with "untrusted" -> deny
  anything else -> allow

Usage: webhook_guard.py [--transport http] [--port N]; binds 127.0.0.1, prints `LISTENING <port>`.
"""

import argparse
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def strings(v):
    if isinstance(v, str):
        yield v
    elif isinstance(v, list):
        for x in v:
            yield from strings(x)
    elif isinstance(v, dict):
        for x in v.values():
            yield from strings(x)


def verdict(ask):
    text = " ".join(strings(ask["content"]))
    if ask["point"] == "request":
        if "forbidden" in text:
            return {"verdict": "deny", "reason": "no forbidden words"}
        if "slow" in text:
            time.sleep(3)
        if "secret-word" in text:
            args = json.loads(json.dumps(ask["content"]["arguments"]).replace("secret-word", "[masked]"))
            return {"verdict": "modify", "content": {"arguments": args}, "reason": "masked a word"}
    if ask["point"] == "result":
        if "classified" in text:
            return {"verdict": "deny", "reason": "classified material"}
        if "swap-structured" in text:
            return {"verdict": "modify", "content": {"content": [{"type": "text", "text": "{\"n\": 1}"}], "structuredContent": {"n": 1}}}
        if "swap-me" in text:
            return {"verdict": "modify", "content": {"content": [{"type": "text", "text": "swapped by guard"}]}}
    if ask["point"] == "catalogue" and "exfiltrate" in text:
        return {"verdict": "deny", "reason": "an exfiltration instruction"}
    if ask["point"] == "catalogue" and ask["item"]["upstream"].startswith("untrusted"):
        return {"verdict": "deny", "reason": "an untrusted upstream"}
    if ask["point"] == "input" and "AKIA" in text:
        return {"verdict": "deny", "reason": "a key in a question"}
    return {"version": "mcpgate.guard/v1", "verdict": "allow"}


class Guard(BaseHTTPRequestHandler):
    def do_POST(self):
        ask = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        print(f"asked {ask['point']} {ask['item']['name']} by {ask['caller']}", file=sys.stderr, flush=True)
        if "requestState" in json.dumps(ask["content"]):
            print("the guard was shown a requestState", file=sys.stderr, flush=True)
        body = json.dumps(verdict(ask)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--transport", default="http")
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Guard)
    print(f"LISTENING {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
