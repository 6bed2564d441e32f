import json
from pathlib import Path

import pytest

from ragweedd.answer.prompts import (
    DEFAULT_ANNOTATION_PROMPT,
    DEFAULT_SYNTHESIS_PROMPT,
    DEFAULT_SYNTHESIS_SYSTEM,
    REFUSAL,
    fill,
    load_prompts,
)
from ragweedd.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


def test_defaults_without_config_dir():
    p = load_prompts(None, "ollama:gemma3:1b")
    assert p.annotation == DEFAULT_ANNOTATION_PROMPT
    assert p.synthesis == DEFAULT_SYNTHESIS_PROMPT
    assert set(p.source.values()) == {"default"}


def test_default_annotation_prompt_has_ragweed_wording():
    assert "{CONTENT}" in DEFAULT_ANNOTATION_PROMPT and "{QUERY}" in DEFAULT_ANNOTATION_PROMPT
    assert "Write at least one quote from the EXTRACT" in DEFAULT_ANNOTATION_PROMPT
    assert "If no quote is relevant write only [IRRELEVANT!!!]" in DEFAULT_ANNOTATION_PROMPT


def test_synthesis_prompt_demands_citations_and_exact_refusal():
    filled = fill(DEFAULT_SYNTHESIS_SYSTEM, REFUSAL=REFUSAL)
    assert REFUSAL in filled and "{REFUSAL}" not in filled
    assert "[1]" in filled and "[2][3]" in filled


def test_shipped_example_files_load_and_match_defaults():
    p = load_prompts(REPO / "config", "ollama:gemma3:1b")
    assert (REPO / "config/annotation_prompt.txt").read_text() == DEFAULT_ANNOTATION_PROMPT
    assert p.source["annotation"].endswith("prompts.json [ollama]")
    assert load_prompts(REPO / "config", "anthropic:claude").synthesis.startswith("<sources>")


def test_annotation_prompt_txt_overrides_default(tmp_path):
    (tmp_path / "annotation_prompt.txt").write_text("Q={QUERY} C={CONTENT} {not-a-token}")
    p = load_prompts(tmp_path, "openai:gpt")
    assert p.annotation == "Q={QUERY} C={CONTENT} {not-a-token}"
    assert p.source["annotation"] == str(tmp_path / "annotation_prompt.txt")


@pytest.mark.parametrize("text,missing", [("only {QUERY}", "{CONTENT}"), ("only {CONTENT}", "{QUERY}"),
                                          ("neither {content} {query}", "{CONTENT}")])
def test_annotation_prompt_without_tokens_is_refused_naming_file(tmp_path, text, missing):
    (tmp_path / "annotation_prompt.txt").write_text(text)
    with pytest.raises(ConfigError) as ei:
        load_prompts(tmp_path)
    assert str(tmp_path / "annotation_prompt.txt") in str(ei.value)
    assert missing in str(ei.value)


def test_empty_and_non_utf8_prompt_files_are_refused(tmp_path):
    f = tmp_path / "annotation_prompt.txt"
    f.write_text("   \n")
    with pytest.raises(ConfigError, match="empty"):
        load_prompts(tmp_path)
    f.write_bytes(b"\xff\xfe{QUERY}{CONTENT}\xff")
    with pytest.raises(ConfigError, match="UTF-8"):
        load_prompts(tmp_path)


def test_prompts_json_most_specific_entry_wins(tmp_path):
    (tmp_path / "annotation_prompt.txt").write_text("TXT {QUERY} {CONTENT}")
    (tmp_path / "prompts.json").write_text(json.dumps({
        "default": {"synthesis": "DEFAULT {SOURCES} {QUERY}"},
        "ollama": {"annotation": "OLLAMA {QUERY} {CONTENT}"},
        "ollama:gemma3:1b": {"annotation": "GEMMA {QUERY} {CONTENT}", "synthesis_system": "sys {REFUSAL}"},
    }))
    gemma = load_prompts(tmp_path, "ollama:gemma3:1b")
    assert gemma.annotation.startswith("GEMMA") and gemma.synthesis.startswith("DEFAULT")
    assert gemma.synthesis_system == "sys {REFUSAL}"
    assert load_prompts(tmp_path, "ollama:llama3").annotation.startswith("OLLAMA")
    other = load_prompts(tmp_path, "openai:gpt-4o")
    assert other.annotation.startswith("TXT") and other.synthesis.startswith("DEFAULT")
    assert other.synthesis_system == DEFAULT_SYNTHESIS_SYSTEM


@pytest.mark.parametrize("content,match", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "JSON object"),
    ('{"ollama": "a string"}', "JSON object"),
    ('{"ollama": {"annotaton": "x {QUERY} {CONTENT}"}}', "unknown field"),
    ('{"ollama": {"annotation": "no tokens"}}', r"ollama\.annotation"),
    ('{"openai": {"synthesis": "{QUERY} only"}}', "{SOURCES}"),
    ('{"ollama": {"annotation": 5}}', "must be a string"),
])
def test_bad_prompts_json_is_refused_naming_file(tmp_path, content, match):
    (tmp_path / "prompts.json").write_text(content)
    with pytest.raises(ConfigError, match=match) as ei:
        load_prompts(tmp_path, "ollama:x")
    assert "prompts.json" in str(ei.value)


def test_fill_is_single_pass():
    out = fill("Q: {QUERY}\nC: {CONTENT}", QUERY="what is {CONTENT}?", CONTENT="text with {QUERY}")
    assert out == "Q: what is {CONTENT}?\nC: text with {QUERY}"
