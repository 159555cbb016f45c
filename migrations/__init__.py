"""alembic's migrations, installed with memstore as memstore.migrations."""
