"""The database schema: one MetaData for the tables on disk, and the ephemeral copy.

The persistent tables are created by alembic's migrations (``migrations/versions``); a test
checks that these definitions and the migrations produce the same schema. The ephemeral
tables have the same shape but live in an in-memory database ATTACHed as ``ephemeral`` to
the store's single connection, created at connect time and never written to disk.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)

from memstore.map_graph import DIRECTIONS
from memstore.models import Category, Status
from memstore.moved_names import forwarding
from memstore.outcome import Outcome

#: The alembic revision these definitions correspond to. MemoryStore.open creates new
#: databases at this revision and refuses older ones; a test checks it is alembic's head.
HEAD_REVISION = "0011"

EPHEMERAL_SCHEMA = "ephemeral"

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=NAMING_CONVENTION)

#: a 64-bit integer on every database (SQLite's INTEGER is, and only INTEGER makes a rowid
#: primary key there; PostgreSQL's INTEGER would be 32 bits)
BigInt = BigInteger().with_variant(Integer(), "sqlite")


def one_of(column: str, values: list[str]) -> str:
    """A CHECK that ``column`` holds one of ``values``, written as ``=`` tests joined by OR.

    Not ``column IN (...)``: SQLite 3.40 builds a temporary b-tree for the list each time it
    evaluates such a CHECK, a few microseconds a row (an import of 1,100 memories spent 4 ms
    on its three); the OR chain is a few comparisons (revision 0008).
    """
    return "(" + " OR ".join(f"{column} = {v!r}" for v in values) + ")"


CATEGORIES = [c.value for c in Category]
OUTCOMES = [o.value for o in Outcome]
STATUSES = [s.value for s in Status]

locations = Table(
    "locations",
    metadata,
    Column("id", BigInt, primary_key=True, autoincrement=False),
    Column("name", Text, nullable=False),
    Column("visit_count", BigInt, nullable=False, server_default=text("0")),
    CheckConstraint("visit_count >= 0", name="visit_count_not_negative"),
)

location_episodes = Table(
    "location_episodes",
    metadata,
    Column(
        "location_id",
        BigInt,
        ForeignKey("locations.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("episode", BigInt, primary_key=True),
    CheckConstraint("episode >= 1", name="episode_positive"),
)


def _memory_columns(persistence_values: list[str], location_fk: bool) -> list:
    location = (
        Column(
            "location_id",
            BigInt,
            ForeignKey("locations.id", ondelete="CASCADE"),
            nullable=False,
        )
        if location_fk
        else Column("location_id", BigInt, nullable=False)
    )
    return [
        Column("id", BigInt, primary_key=True),
        location,
        Column("category", Text, nullable=False),
        Column("title", Text, nullable=False),
        Column("text", Text, nullable=False),
        Column("episode", BigInt, nullable=False),
        Column("turn_start", BigInt, nullable=False),
        Column("turn_end", BigInt, nullable=True),
        Column("score_change", BigInt, nullable=True),
        Column("persistence", Text, nullable=False),
        Column("status", Text, nullable=False),
        Column("created_at", Text, nullable=False),
        CheckConstraint(one_of("category", CATEGORIES), name="category_known"),
        CheckConstraint(one_of("status", STATUSES), name="status_known"),
        CheckConstraint(one_of("persistence", persistence_values), name="persistence_known"),
        CheckConstraint("length(trim(title)) > 0", name="title_not_blank"),
        CheckConstraint("episode >= 1", name="episode_positive"),
        CheckConstraint("turn_start >= 0", name="turn_not_negative"),
        CheckConstraint("turn_end IS NULL OR turn_end >= turn_start", name="turn_range_ordered"),
    ]


memories = Table(
    "memories",
    metadata,
    *_memory_columns(["core", "permanent"], location_fk=True),
    # revision 0004: the store_meta change counter when the row was created / last changed
    Column("created_version", BigInt, nullable=False, server_default=text("0")),
    Column("changed_version", BigInt, nullable=False, server_default=text("0")),
)
Index("ix_memories_location_id_status", memories.c.location_id, memories.c.status)
# The spec's backup de-duplication, enforced by the database within the tier.
Index(
    "uq_memories_location_id_title_live",
    memories.c.location_id,
    memories.c.title,
    unique=True,
    sqlite_where=text("status != 'SUPERSEDED'"),
    postgresql_where=text("status != 'SUPERSEDED'"),
)

memory_links = Table(
    "memory_links",
    metadata,
    Column("id", BigInt, primary_key=True),
    Column(
        "memory_id",
        BigInt,
        ForeignKey("memories.id", ondelete="CASCADE"),
        nullable=False,
        unique=True,
    ),
    Column(
        "superseded_by_id",
        BigInt,
        ForeignKey("memories.id", ondelete="SET NULL"),
        nullable=True,
    ),
    Column("episode", BigInt, nullable=False),
    Column("turn", BigInt, nullable=False),
    Column("reason", Text, nullable=True),
    Column("created_at", Text, nullable=False),
    CheckConstraint("superseded_by_id IS NULL OR reason IS NULL", name="superseded_or_invalidated"),
    CheckConstraint("reason IS NULL OR length(trim(reason)) > 0", name="reason_not_blank"),
)
Index("ix_memory_links_superseded_by_id", memory_links.c.superseded_by_id)

# --- revision 0002: the decision log and turn records (synthesis, metrics) -------------------

synthesis_decisions = Table(
    "synthesis_decisions",
    metadata,
    Column("id", BigInt, primary_key=True),
    Column("episode", BigInt, nullable=False),
    Column("turn", BigInt, nullable=False),
    Column("location_id", BigInt, nullable=False),
    Column("location_name", Text, nullable=False),
    Column("triggers", Text, nullable=False),  # comma-separated Trigger values
    Column("mode", Text, nullable=False),  # "llm" or "offline"
    Column("model", Text, nullable=True),
    Column("raw_answer", Text, nullable=True),
    Column("decision", Text, nullable=True),  # the validated answer, JSON
    Column("applied", Text, nullable=True),  # what was written, JSON (rebuild replays this)
    Column("error_kind", Text, nullable=True),
    Column("error", Text, nullable=True),
    Column("latency_ms", Float, nullable=True),
    Column("prompt_tokens", BigInt, nullable=True),
    Column("completion_tokens", BigInt, nullable=True),
    Column("cost_usd", Float, nullable=True),
    Column("created_at", Text, nullable=False),
    CheckConstraint(one_of("mode", ["llm", "offline"]), name="mode_known"),
)
Index(
    "ix_synthesis_decisions_episode_turn", synthesis_decisions.c.episode, synthesis_decisions.c.turn
)

turn_records = Table(
    "turn_records",
    metadata,
    Column("id", BigInt, primary_key=True),
    Column("run_id", Text, nullable=False),
    Column("episode", BigInt, nullable=False),
    Column("turn", BigInt, nullable=False),
    Column("location_id", BigInt, nullable=False),
    Column("action", Text, nullable=False),
    Column("score_before", BigInt, nullable=False),
    Column("score_after", BigInt, nullable=False),
    Column("location_after", BigInt, nullable=True),
    Column("state_changed", BigInt, nullable=False),  # score, location or inventory changed
    Column("died", BigInt, nullable=False),
    Column("triggers", Text, nullable=False),
    Column("memory_tokens", BigInt, nullable=False),
    Column("overhead_us", Float, nullable=False),
    Column("created_at", Text, nullable=False),
    # revision 0007: the game's own evidence that the action failed (memstore.outcome):
    # ok, refused, repeated or died; NULL for turns recorded before it
    Column("outcome", Text, nullable=True),
    CheckConstraint("outcome IS NULL OR " + one_of("outcome", OUTCOMES), name="outcome_known"),
)
Index(
    "ix_turn_records_run_id_episode_turn",
    turn_records.c.run_id,
    turn_records.c.episode,
    turn_records.c.turn,
)

# --- revision 0003: memories the agent flags itself (spec 001) --------------------------------

flagged_memories = Table(
    "flagged_memories",
    metadata,
    Column("id", BigInt, primary_key=True),
    Column("content", Text, nullable=False),
    Column("importance", BigInt, nullable=False),
    Column("turn", BigInt, nullable=False),
    Column("location_id", BigInt, nullable=True),
    Column("location_name", Text, nullable=False),
    Column("score", BigInt, nullable=True),
    Column("moves", BigInt, nullable=True),
    Column("episode", BigInt, nullable=False),
    Column("session_id", Text, nullable=False),
    Column("created_at", Text, nullable=False),
    # revision 0005: the content as memstore.flagged.normalise makes it (lower case, runs of
    # whitespace one space), indexed, so a duplicate is found without reading every row
    Column("content_key", Text, nullable=False),
    CheckConstraint("importance BETWEEN 1 AND 1000", name="importance_in_range"),
    CheckConstraint("length(trim(content)) > 0", name="content_not_blank"),
)
Index("ix_flagged_memories_importance", flagged_memories.c.importance)
Index("ix_flagged_memories_location_id", flagged_memories.c.location_id)
Index("ix_flagged_memories_content_key", flagged_memories.c.content_key)

# --- revision 0004: the change counter and the rows' earlier states (3-way import) -------------

store_meta = Table(
    "store_meta",
    metadata,
    Column("id", BigInt, primary_key=True, autoincrement=False),
    Column("database_id", Text, nullable=False),
    Column("change_counter", BigInt, nullable=False, server_default=text("0")),
    # the last episode number handed out (MemoryStore.allocate_episode)
    Column("last_episode", BigInt, nullable=False, server_default=text("0")),
    CheckConstraint("id = 1", name="one_row"),
    CheckConstraint("change_counter >= 0", name="counter_not_negative"),
)

#: the state a persistent memory had before a change (or its deletion) replaced it, in the
#: terms of Memories.md (the successor by title), so an import can rebuild the database as
#: it was when a file was exported
memory_history = Table(
    "memory_history",
    metadata,
    Column("id", BigInt, primary_key=True),
    Column("memory_id", BigInt, nullable=False),
    Column("location_id", BigInt, nullable=False),
    Column("category", Text, nullable=False),
    Column("title", Text, nullable=False),
    Column("text", Text, nullable=False),
    Column("episode", BigInt, nullable=False),
    Column("turn_start", BigInt, nullable=False),
    Column("turn_end", BigInt, nullable=True),
    Column("score_change", BigInt, nullable=True),
    Column("persistence", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("successor_title", Text, nullable=True),
    Column("link_turn", BigInt, nullable=True),
    Column("link_episode", BigInt, nullable=True),
    Column("link_reason", Text, nullable=True),
    Column("created_version", BigInt, nullable=False),
    Column("replaced_version", BigInt, nullable=False),
    Column("deleted", BigInt, nullable=False, server_default=text("0")),
)
Index(
    "ix_memory_history_replaced_version_memory_id",
    memory_history.c.replaced_version,
    memory_history.c.memory_id,
)

# --- revision 0009: the names a location had, for the 3-way import of its name ------------

#: the name a location had before the change ``replaced_version`` renamed it (an agent's
#: visit under another name, or an import: ``imported``), so an import can tell which side
#: renamed it since a file was exported
location_names = Table(
    "location_names",
    metadata,
    Column("id", BigInt, primary_key=True),
    Column("location_id", BigInt, nullable=False),
    Column("name", Text, nullable=False),
    Column("replaced_version", BigInt, nullable=False),
    # 1 when an import made the rename (the name it set is then the file's, already in
    # the database: an import of that file again changes nothing), 0 for an agent's visit
    # (revision 0010)
    Column("imported", Integer, nullable=False, server_default=text("0")),
)
Index(
    "ix_location_names_replaced_version_location_id",
    location_names.c.replaced_version,
    location_names.c.location_id,
)

# --- revision 0011: receipts of writes a lost connection left in doubt ------------------------

#: a write transaction's receipt, inserted in that transaction: when the connection to a
#: server is lost during its COMMIT, the writer (memstore.synthesis_runner) asks whether
#: the receipt is here before writing the same rows again; a writer deletes its receipt in
#: its next transaction, so a table holds about one row per writer
write_receipts = Table(
    "write_receipts",
    metadata,
    Column("receipt", Text, primary_key=True),
    Column("created_at", Text, nullable=False),
)

# --- revision 0006: the map (rooms by location id, connections, exit failures, pruned exits) ---
# memstore.map_graph says what the rows mean; names are for display only (several rooms share
# one); everything is on disk, so the map outlives episodes.

KNOWN_DIRECTION = one_of("direction", list(DIRECTIONS))

map_rooms = Table(
    "map_rooms",
    metadata,
    Column("id", BigInt, primary_key=True, autoincrement=False),
    Column("name", Text, nullable=False),  # "" until the game names it
)

map_connections = Table(
    "map_connections",
    metadata,
    Column("id", BigInt, primary_key=True),
    Column("from_id", BigInt, ForeignKey("map_rooms.id", ondelete="CASCADE"), nullable=False),
    Column("action", Text, nullable=False),  # as first typed
    # the canonical direction, else the normalised action: one connection per key and room
    Column("action_key", Text, nullable=False),
    Column("direction", Text, nullable=True),  # the canonical direction when it is one
    Column("to_id", BigInt, ForeignKey("map_rooms.id", ondelete="CASCADE"), nullable=False),
    Column("verifications", BigInt, nullable=False, server_default=text("0")),
    Column("failures", BigInt, nullable=False, server_default=text("0")),
    Column("first_episode", BigInt, nullable=False),
    Column("first_turn", BigInt, nullable=False),
    Column("last_episode", BigInt, nullable=False),
    Column("last_turn", BigInt, nullable=False),
    UniqueConstraint("from_id", "action_key"),
    CheckConstraint("length(trim(action_key)) > 0", name="action_key_not_blank"),
    CheckConstraint(
        f"direction IS NULL OR ({KNOWN_DIRECTION} AND action_key = direction)",
        name="direction_known",
    ),
    CheckConstraint("verifications >= 0 AND failures >= 0", name="counts_not_negative"),
)

map_exit_failures = Table(
    "map_exit_failures",
    metadata,
    Column(
        "from_id",
        BigInt,
        ForeignKey("map_rooms.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("direction", Text, primary_key=True),
    Column("count", BigInt, nullable=False),
    Column("last_episode", BigInt, nullable=False),
    Column("last_turn", BigInt, nullable=False),
    CheckConstraint(KNOWN_DIRECTION, name="direction_known"),
    CheckConstraint("count >= 0", name="count_not_negative"),
)

map_pruned_exits = Table(
    "map_pruned_exits",
    metadata,
    Column(
        "from_id",
        BigInt,
        ForeignKey("map_rooms.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("direction", Text, primary_key=True),
    # when it was pruned (episode and turn: a database renders the same every time)
    Column("pruned_episode", BigInt, nullable=False),
    Column("pruned_turn", BigInt, nullable=False),
    CheckConstraint(KNOWN_DIRECTION, name="direction_known"),
)

#: alembic's own bookkeeping table, as alembic creates it; MemoryStore.open stamps new files
alembic_version = Table(
    "alembic_version",
    MetaData(),
    Column("version_num", String(32), nullable=False),
    PrimaryKeyConstraint("version_num", name="alembic_version_pkc"),
)

# --- the ephemeral tier: same shape, in the attached in-memory database ------------------

ephemeral_metadata = MetaData(schema=EPHEMERAL_SCHEMA, naming_convention=NAMING_CONVENTION)

ephemeral_memories = Table(
    "memories",
    ephemeral_metadata,
    *_memory_columns(["ephemeral"], location_fk=False),
)
Index(
    "ix_ephemeral_memories_location_id_status",
    ephemeral_memories.c.location_id,
    ephemeral_memories.c.status,
)

ephemeral_memory_links = Table(
    "memory_links",
    ephemeral_metadata,
    Column("id", BigInt, primary_key=True),
    Column("memory_id", BigInt, nullable=False, unique=True),
    # an ephemeral memory is superseded by an ephemeral one, or upgraded to a persistent one
    Column("superseded_by_id", BigInt, nullable=True),
    Column("superseded_by_persistent_id", BigInt, nullable=True),
    Column("episode", BigInt, nullable=False),
    Column("turn", BigInt, nullable=False),
    Column("reason", Text, nullable=True),
    Column("created_at", Text, nullable=False),
    CheckConstraint(
        "CAST(superseded_by_id IS NULL AS INTEGER) "
        "+ CAST(superseded_by_persistent_id IS NULL AS INTEGER) "
        "+ CAST(reason IS NULL AS INTEGER) >= 2",
        name="one_cause",
    ),
)


#: where the ephemeral tier lives on PostgreSQL: the connection's own temporary schema
#: (tables there are visible to that connection only and dropped when it closes)
EPHEMERAL_SCHEMA_POSTGRESQL = "pg_temp"


#: names that moved when this module was split (issue 15), found here as before
__getattr__ = forwarding(
    __name__, {"ephemeral_ddl": "memstore.ddl", "persistent_ddl": "memstore.ddl"}
)
