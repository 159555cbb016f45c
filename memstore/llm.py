"""The litellm-backed LLMCallable. litellm is imported lazily, on the first call."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

from memstore.config import MemstoreConfig
from memstore.synthesis import json_schema_response_format


@dataclass(frozen=True)
class LLMUsage:
    """What one call cost: tokens as litellm reports them (None if not reported), cost in
    USD (None when litellm does not know the model's price), wall time in seconds."""

    model: str
    prompt_tokens: int | None
    completion_tokens: int | None
    total_tokens: int | None
    cost_usd: float | None
    seconds: float


def _import_litellm() -> Any:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True  # no "Give Feedback" banners on stdout
    return litellm


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class LiteLLMCompletion:
    """Call ``litellm.completion`` with the configured model; return the answer's text.

    After each successful call ``last_usage`` holds an LLMUsage; the running totals are in
    ``calls``, ``prompt_tokens``, ``completion_tokens`` and ``cost_usd``. A failed call
    sets ``last_usage`` to None and raises litellm's exception (``synthesize`` classifies it).
    """

    def __init__(
        self,
        config: MemstoreConfig,
        *,
        response_format: dict[str, Any] | None = None,
        use_response_format: bool = True,
    ) -> None:
        if not config.model:
            raise ValueError("no model configured: use the offline recorder instead")
        self.config = config
        self.response_format = (
            (response_format or json_schema_response_format()) if use_response_format else None
        )
        self.last_usage: LLMUsage | None = None
        self.calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.cost_usd = 0.0

    def request_kwargs(self, messages: list[dict[str, str]]) -> dict[str, Any]:
        """The keyword arguments given to ``litellm.completion`` (handy in tests and logs)."""
        config = self.config
        kwargs: dict[str, Any] = {
            "model": config.model,
            "messages": messages,
            "temperature": config.temperature,
            "max_tokens": config.max_tokens,
            "timeout": config.timeout,
            "num_retries": config.num_retries,
        }
        if config.api_base:
            kwargs["api_base"] = config.api_base
        if config.api_key:
            kwargs["api_key"] = config.api_key
        if self.response_format is not None:
            kwargs["response_format"] = self.response_format
        return kwargs

    def __call__(self, messages: list[dict[str, str]]) -> str:
        litellm = _import_litellm()
        self.last_usage = None
        started = time.perf_counter()
        response = litellm.completion(**self.request_kwargs(messages))
        seconds = time.perf_counter() - started

        usage = getattr(response, "usage", None)
        prompt_tokens = _int_or_none(getattr(usage, "prompt_tokens", None))
        completion_tokens = _int_or_none(getattr(usage, "completion_tokens", None))
        total_tokens = _int_or_none(getattr(usage, "total_tokens", None))
        try:
            cost = float(litellm.completion_cost(completion_response=response))
        except Exception:  # noqa: BLE001 - unknown model price: no cost, not a failure
            cost = None
        self.last_usage = LLMUsage(
            model=str(self.config.model),
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            total_tokens=total_tokens,
            cost_usd=cost,
            seconds=seconds,
        )
        self.calls += 1
        self.prompt_tokens += prompt_tokens or 0
        self.completion_tokens += completion_tokens or 0
        self.cost_usd += cost or 0.0

        try:
            content = response.choices[0].message.content
        except (AttributeError, IndexError, TypeError):
            content = None
        return content if isinstance(content, str) else ""
