"""Artifact files of any content: `tiny artifacts show` and read_artifact always have an outcome.

An artifact's two files may be edited, damaged or removed by hand: any bytes in the `.txt`,
any JSON (or none, or not JSON) in the `.json`. The command then prints the artifact or exits 2
with one line; the runner's tool answers or raises a one-line ToolCallError for the model.
Never another exception (the `tiny` fixture raises any it sees).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tiny_cli.errors import ConfigError, ToolCallError
from tiny_cli.tools.artifacts import Artifact, ArtifactStore

from .test_properties import QUICK, SLOW_TEXTS, json_values

HANDLE = "art_0123456789"
RESULT_LIMIT = 6000

record_like = st.fixed_dictionaries(
    {
        "handle": st.sampled_from([HANDLE, "art_ffffffffff", "../../outside"]) | json_values,
        "tool": st.text(max_size=8) | json_values,
        "chars": st.integers(min_value=-3, max_value=10**6) | json_values,
    },
    optional={"created": json_values, "card": json_values, "preview": json_values},
)
records = st.one_of(
    st.none(),  # no metadata file
    st.binary(max_size=200),
    json_values.map(json.dumps).map(str.encode),
    record_like.map(json.dumps).map(str.encode),
)
texts = st.one_of(
    st.none(),  # no text file
    st.binary(max_size=400),
    st.text(max_size=400).map(lambda t: t.encode("utf-8", "surrogatepass")),
)
GOOD_RECORD = json.dumps({"handle": HANDLE, "tool": "http_get", "chars": 5}).encode()
DEEP_RECORD = SLOW_TEXTS[0].encode()  # 5,000 brackets deep: past what json.loads can nest


def _lay(folder: Path, record: bytes | None, text: bytes | None) -> None:
    """Put (or take away) the artifact's two files."""
    folder.mkdir(parents=True, exist_ok=True)
    for suffix, data in ((".json", record), (".txt", text)):
        path = folder / f"{HANDLE}{suffix}"
        if data is None:
            path.unlink(missing_ok=True)
        else:
            path.write_bytes(data)


@QUICK
@given(records, texts)
@example(GOOD_RECORD, b"\xff\xfe not utf-8")
@example(GOOD_RECORD, None)
@example(DEEP_RECORD, b"text")
@example(b'{"handle": "art_0123456789", "tool": "t", "chars": 1}' + b" " * 70_000, b"x")
@example(json.dumps({"handle": "../../outside", "tool": "t", "chars": 1}).encode(), b"x")
def test_the_store_has_an_outcome_for_any_files(
    tmp_path_factory, record: bytes | None, text: bytes | None
) -> None:
    store = ArtifactStore(tmp_path_factory.mktemp("home"))
    _lay(store.folder, record, text)
    try:
        artifact = store.get(HANDLE)
        read = store.text(artifact)
    except ConfigError as exc:
        assert "\n" not in str(exc) and HANDLE in str(exc)
        assert _found(store, HANDLE) is None or text is None or "text" in str(exc)
        return
    assert artifact.handle == HANDLE and _found(store, HANDLE) == artifact
    assert text is not None and read.encode("utf-8", "surrogatepass") == text


# through the CLI each example costs two commands: fewer of them, the store test has the rest
@pytest.mark.slow  # a few seconds on 2 cores: in `make test-slow`
@settings(QUICK, max_examples=10)
@given(records, texts)
@example(GOOD_RECORD, b"\xff\xfe not utf-8")
@example(GOOD_RECORD, None)
@example(DEEP_RECORD, b"text")
@example(json.dumps({"handle": "../../outside", "tool": "t", "chars": 1}).encode(), b"x")
def test_artifacts_show_has_an_outcome_for_any_files(
    tiny, home: Path, record: bytes | None, text: bytes | None
) -> None:
    _lay(home / "artifacts", record, text)
    for args in (("artifacts", "show", HANDLE), ("artifacts", "show", HANDLE, "--json")):
        result = tiny(*args)
        assert result.exit_code in (0, 2), result.output
        if result.exit_code == 2:
            [line] = result.stderr.splitlines()
            assert line.startswith("tiny: error: ") and HANDLE in line
        elif "--json" in args:
            shown = json.loads(result.stdout)
            assert shown["handle"] == HANDLE and isinstance(shown["text"], str)
        else:
            assert text is not None and result.stdout.encode() == text


@QUICK
@given(records, texts, st.sampled_from([{}, {"offset": 3, "length": 5}, {"query": "lorem ipsum"}]))
@example(GOOD_RECORD, b"\xff\xfe not utf-8", {})
@example(GOOD_RECORD, None, {"query": "lorem"})
@example(GOOD_RECORD, b"", {"query": "lorem"})
@example(GOOD_RECORD, b"the of and", {"query": "lorem"})
def test_read_artifact_has_an_outcome_for_any_files(
    tmp_path_factory, record: bytes | None, text: bytes | None, arguments: dict
) -> None:
    home = tmp_path_factory.mktemp("home")
    store = ArtifactStore(home)
    _lay(store.folder, record, text)
    # held since the run began (--artifact), its files damaged since; or as the record says
    held = [_found(store, HANDLE) or Artifact(HANDLE, "http_get", 5)]
    tool = store.reader(lambda: held, RESULT_LIMIT)
    try:
        answer = tool(handle=HANDLE, **arguments)
    except ToolCallError as exc:
        assert "\n" not in str(exc)  # one line back to the model
        return
    assert isinstance(answer, str) and HANDLE in answer


def _found(store: ArtifactStore, handle: str) -> Artifact | None:
    """The artifact under `handle`, or None where `get` refuses it (missing or damaged)."""
    try:
        return store.get(handle)
    except ConfigError:
        return None
