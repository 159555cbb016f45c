"""The three memory query tools, their schemas and the dispatcher (fake LLM and fake server)."""

from __future__ import annotations

import inspect
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fake_openai_server import FakeOpenAIServer, FakeReply  # noqa: E402

from memstore.config import MemstoreConfig  # noqa: E402
from memstore.llm import LiteLLMCompletion  # noqa: E402
from memstore.memory_tools import (  # noqa: E402
    EMPTY_LOCATION,
    EMPTY_QUESTION,
    NO_MAP,
    NO_MEMORIES,
    NO_MEMORIES_TO_SEARCH,
    TOOL_SCHEMAS,
    MemoryToolkit,
    parse_query_answer,
)
from memstore.store import MemoryStore  # noqa: E402
from tests.map_helpers import (  # noqa: E402
    ATTIC,
    KITCHEN,
    NAMES,
    WEIRD,
    WEST,
    map_event,
    record_sample,
)


class FakeLLM:
    """Records the messages it gets and answers from a script (or raises a scripted error)."""

    def __init__(self, *answers: str | BaseException) -> None:
        self.answers = list(answers)
        self.calls: list[list[dict[str, str]]] = []

    def __call__(self, messages: list[dict[str, str]]) -> str:
        self.calls.append(messages)
        answer = self.answers.pop(0) if self.answers else "No relevant memories found."
        if isinstance(answer, BaseException):
            raise answer
        return answer


def populate(toolkit: MemoryToolkit) -> None:
    """Five memories; in importance order: egg (#1), lantern (#2), mailbox (#3), clearing (#4),
    songbird (#5)."""
    toolkit.add_memory("Mailbox contains a leaflet", 300, 5, 180, "West of House", 0, 5)
    toolkit.add_memory("Brass lantern on the trophy case", 800, 9, 193, "Living Room", 10, 12)
    toolkit.add_memory("A songbird sings in the trees", 200, 12, 34, "Forest Path", 10, 20)
    toolkit.add_memory("The path winds north to a clearing", 250, 14, 36, "forest path", 10, 22)
    toolkit.add_memory("Tree with a jewelled egg nest", 900, 15, 34, "Forest Path", 10, 23)


@pytest.fixture
def llm() -> FakeLLM:
    return FakeLLM()


@pytest.fixture
def toolkit(store: MemoryStore, llm: FakeLLM) -> MemoryToolkit:
    kit = MemoryToolkit(store, llm=llm, session_id="test-session")
    populate(kit)
    return kit


@pytest.fixture
def empty_toolkit(store: MemoryStore, llm: FakeLLM) -> MemoryToolkit:
    return MemoryToolkit(store, llm=llm)


# --- get_top_memories -------------------------------------------------------------------------


def test_top_memories_format(toolkit: MemoryToolkit) -> None:
    assert toolkit.get_top_memories(2) == (
        "Top 2 Most Important Memories:\n"
        "\n"
        "1. [Turn 15 @ Forest Path (#34)] Tree with a jewelled egg nest\n"
        "   Importance: 900/1000\n"
        "\n"
        "2. [Turn 9 @ Living Room (#193)] Brass lantern on the trophy case\n"
        "   Importance: 800/1000"
    )


def test_top_memories_default_is_ten_and_all_here(toolkit: MemoryToolkit) -> None:
    text = toolkit.get_top_memories()
    assert text.startswith("Top 5 Most Important Memories:")
    assert text.count("Importance: ") == 5


@pytest.mark.parametrize(("limit", "shown"), [(0, 1), (-3, 1), (1, 1), (50, 20), ("3", 3)])
def test_top_memories_limit_is_clamped(store: MemoryStore, limit: object, shown: int) -> None:
    kit = MemoryToolkit(store)
    for n in range(25):
        kit.add_memory(f"Distinct discovery number {n:02d} in room {n}", 10 + n, n, n, f"Room {n}")
    text = kit.get_top_memories(limit)  # type: ignore[arg-type]
    assert text.startswith(f"Top {shown} Most Important Memories:")
    assert text.count("Importance: ") == shown


def test_top_memories_rejects_a_non_number(toolkit: MemoryToolkit) -> None:
    assert toolkit.get_top_memories("many").startswith("Error: limit must be a whole number")  # type: ignore[arg-type]


def test_top_memories_when_empty(empty_toolkit: MemoryToolkit) -> None:
    assert empty_toolkit.get_top_memories() == NO_MEMORIES


