"""The card schema check: a validator precompiled from card.schema.json by fastjsonschema.

`is_valid` runs Python that fastjsonschema generated from the schema (`_card_validator.py`),
so a good card costs neither jsonschema's import nor its per-card walk; the card loader asks
jsonschema only about a card that fails, to say what is wrong in the words it always used.
The generated module is checked in: after editing card.schema.json run
`python -m tiny_cli.cards.schema_check` (tests/test_cards.py fails until it matches).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

GENERATED = Path(__file__).with_name("_card_validator.py")
SCHEMA_FILE = "card.schema.json"


def is_valid(data: Any) -> bool:
    """True if `data` satisfies the card schema, answered by the precompiled validator."""
    from tiny_cli.cards import _card_validator as generated

    try:
        generated.validate_card(data)
    except Exception:  # a failure (or anything odd) is for jsonschema to explain, or clear
        return False
    return True


def schema_text() -> str:
    """Return card.schema.json as shipped inside the package."""
    return Path(__file__).with_name(SCHEMA_FILE).read_text("utf-8")  # the package is files


def schema_digest(text: str) -> str:
    """Return the sha256 of the schema text the generated module was made from."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def generated_source() -> str:
    """Return the validator module fastjsonschema generates from the shipped schema."""
    import fastjsonschema

    text = schema_text()
    # no defaults filled in (the loader reads the card as written), no formats (none is used),
    # short messages (a failure is worded by jsonschema)
    code = fastjsonschema.compile_to_code(
        json.loads(text), use_default=False, use_formats=False, detailed_exceptions=False
    )
    match = re.search(r"^def (validate_\w+)\(", code, re.MULTILINE)
    assert match, "fastjsonschema generated no validate function"
    header = (
        f'"""Generated from {SCHEMA_FILE} by fastjsonschema {fastjsonschema.VERSION}; '
        "do not edit.\n\nRegenerate: python -m tiny_cli.cards.schema_check\n"
        f'"""\n\n# schema sha256: {schema_digest(text)}\n'
    )
    return f"{header}{code.rstrip()}\n\n\nvalidate_card = {match.group(1)}\n"


def main() -> None:
    """Write `_card_validator.py` from the shipped schema."""
    GENERATED.write_text(generated_source(), "utf-8")
    print(f"wrote {GENERATED}")


if __name__ == "__main__":
    main()
