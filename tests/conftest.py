"""Shared fixtures: the database (SQLite and PostgreSQL) and the end-to-end world of fakes."""

pytest_plugins = ["tests.store_fixtures", "tests.mr_world"]
