"""YAML a user wrote, read with hard bounds: size, nesting depth and alias expansion.

PyYAML's safe loader still expands aliases: a 637-byte card of nine nested aliases is a
billion values to anything that walks it (the schema check, line indexing). Composing
first and walking the node graph with a budget refuses such a file in microseconds.
"""

from __future__ import annotations

from typing import Any

import yaml

MAX_YAML_BYTES = 256 * 1024
MAX_YAML_DEPTH = 32
MAX_YAML_VALUES = 20_000  # scalars, lists and mappings, every alias counted as expanded


class YAMLLimitError(yaml.YAMLError):
    """The YAML is well-formed but past one of the bounds above."""

    def __init__(self, problem: str, mark: Any = None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.problem_mark = mark
        self.context = None


def load(text: str) -> tuple[yaml.Node | None, Any]:
    """Compose and construct `text` within the bounds; raise a YAMLError if past them."""
    node = compose(text)
    if node is None:
        return None, None
    return node, yaml.SafeLoader("").construct_document(node)


def compose(text: str) -> yaml.Node | None:
    """Return the node graph of `text`, refusing oversized, too deep or alias-bomb input."""
    size = len(text.encode("utf-8", errors="replace"))
    if size > MAX_YAML_BYTES:
        raise YAMLLimitError(f"{size} bytes is more than the {MAX_YAML_BYTES} allowed")
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except RecursionError:
        raise YAMLLimitError(f"nested deeper than {MAX_YAML_DEPTH} levels") from None
    if node is not None:
        _check_bounds(node)
    return node


def _check_bounds(root: yaml.Node) -> None:
    """Walk the graph as a consumer would see it (aliases expanded), within a budget."""
    stack: list[tuple[yaml.Node, int]] = [(root, 1)]
    seen = 0
    while stack:
        node, depth = stack.pop()
        seen += 1
        if seen > MAX_YAML_VALUES:
            raise YAMLLimitError(
                f"expands to more than {MAX_YAML_VALUES} values (nested YAML aliases?)",
                node.start_mark,
            )
        if depth > MAX_YAML_DEPTH:
            raise YAMLLimitError(f"nested deeper than {MAX_YAML_DEPTH} levels", node.start_mark)
        if isinstance(node, yaml.MappingNode):
            stack.extend((part, depth + 1) for pair in node.value for part in pair)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, depth + 1) for item in node.value)
