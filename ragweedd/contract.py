"""The typed contract: every shape that crosses a face, defined once.

The core produces these, the HTTP API serialises them (they are plain dicts at run time, so JSON is
free), ragweedctl reads them, and the OpenAPI document derives its response schemas from them
(``ragweedd/api/schemas.py``), so a field renamed here is renamed for every face at once and mypy
catches a reader that still uses the old name.

Only the standard library is imported: ragweedctl imports this module and must start fast.

Conventions: times a user sees are ISO 8601 strings in UTC; ``None`` means "not known" or "does not
apply"; every list a route returns in pages sits under ``items`` with ``total``.
"""

# No ``from __future__ import annotations`` here: TypedDict must see NotRequired[...] itself to
# tell optional keys from required ones (Python 3.11 cannot from string annotations).
from typing import Any, AsyncIterator, Literal, NotRequired, Protocol, TypedDict, Union


def iso(t: float | None) -> str | None:
    """A Unix time as the contract shows times: ISO 8601 in UTC (None stays None)."""
    if t is None:
        return None
    from datetime import datetime, timezone

    return datetime.fromtimestamp(t, timezone.utc).isoformat()


def place_uri(source_file: str, *, pages: list[int] | None = None, member: str | None = None,
              t_start: float | None = None, t_end: float | None = None,
              lines: list[int] | None = None) -> str:
    """A URI that opens the cited place: ``file:///x.pdf#page=3`` (PDF viewers' page fragment),
    ``file:///rec.mp3#t=12.5,20`` (W3C media fragment), ``file:///notes.md#L12-L20`` (lines 12 to 20,
    ``#L12`` for one line: GitHub's anchor, which editors' URL handlers and a reader both understand),
    ``file:///a.zip#member=dir/x.txt`` (with ``&L12-L20`` when the member is a text file: the lines
    are the member's own), else the file itself. A page or time wins over lines, which PDFs and
    transcripts do not have anyway."""
    import os
    from urllib.parse import quote

    # what Path.as_uri() gives for an absolute path, without its cost (this runs for every hit);
    # os.fsencode keeps undecodable file-name bytes
    uri = "file://" + quote(os.fsencode(source_file if source_file.startswith("/") else "/" + source_file))
    if pages:
        return f"{uri}#page={pages[0]}"
    if t_start is not None:
        return f"{uri}#t={t_start:g}" + (f",{t_end:g}" if t_end is not None else "")
    anchor = ""
    if lines:
        first, last = lines[0], lines[-1]
        anchor = f"L{first}" if last == first else f"L{first}-L{last}"
    if member:
        return f"{uri}#member={quote(member)}" + (f"&{anchor}" if anchor else "")
    return f"{uri}#{anchor}" if anchor else uri


def shown_path(path: str) -> str:
    """A file name as every face shows it: valid Unicode, each byte that is not UTF-8 written as
    ``\\xNN`` (``caf\\xe9.txt``); a name that is valid UTF-8 is shown exactly. Linux names are
    bytes, which Python hands over with lone surrogates (surrogateescape); JSON and terminals take
    only real characters. The shown name is for reading: ``uri`` (the real bytes, percent-encoded)
    opens the file, and ``doc_key`` addresses the document exactly."""
    if path.isascii():
        return path
    try:
        path.encode("utf-8")
        return path
    except UnicodeEncodeError:
        return "".join(f"\\x{ord(c) - 0xDC00:02x}" if 0xDC80 <= ord(c) <= 0xDCFF
                       else f"\\u{ord(c):04x}" if 0xD800 <= ord(c) <= 0xDFFF else c for c in path)


def shown_hit(hit: dict[str, Any]) -> dict[str, Any]:
    """A hit with its name fields shown (``shown_path``); its ``uri`` already holds the real bytes."""
    for k in ("source_file", "filename", "source_rel_path"):
        v = hit.get(k)
        if isinstance(v, str) and not v.isascii():
            hit[k] = shown_path(v)
    return hit


def without_marks(text: str) -> str:
    """An answer's text without its citation marks ("[1]", "[2, 3]", "[2-4]")."""
    import re

    return re.sub(r"\s*\[\d+(?:\s*[-–,;]\s*\d+)*\]", "", text or "")


