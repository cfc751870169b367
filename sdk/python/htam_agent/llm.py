"""A minimal OpenAI-compatible chat-completions client (plain urllib, no extra dependencies).

Works with vLLM, SGLang, llama.cpp's server, Ollama's /v1 and hosted endpoints: POST
{base_url}/chat/completions with {"model", "messages", ...}; the reply's choices[0].message.content
is the text, its usage field the token counts (estimated from the text when a server omits it).
Transient failures (HTTP 429 and 5xx, connection reset or refused, timeouts) are retried with
exponential backoff, honouring Retry-After.
"""

from __future__ import annotations

import json
import os
import random
import socket
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Callable, List, Optional

ENV_BASE_URL = "HTAM_LLM_BASE_URL"
ENV_MODEL = "HTAM_LLM_MODEL"
ENV_API_KEY = "HTAM_LLM_API_KEY"


class LLMError(Exception):
    """The model endpoint could not give an answer (after retries, or a permanent error)."""


@dataclass
class LLMConfig:
    base_url: str = "http://127.0.0.1:8000/v1"
    model: str = ""
    api_key: str = ""
    temperature: float = 0.2
    max_tokens: int = 4096
    timeout_s: float = 300.0
    max_retries: int = 5
    backoff_s: float = 1.0          # first retry waits this long, doubling each time
    backoff_max_s: float = 30.0

    @classmethod
    def from_env(cls, **overrides) -> "LLMConfig":
        cfg = cls(base_url=os.environ.get(ENV_BASE_URL, cls.base_url),
                  model=os.environ.get(ENV_MODEL, ""),
                  api_key=os.environ.get(ENV_API_KEY, ""))
        for k, v in overrides.items():
            if v is not None:
                setattr(cfg, k, v)
        return cfg


@dataclass
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    estimated: bool      # token counts estimated (the server sent no usage)
    attempts: int        # HTTP attempts it took


def estimate_tokens(text: str) -> int:
    """Rough count for servers without a usage field: about four characters per token."""
    return max(1, (len(text) + 3) // 4) if text else 0


def _retryable_http(code: int) -> bool:
    return code == 429 or code == 408 or 500 <= code <= 599


class ChatClient:
    """Thread-compatible (one request at a time per instance)."""

    def __init__(self, config: LLMConfig, sleep: Callable[[float], None] = time.sleep,
                 log: Optional[Callable[[str], None]] = None):
        if not config.base_url:
            raise LLMError(f"no model endpoint: set {ENV_BASE_URL} or --llm-base-url")
        self.config = config
        self._sleep = sleep
        self._log = log or (lambda msg: None)
        self.total_prompt_tokens = 0
        self.total_completion_tokens = 0
        self.requests = 0

    def _url(self) -> str:
        base = self.config.base_url.rstrip("/")
        return base if base.endswith("/chat/completions") else base + "/chat/completions"

    def _delay(self, attempt: int, retry_after: Optional[str]) -> float:
        if retry_after:
            try:
                return min(float(retry_after), self.config.backoff_max_s)
            except ValueError:
                pass
        base = self.config.backoff_s * (2 ** attempt)
        return min(base * (1.0 + 0.1 * random.random()), self.config.backoff_max_s)

    def complete(self, messages: List[dict]) -> Completion:
        body = {"model": self.config.model or "default", "messages": messages,
                "temperature": self.config.temperature, "max_tokens": self.config.max_tokens,
                "stream": False}
        data = json.dumps(body).encode("utf-8")
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.config.api_key:
            headers["Authorization"] = f"Bearer {self.config.api_key}"
        last_error = ""
        for attempt in range(self.config.max_retries + 1):
            req = urllib.request.Request(self._url(), data=data, headers=headers, method="POST")
            retry_after = None
            try:
                with urllib.request.urlopen(req, timeout=self.config.timeout_s) as resp:
                    payload = resp.read()
                return self._parse(payload, messages, attempt + 1)
            except urllib.error.HTTPError as e:
                detail = e.read()[:500].decode("utf-8", "replace") if e.fp else ""
                last_error = f"HTTP {e.code}: {detail.strip()}"
                if not _retryable_http(e.code):
                    raise LLMError(f"{self._url()}: {last_error}") from e
                retry_after = e.headers.get("Retry-After") if e.headers else None
            except (urllib.error.URLError, ConnectionError, socket.timeout, TimeoutError) as e:
                reason = getattr(e, "reason", e)
                last_error = f"connection: {reason}"
            except LLMError as e:
                # A malformed body is not transient, unless the server cut it off mid-way.
                raise e
            if attempt < self.config.max_retries:
                delay = self._delay(attempt, retry_after)
                self._log(f"model endpoint: {last_error}; retry {attempt + 1}/"
                          f"{self.config.max_retries} in {delay:.1f}s")
                self._sleep(delay)
        raise LLMError(f"{self._url()}: gave up after {self.config.max_retries + 1} attempts: "
                       f"{last_error}")

    def _parse(self, payload: bytes, messages: List[dict], attempts: int) -> Completion:
        try:
            reply = json.loads(payload.decode("utf-8"))
            text = reply["choices"][0]["message"]["content"] or ""
        except (ValueError, KeyError, IndexError, TypeError) as e:
            raise LLMError(f"unexpected reply from {self._url()}: {payload[:300]!r}") from e
        usage = reply.get("usage") or {}
        pt, ct = usage.get("prompt_tokens"), usage.get("completion_tokens")
        estimated = not isinstance(pt, int) or not isinstance(ct, int)
        if estimated:
            pt = estimate_tokens("".join(str(m.get("content", "")) for m in messages))
            ct = estimate_tokens(text)
        self.requests += 1
        self.total_prompt_tokens += pt
        self.total_completion_tokens += ct
        return Completion(text=text, prompt_tokens=pt, completion_tokens=ct,
                          estimated=estimated, attempts=attempts)
