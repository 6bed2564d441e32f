"""The ``store`` key: SQLite by default, a PostgreSQL URI otherwise, and its password never shown."""

import pytest

from ragweedd.cli.command import _shown
from ragweedd.config import _BY_ATTR, load_config, redact_dsn
from ragweedd.errors import ConfigError


def test_default_is_sqlite_and_a_postgres_uri_is_taken():
    assert load_config(text="", env={}).store == "sqlite"
    cfg = load_config(text='store = "postgresql://rw:pw@db.lan:5432/rag"\nsource_name = "laptop"', env={})
    assert cfg.store == "postgresql://rw:pw@db.lan:5432/rag" and cfg.source_name == "laptop"


@pytest.mark.parametrize("value", ["mysql://rw:hunter2@db/rag", "hunter2-postgres", "sqlite3"])
def test_a_bad_store_names_the_key_what_is_allowed_and_hides_the_password(value):
    with pytest.raises(ConfigError) as e:
        load_config(text=f'store = "{value}"', env={})
    assert "'store'" in str(e.value) and "postgresql://" in str(e.value)
    if "hunter2@" in value:
        assert "hunter2" not in str(e.value)


@pytest.mark.parametrize("uri, shown", [
    ("postgresql://rw:s3cret@db.lan:5432/rag", "postgresql://rw:***@db.lan:5432/rag"),
    ("postgresql://rw@db.lan/rag?sslmode=require&password=s3cret", "postgresql://rw@db.lan/rag?sslmode=require&password=***"),
    ("postgres://:s3cret@/rag?host=/run/pg", "postgres://:***@/rag?host=/run/pg"),
    ("postgresql://rw@db.lan/rag", "postgresql://rw@db.lan/rag"),
    ("sqlite", "sqlite"),
    ("host=/tmp/x dbname=d user=u password=secret", "host=/tmp/x dbname=d user=u password=***"),
    ("host=db password = 'se cr\\'et' user=u", "host=db password = *** user=u"),
    ("PASSWORD=secret", "PASSWORD=***"),
    ("host=db password=Top\\ Secret99 user=u", "host=db password=*** user=u"),  # an escaped space
])
def test_redact_dsn(uri, shown):
    assert redact_dsn(uri) == shown


def test_check_config_shows_the_store_without_its_password():
    cfg = load_config(text='store = "postgresql://rw:s3cret@db.lan/rag"', env={})
    assert _shown(_BY_ATTR["store"], cfg) == "postgresql://rw:***@db.lan/rag"


def test_a_libpq_key_value_store_is_refused_without_its_password():
    # a key=value connection string is not taken (the store is a URI), and its password never shown
    with pytest.raises(ConfigError) as e:
        load_config(text='store = "host=/tmp/x dbname=d user=u password=secret"', env={})
    shown = str(e.value) + (e.value.hint or "")
    assert "'store'" in shown and "password=***" in shown and "secret" not in shown
    with pytest.raises(ConfigError) as e:
        load_config(text="", env={"RAGWEED_STORE": "host=db user=u password='s e c r e t'"})
    assert "s e c r e t" not in str(e.value) and "password=***" in str(e.value)


@pytest.mark.parametrize("name", ["lap\ntop", "tab\there", "bell\x07", "del\x7f", "   ", "\t"])
def test_a_source_name_with_control_characters_or_only_spaces_is_refused(name):
    import json

    with pytest.raises(ConfigError) as e:
        load_config(text=f"source_name = {json.dumps(name)}", env={})
    assert "'source_name'" in str(e.value) and "control characters" in str(e.value)
    with pytest.raises(ConfigError):
        load_config(text="", env={"RAGWEED_SOURCE_NAME": name})


@pytest.mark.parametrize("name", ["", "nas", "alice-laptop", "Bürorechner 2"])
def test_a_plain_source_name_is_taken(name):
    import json

    assert load_config(text=f"source_name = {json.dumps(name)}", env={}).source_name == name
