"""Default prompts and the loader of custom ones (DESIGN §9).

Templates use the literal tokens ``{CONTENT}``, ``{QUERY}``, ``{SOURCES}`` and ``{REFUSAL}`` and are
filled with ``str.replace`` (never ``str.format``), so prompts may contain other braces, JSON examples
and the like.

Look-up order for a provider spec such as "ollama:gemma3:1b", in ``CONFIG_DIR``:

1. ``prompts.json`` entry for the exact spec ("ollama:gemma3:1b"), then for the provider ("ollama"),
   then for "default": ``{"annotation": "...", "synthesis": "...", "synthesis_system": "..."}``
   (every field optional);
2. ``annotation_prompt.txt`` for the annotation prompt;
3. the defaults below.

A template without its required tokens is refused at load with a ConfigError naming the file.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from ragweedd.errors import ConfigError

REFUSAL = "The indexed documents do not answer this question."
NO_LLM_LABEL = "No LLM configured: the most relevant passages, with sources"
CONTENT_CHARS = 1200  # the annotation sees the first 1,200 characters of a chunk

DEFAULT_ANNOTATION_PROMPT = """\
You are checking whether an EXTRACT from one of the user's documents helps to answer a QUESTION.

QUESTION: {QUERY}

EXTRACT:
\"\"\"
{CONTENT}
\"\"\"

Write at least one quote from the EXTRACT that is relevant to the QUESTION. Copy each quote word for \
word, in double quotes, and follow it with one short sentence that says how it bears on the QUESTION. \
Use at most three quotes and 80 words in all. Do not answer the QUESTION from your own knowledge and do \
not add anything that is not in the EXTRACT.
If no quote is relevant write only [IRRELEVANT!!!] and nothing else.
"""

DEFAULT_SYNTHESIS_SYSTEM = """\
You answer questions using only the numbered SOURCES you are given: extracts from the user's own \
documents. Follow these rules exactly.
1. After every claim, put the number of the source it comes from in square brackets, e.g. [1], or \
[2][3] when several sources support it. Cite only numbers that appear in SOURCES.
2. Use only the SOURCES. Do not add outside knowledge and do not guess. The ANNOTATION lines are \
hints from a reviewer; the source text itself is what counts.
3. If the SOURCES do not answer the question, reply with exactly this sentence and nothing else: \
{REFUSAL}
4. If the SOURCES answer only part of the question, answer that part with citations and say plainly \
what they do not cover.
5. Be concise and concrete. Quote exact words when precision matters. Answer in the language of the \
question.
"""

DEFAULT_SYNTHESIS_PROMPT = """\
SOURCES:

{SOURCES}

QUESTION: {QUERY}

Answer the QUESTION from the SOURCES, with a [N] citation after each claim.
"""

CONTINUE_PROMPT = (
    "Your answer was cut off. Continue it exactly where it stopped: do not repeat anything, do not "
    "restart, keep citing sources as [N]."
)

_REQUIRED = {
    "annotation": ("{CONTENT}", "{QUERY}"),
    "synthesis": ("{SOURCES}", "{QUERY}"),
    "synthesis_system": (),
}


@dataclass(frozen=True)
class Prompts:
    annotation: str = DEFAULT_ANNOTATION_PROMPT
    synthesis: str = DEFAULT_SYNTHESIS_PROMPT
    synthesis_system: str = DEFAULT_SYNTHESIS_SYSTEM
    # field -> where it came from ("default" or a file path), for doctor/history
    source: dict[str, str] = field(default_factory=dict)


def validate_template(kind: str, text: str, origin: str) -> str:
    if not isinstance(text, str):
        raise ConfigError(f"{origin}: the {kind} prompt must be a string, not {type(text).__name__}")
    # an empty synthesis_system is allowed: it means "no system prompt, the template says it all"
    if not text.strip() and kind != "synthesis_system":
        raise ConfigError(f"{origin}: the {kind} prompt is empty",
                          hint="write a prompt or delete it to use the default")
    missing = [t for t in _REQUIRED[kind] if t not in text]
    if missing:
        raise ConfigError(
            f"{origin}: the {kind} prompt lacks the placeholder(s) {', '.join(missing)}",
            hint=f"a {kind} prompt must contain {' and '.join(_REQUIRED[kind])} exactly so, with the braces",
        )
    return text


_TOKEN_RE = re.compile(r"\{(CONTENT|QUERY|SOURCES|REFUSAL)\}")


def fill(template: str, **values: str) -> str:
    # a single pass: a chunk or query that itself contains "{QUERY}" is inserted verbatim, not re-filled
    return _TOKEN_RE.sub(lambda m: values.get(m.group(1), m.group(0)), template)


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text", hint="save the file as UTF-8") from None
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: not valid JSON: {e}",
                          hint='expected {"PROVIDER": {"annotation": "...", "synthesis": "..."}}') from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise ConfigError(f"{path}: must be a JSON object mapping a provider to an object of prompts",
                          hint='e.g. {"ollama": {"annotation": "... {CONTENT} ... {QUERY} ..."}}')
    for prov, entry in data.items():
        unknown = set(entry) - set(_REQUIRED)
        if unknown:
            raise ConfigError(f"{path}: entry '{prov}' has unknown field(s) {sorted(unknown)}",
                              hint="allowed: " + ", ".join(_REQUIRED))
        for kind, text in entry.items():
            validate_template(kind, text, f"{path} [{prov}.{kind}]")
    return data


def load_prompts(config_dir: str | Path | None, spec: str | None = None) -> Prompts:
    """Prompts for the provider ``spec`` (e.g. "ollama:gemma3:1b"), from ``config_dir`` or defaults."""
    fields = {"annotation": DEFAULT_ANNOTATION_PROMPT, "synthesis": DEFAULT_SYNTHESIS_PROMPT,
              "synthesis_system": DEFAULT_SYNTHESIS_SYSTEM}
    source = {k: "default" for k in fields}
    if config_dir is None:
        return Prompts(**fields, source=source)
    d = Path(config_dir).expanduser()
    txt = d / "annotation_prompt.txt"
    if txt.is_file():
        try:
            text = txt.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise ConfigError(f"{txt}: not UTF-8 text", hint="save the file as UTF-8") from None
        fields["annotation"] = validate_template("annotation", text, str(txt))
        source["annotation"] = str(txt)
    pj = d / "prompts.json"
    if pj.is_file():
        data = _read_json(pj)
        keys = []
        if spec:
            keys = [spec, spec.partition(":")[0]]
        keys.append("default")
        # most specific entry wins per field
        for key in reversed(keys):
            for kind, text in data.get(key, {}).items():
                fields[kind] = text
                source[kind] = f"{pj} [{key}]"
    return Prompts(**fields, source=source)
