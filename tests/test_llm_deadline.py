"""``timeout`` bounds the whole model call, retries included (issue 14).

Local servers on 127.0.0.1 that trickle, hang, close the connection or fail: every call
returns to the agent loop by the deadline (plus a margin for a slow host), a call with no
answer by then is a ``timeout``, and retries work without litellm's optional ``tenacity``.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from fake_openai_server import FakeOpenAIServer, FakeReply  # noqa: E402

from memstore.config import MemstoreConfig  # noqa: E402
from memstore.llm import LiteLLMCompletion, import_litellm  # noqa: E402
from memstore.manager import SimpleMemoryManager  # noqa: E402
from memstore.store import MemoryStore  # noqa: E402
from memstore.synthesis import SynthesisError, SynthesisErrorKind, synthesize  # noqa: E402
from memstore.triggers import ZMachineContext  # noqa: E402

TIMEOUT = 2.0
#: how late a call may return after its deadline on a slow host
MARGIN = 1.5
MESSAGES = [{"role": "user", "content": "Location: Clearing (ID: 3)"}]
VALID = json.dumps({"should_remember": False, "reasoning": "nothing new"})


@pytest.fixture(scope="module", autouse=True)
def _litellm_imported() -> None:
    """Import litellm once, before any clock starts (the import takes seconds)."""
    import_litellm()


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as running:
        yield running


def completion(api_base: str, **settings: Any) -> LiteLLMCompletion:
    values: dict[str, Any] = {"timeout": TIMEOUT, "num_retries": 2}
    values.update(settings)
    return LiteLLMCompletion(
        MemstoreConfig(model="openai/fake-model", api_base=api_base, api_key="test", **values)
    )


def timed_failure(llm: LiteLLMCompletion) -> tuple[SynthesisError, float]:
    started = time.perf_counter()
    with pytest.raises(SynthesisError) as caught:
        synthesize(llm, MESSAGES)
    return caught.value, time.perf_counter() - started


def test_a_trickling_server_is_a_timeout_at_the_deadline(server: FakeOpenAIServer) -> None:
    server.enqueue(*[FakeReply(content=VALID, trickle=0.5)] * 3)
    error, seconds = timed_failure(completion(server.api_base))
    assert error.kind is SynthesisErrorKind.TIMEOUT
    assert TIMEOUT - 0.1 <= seconds < TIMEOUT + MARGIN
    assert "2" in error.message  # says which deadline passed


def test_a_server_that_never_answers_is_a_timeout(server: FakeOpenAIServer) -> None:
    server.enqueue(*[FakeReply(content=VALID, delay=60)] * 3)
    error, seconds = timed_failure(completion(server.api_base))
    assert error.kind is SynthesisErrorKind.TIMEOUT
    assert seconds < TIMEOUT + MARGIN


def test_a_socket_that_accepts_and_never_reads_is_a_timeout() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)  # the kernel accepts; nobody ever reads or answers
        api_base = f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
        error, seconds = timed_failure(completion(api_base))
    assert error.kind is SynthesisErrorKind.TIMEOUT
    assert seconds < TIMEOUT + MARGIN


def test_a_server_that_closes_the_connection_is_retried_within_the_deadline(
    server: FakeOpenAIServer,
) -> None:
    server.enqueue(*[FakeReply(close=True)] * 3)
    error, seconds = timed_failure(completion(server.api_base))
    assert error.kind is SynthesisErrorKind.PROVIDER_ERROR
    assert "tenacity" not in error.message
    assert seconds < TIMEOUT + MARGIN
    assert 2 <= len(server.requests) <= 3  # retried, never more than num_retries allow


def test_a_server_error_then_a_valid_answer_succeeds_on_the_second_try_without_tenacity(
    server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "tenacity", None)  # as on a fresh install: not importable
    server.enqueue(FakeReply(status=500), FakeReply(content=VALID))
    llm = completion(server.api_base)
    raw, response = synthesize(llm, MESSAGES)
    assert raw == VALID and response.reasoning == "nothing new"
    assert len(server.requests) == 2
    assert llm.calls == 1 and llm.last_usage is not None


def test_failed_retries_report_the_real_cause_not_tenacity(
    server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "tenacity", None)
    server.enqueue(*[FakeReply(status=500)] * 5)
    error, seconds = timed_failure(completion(server.api_base, timeout=5.0))
    assert error.kind is SynthesisErrorKind.PROVIDER_ERROR
    assert "scripted error 500" in error.message and "tenacity" not in error.message
    assert len(server.requests) == 3  # one call and num_retries = 2 retries, no more
    assert seconds < 5.0


def test_a_rate_limit_is_retried(server: FakeOpenAIServer) -> None:
    server.enqueue(FakeReply(status=429), FakeReply(content=VALID))
    assert synthesize(completion(server.api_base), MESSAGES)[0] == VALID
    assert len(server.requests) == 2


def test_a_bad_request_is_not_retried(server: FakeOpenAIServer) -> None:
    server.enqueue(*[FakeReply(status=400)] * 3)
    error, _ = timed_failure(completion(server.api_base))
    assert error.kind is SynthesisErrorKind.PROVIDER_ERROR
    assert len(server.requests) == 1


def test_retries_stop_at_the_deadline(server: FakeOpenAIServer) -> None:
    server.enqueue(*[FakeReply(status=503)] * 20)
    error, seconds = timed_failure(completion(server.api_base, num_retries=10))
    assert error.kind is SynthesisErrorKind.PROVIDER_ERROR
    assert seconds < TIMEOUT + MARGIN
    assert 2 <= len(server.requests) < 11


def test_the_manager_counts_a_trickle_as_a_timeout_and_goes_on(
    server: FakeOpenAIServer, store: MemoryStore
) -> None:
    server.enqueue(*[FakeReply(content=VALID, trickle=0.5)] * 3)
    config = MemstoreConfig(
        model="openai/fake-model",
        api_base=server.api_base,
        api_key="test",
        timeout=TIMEOUT,
        num_retries=2,
    )
    manager = SimpleMemoryManager(store, config, episode=1)
    context = ZMachineContext(location_before=3, location_after=3)
    started = time.perf_counter()
    result = manager.record_action_outcome(3, "Clearing", "look", "x" * 150, context)
    assert time.perf_counter() - started < TIMEOUT + MARGIN
    assert result is None
    assert manager.get_status()["failures"] == {"timeout": 1}
    manager.close()
    (row,) = store.decision_log()
    assert row["error_kind"] == "timeout" and row["applied"] is None
    assert store.get_persistent_count() == 0