# --------------------------------------------------------------------------- errors
ErrorCode = str  # "bad_request", "not_found", "too_many_answers", "internal", ...


class ErrorAction(TypedDict):
    """What to do, for a client to word in its own terms (ragweedd.errors.FIXES): e.g.
    ``{"id": "list_collections"}``, ``{"id": "collection_name_taken", "args": {"name": "notes"}}``."""

    id: str
    args: NotRequired[dict[str, str]]


class ErrorBody(TypedDict):
    code: ErrorCode
    message: str
    hint: NotRequired[str]  # what to do, in the API's words
    action: NotRequired[ErrorAction]


class ApiError(TypedDict):
    """The body of every error response, and the ``error`` of an ask stream's error event."""

    error: ErrorBody


# --------------------------------------------------------------------------- health and status
class Health(TypedDict):
    ok: bool
    version: str
    # HMAC-SHA256(token, "ragweedd-health\n" + port + "\n" + challenge), hex, when ?challenge= is
    # given: the daemon proves it knows the token before a client sends it (docs/api.md).
    proof: NotRequired[str]


DocState = Literal["queued", "indexed", "failed", "skipped", "superseded"]
DOC_STATES: tuple[DocState, ...] = ("queued", "indexed", "failed", "skipped", "superseded")
# The ingest tracker's own file states and the state a user sees for each.
FILE_STATE_SHOWN: dict[str, DocState] = {
    "pending": "queued", "extracting": "queued", "embedding": "queued", "done": "indexed",
    "failed": "failed", "skipped": "skipped", "deleted": "superseded"}


class RootState(TypedDict):
    path: str
    state: Literal["ok", "missing", "empty_mount", "deleted", "unknown"]
    watch: Literal["native", "polling", "none"]


class ScanSummary(TypedDict):
    collection: str
    files_seen: int
    upserts: int
    deletes: int
    unavailable_roots: list[str]
    seconds: float
    at: str


class Collection(TypedDict):
    name: str
    paths: list[str]
    ignore: list[str]
    topic: str
    documents: int
    available: bool
    roots: list[RootState]
    from_config: bool
    last_scan: ScanSummary | None


class CollectionList(TypedDict):
    items: list[Collection]


class ScanActivity(TypedDict):
    """A reconciliation scan wanted or under way: ``waiting`` for the scan thread, ``walking`` the
    folders (``files_seen`` so far), or ``recording`` what it found (queueing jobs, writing the
    rows of skipped files)."""

    collection: str
    state: Literal["waiting", "walking", "recording"]
    files_seen: int


class IngestProgress(TypedDict):
    """Files of the current ingest batch (a batch starts when the queue goes from empty to busy and
    ends when it is empty again): ``done`` of ``total``, the recent rate and the time left; and
    the work not in the queue yet (scans, settling events) and ``busy_with``: everything that keeps
    the daemon from idle (``Status.idle``), in words."""

    running: bool
    done: int
    total: int
    files_per_s: float
    chunks_per_s: float
    eta_s: float | None
    done_since_start: int
    failed_since_start: int
    chunks_since_start: int
    embedded_since_start: int
    workers: int
    scans: list[ScanActivity]  # reconciliation scans wanted or under way
    settling: int  # file change events heard and not yet queued or recorded
    events_seen: int  # file change events the watcher heard since the daemon started (only grows)
    busy_with: list[str]  # what keeps the daemon from idle, in words; empty when status.idle


class VectorProgress(TypedDict):
    """The embedding stage. A file is keyword-searchable as soon as it is extracted (its chunks
    are published); its vectors follow. ``files_searchable`` counts documents with published
    chunks, ``files_with_vectors`` those none of whose chunks waits for a vector."""

    running: bool
    pending_chunks: int
    files_searchable: int
    files_with_vectors: int
    chunks_per_s: float
    eta_s: float | None
    vectors_since_start: int
    embedded_since_start: int


class QueueDepth(TypedDict):
    queued: int
    running: int
    failed: int
    debouncing: int


class FailedJob(TypedDict):
    collection: str
    path: str
    op: Literal["upsert", "delete"]
    tries: int
    error: str | None


class EmbedderInfo(TypedDict):
    id: str
    dim: int


