"""Examples under each command's --help (its epilog): what a user types first."""

from __future__ import annotations

__all__ = ["EXAMPLES"]

EXAMPLES = {
    "init": """\b
Examples:
  tiny init                  # tiny.toml, cards/word-counter.yaml, my_tools.py here
  tiny init my-project""",
    "validate": """\b
Examples:
  tiny validate
  tiny validate cards/new.yaml --json
  tiny validate --format github   # annotations in a GitHub Actions job""",
    "route": """\b
Examples:
  tiny route "how did the onboarding process work again"
  tiny route "..." --explain --top 3
  tiny route - < tasks.txt
  tiny route --eval labelled.jsonl""",
    "invoke": """\b
Examples:
  tiny invoke docs-finder "how did the onboarding process work again"
  tiny invoke web-reader "read https://example.org/" --json --record run.jsonl""",
    "delegate": """\b
Examples:
  tiny delegate "what is our policy on expenses and travel"
  tiny delegate "add the company ACME to the CRM" --yes --json""",
    "bench": """\b
Examples:
  tiny bench --repeat 3 --record run.jsonl --fail-under tiny.right=0.8
  tiny bench --replay examples/bench/recordings/qwen2.5-coder-1.5b-json.jsonl
  tiny bench --scale --tasks examples/bfcl/tasks.jsonl --cards examples/bfcl/cards \\
      --all-tools-sizes 10,100,all --record sweep.jsonl --html report.html
  tiny bench ... --resume .sweep.jsonl.1234.partial --record sweep.jsonl""",
    "runs search": """\b
Examples:
  tiny runs search "vacation personio"
  tiny runs search onboard* --card docs-finder --json""",
    "runs delete": """\b
Examples:
  tiny runs delete 12 13
  tiny runs delete --older-than 30d --yes""",
    "runs export": """\b
Examples:
  tiny runs export --since 7d --out week.jsonl
  tiny runs export --card crm-writer | jq .digest.status""",
}