def test_multiline_content_stays_on_its_numbered_line(empty_toolkit: MemoryToolkit) -> None:
    empty_toolkit.add_memory("Line one\n2. forged entry", 500, 1, 1, "Here")
    assert "1. [Turn 1 @ Here (#1)] Line one 2. forged entry\n" in (
        empty_toolkit.get_top_memories() + "\n"
    )


# --- query_memories ---------------------------------------------------------------------------


def test_query_sends_the_numbered_memories_and_the_question(
    toolkit: MemoryToolkit, llm: FakeLLM
) -> None:
    llm.answers.append("Relevant memories: #2\nAnswer: The lantern is in the Living Room.")
    toolkit.query_memories("Where is the brass lantern?")
    [messages] = llm.calls
    assert [m["role"] for m in messages] == ["system", "user"]
    assert "searching their memory notes" in messages[0]["content"]
    assert "Relevant memories: #3, #7, #12" in messages[0]["content"]
    user = messages[1]["content"]
    assert "1. [Turn 15 @ Forest Path (#34), importance=900] Tree with a jewelled egg nest" in user
    assert "2. [Turn 9 @ Living Room (#193), importance=800] Brass lantern on the trophy" in user
    assert "5. [Turn 12 @ Forest Path (#34), importance=200]" in user
    assert "Question: Where is the brass lantern?" in user
    assert user.rstrip().endswith("Which memories are relevant and what's the answer?")


def test_query_answer_lists_cited_memories_and_drops_invented_ones(
    toolkit: MemoryToolkit, llm: FakeLLM
) -> None:
    llm.answers.append(
        "Relevant memories: #2, #99, #3\nAnswer: Take the lantern from the Living Room."
    )
    result = toolkit.query_memories("What light source do I have?")
    assert result == (
        "Question: What light source do I have?\n"
        "Answer: Take the lantern from the Living Room.\n"
        "\n"
        "Relevant memories:\n"
        "#2 [Turn 9 @ Living Room (#193)] Brass lantern on the trophy case (importance: 800/1000)\n"
        "#3 [Turn 5 @ West of House (#180)] Mailbox contains a leaflet (importance: 300/1000)\n"
        "\n"
        "Dropped citations of memories that do not exist: #99."
    )


def test_query_with_only_invented_citations_discards_the_answer(
    toolkit: MemoryToolkit, llm: FakeLLM
) -> None:
    llm.answers.append("Relevant memories: #0, #99\nAnswer: The key is under the mat.")
    result = toolkit.query_memories("Where is the key?")
    assert result.startswith("No relevant memories found.")
    assert "#0, #99" in result and "discarded" in result
    assert "under the mat" not in result


def test_query_with_no_relevant_memories(toolkit: MemoryToolkit, llm: FakeLLM) -> None:
    llm.answers.append("No relevant memories found.")
    assert toolkit.query_memories("Where is the rusty key?") == (
        "No relevant memories found. (question: Where is the rusty key?)"
    )


@pytest.mark.parametrize("question", ["", "   ", None])
def test_empty_question_needs_no_llm_call(
    toolkit: MemoryToolkit, llm: FakeLLM, question: object
) -> None:
    assert toolkit.query_memories(question) == EMPTY_QUESTION  # type: ignore[arg-type]
    assert llm.calls == []


def test_query_on_an_empty_store_needs_no_llm_call(
    empty_toolkit: MemoryToolkit, llm: FakeLLM
) -> None:
    assert empty_toolkit.query_memories("Where is the lantern?") == NO_MEMORIES_TO_SEARCH
    assert llm.calls == []


def test_query_without_a_model_says_it_needs_one(store: MemoryStore) -> None:
    kit = MemoryToolkit(store)
    assert kit.llm is None
    populate(kit)
    result = kit.query_memories("Where is the lantern?")
    assert result.startswith("Error: query_memories needs a language model")
    assert "#" not in result  # no memory numbers, invented or not


def test_query_llm_failure_is_an_error_string(toolkit: MemoryToolkit, llm: FakeLLM) -> None:
    llm.answers.append(TimeoutError("took too long"))
    result = toolkit.query_memories("Where is the lantern?")
    assert result.startswith("Error: query_memories could not get an answer")
    assert "timeout" in result and "took too long" in result