class EmbedPass(TypedDict):
    """An extra embedding pass (``multi_embed_384`` / ``multi_embed_1024``): ``state`` "ok" or
    "skipped" (``problem`` says why and what to do); ``vectors`` stored in all collections,
    ``pending_chunks`` still without one."""

    key: str
    model: str
    space: str
    dim: int
    embedder_id: str | None
    state: str
    vectors: int
    pending_chunks: int
    problem: str | None


class EmbedMigration(TypedDict):
    """A change of ``embed.model`` under way (docs/embedders.md): searches use the old model
    (``old_embedder_id``) until every chunk has a vector of the new one; ``state`` "embedding",
    "switching" (all done, the daemon is moving to the new model), "failed" (``problem``) or
    "blocked" (the new model could not be loaded at the start: ``problem``; tried again every
    embed.retry_s; ``new_embedder_id`` is "" and ``dim`` 0 until a first load recorded them)."""

    old_embedder_id: str
    new_embedder_id: str
    model: str
    dim: int
    state: str
    vectors: int
    pending_chunks: int
    percent: float
    collections: dict[str, dict[str, int]]
    problem: str | None


class IndexInfo(TypedDict):
    vectors: int | None
    applied_seq: int | None
    state: str
    dirty: bool
    last_flush: str | None
    error: str | None


class ScheduledJob(TypedDict):
    name: str
    at: str | None


class JobRun(TypedDict):
    at: str
    ok: bool
    seconds: float | None
    error: str | None


class IntegrityReport(TypedDict):
    """The last integrity check. ``repaired`` lists what the daemon did about ``problems`` right
    after that check (a damaged database moved aside and rebuilt, files re-ingested); empty when
    nothing needed it."""

    ok: bool
    at: str
    problems: list[str]
    repaired: list[str]


class MissingTool(TypedDict):
    """An external program the machine lacks: ``optional`` ones cost a feature (OCR, a faster
    transcriber); the others make their formats' files fail until installed."""

    tool: str
    package: str
    formats: list[str]
    optional: bool


class Status(TypedDict):
    version: str
    pid: int
    uptime_s: float
    collections: list[Collection]
    files_by_state: dict[str, int]  # keys are DocState values
    queue: QueueDepth
    queue_depth: int  # queued + running jobs
    failed_jobs: list[FailedJob]
    ingest: IngestProgress
    vectors: VectorProgress
    embedder: EmbedderInfo
    index: dict[str, IndexInfo]  # by collection
    index_sizes: dict[str, int | None]  # vectors in each collection's index
    last_flush: str | None  # newest index flush of any collection
    next_jobs: list[ScheduledJob]
    last_jobs: dict[str, JobRun]
    integrity: IntegrityReport | None
    degraded: list[str]
    missing_tools: list[MissingTool]
    embed_passes: NotRequired[list[EmbedPass]]  # the configured extra embedding passes
    embed_migration: NotRequired[EmbedMigration | None]  # a change of embed.model under way
    # every file recorded, extracted and embedded, no scan wanted or under way, no file change
    # event settling, the search index caught up, no repair due (ingest.busy_with says what is left)
    idle: bool


# --------------------------------------------------------------------------- documents
class Document(TypedDict):
    """One file of a collection. ``source_file`` and ``filename`` are shown names (``shown_path``:
    bytes that are not UTF-8 as ``\\xNN``); ``uri`` holds the real bytes and ``doc_key`` is exact."""

    doc_key: str
    collection: str
    source_file: str
    filename: str
    uri: str
    state: DocState
    size_bytes: int
    chunks: int
    error: str | None
    updated_at: str | None


class DocumentPage(TypedDict):
    items: list[Document]
    total: int


class ChunkDetail(TypedDict):
    chunk_idx: int
    text: str
    page_label: str | None
    section: str | None
    span: list[int | None] | None
    lines: list[int] | None
    t_start: float | None
    t_end: float | None
    uri: str


class DocumentDetail(Document):
    chunks_detail: list[ChunkDetail]


class Uploaded(TypedDict):
    collection: str
    source_file: str
    state: DocState
    size_bytes: int


class SourceFile(TypedDict):
    """Where an indexed document's original file is (the real path, not a shown one) and its
    collection's current roots, the managed upload folder included: what the web UI's file view
    needs to decide whether it may serve the file."""

    doc_key: str
    collection: str
    path: str
    indexed: bool
    roots: list[str]


