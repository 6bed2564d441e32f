"""Configuration: TOML + RAGWEED_* overrides, validation messages, docs kept in step with KEYS."""

import dataclasses
import re
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from ragweedd.config import KEYS, CollectionConfig, Config, default_config, load_config
from ragweedd.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def test_defaults_match_the_original_design():
    c = default_config()
    assert (c.chunk_size_pdf, c.chunk_size_av, c.chunk_overlap_pct) == (1024, 512, "auto")
    assert (c.ingest_entropy_max, c.ingest_entropy_min) == (7.0, 0.5)
    assert (c.top_k, c.hnsw_ef, c.max_chunks_per_file, c.min_score) == (64, 512, 3, 0.0)
    assert (c.fts_enabled, c.fts_weight, c.fts_min_query_ic, c.fts_long_query_threshold) == (True, 0.15, 0.5, 5)
    assert (c.synonyms_enabled, c.synonyms_max_per_word, c.annotation_concurrency) == (True, 5, 4)
    assert c.embed_model == "local:all-minilm-l6-v2" and c.listen == "127.0.0.1:8723"
    # measured on SciFact train and FinanceBench dev (docs/retrieval.md): standardised-score fusion
    # beats rrf and the seed's additive boost; pruning and synonyms of present words lost
    assert (c.fusion, c.zscore_dense_weight, c.fts_top_k) == ("zscore", 0.55, 128)
    assert (c.fts_prune_long_queries, c.synonyms_for) == (False, "absent")


def test_file_values_upper_case_keys_and_sections(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text('TOP_K = 8\nchunk_size = 300\n[embed]\nmodel = "hash:64"\n'
                 '[collections.notes]\npaths = ["notes"]\nignore = ["*.bak"]\n')
    c = load_config(f, env={})
    assert c.top_k == 8 and c.chunk_size == 300 and c.embed_model == "hash:64"
    assert c.collections["notes"].paths == (str((tmp_path / "notes").resolve()),)
    assert c.collections["notes"].ignore == ("*.bak",)


def test_env_overrides_file(tmp_path):
    c = load_config(text="top_k = 8", env={"RAGWEED_TOP_K": "12", "RAGWEED_FTS_ENABLED": "false",
                                          "RAGWEED_FTS_WEIGHT": "0.3", "RAGWEED_EMBED_MODEL": "hash:32"})
    assert (c.top_k, c.fts_enabled, c.fts_weight, c.embed_model) == (12, False, 0.3, "hash:32")


@pytest.mark.parametrize("text,env,needle", [
    ('top_k = "many"', {}, "key 'top_k' has value 'many', but it must be a whole number"),
    ("top_k = 0", {}, "key 'top_k' has value 0; allowed: a number from 1 to 10000"),
    ("fts_weight = true", {}, "key 'fts_weight' has value True, but it must be a number"),
    ('fusion = "max"', {}, "allowed: one of 'zscore', 'convex', 'rrf', 'boost'"),
    ("zscore_dense_weight = nan", {}, "key 'zscore_dense_weight' has value nan; allowed: a number from 0.0 to 1.0"),
    ("", {"RAGWEED_MIN_SCORE": "nan"}, "key 'min_score' has value nan; allowed: a number from 0.0 to 1.0"),
    ("chunk_size = 8", {}, "'auto' or a whole number of tokens from 16 to 32768"),
    ("topk = 3", {}, "unknown key 'topk'"),
    ("[embed]\nmodle = 'x'", {}, "unknown key 'embed.modle'"),
    ("", {"RAGWEED_TOP_K": "lots"}, "env RAGWEED_TOP_K: key 'top_k' has value 'lots'"),
    ("", {"RAGWEED_NOPE": "1"}, "RAGWEED_NOPE names no configuration key"),
    ('annotation_irrelevant_re = "(["', {}, "a valid Python regular expression"),
    ('listen = "localhost"', {}, "HOST:PORT"),
    ("[collections.notes]\npaths = 'x'", {}, "'paths' has value 'x'"),
    ("top_k = [", {}, "not valid TOML"),
])
def test_bad_values_name_key_value_and_what_is_allowed(text, env, needle):
    with pytest.raises(ConfigError) as ei:
        load_config(text=text, env=env)
    assert needle in str(ei.value)


def test_suggests_close_key():
    with pytest.raises(ConfigError, match="did you mean top_k"):
        load_config(text="top_kk = 3", env={})


def test_check_config_exits_2_with_message(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text("hnsw_ef = 99999\n")
    r = subprocess.run([sys.executable, "-m", "ragweedd", "--config", str(f), "check-config"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert "hnsw_ef" in r.stderr and "99999" in r.stderr and "from 1 to 4096" in r.stderr
    good = tmp_path / "good.toml"
    good.write_text("hnsw_ef = 64\n")
    r = subprocess.run([sys.executable, "-m", "ragweedd", "--config", str(good), "check-config"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "hnsw_ef = 64" in r.stdout


def _type_names(t) -> tuple[str, ...]:
    return tuple(x.__name__ for x in t) if isinstance(t, tuple) else (t.__name__,)


def test_every_key_is_documented_and_every_documented_key_exists():
    doc = (ROOT / "docs" / "config.md").read_text()
    documented = set(re.findall(r"^\| `([a-z0-9_.]+)` \|", doc, re.M))
    keys = {k.dotted for k in KEYS}
    assert keys - documented == set(), "keys missing from docs/config.md"
    assert documented - keys - {"paths", "ignore", "topic"} == set(), "docs/config.md names keys that do not exist"
    # Each key's row states the type, default and variable that KEYS declares.
    rows = {m[0]: m[1:] for m in re.findall(r"^\| `([a-z0-9_.]+)` \| ([^|]+?) \| `([^`]*)` \| `([^`]*)` \|", doc, re.M)}
    for k in KEYS:
        default = str(k.default).lower() if isinstance(k.default, bool) else repr(k.default)
        assert rows[k.dotted] == ("/".join(_type_names(k.type)), default, k.env), f"docs/config.md row of {k.dotted}"


def test_config_dataclass_fields_match_keys():
    hints = typing.get_type_hints(Config)
    fields = {f.name: f for f in dataclasses.fields(Config)}
    assert list(fields) == [k.attr for k in KEYS] + ["collections", "source"]
    for k in KEYS:
        f = fields[k.attr]
        assert f.default == k.default and type(f.default) is type(k.default), f"default of Config.{k.attr}"
        declared = typing.get_args(hints[k.attr]) or (hints[k.attr],)
        assert tuple(t.__name__ for t in declared) == _type_names(k.type), f"type of Config.{k.attr}"
    assert hints["collections"] == dict[str, CollectionConfig] and fields["collections"].default_factory is dict
    assert hints["source"] == str | None and fields["source"].default is None
    assert Config.__dataclass_params__.frozen


def test_example_config_is_valid():
    c = load_config(ROOT / "config" / "ragweedd.example.toml", env={})
    assert "examples" in c.collections
    # ragweedctl finds the daemon `make run` starts through the default state directory
    assert c.state_dir == "" and c.data_dir.endswith(".ragweed-run/data")
