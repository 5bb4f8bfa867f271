"""Write the tools-first variant of the BFCL cards: a one-sentence summary, the functions the rest.

examples/bfcl/cards joins every function's description into the summary, which no one
writing a card by hand does. This variant keeps each card as it is but for its summary:
one plain sentence naming what its functions are about, from their names ("Air quality
forecast, weather forecast and news."), so routing has to read the functions to know more.
Run: `python benchmarks/bfcl_toolsfirst.py` (writes benchmarks/data/bfcl-toolsfirst/cards);
the tasks are examples/bfcl/tasks.jsonl as they are.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
SOURCE = REPO / "examples" / "bfcl" / "cards"
OUT = REPO / "benchmarks" / "data" / "bfcl-toolsfirst" / "cards"
# words a function name adds nothing with ("get weather" says "weather")
VERBS = frozenset({"get", "calculate", "calc", "compute", "find", "fetch", "check", "retrieve"})


def topic(name: str) -> str:
    """A function name as the words of what it is about: "weather_forecast_m63" → "weather
    forecast", "get_stock_price" → "stock price"."""
    name = re.sub(r"_m\d+$", "", name)
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name)
    words = [w.lower() for w in re.split(r"[^0-9A-Za-z]+", spaced) if w]
    kept = [w for w in words if w not in VERBS]
    return " ".join(dict.fromkeys(kept or words))  # each word once: "scores.get_scores"


def sentence(functions: list[dict[str, Any]]) -> str:
    """One plain sentence from the functions' names: "A, b and c."."""
    topics = list(dict.fromkeys(topic(str(f["name"])) for f in functions))
    listed = topics[0] if len(topics) == 1 else f"{', '.join(topics[:-1])} and {topics[-1]}"
    return f"{listed[:1].upper()}{listed[1:]}."


def rewrite(text: str) -> str:
    """A card file's text with its summary replaced; the comment line and the rest kept."""
    comment = "".join(line + "\n" for line in text.splitlines() if line.startswith("#"))
    card = yaml.safe_load(text)
    card["summary"] = sentence(card["functions"])
    body = yaml.safe_dump(card, sort_keys=False, allow_unicode=True, width=100)
    return comment + body


def main(argv: list[str] | None = None) -> int:
    """Write one tools-first card per BFCL card; return the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cards", type=Path, default=SOURCE, help="the BFCL cards to rewrite")
    parser.add_argument("--out", type=Path, default=OUT, help="where the variant's cards go")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for path in sorted(args.cards.glob("*.yaml")):
        (args.out / path.name).write_text(rewrite(path.read_text("utf-8")), "utf-8", newline="\n")
    print(f"wrote {len(list(args.out.glob('*.yaml')))} cards to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
