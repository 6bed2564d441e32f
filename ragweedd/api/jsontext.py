"""JSON text of every response: valid Unicode whatever a value holds.

File names reach the faces as Python str, and a name that is not UTF-8 holds lone surrogates (the
file system's bytes, surrogateescape). Plain ``json.dumps`` would send them as ``\\udce9`` escapes,
which strict parsers refuse, or fail to encode with ``ensure_ascii=False``. Here each one is written
as the shown form (``contract.shown_path``: ``\\xNN``), so a name reads the same in every field, log
and terminal, and ``uri`` (percent-encoded bytes) and ``doc_key`` stay the exact handles.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ragweedd.contract import shown_path

_SURROGATE = re.compile("[\ud800-\udfff]")


def dumps(obj: Any) -> str:
    text = json.dumps(obj, ensure_ascii=False)
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        # A surrogate only ever sits inside a JSON string, where a backslash is written twice.
        return _SURROGATE.sub(lambda m: shown_path(m.group()).replace("\\", "\\\\"), text)


def _number(text: str) -> int | float:
    value = float(text)
    # JSON Schema counts 45.0 as an integer: a client that writes every number as a float (some
    # JavaScript and Go encoders do) must be able to send "top_k": 45.0
    return int(value) if value.is_integer() and abs(value) <= 2**53 else value


def loads(text: str) -> Any:
    """A request body: JSON, with integral numbers written as floats read as integers."""
    return json.loads(text, parse_float=_number)