def test_query_empty_llm_answer_is_an_error_string(toolkit: MemoryToolkit, llm: FakeLLM) -> None:
    llm.answers.append("  ")
    assert toolkit.query_memories("Where?") == (
        "Error: query_memories got an empty answer from the memory model."
    )


def test_query_sends_at_most_max_query_memories(store: MemoryStore, llm: FakeLLM) -> None:
    kit = MemoryToolkit(store, llm=llm, max_query_memories=2)
    populate(kit)
    kit.query_memories("Anything?")
    user = llm.calls[0][1]["content"]
    assert "2. [Turn 9" in user and "3. [" not in user


@pytest.mark.parametrize(
    ("raw", "cited", "answer"),
    [
        ("Relevant memories: #3, #7, #12\nAnswer: Go north.", [3, 7, 12], "Go north."),
        ("**Relevant memories:** 3, 3, #1\n**Answer:** Two\nlines.", [3, 1], "Two\nlines."),
        ("relevant memory: #4", [4], ""),
        ("Just prose, mentions #5.", [], "Just prose, mentions #5."),
    ],
)
def test_parse_query_answer(raw: str, cited: list[int], answer: str) -> None:
    assert parse_query_answer(raw) == (cited, answer)


# --- get_location_memories --------------------------------------------------------------------


def test_location_by_number_is_summarised_by_the_llm(toolkit: MemoryToolkit, llm: FakeLLM) -> None:
    llm.answers.append("A mailbox with a leaflet stands here.")
    assert toolkit.get_location_memories(180) == (
        "Memories from West of House (#180) (1 memory):\nA mailbox with a leaflet stands here."
    )
    [messages] = llm.calls
    assert messages[0]["content"].startswith("You are summarizing memories about a specific")
    assert messages[1]["content"] == (
        "Location: West of House (#180)\n\nMemories from this location:\n"
        "- Turn 5: Mailbox contains a leaflet (importance: 300)\n\n"
        "Provide a 2-3 sentence summary of what we learned here."
    )


@pytest.mark.parametrize("asked", ["193", " #193 ", "living ROOM", "Living Room"])
def test_location_by_number_string_or_name(
    toolkit: MemoryToolkit, llm: FakeLLM, asked: str
) -> None:
    llm.answers.append("The lantern is here.")
    assert toolkit.get_location_memories(asked) == (
        "Memories from Living Room (#193) (1 memory):\nThe lantern is here."
    )


def test_ambiguous_name_lists_every_location(toolkit: MemoryToolkit, llm: FakeLLM) -> None:
    llm.answers += ["Summary of 34.", "Summary of 36."]
    result = toolkit.get_location_memories("forest path")
    assert result == (
        "'forest path' matches 2 different locations: #34 Forest Path, #36 forest path. "
        "Each is shown separately; use the number to ask about one.\n\n"
        "Memories from Forest Path (#34) (2 memories):\nSummary of 34.\n\n"
        "Memories from forest path (#36) (1 memory):\nSummary of 36."
    )
    assert len(llm.calls) == 2
    assert "jewelled egg" in llm.calls[0][1]["content"]
    assert "clearing" in llm.calls[1][1]["content"]


def test_location_without_a_model_is_listed_verbatim(store: MemoryStore) -> None:
    kit = MemoryToolkit(store)
    populate(kit)
    assert kit.get_location_memories("Forest Path") == (
        "'Forest Path' matches 2 different locations: #34 Forest Path, #36 forest path. "
        "Each is shown separately; use the number to ask about one.\n\n"
        "Memories from Forest Path (#34) (2 memories):\n"
        "- Turn 15: Tree with a jewelled egg nest (importance: 900/1000)\n"
        "- Turn 12: A songbird sings in the trees (importance: 200/1000)\n\n"
        "Memories from forest path (#36) (1 memory):\n"
        "- Turn 14: The path winds north to a clearing (importance: 250/1000)"
    )


@pytest.mark.parametrize("asked", ["Kitchen", "999", 999, -4])
def test_unknown_location(toolkit: MemoryToolkit, llm: FakeLLM, asked: object) -> None:
    assert toolkit.get_location_memories(asked) == (  # type: ignore[arg-type]
        f"No memories recorded for '{str(asked).strip()}'. Either you haven't been there or "
        "nothing important was noted."
    )
    assert llm.calls == []


