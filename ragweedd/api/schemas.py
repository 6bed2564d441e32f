"""JSON Schemas derived from the typed contract (ragweedd/contract.py).

The OpenAPI document's response schemas come from here, so they cannot drift from the shapes the
core produces and ragweedctl reads: a field added to a TypedDict appears in the document, a field
the server sends that the contract does not name fails the contract tests (closed objects:
``additionalProperties: false``).
"""

from __future__ import annotations

import types
import typing
from typing import Any, Literal, NotRequired, Required, Union, get_args, get_origin, get_type_hints

from ragweedd import contract
from ragweedd.errors import InternalError

# Shapes published under #/components/schemas, by name.
PUBLISHED: tuple[type, ...] = (
    contract.ErrorAction, contract.ErrorBody, contract.ApiError, contract.Health, contract.RootState,
    contract.ScanSummary,
    contract.Collection, contract.CollectionList, contract.IngestProgress, contract.VectorProgress, contract.QueueDepth,
    contract.FailedJob, contract.EmbedderInfo, contract.IndexInfo, contract.ScheduledJob, contract.JobRun,
    contract.IntegrityReport, contract.MissingTool, contract.Status, contract.Document,
    contract.DocumentPage, contract.ChunkDetail, contract.DocumentDetail, contract.Uploaded,
    contract.Queued, contract.Removed, contract.Hit, contract.SearchResult, contract.Source,
    contract.SourcesEvent, contract.AnnotationEvent, contract.ContextEvent, contract.TokenEvent,
    contract.DoneEvent, contract.ErrorEvent, contract.Answer, contract.HistoryItem, contract.HistoryPage,
    contract.HistoryEntry, contract.RewriteCall, contract.Rewrite, contract.ConversationItem,
    contract.ConversationPage, contract.Conversation, contract.ConversationDeleted,
    contract.ChatModel, contract.ChatModelList, contract.Citation, contract.ChatMessage, contract.ChatChoice,
    contract.ChatUsage, contract.ChatCompletion, contract.ChatDelta, contract.ChatChunkChoice,
    contract.ChatCompletionChunk, contract.LoginCode, contract.WebSession,
)
_NAMES = {t: t.__name__ for t in PUBLISHED}


def _is_typeddict(tp: Any) -> bool:
    return isinstance(tp, type) and typing.is_typeddict(tp)


def _strip(tp: Any) -> Any:
    while get_origin(tp) in (Required, NotRequired):
        tp = get_args(tp)[0]
    return tp


def schema_of(tp: Any, *, ref: bool = True) -> dict[str, Any]:
    """JSON Schema of a contract type. TypedDicts that are published become ``$ref``s when
    ``ref`` is true (inside the document); otherwise they are inlined."""
    tp = _strip(tp)
    if tp is Any:
        return {}
    if tp is type(None) or tp is None:
        return {"type": "null"}
    if tp is bool:
        return {"type": "boolean"}
    if tp is int:
        return {"type": "integer"}
    if tp is float:
        return {"type": "number"}
    if tp is str:
        return {"type": "string"}
    if _is_typeddict(tp):
        if ref and tp in _NAMES:
            return {"$ref": f"#/components/schemas/{_NAMES[tp]}"}
        return _object(tp, ref=ref)
    origin = get_origin(tp)
    args = get_args(tp)
    if origin is Literal:
        return {"enum": list(args)}
    if origin in (Union, types.UnionType):
        return {"anyOf": [schema_of(a, ref=ref) for a in args]}
    if origin is list:
        return {"type": "array", "items": schema_of(args[0], ref=ref) if args else {}}
    if origin is tuple:
        return {"type": "array"}
    if origin is dict:
        return {"type": "object", "additionalProperties": schema_of(args[1], ref=ref) if args else {}}
    raise InternalError(f"no JSON Schema for {tp!r}")


def _object(td: type, *, ref: bool) -> dict[str, Any]:
    hints = get_type_hints(td, include_extras=True)
    required = sorted(k for k in hints if k in td.__required_keys__)  # type: ignore[attr-defined]
    props = {k: schema_of(v, ref=ref) for k, v in hints.items()}
    out: dict[str, Any] = {"type": "object", "properties": props, "additionalProperties": False}
    if required:
        out["required"] = required
    return out


def components() -> dict[str, dict[str, Any]]:
    """Every published shape, by name, for #/components/schemas."""
    return {name: _object(tp, ref=True) for tp, name in _NAMES.items()}


def ref(tp: type) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{_NAMES[tp]}"}
