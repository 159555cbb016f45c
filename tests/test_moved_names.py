"""Names a module gave before issue 15 split it are still found there (review I): an
import of the old place, and a pickle made before the split, load the same object."""

from __future__ import annotations

import importlib
import pickle

import pytest

MOVED = [
    ("memstore.export_file", "EditsAtRisk", "memstore.export_risk"),
    ("memstore.export_file", "edits_at_risk", "memstore.export_risk"),
    ("memstore.eval_results", "EvalReport", "memstore.eval_targets"),
    ("memstore.eval_results", "Target", "memstore.eval_targets"),
    ("memstore.busy_buffer", "SYNTHESIS_OVERHEAD_BYTES", "memstore.busy_rows"),
    ("memstore.busy_buffer", "MEMORY_OVERHEAD_BYTES", "memstore.busy_rows"),
    ("memstore.busy_buffer", "ROW_OVERHEAD_BYTES", "memstore.busy_rows"),
    ("memstore.map_json_read", "MAX_COUNT", "memstore.map_json_checks"),
    ("memstore.map_json_read", "MAX_INTEGER", "memstore.map_json_checks"),
    ("memstore.map_json_read", "CONFIDENCE_RULE", "memstore.map_json_connections"),
    ("memstore.map_json_read", "MAX_DERIVED_FAILURES", "memstore.map_json_connections"),
    ("memstore.schema", "ephemeral_ddl", "memstore.ddl"),
    ("memstore.schema", "persistent_ddl", "memstore.ddl"),
]


@pytest.mark.parametrize(("old", "name", "new"), MOVED)
def test_a_moved_name_is_found_where_it_was(old: str, name: str, new: str) -> None:
    moved = getattr(importlib.import_module(new), name)
    assert getattr(importlib.import_module(old), name) is moved
    namespace: dict[str, object] = {}
    exec(f"from {old} import {name}", namespace)  # noqa: S102 - the import users write
    assert namespace[name] is moved


def test_a_pickle_made_before_the_split_loads() -> None:
    from memstore.eval_targets import Target

    # what pickle wrote for the class when it lived in eval_results (protocol 0's GLOBAL)
    assert pickle.loads(b"cmemstore.eval_results\nTarget\n.") is Target  # noqa: S301


def test_a_name_no_module_gave_is_still_an_attribute_error() -> None:
    schema = importlib.import_module("memstore.schema")
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        _ = schema.no_such_name
    with pytest.raises(ImportError):
        exec("from memstore.export_file import no_such_name", {})  # noqa: S102