@pytest.mark.parametrize("asked", ["", "  ", None, True])
def test_empty_location(toolkit: MemoryToolkit, llm: FakeLLM, asked: object) -> None:
    assert toolkit.get_location_memories(asked) == EMPTY_LOCATION  # type: ignore[arg-type]
    assert llm.calls == []


def test_location_summary_failure_still_lists_the_memories(
    toolkit: MemoryToolkit, llm: FakeLLM
) -> None:
    llm.answers.append(RuntimeError("provider down"))
    result = toolkit.get_location_memories("West of House")
    assert result.startswith(
        "Memories from West of House (#180) (1 memory):\n"
        "- Turn 5: Mailbox contains a leaflet (importance: 300/1000)\n"
    )
    assert "(Error: get_location_memories could not get an answer" in result
    assert "provider_error" in result and "provider down" in result


def test_tools_never_raise_on_store_errors(store: MemoryStore, llm: FakeLLM) -> None:
    kit = MemoryToolkit(store, llm=llm)
    populate(kit)
    store.close()
    arguments = ((5,), ("Where?",), ("Kitchen",), ("Kitchen", "Attic"))
    for tool, given in zip(kit.tools(), arguments, strict=True):
        result = tool(*given)
        assert result.startswith(f"Error: {tool.__name__} failed"), result


# --- get_route ------------------------------------------------------------------------------


@pytest.fixture
def mapped(store: MemoryStore, llm: FakeLLM) -> MemoryToolkit:
    record_sample(store)
    return MemoryToolkit(store, llm=llm)


def test_route_by_name_or_number_lists_the_moves_and_rooms(mapped: MemoryToolkit) -> None:
    expected = (
        f"Route from {NAMES[WEIRD]} (#99) to Attic (#187), 3 moves: out, east, up\n"
        "1. out → Living Room (#75)\n"
        "2. east → Kitchen (#27)\n"
        "3. up → Attic (#187)"
    )
    assert mapped.get_route(WEIRD, "attic") == expected
    assert mapped.get_route("99", " ATTIC ") == expected
    assert mapped.call_tool("get_route", '{"from": "#99", "to": 187}') == expected


def test_route_names_shared_by_several_rooms_are_not_guessed(mapped: MemoryToolkit) -> None:
    assert mapped.get_route("Forest", "West of House") == (
        "Error: 'Forest' matches 2 rooms on the map: 87, 88; give the number of the one you mean."
    )
    assert mapped.get_route("87", "88").startswith(
        "Route from Forest (#87) to Forest (#88), 1 move"
    )


def test_route_unknown_rooms_and_missing_routes(mapped: MemoryToolkit) -> None:
    assert mapped.get_route("Kitchn", "Attic") == (
        "Error: no room called 'Kitchn' on the map; closest: 'Kitchen'."
    )
    assert mapped.get_route("Attic", "5") == (
        "Error: room 5 is not on the map (no exit was taken or tried there yet)."
    )
    assert mapped.get_route(WEST, KITCHEN).startswith(
        "No known route from West of House (#64) to Kitchen (#27): no route from "
    )
    assert mapped.get_route("Attic", 187) == "You are already at Attic (#187): no moves needed."


def test_route_without_a_map(empty_toolkit: MemoryToolkit) -> None:
    assert empty_toolkit.get_route("Kitchen", "Attic") == NO_MAP


def test_route_sees_the_moves_a_manager_has_not_written_yet(
    store: MemoryStore, llm: FakeLLM
) -> None:
    record_sample(store)
    buffered = [map_event(ATTIC, "w", WEST, 30)]
    kit = MemoryToolkit(store, llm=llm, pending_map_events=lambda: buffered)
    assert kit.get_route("Attic", "West of House").endswith("1. west → West of House (#64)")
    assert (
        MemoryToolkit(store, llm=llm)
        .get_route("Attic", "West of House")
        .startswith("No known route")
    )


@pytest.mark.parametrize(
    "arguments",
    [
        {"from": "", "to": "Attic"},
        {"from": True, "to": "Attic"},
        {"from": {"room": 1}, "to": "Attic"},
        {"from": ["Attic"], "to": 2**70},
        {"from": "Attic", "to": "9" * 5000},
        '{"from": "Attic", "to": "Attic", "from_": 1}',
    ],
)
def test_route_never_raises_on_hostile_arguments(mapped: MemoryToolkit, arguments: object) -> None:
    result = mapped.call_tool("get_route", arguments)  # type: ignore[arg-type]
    assert result.startswith("Error: ") and "\n" not in result and len(result) < 1000, result


