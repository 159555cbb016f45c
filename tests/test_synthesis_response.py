"""MemorySynthesisResponse rules and parse_synthesis_answer."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from memstore.models import Category, Persistence, Status
from memstore.synthesis import (
    AnswerError,
    MemorySynthesisResponse,
    SynthesisError,
    SynthesisErrorKind,
    json_schema_response_format,
    parse_synthesis_answer,
)

VALID = {
    "should_remember": True,
    "category": "DANGER",
    "memory_title": "Troll attacks after accepting gift",
    "memory_text": "The troll eats the lunch, then attacks.",
    "status": "ACTIVE",
    "persistence": "permanent",
    "supersedes": [1],
    "reasoning": "contradicts the tentative memory",
}


def answer(**changes: object) -> dict:
    data = dict(VALID)
    for key, value in changes.items():
        if value is ...:
            data.pop(key, None)
        else:
            data[key] = value
    return data


def schema_error(data: dict) -> str:
    with pytest.raises(SynthesisError) as caught:
        parse_synthesis_answer(json.dumps(data))
    assert caught.value.kind is SynthesisErrorKind.SCHEMA
    return caught.value.message


def test_valid_answer_parses_into_typed_fields() -> None:
    response = parse_synthesis_answer(json.dumps(VALID))
    assert response.should_remember is True
    assert response.category is Category.DANGER
    assert response.persistence is Persistence.PERMANENT
    assert response.status is Status.ACTIVE
    assert response.supersedes == (1,)
    assert response.invalidates == ()


def test_case_of_enums_is_forgiven_and_status_defaults_to_active() -> None:
    response = parse_synthesis_answer(
        json.dumps(answer(category="danger", persistence="PERMANENT", status=...))
    )
    assert response.category is Category.DANGER
    assert response.persistence is Persistence.PERMANENT
    assert response.status is Status.ACTIVE


@pytest.mark.parametrize("missing", ["category", "memory_title", "memory_text", "persistence"])
def test_remembering_requires_category_title_text_and_persistence(missing: str) -> None:
    message = schema_error(answer(**{missing: ...}))
    assert "required" in message and missing in message


def test_blank_title_counts_as_missing() -> None:
    assert "memory_title" in schema_error(answer(memory_title="   "))


def test_unknown_persistence_is_rejected_with_the_allowed_values() -> None:
    message = schema_error(answer(persistence="forever"))
    assert "persistence" in message and "core" in message


def test_unknown_category_is_rejected() -> None:
    assert "category" in schema_error(answer(category="TRIVIA"))


def test_new_memory_cannot_be_created_superseded() -> None:
    assert "cannot be created SUPERSEDED" in schema_error(answer(status="SUPERSEDED"))


def test_more_than_three_supersessions_are_rejected() -> None:
    assert "at most 3 memories may be superseded" in schema_error(answer(supersedes=[1, 2, 3, 4]))


def test_more_than_three_invalidations_are_rejected() -> None:
    message = schema_error(
        answer(supersedes=[], invalidates=[1, 2, 3, 4], invalidation_reason="all wrong")
    )
    assert "at most 3 memories may be invalidated" in message


def test_invalidating_requires_a_non_empty_reason() -> None:
    assert "invalidation_reason is required" in schema_error(
        answer(supersedes=[], invalidates=[2], invalidation_reason="  ")
    )


def test_a_memory_cannot_be_both_superseded_and_invalidated() -> None:
    message = schema_error(answer(supersedes=[2], invalidates=["[2]"], invalidation_reason="x"))
    assert "both superseded and invalidated" in message


def test_supersedes_without_a_new_memory_is_an_error() -> None:
    message = schema_error({"should_remember": False, "supersedes": [1], "reasoning": ""})
    assert "supersedes needs a new memory" in message


def test_invalidation_only_answer_is_valid() -> None:
    response = parse_synthesis_answer(
        json.dumps(
            {
                "should_remember": False,
                "invalidate_memory_titles": ["Troll is friendly"],
                "invalidation_reason": "Proven false by death",
                "reasoning": "death proves speculation wrong",
            }
        )
    )
    assert response.invalidates == ("Troll is friendly",)
    assert response.invalidation_reason == "Proven false by death"


def test_spec_title_field_names_are_accepted_as_aliases() -> None:
    response = MemorySynthesisResponse.model_validate(
        answer(supersedes=..., supersedes_memory_titles=["Troll accepts lunch gift"])
    )
    assert response.supersedes == ("Troll accepts lunch gift",)


def test_handle_strings_become_handles_and_duplicates_collapse() -> None:
    # a bare number stays text: it is a title first, a handle only when no memory has that
    # title (tests/test_numeric_title_reference.py)
    response = MemorySynthesisResponse.model_validate(
        answer(supersedes=["[2]", "2", 2, " [ 3 ] ", "[3]"])
    )
    assert response.supersedes == (2, "2", 3)


def test_boolean_reference_is_rejected() -> None:
    with pytest.raises(ValidationError, match="handle or a title"):
        MemorySynthesisResponse.model_validate(answer(supersedes=[True]))


def test_unknown_fields_are_ignored() -> None:
    response = parse_synthesis_answer(json.dumps(answer(confidence=0.9, extra={"a": 1})))
    assert not hasattr(response, "confidence")


def test_not_remembering_needs_no_other_fields() -> None:
    response = parse_synthesis_answer('{"should_remember": false, "reasoning": "duplicate"}')
    assert response.should_remember is False
    assert response.persistence is None


def test_should_remember_is_required() -> None:
    assert "should_remember" in schema_error({"reasoning": "forgot the flag"})


def test_fenced_json_block_is_tolerated() -> None:
    raw = "Here is my answer:\n```json\n" + json.dumps(VALID) + "\n```\nThanks."
    assert parse_synthesis_answer(raw).memory_title == VALID["memory_title"]


@pytest.mark.parametrize(
    "raw", ["", "   ", "not json at all", '{"should_remember": true', "```json\n{oops}\n```"]
)
def test_malformed_answer_is_invalid_json(raw: str) -> None:
    with pytest.raises(AnswerError) as caught:
        parse_synthesis_answer(raw)
    assert caught.value.kind is SynthesisErrorKind.INVALID_JSON
    assert str(caught.value).startswith("invalid_json:")


def test_json_that_is_not_an_object_is_a_schema_error() -> None:
    with pytest.raises(SynthesisError) as caught:
        parse_synthesis_answer("[1, 2, 3]")
    assert caught.value.kind is SynthesisErrorKind.SCHEMA
    assert "JSON object" in caught.value.message


def test_synthesis_error_kind_is_validated() -> None:
    assert SynthesisError("timeout", "slow").kind is SynthesisErrorKind.TIMEOUT
    with pytest.raises(ValueError):
        SynthesisError("no_such_kind", "x")


def test_response_format_is_a_non_strict_json_schema() -> None:
    response_format = json_schema_response_format()
    assert response_format["type"] == "json_schema"
    inner = response_format["json_schema"]
    assert inner["strict"] is False and inner["name"]
    properties = inner["schema"]["properties"]
    assert {"should_remember", "persistence", "supersedes", "invalidates"} <= set(properties)
    assert properties["persistence"]["enum"][:3] == ["core", "permanent", "ephemeral"]
    assert "SUPERSEDED" not in properties["status"]["enum"]
    json.dumps(response_format)  # serialisable


@pytest.mark.parametrize("field", ["memory_title", "memory_text"])
@pytest.mark.parametrize("invisible", ["\u200b\u200d", "\ufeff \u00ad", "\u202e\u202c"])
def test_a_title_or_text_that_shows_nothing_is_refused(field: str, invisible: str) -> None:
    # review S5 A finding 12: a blank text was refused, one of zero-width characters stored
    message = schema_error(answer(**{field: invisible}))
    assert f"{field} shows nothing" in message