class LoginCode(TypedDict):
    """A single-use, short-lived code that signs a browser in to the web UI (``ragweedctl open``)."""

    code: str
    url: str
    expires_in_s: float


class WebSession(TypedDict):
    """What ``POST /login`` answers besides the session cookie: the key the web UI page keeps in
    sessionStorage and sends as ``X-Ragweedd-Key`` (the cookie alone signs nothing in), and how long
    the session lasts unused and at most."""

    key: str
    idle_timeout_s: float
    max_age_s: float


# --------------------------------------------------------------------------- collection actions
class Queued(TypedDict):
    """A scan, re-analysis or keyword-index rebuild was started in the background."""

    collection: str
    queued: bool


class Removed(TypedDict):
    name: str
    removed: bool


# --------------------------------------------------------------------------- search
class Hit(TypedDict):
    """One ranked chunk: where it is (file, page, section, span, lines, time, member, ``uri`` that
    opens the place) and how it scored. ``lines`` is [first, last] (1-based, inclusive) in the file
    as an editor numbers it, for text indexed as the file's own text (plain text, markdown, rst,
    source code, such files inside a zip), else None. Names (``source_file``, ``filename``,
    ``source_rel_path``) are shown names (``shown_path``); ``uri`` percent-encodes the real bytes."""

    embedding_id: int
    collection: str
    doc_id: str
    chunk_idx: int
    source_file: str
    filename: str
    source_rel_path: str | None
    uri: str
    text: str
    page_label: str | None
    pages: list[int] | None
    section: str | None
    span: list[int | None] | None
    lines: list[int] | None
    sheet: str | None
    table: int | None
    table_title: str | None
    rows: list[int | None] | None
    t_start: float | None
    t_end: float | None
    member: str | None
    ocr_type: str | None
    text_entropy: float | None
    word_count: int | None
    score: float
    rel_score: float
    rank: int
    annotate: bool
    snippet: str  # ~300 characters of text around the densest run of the query's words (query/snippet.py)
    snippet_marks: list[list[int]]  # [start, end) of each matched word within snippet
    sim: NotRequired[float | None]  # dense similarity, when the dense leg saw the chunk
    bm25: NotRequired[float | None]  # BM25 of the query's words in the chunk, when it holds any
    fts: NotRequired[bool]  # found by the keyword leg (not only scored for the fusion)
    dense_rank: NotRequired[int | None]
    fts_rank: NotRequired[int | None]


RetrievalMeta = dict[str, Any]  # what each stage did: tiers, words, synonyms, timings (free-form, logged)


class SearchCacheMeta(TypedDict):
    """``retrieval_meta.cache`` (null when the semantic search cache is off): whether the result
    came from the cache, and from which earlier query how close."""

    hit: bool
    entries: int
    similarity: NotRequired[float]
    cached_query: NotRequired[str]
    age_s: NotRequired[float]
    stored: NotRequired[bool]  # on a miss: whether this result was kept for the next searches
    closest_similarity: NotRequired[float]  # on a miss: the nearest cached query of the same options


class HydeMeta(TypedDict):
    """``retrieval_meta.hyde`` (only with ``[llm] hyde`` set, in dense and hybrid searches): whether
    hypothetical passages moved the dense leg, and what asking for them cost."""

    used: bool
    gate: float
    best_score: float | None
    provider: str
    model: str
    passages: NotRequired[int]
    calls: NotRequired[int]
    input_tokens: NotRequired[int]
    output_tokens: NotRequired[int]
    ms: NotRequired[float]
    best_score_after: NotRequired[float | None]
    error: NotRequired[str]
    error_code: NotRequired[str]
    cached_from: NotRequired[dict[str, Any]]  # a cache hit: cost 0 here, the stored search's hyde in it


class SearchResult(TypedDict):
    results: list[Hit]
    retrieval_meta: RetrievalMeta
    history_id: NotRequired[str]


# --------------------------------------------------------------------------- answers
class Quote(TypedDict):
    """A sentence of a source that answers the question: ``text`` is exactly the document's
    extracted text at ``span`` (the same coordinates as the source's ``span``); ``lines`` (text
    files) and ``page_label`` (PDFs: the page when it can be told, else the source's range) place
    it, and ``uri`` opens it (``#L12``, ``#page=3``). ``score`` ranks the sentences of one answer.
    ``lead`` counts the characters at the start of ``text`` brought along so the sentence stands
    alone: the heading or term on the line above it, or the sentence it points back to (0: none)."""

    text: str
    lead: int
    span: list[int] | None
    lines: list[int] | None
    page_label: str | None
    uri: str
    score: float


