"""A scripted MCP server with 40 tools of an office suite, built with the SDK's MCPServer.

python catalogue.py              serve the 40 tools below over stdio
CATALOGUE_FILE=tools.json ...    serve the tools that file lists instead: a JSON list of
                                 {"name", "description", "kind"}, so a test can add, rename
                                 and remove tools between two imports

`kind` is the tool's MCP annotations: `read` (readOnlyHint), `write` (readOnlyHint false),
`destructive` (destructiveHint), `none` (no annotations: a writer, as far as tiny knows).
Every tool takes one string, `query`, and answers `NAME: QUERY`.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

KINDS = {
    "read": ToolAnnotations(read_only_hint=True),
    "write": ToolAnnotations(read_only_hint=False, destructive_hint=False),
    "destructive": ToolAnnotations(destructive_hint=True),
    "none": None,
}

TOOLS: list[tuple[str, str, str]] = [
    # calendar
    ("list_events", "List the calendar events between two dates.", "read"),
    ("get_event", "Show one calendar event with its attendees and room.", "read"),
    ("find_free_slot", "Find a free slot in the calendar for a meeting of given length.", "read"),
    ("create_event", "Create a calendar event and invite attendees.", "write"),
    ("cancel_event", "Cancel a calendar event and tell its attendees.", "destructive"),
    ("move_event", "Move a calendar event to another time.", "none"),
    # mail
    ("search_mail", "Search the mailbox for messages by sender, subject or text.", "read"),
    ("read_message", "Read one email message with its attachments listed.", "read"),
    ("list_mail_folders", "List the mailbox folders and their unread counts.", "read"),
    ("send_mail", "Send an email message to recipients.", "write"),
    ("move_message", "Move an email message to another mailbox folder.", "write"),
    ("delete_message", "Delete an email message from the mailbox.", "destructive"),
    # issues
    ("list_issues", "List the open issues of a project tracker.", "read"),
    ("get_issue", "Show one tracker issue with its comments.", "read"),
    ("search_issues", "Search tracker issues by label, assignee or text.", "read"),
    ("create_issue", "Open a new issue in the project tracker.", "write"),
    ("close_issue", "Close an issue in the project tracker.", "write"),
    ("comment_issue", "Add a comment to a tracker issue.", "none"),
    # files
    ("list_files", "List the files in a shared drive folder.", "read"),
    ("read_file", "Read the text of a file on the shared drive.", "read"),
    ("search_files", "Search the shared drive for files by name or content.", "read"),
    ("write_file", "Write text to a file on the shared drive.", "write"),
    ("delete_file", "Delete a file from the shared drive.", "destructive"),
    # contacts
    ("find_contact", "Find a person in the address book by name or company.", "read"),
    ("list_contacts", "List the contacts of the address book in a group.", "read"),
    ("add_contact", "Add a person to the address book.", "write"),
    ("update_contact", "Change a person's phone number or email in the address book.", "write"),
    # weather
    ("current_weather", "Current weather for a city: temperature, wind and rain.", "read"),
    ("weather_forecast", "Weather forecast for a city for the next days.", "read"),
    ("weather_alerts", "Storm and heat weather alerts for a region.", "read"),
    # currency and stocks
    ("convert_currency", "Convert an amount of money from one currency to another.", "read"),
    ("exchange_rate", "Today's exchange rate between two currencies.", "read"),
    ("stock_quote", "The latest stock price quote for a ticker symbol.", "read"),
    # tasks
    ("list_tasks", "List the to-do tasks on a task board.", "read"),
    ("add_task", "Add a to-do task to a task board.", "write"),
    ("complete_task", "Mark a to-do task on the board as done.", "write"),
    # translation and text
    ("translate_text", "Translate text from one language to another.", "read"),
    ("detect_language", "Detect the language a text is written in.", "read"),
    ("spell_check", "Check the spelling of a text and list the mistakes.", "read"),
    ("summarize_text", "Summarize a long text in a few sentences.", "read"),
]


def specs() -> list[dict[str, str]]:
    """The tools to serve: CATALOGUE_FILE's list, else the 40 above."""
    path = os.environ.get("CATALOGUE_FILE")
    if path:
        with open(path, encoding="utf-8") as file:
            return json.load(file)
    return [{"name": n, "description": d, "kind": k} for n, d, k in TOOLS]


def _answer(name: str) -> Any:
    def answer(query: str) -> str:
        return f"{name}: {query}"

    return answer


def build() -> MCPServer:
    """Return the server with one tool per spec."""
    server = MCPServer("catalogue")
    for spec in specs():
        server.add_tool(
            _answer(spec["name"]),
            name=spec["name"],
            description=spec["description"],
            annotations=KINDS[spec["kind"]],
        )
    return server


if __name__ == "__main__":
    build().run()
    sys.exit(0)