# --- the facade, the schemas, the dispatcher -------------------------------------------------


def test_add_memory_and_stats(empty_toolkit: MemoryToolkit) -> None:
    assert empty_toolkit.get_summary_stats()["total_memories"] == 0
    assert empty_toolkit.add_memory("Mailbox contains a leaflet", 300, 5, 180, "West of House")
    assert not empty_toolkit.add_memory("mailbox contains a leaflet", 600, 6, 180, "West of House")
    assert empty_toolkit.get_memory_count() == 1
    assert empty_toolkit.get_summary_stats() == {
        "total_memories": 1,
        "avg_importance": 600.0,
        "locations_covered": 1,
        "top_location": "West of House (#180)",
    }
    # the model's importance, kept within 1..1000 and counted (review S6 A F2: it raised)
    assert empty_toolkit.add_memory("Another thing", 0, 6, 180, "West of House")
    assert empty_toolkit.failures["importance_clamped"] == 1
    with pytest.raises(ValueError, match="importance"):
        empty_toolkit.memories.add_flagged_memory("A third thing", 0, 6, 180, "West of House")


def test_session_id_is_recorded(toolkit: MemoryToolkit) -> None:
    assert toolkit.session_id == "test-session"
    assert {m.session_id for m in toolkit.memories.all()} == {"test-session"}


def test_tool_schemas_are_valid_and_match_the_functions(toolkit: MemoryToolkit) -> None:
    schemas = toolkit.tool_schemas()
    assert json.loads(json.dumps(schemas)) == schemas == TOOL_SCHEMAS
    tools = toolkit.tools()
    assert (
        [s["function"]["name"] for s in schemas]
        == [t.__name__ for t in tools]
        == [
            "get_top_memories",
            "query_memories",
            "get_location_memories",
            "get_route",
        ]
    )
    required = {
        "get_top_memories": [],
        "query_memories": ["question"],
        "get_location_memories": ["location"],
        "get_route": ["from", "to"],
    }
    for schema, tool in zip(schemas, tools, strict=True):
        assert schema["type"] == "function"
        function = schema["function"]
        assert function["description"].strip()
        assert tool.__doc__ and tool.__doc__.strip()
        parameters = function["parameters"]
        assert parameters["type"] == "object"
        assert parameters["required"] == required[function["name"]]
        signature = inspect.signature(tool)
        # a Python keyword ("from") is the parameter "from_"
        names = [name.removesuffix("_") for name in signature.parameters]
        assert list(parameters["properties"]) == names
        for name, parameter in zip(names, signature.parameters.values(), strict=True):
            is_required = parameter.default is inspect.Parameter.empty
            assert (name in parameters["required"]) == is_required


def test_tool_schemas_are_a_copy(toolkit: MemoryToolkit) -> None:
    toolkit.tool_schemas()[0]["function"]["name"] = "changed"
    assert toolkit.tool_schemas()[0]["function"]["name"] == "get_top_memories"


def test_call_tool_dispatches_json_string_arguments(toolkit: MemoryToolkit, llm: FakeLLM) -> None:
    assert toolkit.call_tool("get_top_memories", '{"limit": 1}') == toolkit.get_top_memories(1)
    assert toolkit.call_tool("get_top_memories", "") == toolkit.get_top_memories()
    assert toolkit.call_tool("get_top_memories", None) == toolkit.get_top_memories()
    llm.answers.append("Relevant memories: #2\nAnswer: Living Room.")
    assert toolkit.call_tool("query_memories", '{"question": "lantern?"}').startswith(
        "Question: lantern?\nAnswer: Living Room."
    )
    assert toolkit.call_tool("get_location_memories", {"location": 180}).startswith(
        "Memories from West of House (#180)"
    )


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        (
            "forget_everything",
            {},
            "Error: unknown tool 'forget_everything'. Available tools: "
            "get_top_memories, query_memories, get_location_memories, get_route.",
        ),
        (
            "query_memories",
            "{not json",
            "Error: the arguments for query_memories are not valid JSON",
        ),
        (
            "query_memories",
            "[1, 2]",
            "Error: the arguments for query_memories must be a JSON object.",
        ),
        ("query_memories", {}, "Error: query_memories needs the argument(s) question."),
        (
            "get_top_memories",
            {"limit": 3, "sort": "asc"},
            "Error: get_top_memories has no argument(s) sort.",
        ),
    ],
)
def test_call_tool_errors_are_strings(
    toolkit: MemoryToolkit, llm: FakeLLM, name: str, arguments: object, expected: str
) -> None:
    assert toolkit.call_tool(name, arguments).startswith(expected)  # type: ignore[arg-type]
    assert llm.calls == []