class Source(TypedDict):
    """A hit as an answer cites it: numbered from 1 in prompt order (``n``), with a label for
    ``[N]`` and either the full text (sources that went into the prompt) or an excerpt."""

    embedding_id: int
    collection: str
    doc_id: str
    source_file: str
    filename: str
    source_rel_path: str | None
    uri: str
    score: float | None
    rel_score: float | None
    page_label: str | None
    section: str | None
    span: list[int | None] | None
    lines: list[int] | None
    sheet: str | None  # a spreadsheet's sheet, with the 1-based rows [first, last] the source holds
    table: int | None  # or the document's table (1-based: its Nth), with its title and rows
    table_title: str | None
    rows: list[int | None] | None
    t_start: float | None
    t_end: float | None
    member: str | None
    label: str
    n: NotRequired[int]
    annotation: NotRequired[str | None]
    text: NotRequired[str]
    excerpt: NotRequired[str]
    truncated: NotRequired[bool]
    quotes: NotRequired[list[Quote]]  # the sentences quoted from this source, in reading order
    quote: NotRequired[Quote | None]  # the best of them: what a citation of [n] highlights


# --------------------------------------------------------------------------- conversations
ConversationId = str  # "c" and 16 hex digits (CONVERSATION_ID_PATTERN)
CONVERSATION_ID_PATTERN = r"^c[0-9a-f]{16}$"


class RewriteCall(TypedDict):
    """The one short LLM call that rewrote a follow-up (``rewrite.llm``): the prompt it was sent,
    its reply and what it cost; ``error`` when it failed and the question was searched as asked."""

    provider: str
    model: str | None
    messages: list[dict[str, str]]
    reply: str | None
    input_tokens: int
    output_tokens: int
    calls: int
    ms: float
    error: NotRequired[str]


class Rewrite(TypedDict):
    """How a question became the query that was searched (docs/answers.md, Conversations): as
    asked (``rewritten`` false: the first turn, a question that stands alone, a failed LLM call),
    or rewritten from the earlier turns by ``method`` "rules" (``carried``: words of the earlier
    turns added; ``replaced``: earlier words the question's own took the place of) or "llm"
    (``llm``: the call). ``filters`` are those the search used, ``filters_carried`` when they came
    from the earlier turn; ``preferred_documents`` the doc_ids of the previous answer's sources
    that ranked first among equals."""

    question: str
    query: str
    rewritten: bool
    method: Literal["none", "rules", "llm"]
    reason: str
    carried: list[str]
    replaced: list[str]
    filters: dict[str, Any]
    filters_carried: bool
    preferred_documents: list[str]
    llm: NotRequired[RewriteCall]


class ThreadTurn(TypedDict):
    """An earlier turn as a follow-up reads it: the question as asked, the query it searched, the
    answer's text without its [N] marks (``without_marks``: they point at that turn's sources, which
    a later prompt numbers anew), the filters it searched with and the doc_ids its answer cited."""

    question: str
    query: str
    answer: str
    filters: dict[str, Any]
    documents: list[str]


class SourcesEvent(TypedDict):
    type: Literal["sources"]
    sources: list[Source]
    # an answer of a conversation: which one, which turn, and what was searched for the question
    conversation_id: NotRequired[ConversationId]
    turn: NotRequired[int]
    rewrite: NotRequired[Rewrite]


class AnnotationEvent(TypedDict):
    type: Literal["annotation"]
    embedding_id: int | None
    annotation: str | None
    relevant: bool
    error: str | None


class ContextEvent(TypedDict):
    """The numbered sources that went into the prompt; ``[N]`` in the answer points at them."""

    type: Literal["context"]
    sources: list[Source]


class TokenEvent(TypedDict):
    type: Literal["token"]
    text: str


FinishReason = Literal["stop", "max_tokens"]
AnswerMode = Literal["llm", "passages", "empty"]


