"""The SQLite backend: one data directory of SQLite files (docs/architecture.md)."""
