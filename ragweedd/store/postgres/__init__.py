"""The PostgreSQL backend: one shared database with pgvector (docs/postgres.md)."""
