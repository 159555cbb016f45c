"""LiteLLMCompletion + synthesize against the fake OpenAI-compatible server (no network)."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fake_openai_server import FakeOpenAIServer, FakeReply  # noqa: E402

from memstore.config import MemstoreConfig  # noqa: E402
from memstore.llm import LiteLLMCompletion, LLMUsage  # noqa: E402
from memstore.models import Persistence  # noqa: E402
from memstore.synthesis import (  # noqa: E402
    LLMCallError,
    SynthesisError,
    SynthesisErrorKind,
    classify_llm_exception,
    synthesize,
)

MESSAGES = [
    {"role": "system", "content": "You answer with JSON."},
    {"role": "user", "content": "Location: Troll Room (ID: 152)"},
]
VALID = json.dumps(
    {
        "should_remember": True,
        "category": "DANGER",
        "memory_title": "Troll attacks on sight",
        "memory_text": "The troll swings his axe at anyone who enters.",
        "persistence": "permanent",
        "supersedes": [],
        "reasoning": "death by troll",
    }
)


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as running:
        yield running


def completion(server: FakeOpenAIServer, **settings: object) -> LiteLLMCompletion:
    values: dict[str, object] = {"num_retries": 0, "timeout": 5.0}
    values.update(settings)
    config = MemstoreConfig(
        model="openai/fake-model", api_base=server.api_base, api_key="test", **values
    )
    return LiteLLMCompletion(config)


def failure(server: FakeOpenAIServer, **settings: object) -> SynthesisError:
    llm = completion(server, **settings)
    with pytest.raises(SynthesisError) as caught:
        synthesize(llm, MESSAGES)
    assert llm.last_usage is None or caught.value.kind in (
        SynthesisErrorKind.INVALID_JSON,
        SynthesisErrorKind.SCHEMA,
    )
    return caught.value


def test_valid_answer_round_trip(server: FakeOpenAIServer) -> None:
    server.enqueue(FakeReply(content=VALID))
    llm = completion(server)
    raw, response = synthesize(llm, MESSAGES)
    assert raw == VALID
    assert response.memory_title == "Troll attacks on sight"
    assert response.persistence is Persistence.PERMANENT


def test_request_carries_sampling_settings_and_response_format(server: FakeOpenAIServer) -> None:
    server.enqueue(FakeReply(content=VALID))
    synthesize(completion(server), MESSAGES)
    assert len(server.requests) == 1
    request = server.requests[0]
    assert request.path == "/v1/chat/completions"
    body = request.body
    assert body["model"] == "fake-model"
    assert body["temperature"] == 0.3
    assert body["max_tokens"] == 1000
    assert body["messages"] == MESSAGES
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["strict"] is False
    assert request.headers.get("Authorization") == "Bearer test"


def test_usage_is_readable_after_each_call(server: FakeOpenAIServer) -> None:
    usage = {"prompt_tokens": 321, "completion_tokens": 45, "total_tokens": 366}
    server.enqueue(FakeReply(content=VALID, usage=usage), FakeReply(content=VALID))
    llm = completion(server)
    synthesize(llm, MESSAGES)
    first = llm.last_usage
    assert isinstance(first, LLMUsage)
    assert (first.prompt_tokens, first.completion_tokens, first.total_tokens) == (321, 45, 366)
    assert first.cost_usd is None  # litellm has no price for fake-model
    assert first.model == "openai/fake-model" and first.seconds >= 0
    synthesize(llm, MESSAGES)
    assert llm.calls == 2
    assert llm.prompt_tokens == 321 + 120 and llm.completion_tokens == 45 + 30


def test_fenced_answer_is_accepted(server: FakeOpenAIServer) -> None:
    server.enqueue(FakeReply(content=f"```json\n{VALID}\n```"))
    assert synthesize(completion(server), MESSAGES)[1].should_remember


def test_malformed_json_is_invalid_json(server: FakeOpenAIServer) -> None:
    server.enqueue(FakeReply(content='{"should_remember": tru'))
    assert failure(server).kind is SynthesisErrorKind.INVALID_JSON


def test_empty_content_is_invalid_json(server: FakeOpenAIServer) -> None:
    server.enqueue(FakeReply(content=""))
    assert failure(server).kind is SynthesisErrorKind.INVALID_JSON


def test_schema_breaking_answer_is_schema(server: FakeOpenAIServer) -> None:
    server.enqueue(FakeReply(content=json.dumps({"should_remember": True, "reasoning": "x"})))
    error = failure(server)
    assert error.kind is SynthesisErrorKind.SCHEMA
    assert "persistence" in error.message


def test_server_error_then_success_with_retries(server: FakeOpenAIServer) -> None:
    server.enqueue(FakeReply(status=500), FakeReply(content=VALID))
    _, response = synthesize(completion(server, num_retries=1), MESSAGES)
    assert response.should_remember
    assert len(server.requests) == 2


def test_server_error_without_retries_is_provider_error(server: FakeOpenAIServer) -> None:
    server.enqueue(FakeReply(status=500))
    error = failure(server, num_retries=0)
    assert isinstance(error, LLMCallError)
    assert error.kind is SynthesisErrorKind.PROVIDER_ERROR
    assert len(server.requests) == 1


def test_too_many_requests_is_rate_limit(server: FakeOpenAIServer) -> None:
    server.enqueue(FakeReply(status=429))
    assert failure(server, num_retries=0).kind is SynthesisErrorKind.RATE_LIMIT


def test_slow_server_is_timeout(server: FakeOpenAIServer) -> None:
    server.enqueue(FakeReply(content=VALID, delay=3.0))
    started = time.perf_counter()
    assert failure(server, num_retries=0, timeout=0.3).kind is SynthesisErrorKind.TIMEOUT
    assert time.perf_counter() - started < 2.5


def test_garbage_http_body_is_provider_error(server: FakeOpenAIServer) -> None:
    server.enqueue(FakeReply(status=200, body="<html>not an API</html>"))
    assert failure(server).kind is SynthesisErrorKind.PROVIDER_ERROR


def test_unreachable_server_is_a_synthesis_error() -> None:
    with FakeOpenAIServer() as server:
        api_base = server.api_base
    config = MemstoreConfig(
        model="openai/fake-model", api_base=api_base, api_key="test", num_retries=0, timeout=2
    )
    with pytest.raises(SynthesisError) as caught:
        synthesize(LiteLLMCompletion(config), MESSAGES)
    assert caught.value.kind in (SynthesisErrorKind.PROVIDER_ERROR, SynthesisErrorKind.TIMEOUT)


def test_injected_callable_exceptions_never_escape_raw() -> None:
    def broken(messages: list[dict[str, str]]) -> str:
        raise KeyError("boom")

    with pytest.raises(LLMCallError) as caught:
        synthesize(broken, MESSAGES)
    assert caught.value.kind is SynthesisErrorKind.PROVIDER_ERROR
    assert isinstance(caught.value.__cause__, KeyError)


def test_injected_callable_timeout_and_non_text_answer() -> None:
    def slow(messages: list[dict[str, str]]) -> str:
        raise TimeoutError("too slow")

    with pytest.raises(SynthesisError) as caught:
        synthesize(slow, MESSAGES)
    assert caught.value.kind is SynthesisErrorKind.TIMEOUT
    with pytest.raises(SynthesisError) as caught:
        synthesize(lambda messages: None, MESSAGES)  # type: ignore[arg-type,return-value]
    assert caught.value.kind is SynthesisErrorKind.PROVIDER_ERROR


def test_injected_callable_answer_is_parsed() -> None:
    seen: list[list[dict[str, str]]] = []

    def scripted(messages: list[dict[str, str]]) -> str:
        seen.append(messages)
        return VALID

    raw, response = synthesize(scripted, MESSAGES)
    assert seen == [MESSAGES] and raw == VALID and response.should_remember


def test_litellm_exception_classes_are_classified() -> None:
    import litellm

    def make(cls: type, **extra: object) -> BaseException:
        return cls(message="m", llm_provider="openai", model="fake-model", **extra)

    assert classify_llm_exception(make(litellm.Timeout)) is SynthesisErrorKind.TIMEOUT
    assert classify_llm_exception(make(litellm.RateLimitError)) is SynthesisErrorKind.RATE_LIMIT
    assert (
        classify_llm_exception(make(litellm.APIConnectionError))
        is SynthesisErrorKind.PROVIDER_ERROR
    )
    assert classify_llm_exception(RuntimeError("x")) is SynthesisErrorKind.PROVIDER_ERROR


def test_no_model_configured_is_refused() -> None:
    with pytest.raises(ValueError, match="offline recorder"):
        LiteLLMCompletion(MemstoreConfig())


def test_request_kwargs_pass_every_setting() -> None:
    config = MemstoreConfig(
        model="openai/m", api_base="http://x/v1", api_key="k", timeout=7, num_retries=3
    )
    kwargs = LiteLLMCompletion(config).request_kwargs(MESSAGES)
    assert kwargs["timeout"] == 7  # one attempt's share: all of it by default
    assert kwargs["num_retries"] == 0 and kwargs["max_retries"] == 0  # memstore retries
    assert LiteLLMCompletion(config).request_kwargs(MESSAGES, timeout=1.5)["timeout"] == 1.5
    assert kwargs["api_base"] == "http://x/v1" and kwargs["api_key"] == "k"
    assert kwargs["temperature"] == 0.3 and kwargs["max_tokens"] == 1000
    assert "response_format" in kwargs
    bare = LiteLLMCompletion(config, use_response_format=False).request_kwargs(MESSAGES)
    assert "response_format" not in bare


def test_importing_memstore_synthesis_does_not_import_litellm() -> None:
    import subprocess

    code = (
        "import sys, memstore.synthesis, memstore.llm, memstore.prompt, memstore.recorder;"
        "print('litellm' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "False"


# --- memstore demo with a model that fails --------------------------------------------------


def test_demo_report_shows_llm_failures_by_kind() -> None:
    from memstore.demo import DemoReport

    report = DemoReport(
        mode="llm", model="openai/m", turns=10, llm_calls=5, failures={"timeout": 2, "schema": 1}
    )
    text = report.render()
    assert "LLM calls: 5, 3 failed (timeout 2, schema 1) (llm: openai/m)" in text
    assert not report.all_llm_calls_failed
    offline = DemoReport(mode="offline", model="offline-recorder", turns=10)
    assert "LLM calls: 0 (offline: offline-recorder)" in offline.render()
    assert not offline.all_llm_calls_failed


def test_demo_with_an_injected_llm_that_always_fails_says_why(tmp_path: Path) -> None:
    from memstore.demo import run_demo
    from memstore.store import MemoryStore
    from tests.fixtures.walkthrough import rom_or_skip

    rom = rom_or_skip()

    def down(messages: list[dict[str, str]]) -> str:
        raise ConnectionError("provider down")

    with MemoryStore.open(tmp_path / "demo.db") as store:
        report = run_demo(store, episodes=1, moves=5, rom=rom, llm=down, out=None, progress=False)
    assert report.llm_calls > 0
    assert report.failures == {"provider_error": report.llm_calls}
    assert report.all_llm_calls_failed
    text = report.render()
    calls = report.llm_calls
    assert f"LLM calls: {calls}, all {calls} failed (provider_error {calls})" in text
    assert "every LLM call failed, so no memory was synthesised" in text


def test_demo_cli_exits_1_when_every_llm_call_failed(
    server: FakeOpenAIServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from memstore import cli
    from tests.fixtures.walkthrough import rom_or_skip

    rom = rom_or_skip().resolve()  # the test runs in tmp_path
    (tmp_path / "pyproject.toml").write_text("[tool.memstore]\nnum_retries = 0\ntimeout = 5\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEMSTORE_API_BASE", server.api_base)
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    server.enqueue(*[FakeReply(status=503)] * 50)
    code = cli.main(
        ["--db", str(tmp_path / "demo.db"), "demo", "--episodes", "1", "--moves", "5",
         "--rom", str(rom), "--out", str(tmp_path / "Memories.md"), "--no-progress",
         "--model", "openai/fake-model"]
    )  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 1, err
    calls = len(server.requests)
    assert calls > 0, err
    assert f"LLM calls: {calls}, all {calls} failed (provider_error {calls})" in out
    assert "every LLM call failed, so no memory was synthesised" in out
    (line,) = err.strip().splitlines()
    assert line.startswith("memstore: error: every LLM call failed") and "503" in line