class SourceSentence(TypedDict):
    """The sentence of a cited source that best matches a claim: ``offsets`` into the source's
    ``text``; ``span`` in the document's extracted text (as a Quote's), null when the source has
    no span."""

    text: str
    offsets: list[int]
    span: list[int] | None
    score: float


class CitationCheck(TypedDict):
    """One citation of an LLM answer checked against its source (docs/answers.md, Verified
    citations): the claim (the citing sentence without its marks, at ``answer_span`` in the
    answer), whether source ``n`` supports it, the share of its terms the source holds, what it
    lacks, and the source's closest sentence."""

    n: int
    claim: str
    answer_span: list[int]
    supported: bool
    score: float
    missing: list[str]
    method: Literal["terms", "terms+llm"]
    source_sentence: SourceSentence | None
    entailed: NotRequired[bool]
    entailment_error: NotRequired[str]
    no_source: NotRequired[bool]  # true when the answer cites a number no source has: unsupported


class CitationsVerified(TypedDict):
    """The summary of ``citation_checks``."""

    method: Literal["terms", "terms+llm"]
    checked: int
    supported: int
    unsupported: int
    min_support: float
    ms: float
    entailment: NotRequired[dict[str, Any]]  # provider, calls, input_tokens, output_tokens, error?


AskMode = Literal["hybrid", "tree"]


class TreeDocument(TypedDict):
    id: str  # "D1": the id the router saw
    collection: str
    doc_id: str
    title: str
    source_file: str
    structured: bool  # false: no headings, the document was one section


class TreeSection(TypedDict):
    id: str  # "D1.3": document id, then the node's number in reading order
    document: str
    title: str
    path: list[str]
    pages: list[int] | None  # first and last page, PDFs only
    chunks: int
    chunks_read: NotRequired[int]  # what fit the context's token budget, shared across the sections
    chunks_left_out: NotRequired[int]


class TreeSteps(TypedDict):
    """What a tree-mode answer did (docs/answers.md, Tree mode): the documents the LLM chose, the
    sections it opened, and, when its output could not be used, the fallback to ordinary retrieval."""

    documents: list[TreeDocument]
    sections: list[TreeSection]
    fallback: dict[str, str] | None  # {"stage": "route" | "select", "reason"}
    candidates: NotRequired[int]
    documents_total: NotRequired[int]
    calls: int
    input_tokens: int
    output_tokens: int
    ms: NotRequired[float]
    summaries: NotRequired[dict[str, Any]]  # LLM summaries: provider, calls, cached, errors, tokens


class DoneEvent(TypedDict):
    """The last event of an answer: the whole record the history keeps."""

    type: Literal["done"]
    history_id: str
    query: str
    mode: AnswerMode
    label: str | None
    answer: str
    sources: list[Source]
    cited: list[Source]
    cited_numbers: list[int]
    invalid_citations: list[int]
    refused: bool
    refused_only: bool
    stop_reason: str
    finish_reason: FinishReason
    continuable: bool
    provider: str | None
    model: str | None
    usage: dict[str, Any]
    llm_calls: int
    continuations: int
    timings: dict[str, float]
    annotations: list[dict[str, Any]]
    filtered: list[dict[str, Any]]
    annotation_provider: str | None
    annotation_errors: list[dict[str, Any]]
    retrieved: list[Source]  # every hit retrieval found, compact (an excerpt, no full text)
    budget: NotRequired[dict[str, Any]]  # how the prompt's context budget was spent (LLM answers)
    citation_checks: NotRequired[list[CitationCheck]]  # LLM answers with verify_citations on
    citations_verified: NotRequired[CitationsVerified]
    tree: NotRequired["TreeSteps"]  # ask mode "tree": documents chosen, sections opened
    llm_setup: NotRequired[str | None]  # no synthesis LLM: whether a key is set and what to configure
    conversation_id: NotRequired[ConversationId]  # the conversation this answer is a turn of
    turn: NotRequired[int]  # its number in the conversation, from 1
    rewrite: NotRequired[Rewrite]  # how the question became the query searched


class ErrorEvent(TypedDict):
    """Instead of ``done`` when an answer fails after it started (errors before the first event
    are HTTP errors)."""

    type: Literal["error"]
    error: ErrorBody


AskEvent = Union[SourcesEvent, AnnotationEvent, ContextEvent, TokenEvent, DoneEvent, ErrorEvent]
ASK_EVENT_TYPES = ("sources", "annotation", "context", "token", "done", "error")


