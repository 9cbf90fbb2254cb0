"""A server with 100 tools of one business domain, for the tool-search tests, built on the
official Python SDK's low-level `Server` (mcp==2.3.0). Five domains (code, calendar, files,
payments, crm), each 20 nouns x 5 verbs (create, get, list, update, delete) with plain
descriptions, where one tool per domain is replaced by a distinctive one whose purpose a test
searches for (see DISTINCT). Every call answers "<tool name> done".

Usage: domain_server.py --domain NAME [--port N]
HTTP only; binds 127.0.0.1 and prints `LISTENING <port>` once ready.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError
from serving import run_lowlevel

NOUNS = {
    "code": ["repository", "branch", "commit", "pull request", "issue", "release", "tag", "workflow run", "review comment", "fork",
             "gist", "milestone", "label", "deploy key", "webhook", "collaborator", "code scan alert", "discussion", "wiki page", "package"],
    "calendar": ["event", "meeting", "attendee", "reminder", "room booking", "time slot", "calendar", "invitation", "recurring series",
                 "availability window", "agenda", "time zone setting", "holiday", "focus block", "out of office notice", "video link",
                 "note", "task", "contact", "schedule"],
    "files": ["document", "folder", "spreadsheet", "presentation", "image", "pdf", "shared link", "permission", "version",
              "comment thread", "trash item", "drive", "upload session", "thumbnail", "template", "archive", "download", "tag",
              "favorite", "storage quota"],
    "payments": ["charge", "refund", "invoice", "customer", "subscription", "payout", "dispute", "coupon", "price", "product",
                 "checkout session", "payment method", "balance transaction", "tax rate", "credit note", "transfer",
                 "webhook endpoint", "receipt", "quote", "card"],
    "crm": ["lead", "contact", "account", "deal", "pipeline", "opportunity", "campaign", "note", "task", "call log", "email template",
            "segment", "company", "ticket", "quote", "forecast", "territory", "sales rep", "meeting note", "stage"],
}
VERBS = {
    "create": "Create a new {noun} in {domain}.",
    "get": "Fetch one {noun} by its id from {domain}.",
    "list": "List {noun}s in {domain}, newest first, with paging.",
    "update": "Change fields of an existing {noun} in {domain}.",
    "delete": "Permanently delete a {noun} from {domain}.",
}
# (replaced tool, distinctive tool, its description)
DISTINCT = {
    "code": ("delete_pull_request", "merge_pull_request", "Merge an approved pull request into its base branch."),
    "calendar": ("delete_time_slot", "find_free_time", "Find a time when all attendees are free for a meeting of a given length."),
    "files": ("delete_pdf", "convert_to_pdf", "Convert a document, spreadsheet or presentation to PDF."),
    "payments": ("delete_refund", "refund_charge", "Give a customer their money back: refunds all or part of a card charge."),
    "crm": ("delete_forecast", "score_lead", "Estimate how likely a lead is to buy, from its activity and company size."),
}


def tools_for(domain: str) -> list[types.Tool]:
    replaced, name, description = DISTINCT[domain]
    out = []
    for noun in NOUNS[domain]:
        for verb, template in VERBS.items():
            tool = f"{verb}_{noun.replace(' ', '_')}"
            text = template.format(noun=noun, domain=domain.capitalize())
            if tool == replaced:
                tool, text = name, description
            schema = {"type": "object", "properties": {"id": {"type": "string"}}}
            out.append(types.Tool(name=tool, description=text, input_schema=schema))
    assert len(out) == 100, len(out)
    return out


def build(domain: str) -> Server[Any]:
    tools = tools_for(domain)
    names = {t.name for t in tools}

    async def list_tools(ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name not in names:
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {params.name}")
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"{params.name} done")])

    return Server(domain, version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--transport", choices=["http"], default="http")
    ap.add_argument("--domain", choices=sorted(NOUNS), required=True)
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    run_lowlevel(build(args.domain), args.port, "domain_server")


if __name__ == "__main__":
    main()