HUGE_INT = "1" * 5000


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("get_top_memories", "[" * 100_000, "Error: the arguments for get_top_memories are"),
        ("query_memories", '{"question": ' * 50_000, "Error: the arguments for query_memories"),
        ("get_top_memories", '{"limit": ' + HUGE_INT + "}", "Error: the arguments for"),
        ("get_top_memories", {"limit": "9" * 5000}, "Error: limit must be a whole number"),
        ("get_location_memories", {"location": HUGE_INT}, "No memories recorded for"),
        ("get_location_memories", {"location": 2**64}, "No memories recorded for"),
        ("get_top_memories", {1: 2, "sort": 3}, "Error: get_top_memories has no argument(s)"),
        ("get_top_memories", "x" * 2_000_000, "Error: the arguments for get_top_memories are"),
        ({"not": "hashable"}, {}, "Error: unknown tool"),
    ],
    ids=[
        "deep nesting",
        "deep objects",
        "5,000-digit JSON integer",
        "5,000-digit limit",
        "5,000-digit location",
        "location past 64 bits",
        "non-text argument name",
        "two megabytes of arguments",
        "unhashable tool name",
    ],
)
def test_call_tool_never_raises_on_hostile_arguments(
    toolkit: MemoryToolkit, llm: FakeLLM, name: object, arguments: object, expected: str
) -> None:
    result = toolkit.call_tool(name, arguments)  # type: ignore[arg-type]
    assert isinstance(result, str) and result.startswith(expected)
    assert "\n" not in result and len(result) < 1000
    assert llm.calls == []


# --- through litellm and the fake OpenAI-compatible server ------------------------------------


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as running:
        yield running


def server_config(server: FakeOpenAIServer, **settings: object) -> MemstoreConfig:
    return MemstoreConfig(
        model="openai/fake-model",
        api_base=server.api_base,
        api_key="test",
        num_retries=0,
        timeout=5,
        **settings,
    )


def test_query_answered_through_http(store: MemoryStore, server: FakeOpenAIServer) -> None:
    kit = MemoryToolkit(store, config=server_config(server))
    assert isinstance(kit.llm, LiteLLMCompletion)
    populate(kit)
    server.enqueue(FakeReply(content="Relevant memories: #2\nAnswer: In the Living Room."))
    result = kit.call_tool("query_memories", '{"question": "Where is the lantern?"}')
    assert result.startswith("Question: Where is the lantern?\nAnswer: In the Living Room.")
    assert "#2 [Turn 9 @ Living Room (#193)] Brass lantern" in result
    [request] = server.requests
    assert request.body["model"] == "fake-model"
    assert "response_format" not in request.body  # free text, not the synthesis JSON schema
    assert request.body["messages"][1]["content"].startswith("Memories:\n1. [Turn 15")


def test_query_model_is_preferred_over_model(store: MemoryStore, server: FakeOpenAIServer) -> None:
    kit = MemoryToolkit(store, config=server_config(server, query_model="openai/cheap-model"))
    populate(kit)
    server.enqueue(FakeReply(content="No relevant memories found."))
    kit.query_memories("Anything?")
    assert server.requests[0].body["model"] == "cheap-model"


def test_the_store_config_is_used_by_default(db_path: Path, server: FakeOpenAIServer) -> None:
    with MemoryStore.open(db_path, config=server_config(server)) as opened:
        assert isinstance(MemoryToolkit(opened).llm, LiteLLMCompletion)


def test_server_error_is_a_clean_error_string(store: MemoryStore, server: FakeOpenAIServer) -> None:
    kit = MemoryToolkit(store, config=server_config(server))
    populate(kit)
    server.enqueue(FakeReply(status=500))
    result = kit.query_memories("Where is the lantern?")
    assert result.startswith(
        "Error: query_memories could not get an answer from the memory model (provider_error:"
    )
    assert "\n" not in result
    assert len(server.requests) == 1