class Answer(TypedDict):
    """An answer as one JSON object (``stream=false``): the done record, or on failure the error
    with what was written so far."""

    answer: str
    sources: list[Source]
    annotations: list[dict[str, Any]]
    history_id: str | None
    finish_reason: FinishReason | None
    error: NotRequired[ErrorBody]
    query: NotRequired[str]
    mode: NotRequired[AnswerMode]
    label: NotRequired[str | None]
    cited: NotRequired[list[Source]]
    cited_numbers: NotRequired[list[int]]
    invalid_citations: NotRequired[list[int]]
    citation_checks: NotRequired[list[CitationCheck]]
    citations_verified: NotRequired[CitationsVerified]
    refused: NotRequired[bool]
    refused_only: NotRequired[bool]
    stop_reason: NotRequired[str]
    continuable: NotRequired[bool]
    provider: NotRequired[str | None]
    model: NotRequired[str | None]
    usage: NotRequired[dict[str, Any]]
    llm_calls: NotRequired[int]
    continuations: NotRequired[int]
    timings: NotRequired[dict[str, float]]
    filtered: NotRequired[list[dict[str, Any]]]
    annotation_provider: NotRequired[str | None]
    annotation_errors: NotRequired[list[dict[str, Any]]]
    retrieved: NotRequired[list[Source]]
    budget: NotRequired[dict[str, Any]]
    tree: NotRequired["TreeSteps"]
    llm_setup: NotRequired[str | None]
    conversation_id: NotRequired[ConversationId]
    turn: NotRequired[int]
    rewrite: NotRequired[Rewrite]


# --------------------------------------------------------------------------- history
HistoryKind = Literal["search", "ask"]


class HistoryItem(TypedDict):
    """One entry of the listing; an answer that is a turn of a conversation names it and its
    turn (null for searches and answers outside any conversation)."""

    id: str
    kind: HistoryKind
    query: str
    created_at: str | None
    conversation_id: ConversationId | None
    turn: int | None


class HistoryPage(TypedDict):
    items: list[HistoryItem]
    total: int


class HistoryEntry(HistoryItem, total=False):
    """One entry in full: a search keeps ``results``; an answer keeps what its done event carried
    (``status`` is "streaming" while it is written, "done" or "error" after)."""

    results: list[Hit]
    retrieved: list[Hit | Source]  # full hits while the answer is written, compact once it is done
    retrieval_meta: RetrievalMeta
    status: Literal["streaming", "done", "error"]
    error: ErrorBody
    mode: AnswerMode
    label: str | None
    answer: str
    sources: list[Source]
    cited: list[Source]
    cited_numbers: list[int]
    invalid_citations: list[int]
    refused: bool
    refused_only: bool
    stop_reason: str
    finish_reason: FinishReason
    continuable: bool
    provider: str | None
    model: str | None
    usage: dict[str, Any]
    llm_calls: int
    continuations: int
    timings: dict[str, float]
    annotations: list[dict[str, Any]]
    filtered: list[dict[str, Any]]
    annotation_provider: str | None
    annotation_errors: list[dict[str, Any]]
    budget: dict[str, Any]
    citation_checks: list[CitationCheck]
    citations_verified: CitationsVerified
    tree: "TreeSteps"
    llm_setup: str | None
    state: dict[str, Any] | None
    rewrite: Rewrite


class ConversationItem(TypedDict):
    """A conversation in the listing: its first question as its title, when it started and was
    last continued, how many turns it has."""

    id: ConversationId
    title: str
    created_at: str | None
    updated_at: str | None
    turn_count: int


class ConversationPage(TypedDict):
    items: list[ConversationItem]
    total: int


class Conversation(TypedDict):
    """A conversation in full: its turns in order, each the history entry of its answer (the
    question as asked in ``query``, what was searched in ``rewrite``), without continuation state."""

    id: ConversationId
    title: str
    created_at: str | None
    updated_at: str | None
    turns: list[HistoryEntry]


class ConversationDeleted(TypedDict):
    id: ConversationId
    deleted: bool
    turns: int  # the turns deleted with it


# --------------------------------------------------------------------------- the operations
# --------------------------------------------------------------------------- OpenAI-compatible face
class ChatModel(TypedDict):
    """One entry of GET /v1/models: a collection as ``ragweedd/<name>``, or ``ragweedd/all``."""

    id: str
    object: Literal["model"]
    created: int
    owned_by: str


class ChatModelList(TypedDict):
    object: Literal["list"]
    data: list[ChatModel]


class Citation(TypedDict):
    """A source the answer cites as ``[n]`` (additive to OpenAI's shape): where to open it
    (``file``, ``page``, ``lines``, ``span``, ``uri``) and the sentence it was cited for."""

    n: int
    collection: str
    doc_id: str
    file: str
    filename: str
    page: str | None
    lines: list[int] | None
    span: list[int | None] | None
    uri: str
    quote: str | None


class ChatMessage(TypedDict):
    role: Literal["assistant"]
    content: str


class ChatChoice(TypedDict):
    index: int
    message: ChatMessage
    finish_reason: Literal["stop", "length"]


class ChatUsage(TypedDict):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ChatCompletion(TypedDict):
    """POST /v1/chat/completions without streaming; ``citations`` and ``history_id`` are ours."""

    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[ChatChoice]
    usage: ChatUsage
    citations: list[Citation]
    history_id: str


class ChatDelta(TypedDict, total=False):
    role: Literal["assistant"]
    content: str


class ChatChunkChoice(TypedDict):
    index: int
    delta: ChatDelta
    finish_reason: Literal["stop", "length"] | None


class ChatCompletionChunk(TypedDict):
    """One ``data:`` line of a streamed completion; only the last one (the one with a
    ``finish_reason``) carries ``citations``, ``usage`` and ``history_id``."""

    id: str
    object: Literal["chat.completion.chunk"]
    created: int
    model: str
    choices: list[ChatChunkChoice]
    citations: NotRequired[list[Citation]]
    usage: NotRequired[ChatUsage]
    history_id: NotRequired[str]


class Engine(Protocol):
    """What every face calls. Coroutines that never block the event loop; failures are
    ragweedd.errors exceptions, which the faces turn into ``ApiError`` with the exception's
    ``http_status``."""

    async def status(self) -> Status: ...

    async def list_collections(self) -> list[Collection]: ...

    async def add_collection(self, name: str, paths: list[str], ignore: list[str] | None = None,
                             topic: str = "") -> Collection: ...

    async def remove_collection(self, name: str) -> Removed: ...

    async def scan(self, name: str) -> Queued: ...

    async def reanalyze(self, name: str) -> Queued: ...

    async def rebuild_fts(self, name: str) -> Queued: ...

    async def list_documents(self, collection: str | None = None, state: str | None = None,
                             path_glob: str | None = None, offset: int = 0,
                             limit: int = 50) -> DocumentPage: ...

    async def get_document(self, doc_key: str) -> DocumentDetail: ...

    async def source_file(self, doc_key: str) -> SourceFile: ...

    async def upload(self, collection: str, filename: str, data: bytes) -> Uploaded: ...

    async def search(self, query: str, collections: list[str] | None = None, top_k: int | None = None,
                     path_glob: str | None = None, file_type: str | None = None,
                     doc_id: str | None = None) -> SearchResult: ...

    async def ask(self, query: str, collections: list[str] | None = None, top_k: int | None = None,
                  path_glob: str | None = None, file_type: str | None = None,
                  doc_id: str | None = None, mode: AskMode = "hybrid",
                  conversation_id: ConversationId | None = None,
                  thread: list[ThreadTurn] | None = None) -> AsyncIterator[AskEvent]:
        """An answer as the next turn of ``conversation_id`` (None: the first turn of a new
        conversation), or, with ``thread``, after turns the client holds (nothing is stored of
        them: the OpenAI-compatible face)."""
        ...

    async def ask_continue(self, history_id: str) -> AsyncIterator[AskEvent]: ...

    async def history_list(self, offset: int = 0, limit: int = 50) -> HistoryPage: ...

    async def history_show(self, history_id: str) -> HistoryEntry: ...

    async def conversations_list(self, offset: int = 0, limit: int = 50) -> ConversationPage: ...

    async def conversation_show(self, conversation_id: ConversationId) -> Conversation: ...

    async def conversation_delete(self, conversation_id: ConversationId) -> ConversationDeleted: ...
