"""Configuration: one TOML file plus RAGWEED_<KEY> environment overrides (DESIGN §11).

Every key is declared once in ``KEYS`` with its type, default, allowed range and a one-line doc;
``docs/config.md`` documents each (a test keeps them equal). Keys of the original RAGWeed design keep
their names: ``CHUNK_SIZE`` is ``chunk_size`` at the top level, ``EMBED_MODEL`` is ``model`` in
``[embed]``. In the environment a key is ``RAGWEED_`` + section + key in upper case
(``RAGWEED_EMBED_MODEL``, ``RAGWEED_TOP_K``). Upper-case keys are accepted in the file too.

A wrong type, an out-of-range value or an unknown key raises ConfigError naming the key, the value
and what is allowed; the CLI exits with code 2.
"""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragweedd.errors import ConfigError

# A key's check returns None for a good value, else what is allowed (for the error message).
_Check = Callable[[Any], str | None]


@dataclass(frozen=True)
class KeySpec:
    section: str  # "" for top level, "embed", "llm"
    name: str
    type: type | tuple[type, ...]
    default: Any
    doc: str
    check: _Check | None = None

    @property
    def attr(self) -> str:
        return f"{self.section}_{self.name}" if self.section else self.name

    @property
    def env(self) -> str:
        return "RAGWEED_" + self.attr.upper()

    @property
    def dotted(self) -> str:
        return f"{self.section}.{self.name}" if self.section else self.name


def _range(lo: float | None = None, hi: float | None = None) -> _Check:
    def check(v: Any) -> str | None:
        # NaN compares false with everything, so it would pass any bound and poison every score
        if v != v or (lo is not None and v < lo) or (hi is not None and v > hi):
            lo_s = "-inf" if lo is None else lo
            hi_s = "inf" if hi is None else hi
            return f"a number from {lo_s} to {hi_s}"
        return None

    return check


def _choice(*options: str) -> _Check:
    def check(v: Any) -> str | None:
        return None if v in options else "one of " + ", ".join(repr(o) for o in options)

    return check


def _regex(v: str) -> str | None:
    try:
        re.compile(v)
    except re.error as e:
        return f"a valid Python regular expression ({e})"
    return None


def _flags(v: str) -> str | None:
    bad = [f for f in v.replace(",", "|").split("|") if f.strip() and f.strip().upper() not in _RE_FLAGS]
    return None if not bad else "'|'-separated names from " + ", ".join(sorted(_RE_FLAGS))


_RE_FLAGS = {"IGNORECASE", "I", "MULTILINE", "M", "DOTALL", "S", "VERBOSE", "X", "ASCII", "A"}


def _listen(v: str) -> str | None:
    host, sep, port = v.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        return "HOST:PORT, e.g. '127.0.0.1:8723'"
    return None


def _chunk_size(v: int | str) -> str | None:
    if v == "auto" or (isinstance(v, int) and not isinstance(v, bool) and 16 <= v <= 32768):
        return None
    return "'auto' or a whole number of tokens from 16 to 32768"


def _overlap(v: int | str) -> str | None:
    if v == "auto" or (isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 90):
        return None
    return "'auto' or a whole number of percent from 0 to 90"


def _workers(v: int | str) -> str | None:
    if v == "auto" or (isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 64):
        return None
    return "'auto' or a whole number from 1 to 64"


def ingest_worker_count(cfg: Config) -> int:
    """``ingest_workers`` resolved: 'auto' is half the CPU cores, at least 1 and at most 4 (the
    embedding thread and the API need the rest)."""
    v = cfg.ingest_workers
    if v == "auto":
        return max(1, min(4, (os.cpu_count() or 2) // 2))
    return int(v)


def _source_name(v: str) -> str | None:
    # the name is stored with every path, job and history entry and shown in status and logs: a
    # newline or other control character there corrupts what it is shown in
    if any(ord(ch) < 32 or 127 <= ord(ch) < 160 for ch in v) or (v and not v.strip()):
        return "a name without control characters (newline, tab, ...) and not only spaces; empty = the host name"
    return None


def _store(v: str) -> str | None:
    if v == "sqlite" or v.startswith(("postgresql://", "postgres://")):
        return None
    return "'sqlite', or a PostgreSQL connection URI 'postgresql://USER@HOST:PORT/DBNAME' (see docs/postgres.md)"


def redact_dsn(v: Any) -> Any:
    """A connection URI as it may be shown (errors, check-config, status, logs): its password
    replaced by '***', in the user part and in a ``password=`` parameter. A libpq key=value string
    (not taken as a store, but it may be written as one) has its ``password=`` value replaced,
    quoted or not."""
    if not isinstance(v, str):
        return v
    if "://" not in v:
        return re.sub(r"(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'?|(?:\\.|\S)*)", r"\1***", v, flags=re.IGNORECASE)
    v = re.sub(r"^([a-z][a-z0-9+.-]*://[^:/@?#]*):[^@/?#]*@", r"\1:***@", v, flags=re.IGNORECASE)
    return re.sub(r"([?&]password=)[^&#]*", r"\1***", v, flags=re.IGNORECASE)


def _hhmm(v: str) -> str | None:
    m = re.fullmatch(r"(\d{1,2}):(\d{2})", v)
    if not m or int(m.group(1)) > 23 or int(m.group(2)) > 59:
        return "a local time HH:MM, e.g. '03:00'"
    return None


K = KeySpec
KEYS: tuple[KeySpec, ...] = (
    # --- service -------------------------------------------------------------------------
    K("", "listen", str, "127.0.0.1:8723", "Address the API binds to; loopback only unless allow_remote_bind; port 0 picks a free port (written to the port file).", _listen),
    K("", "allow_remote_bind", bool, False, "Permit a non-loopback listen address (prints a warning)."),
    K("", "data_dir", str, "", "Databases and indexes; empty = OS default (XDG_DATA_HOME/ragweedd, ~/Library/Application Support/ragweedd)."),
    K("", "state_dir", str, "", "Token, port, lock files; empty = OS default (XDG_STATE_HOME/ragweedd)."),
    K("", "cache_dir", str, "", "Numba kernel cache and scratch; empty = OS default (XDG_CACHE_HOME/ragweedd)."),
    K("", "log_level", str, "info", "Log level.", _choice("debug", "info", "warning", "error")),
    K("", "max_body_mb", int, 64, "Largest request body the API accepts (uploads included), in MiB.", _range(1, 4096)),
    K("", "max_concurrent_answers", int, 4, "Answers generated at once; more get HTTP 429.", _range(1, 64)),
    K("", "http_idle_timeout_s", float, 15.0, "An API connection that has not sent a whole request head this long after connecting or after its previous answer is closed (idle and half-sent connections).", _range(1.0, 3600.0)),
    K("", "http_body_timeout_s", float, 60.0, "A request body must have arrived this long after its head, else HTTP 408 (raise it for big uploads over slow links).", _range(1.0, 3600.0)),
    K("", "http_write_timeout_s", float, 30.0, "An API client that accepts no bytes of an answer for this long is disconnected (frees its answer slot).", _range(1.0, 3600.0)),
    K("", "mcp_allow_writes", bool, False, "The daemon's MCP endpoint (/mcp) also offers the add_collection, scan and upload tools; read-only tools otherwise."),
    K("", "history_max_entries", int, 0, "Most searches and answers kept in the history (oldest dropped first); 0 = keep all.", _range(0, 10**9)),
    K("", "store", str, "sqlite", "Where chunks, vectors, the job queue and history live: 'sqlite' (files under data_dir) or a PostgreSQL-with-pgvector connection URI 'postgresql://USER@HOST/DBNAME' (password from ~/.pgpass or PGPASSWORD, never shown); see docs/postgres.md.", _store),
    K("", "source_name", str, "", "Names this machine (or share) in a shared store: a document is (source_name, path), so two machines' ~/notes stay apart; empty = the host name. No control characters.", _source_name),
    # --- chunking (original RAGWeed keys) --------------------------------------------------
    K("", "chunk_size", (int, str), "auto", "CHUNK_SIZE in tokens (4 chars/token); 'auto' = the embedder's measured default (2048 for long-context embedders, see docs/chunking.md).", _chunk_size),
    K("", "chunk_size_pdf", int, 1024, "CHUNK_SIZE_PDF: PDF chunks use min(chunk_size, this).", _range(16, 32768)),
    K("", "chunk_size_av", int, 512, "CHUNK_SIZE_AV: audio/video transcript chunks use min(chunk_size, this).", _range(16, 32768)),
    K("", "chunk_overlap_pct", (int, str), "auto", "CHUNK_OVERLAP_PCT: overlap between consecutive chunks, percent; 'auto' = the embedder's measured defaults: 15 for text (the seed's 50 embeds 18% more chunks for no measured gain), 50 for PDFs (it finds the cited page of a filing clearly more often); see docs/chunking.md.", _overlap),
    K("", "chunk_context", bool, True, "Embed and keyword-index each chunk with a context line: the document's readable name (and title when it says more) and the section path; the stored and cited text stays the chunk. Part of the collection's embedder id, so changing it re-embeds (see docs/chunking.md).", None),
    K("", "ingest_entropy_max", float, 7.0, "INGEST_ENTROPY_MAX: chunks above this Shannon entropy (bits/char) are dropped as garbage.", _range(0.0, 32.0)),
    K("", "ingest_entropy_min", float, 0.5, "INGEST_ENTROPY_MIN: chunks below this entropy and with < 5 words are dropped as empty.", _range(0.0, 32.0)),
    # --- embedding -------------------------------------------------------------------------
    K("embed", "model", str, "local:all-minilm-l6-v2", "EMBED_MODEL: 'local:all-minilm-l6-v2' (int8 linear layers, 35 chunks/s), 'local:all-minilm-l6-v2-f32' (float32, exact upstream vectors), 'local:all-minilm-l6-v2-int8' (the int8 ONNX file), 'ollama:NAME' or 'hash:DIM' (tests).", None),
    K("embed", "ollama_url", str, "http://127.0.0.1:11434", "Ollama server for 'ollama:' embedders and chat."),
    K("embed", "batch_size", int, 32, "Texts per embedding call.", _range(1, 4096)),
    K("embed", "threads", int, 2, "Threads the local ONNX embedder uses.", _range(1, 256)),
    K("embed", "migrate", bool, True, "When embed.model changes, build the new model's vectors beside the old ones while searches keep using the old model, then switch every collection at once (false: drop the collections' vectors and index them again from their files). See docs/embedders.md.", None),
    K("embed", "retry_s", float, 30.0, "While a change of embed.model waits for a new model that cannot be loaded (its Ollama server down, the model not pulled), the old model serves and the new one is tried again this often (seconds). See docs/embedders.md.", _range(0.1, 86400.0)),
    K("embed", "languages", str, "auto", "Languages the primary embedder reads well: ISO 639-1 codes separated by commas ('en', 'en,de'), '*' for every language, or 'auto': what the embedder declares (the embedded MiniLM: 'en'; Ollama and hash embedders: '*'). A query in a language no working embedder reads is ranked by the keyword leg first (uncovered_dense_weight; docs/embedders.md, Languages).", None),
    K("", "multi_embed_384", str, "", "MULTI_EMBED_384: model of an extra 384-d embedding pass, in the form of embed.model (e.g. 'ollama:all-minilm', or 'local:all-minilm-l6-v2' beside an Ollama primary; empty = off). Its vectors are stored beside the primary's and indexed in data_level0_384.bin; searches keep each chunk's best similarity over the passes. A model that cannot be used is skipped with a warning and a line in status `degraded`."),
    K("", "multi_embed_1024", str, "", "MULTI_EMBED_1024: model of an extra 1024-d embedding pass (e.g. 'ollama:mxbai-embed-large'; empty = off), like multi_embed_384, indexed in data_level0_1024.bin."),
    K("", "multi_embed_languages", str, "auto", "Languages the extra passes' models (multi_embed_384, multi_embed_1024) read well, in the form of embed.languages; 'auto' = what each pass's embedder declares ('*' for Ollama models). A query is read by the dense leg when the primary or a working pass covers its language.", None),
    # --- index -----------------------------------------------------------------------------
    K("", "hnsw_ef", int, 512, "HNSW_EF: layer-0 beam width at search.", _range(1, 4096)),
    K("", "hnsw_exact_below", int, 20000, "Collections with fewer vectors than this are searched exactly (as fast, and exact).", _range(0, 10**9)),
    K("", "index_flush_quiet_s", float, 5.0, "Flush the index after this many seconds without changes.", _range(0.0, 3600.0)),
    K("", "index_flush_max_s", float, 60.0, "Flush at least this often while the index is dirty.", _range(0.1, 86400.0)),
    K("", "index_compact_tombstone_pct", float, 20.0, "Compact the index when tombstones exceed this percent.", _range(1.0, 100.0)),
    # --- retrieval (original RAGWeed keys) ---------------------------------------------------
    K("", "top_k", int, 64, "TOP_K: vector candidates per collection and dimension.", _range(1, 10000)),
    K("", "max_chunks_per_file", int, 3, "MAX_CHUNKS_PER_FILE: results kept per source file.", _range(1, 1000)),
    K("", "min_score", float, 0.0, "MIN_SCORE: drop results with rel_score below this.", _range(0.0, 1.0)),
    K("", "pre_annotate_keep", int, 100, "PRE_ANNOTATE_KEEP: percent of results kept for annotation.", _range(1, 100)),
    K("", "fts_top_k", int, 128, "Keyword candidates per collection (the keyword leg's depth; top_k is the vector leg's).", _range(1, 10000)),
    K("", "fts_enabled", bool, True, "FTS_ENABLED: run the keyword (FTS5) half of hybrid search."),
    K("", "fts_weight", float, 0.15, "FTS_WEIGHT: bonus added to the similarity of keyword hits.", _range(0.0, 10.0)),
    K("", "fts_min_query_ic", float, 0.5, "FTS_MIN_QUERY_IC: skip keyword search when the query's mean IDF is below this.", _range(0.0, 100.0)),
    K("", "fts_long_query_threshold", int, 5, "FTS_LONG_QUERY_THRESHOLD: longer queries keep their top two thirds of words by IDF.", _range(1, 1000)),
    K("", "fts_prune_long_queries", bool, False, "Keep only the top two thirds of a long query's words by IDF (the original design); off: every word counts, as in BM25."),
    K("", "fts_or_max_postings", int, 10000, "Most summed document frequency of the OR tier's terms (rarest first); bounds its cost on large collections.", _range(1, 10**9)),
    K("", "synonyms_enabled", bool, True, "SYNONYMS_ENABLED: expand the OR tier with WordNet synonyms."),
    K("", "synonyms_for", str, "absent", "Which query words get WordNet synonyms: 'absent' (only words the collection does not contain, so only their synonyms can match) or 'all' (the original design's budget by IDF third).", _choice("absent", "all")),
    K("", "synonyms_max_per_word", int, 5, "SYNONYMS_MAX_PER_WORD: synonym budget of the top IDF tier.", _range(0, 100)),
    K("", "wordnet_dir", str, "/usr/share/wordnet", "Directory of the WordNet 3.0 dict files (index.noun, data.noun, ...)."),
    K("", "fusion", str, "zscore", "How keyword and vector results merge: 'zscore' (each leg standardised over its top scores, then weighted; measured best over SciFact train and FinanceBench dev), 'convex' (cosine and BM25 over the query's best BM25, weighted), 'rrf' (reciprocal-rank fusion) or 'boost' (+fts_weight, the original design).", _choice("zscore", "convex", "rrf", "boost")),
    K("", "zscore_dense_weight", float, 0.55, "Fusion 'zscore': the dense leg's weight (the keyword leg gets the rest).", _range(0.0, 1.0)),
    K("", "uncovered_dense_weight", float, 0.1, "Fusion 'zscore' and 'convex': the dense leg's weight (instead of zscore_dense_weight / convex_dense_weight) for a query in a language no working embedder reads (embed.languages, multi_embed_languages), so an embedder blind to it cannot push down what the keyword leg found; fusion 'rrf': the dense list's weight for such a query.", _range(0.0, 1.0)),
    K("", "convex_dense_weight", float, 0.7, "Fusion 'convex': the cosine's weight (the normalised BM25 gets the rest).", _range(0.0, 1.0)),
    K("", "dense_feedback", int, 5, "Rocchio feedback of hybrid search with 'zscore' or 'convex' fusion: the query vector moves toward the stored vectors of this many top fused results and the vector search runs again (0 = off).", _range(0, 100)),
    K("", "dense_feedback_weight", float, 0.3, "Rocchio feedback: the weight of the feedback vectors' mean added to the query vector.", _range(0.0, 10.0)),
    K("", "rrf_keyword_weight", float, 1.0, "RRF fusion: the weight of the keyword list (the dense list's is 1).", _range(0.0, 100.0)),
    K("", "rrf_k", int, 60, "The k of reciprocal-rank fusion.", _range(1, 10000)),
    K("", "search_cache_size", int, 256, "Searches kept by the semantic search cache (least recently used dropped first); 0 = off. An entry answers only while none of its collections has changed since it was stored (docs/retrieval.md, Semantic cache).", _range(0, 100000)),
    K("", "search_cache_similarity", float, 0.97, "Semantic search cache: the least cosine between a query's embedding and a cached query's for the cached result to answer it (1.0 = the same text only).", _range(0.5, 1.0)),
    # --- answers (original RAGWeed keys) -----------------------------------------------------
    K("", "max_tokens", int, 1024, "MAX_TOKENS: tokens reserved for the answer.", _range(16, 200000)),
    K("", "verify_citations", bool, True, "Check every sentence of an LLM answer that cites [N] against source N: its numbers, names and key terms must appear there (docs/answers.md, Verified citations)."),
    K("", "citation_min_support", float, 0.6, "Verified citations: the least share of a sentence's key terms (numbers and names must all be there) that the cited source must hold for the claim to count as supported.", _range(0.0, 1.0)),
    K("", "context_chunks", int, 12, "CONTEXT_CHUNKS: most sources packed into the answer prompt.", _range(1, 1000)),
    K("", "tree_max_documents", int, 3, "Tree mode of ask: most documents the LLM may choose when it routes the question (docs/answers.md, Tree mode).", _range(1, 50)),
    K("", "tree_max_sections", int, 4, "Tree mode of ask: most sections the LLM may open; their chunks (subsections included) are the answer's sources.", _range(1, 100)),
    K("", "tree_documents_shown", int, 30, "Tree mode of ask: when the collections hold more documents than this, only this many of those the ordinary search found are offered to the router.", _range(1, 1000)),
    K("", "annotation_concurrency", int, 4, "ANNOTATION_CONCURRENCY: annotation calls in flight.", _range(1, 256)),
    K("", "annotation_irrelevant_re", str, r"\[IRRELEVANT!!!\]", "ANNOTATION_IRRELEVANT_RE: annotations matching this are filtered out.", _regex),
    K("", "annotation_irrelevant_flags", str, "IGNORECASE", "ANNOTATION_IRRELEVANT_FLAGS: re flags for the pattern, e.g. 'IGNORECASE|MULTILINE'.", _flags),
    K("llm", "synthesis", str, "", "Provider:model that writes answers, e.g. 'anthropic:claude-sonnet-4-5'; empty = cited passages."),
    K("llm", "annotation", str, "", "Provider:model that annotates chunks; empty = no annotation."),
    K("llm", "rerank", str, "", "Provider:model that reorders the top search results of every search and ask (docs/retrieval.md, Rerank); empty = no rerank."),
    K("llm", "rerank_strategy", str, "batch", "'batch': one call scores all candidates 0-10; 'each': one yes/no call per candidate, rerank_concurrency at a time.", _choice("batch", "each")),
    K("llm", "rerank_candidates", int, 20, "How many of the top fused results the reranker sees (the search fetches at least this many, then cuts to the number asked for).", _range(2, 200)),
    K("llm", "rerank_concurrency", int, 4, "Calls in flight for rerank_strategy 'each'.", _range(1, 64)),
    K("llm", "rerank_timeout_s", float, 30.0, "Longest the rerank stage may take; past it the search answers in fused order and says so in retrieval_meta.rerank.error.", _range(1.0, 3600.0)),
    K("llm", "hyde", str, "", "Provider:model that writes hypothetical passages for queries the vector search finds nothing close to (HyDE, docs/retrieval.md); empty = off."),
    K("llm", "hyde_gate", float, 0.5, "HyDE runs when the best cosine of the query's own vector search is below this.", _range(0.0, 1.0)),
    K("llm", "hyde_passages", int, 1, "Hypothetical passages HyDE asks for (one call); their embeddings are averaged with the query's.", _range(1, 8)),
    K("llm", "hyde_timeout_s", float, 20.0, "Longest the HyDE call may take; past it (or on any provider error) the search uses the plain query vector and says so in retrieval_meta.hyde.error.", _range(1.0, 600.0)),
    K("llm", "entailment", str, "", "Provider:model that also checks each cited sentence against its source (yes/no) after the deterministic check (docs/answers.md, Verified citations); empty = deterministic check only."),
    K("llm", "judge", str, "", "Provider:model that scores answers in `ragweedd eval answers` (docs/answers.md, Evaluating answers); empty = the synthesis provider."),
    K("llm", "openai_base_url", str, "", "Base URL for an OpenAI-compatible server (empty = api.openai.com)."),
    K("llm", "timeout_s", float, 120.0, "Timeout of one LLM call.", _range(1.0, 3600.0)),
    K("llm", "max_retries", int, 4, "Retries of a rate-limited LLM call (exponential backoff).", _range(0, 20)),
    K("llm", "context_tokens", int, 32000, "Context window of the synthesis model, in tokens.", _range(512, 4_000_000)),
    K("llm", "retry_backoff_s", float, 1.0, "First wait before retrying a rate-limited LLM call; doubles each retry (capped at 60 s).", _range(0.0, 60.0)),
    K("llm", "anthropic_api_key", str, "", "Anthropic API key; empty = ANTHROPIC_API_KEY from the environment, else the keys file (ragweedctl keys set)."),
    K("llm", "openai_api_key", str, "", "OpenAI (or compatible server) API key; empty = OPENAI_API_KEY from the environment, else the keys file."),
    K("llm", "gemini_api_key", str, "", "Gemini API key; empty = GEMINI_API_KEY or GOOGLE_API_KEY from the environment, else the keys file."),
    K("llm", "synthesis_temperature", float, 0.2, "Temperature of the answer-writing call (annotation always uses 1.0).", _range(0.0, 2.0)),
    # --- extraction (original RAGWeed keys + sandbox) ----------------------------------------
    K("", "tess_bin", str, "tesseract", "TESS_BIN: tesseract binary used for OCR."),
    K("", "whisper_model", str, "", "WHISPER_MODEL: whisper.cpp model file for whisper-cli; empty = faster-whisper with the bundled model."),
    K("", "extract_timeout_s", float, 300.0, "Wall-time cap of one extraction subprocess.", _range(1.0, 86400.0)),
    K("", "extract_cpu_s", int, 300, "CPU-time cap (RLIMIT_CPU) of one extraction subprocess.", _range(1, 86400)),
    K("", "extract_memory_mb", int, 2048, "Memory cap (RLIMIT_AS / watched RSS) of one extraction subprocess.", _range(64, 1_000_000)),
    K("", "extract_max_tries", int, 3, "Tries before a file is marked failed.", _range(1, 100)),
    K("", "ingest_max_text_mb", int, 64, "Text-like files (plain text, markdown, code, HTML, JSON, CSV, SVG, TeX, RTF) larger than this many MiB, and any file whose extracted text is larger, are skipped with the reason.", _range(1, 1_000_000)),
    K("", "ingest_max_file_mb", int, 2048, "Files of any other format (PDF, office, archives, audio/video) larger than this many MiB are skipped with the reason.", _range(1, 10_000_000)),
    K("", "ingest_small_file_mb", float, 1.0, "While an ingest worker has been busy on one file for 2 s, a small-file lane takes only files up to this many MiB, so they never wait behind a big or slow one; 0 = no such lane.", _range(0.0, 1_000_000.0)),
    K("", "zip_max_depth", int, 3, "Deepest nesting of archives inside archives.", _range(0, 32)),
    K("", "zip_max_members", int, 10000, "Most members read from one archive.", _range(1, 10**7)),
    K("", "zip_max_total_mb", int, 512, "Most uncompressed MiB read from one archive.", _range(1, 10**6)),
    K("", "zip_max_ratio", float, 200.0, "Largest compression ratio accepted for a member.", _range(1.0, 10**6)),
    # --- watching and ingest -------------------------------------------------------------------
    K("", "debounce_s", float, 2.0, "Quiet time per path before a change is ingested.", _range(0.0, 3600.0)),
    K("", "delete_hold_s", float, 1.0, "How long a delete waits for a matching create (editor save patterns).", _range(0.0, 3600.0)),
    K("", "scan_interval_s", float, 3600.0, "Periodic reconciliation scan; 0 = only at start and after overflows.", _range(0.0, 10**7)),
    K("", "ingest_workers", (int, str), "auto", "Files extracted at once, each in its own sandbox process; 'auto' = half the CPU cores, 1 to 4. Embedding runs beside them in one more thread (docs/daemon.md).", _workers),
    K("", "ingest_nice", int, 10, "nice value of ingest work (0 = normal priority).", _range(0, 19)),
    K("", "cluster_schedule", str, "03:00", "Local time of the nightly cluster re-analysis.", _hhmm),
    K("", "integrity_interval_s", float, 21600.0, "Period of the integrity check (SQLite, FTS, index counts).", _range(60.0, 10**7)),
)
del K

_BY_ATTR = {k.attr: k for k in KEYS}
_PATH_KEYS = ("data_dir", "state_dir", "cache_dir", "wordnet_dir", "whisper_model")
_SECTIONS = {k.section for k in KEYS if k.section}


@dataclass(frozen=True)
class CollectionConfig:
    name: str
    paths: tuple[str, ...]
    ignore: tuple[str, ...] = ()
    topic: str = ""


@dataclass(frozen=True)
class Config:
    """Validated configuration: one field per KeySpec.attr, plus collections and source.

    Written out by hand so type checkers and editors see each key's type; KEYS stays the one place
    of docs and validation, and a unit test keeps the two in step (names, types, defaults).
    """

    # service
    listen: str = "127.0.0.1:8723"
    allow_remote_bind: bool = False
    data_dir: str = ""
    state_dir: str = ""
    cache_dir: str = ""
    log_level: str = "info"
    max_body_mb: int = 64
    max_concurrent_answers: int = 4
    http_idle_timeout_s: float = 15.0
    http_body_timeout_s: float = 60.0
    http_write_timeout_s: float = 30.0
    mcp_allow_writes: bool = False
    history_max_entries: int = 0
    store: str = "sqlite"
    source_name: str = ""
    # chunking
    chunk_size: int | str = "auto"
    chunk_size_pdf: int = 1024
    chunk_size_av: int = 512
    chunk_overlap_pct: int | str = "auto"
    chunk_context: bool = True
    ingest_entropy_max: float = 7.0
    ingest_entropy_min: float = 0.5
    # embedding
    embed_model: str = "local:all-minilm-l6-v2"
    embed_ollama_url: str = "http://127.0.0.1:11434"
    embed_batch_size: int = 32
    embed_threads: int = 2
    embed_migrate: bool = True
    embed_retry_s: float = 30.0
    embed_languages: str = "auto"
    multi_embed_384: str = ""
    multi_embed_1024: str = ""
    multi_embed_languages: str = "auto"
    # index
    hnsw_ef: int = 512
    hnsw_exact_below: int = 20000
    index_flush_quiet_s: float = 5.0
    index_flush_max_s: float = 60.0
    index_compact_tombstone_pct: float = 20.0
    # retrieval
    top_k: int = 64
    max_chunks_per_file: int = 3
    min_score: float = 0.0
    pre_annotate_keep: int = 100
    fts_top_k: int = 128
    fts_enabled: bool = True
    fts_weight: float = 0.15
    fts_min_query_ic: float = 0.5
    fts_long_query_threshold: int = 5
    fts_prune_long_queries: bool = False
    fts_or_max_postings: int = 10000
    synonyms_enabled: bool = True
    synonyms_for: str = "absent"
    synonyms_max_per_word: int = 5
    wordnet_dir: str = "/usr/share/wordnet"
    fusion: str = "zscore"
    zscore_dense_weight: float = 0.55
    uncovered_dense_weight: float = 0.1
    convex_dense_weight: float = 0.7
    dense_feedback: int = 5
    dense_feedback_weight: float = 0.3
    rrf_keyword_weight: float = 1.0
    rrf_k: int = 60
    search_cache_size: int = 256
    search_cache_similarity: float = 0.97
    # answers
    max_tokens: int = 1024
    verify_citations: bool = True
    citation_min_support: float = 0.6
    context_chunks: int = 12
    tree_max_documents: int = 3
    tree_max_sections: int = 4
    tree_documents_shown: int = 30
    annotation_concurrency: int = 4
    annotation_irrelevant_re: str = r"\[IRRELEVANT!!!\]"
    annotation_irrelevant_flags: str = "IGNORECASE"
    llm_synthesis: str = ""
    llm_annotation: str = ""
    llm_rerank: str = ""
    llm_rerank_strategy: str = "batch"
    llm_rerank_candidates: int = 20
    llm_rerank_concurrency: int = 4
    llm_rerank_timeout_s: float = 30.0
    llm_hyde: str = ""
    llm_hyde_gate: float = 0.5
    llm_hyde_passages: int = 1
    llm_hyde_timeout_s: float = 20.0
    llm_entailment: str = ""
    llm_judge: str = ""
    llm_openai_base_url: str = ""
    llm_timeout_s: float = 120.0
    llm_max_retries: int = 4
    llm_context_tokens: int = 32000
    llm_retry_backoff_s: float = 1.0
    llm_anthropic_api_key: str = ""
    llm_openai_api_key: str = ""
    llm_gemini_api_key: str = ""
    llm_synthesis_temperature: float = 0.2
    # extraction
    tess_bin: str = "tesseract"
    whisper_model: str = ""
    extract_timeout_s: float = 300.0
    extract_cpu_s: int = 300
    extract_memory_mb: int = 2048
    extract_max_tries: int = 3
    ingest_max_text_mb: int = 64
    ingest_max_file_mb: int = 2048
    ingest_small_file_mb: float = 1.0
    zip_max_depth: int = 3
    zip_max_members: int = 10000
    zip_max_total_mb: int = 512
    zip_max_ratio: float = 200.0
    # watching and ingest
    debounce_s: float = 2.0
    delete_hold_s: float = 1.0
    scan_interval_s: float = 3600.0
    ingest_workers: int | str = "auto"
    ingest_nice: int = 10
    cluster_schedule: str = "03:00"
    integrity_interval_s: float = 21600.0
    # not keys: the [collections.NAME] tables and where the values came from
    collections: dict[str, CollectionConfig] = field(default_factory=dict)
    source: str | None = None


# The one rule for collection names (ragweedd.paths also applies it where a collection's folder is
# built): \A...\Z, not ^...$, so "x\n" is refused by .match() and .fullmatch() alike.
from ragweedd.paths import _COLLECTION_NAME_RE as _NAME_RE  # noqa: E402


def _type_name(t: type | tuple[type, ...]) -> str:
    if isinstance(t, tuple):
        return " or ".join(_type_name(x) for x in t)
    return {str: "a string", int: "a whole number", float: "a number", bool: "true or false"}[t]


def _coerce(spec: KeySpec, value: Any, origin: str) -> Any:
    types = spec.type if isinstance(spec.type, tuple) else (spec.type,)
    # an environment value is text: "512" for a key that takes a number or 'auto' is the number
    if isinstance(value, str) and origin.startswith("env") and (str not in types or int in types):
        value = _parse_env(spec, value, origin)
    ok = False
    for t in types:
        if t is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            value, ok = float(value), True
        elif t is int and isinstance(value, int) and not isinstance(value, bool):
            ok = True
        elif t in (str, bool) and isinstance(value, t):
            ok = True
        if ok:
            break
    if not ok and isinstance(value, str) and int in types and origin.startswith("env") and value.strip().lstrip("-").isdigit():
        value, ok = int(value), True
    if not ok:
        raise ConfigError(
            f"{origin}: key '{spec.dotted}' has value {redact_dsn(value)!r}, but it must be {_type_name(spec.type)}",
            hint=spec.doc,
        )
    if spec.check is not None:
        allowed = spec.check(value)
        if allowed:
            raise ConfigError(f"{origin}: key '{spec.dotted}' has value {redact_dsn(value)!r}; allowed: {allowed}",
                              hint=spec.doc)
    return value


def _parse_env(spec: KeySpec, raw: str, origin: str) -> Any:
    types = spec.type if isinstance(spec.type, tuple) else (spec.type,)
    if bool in types:
        low = raw.strip().lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        return raw
    if int in types:
        try:
            return int(raw)
        except ValueError:
            pass
    if float in types:
        try:
            return float(raw)
        except ValueError:
            pass
    return raw


def _collections(raw: Any, origin: str) -> dict[str, CollectionConfig]:
    if not isinstance(raw, dict):
        raise ConfigError(f"{origin}: 'collections' must be a table of [collections.NAME] tables")
    out = {}
    for name, body in raw.items():
        where = f"{origin}: [collections.{name}]"
        if not _NAME_RE.fullmatch(name):
            raise ConfigError(f"{where}: collection name {name!r} is not allowed; use letters, digits, '_', '-', '.' (max 64)")
        if not isinstance(body, dict):
            raise ConfigError(f"{where} must be a table with 'paths'")
        unknown = set(body) - {"paths", "ignore", "topic"}
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)}; allowed: paths, ignore, topic")
        paths = body.get("paths", [])
        if not isinstance(paths, list) or not all(isinstance(p, str) and p for p in paths):
            raise ConfigError(f"{where}: 'paths' has value {paths!r}; allowed: a list of folder paths")
        ignore = body.get("ignore", [])
        if not isinstance(ignore, list) or not all(isinstance(p, str) for p in ignore):
            raise ConfigError(f"{where}: 'ignore' has value {ignore!r}; allowed: a list of glob patterns")
        topic = body.get("topic", "")
        if not isinstance(topic, str):
            raise ConfigError(f"{where}: 'topic' has value {topic!r}; allowed: a string")
        base = Path(origin).parent if origin not in ("<defaults>", "<string>") else Path.cwd()
        resolved = tuple(str((base / Path(os.path.expanduser(p))).resolve()) for p in paths)
        out[name] = CollectionConfig(name=name, paths=resolved, ignore=tuple(ignore), topic=topic)
    return out


def load_config(path: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None,
                *, text: str | None = None) -> Config:
    """Read the TOML file (or ``text``), apply RAGWEED_* overrides from ``env``, validate."""
    env = os.environ if env is None else env
    origin = "<defaults>"
    data: dict[str, Any] = {}
    if text is not None:
        origin = "<string>"
        data = _parse_toml(text, origin)
    elif path is not None:
        p = Path(path).expanduser()
        origin = str(p)
        try:
            data = _parse_toml(p.read_text(encoding="utf-8"), origin)
        except FileNotFoundError:
            raise ConfigError(f"config file {p} does not exist", hint="create it from config/ragweedd.example.toml or pass --config") from None
    values: dict[str, Any] = {}
    collections: dict[str, CollectionConfig] = {}
    for key, value in data.items():
        low = key.lower()
        if low == "collections":
            collections = _collections(value, origin)
        elif low in _SECTIONS and isinstance(value, dict):
            for sub, subval in value.items():
                spec = _BY_ATTR.get(f"{low}_{sub.lower()}")
                if spec is None or spec.section != low:
                    raise ConfigError(f"{origin}: unknown key '{low}.{sub}'", hint=_allowed_in(low))
                values[spec.attr] = _coerce(spec, subval, origin)
        else:
            spec = _BY_ATTR.get(low)
            if spec is None or spec.section:
                raise ConfigError(f"{origin}: unknown key '{key}'", hint=_suggest(low))
            values[spec.attr] = _coerce(spec, value, origin)
    if path is not None:
        # Relative paths in a file mean "relative to that file", like the collection paths.
        base = Path(origin).parent
        for attr in _PATH_KEYS:
            v = values.get(attr)
            if v and not Path(os.path.expanduser(v)).is_absolute():
                values[attr] = str((base / v).resolve())
    for name, raw in env.items():
        if not name.startswith("RAGWEED_") or name in _NON_KEY_ENV:
            continue
        spec = _BY_ATTR.get(name[len("RAGWEED_"):].lower())
        if spec is None:
            raise ConfigError(f"environment variable {name} names no configuration key", hint=_suggest(name[8:].lower()))
        values[spec.attr] = _coerce(spec, raw, f"env {name}")
    return Config(**values, collections=collections, source=origin)


# RAGWEED_* variables that are not configuration keys (process switches read elsewhere).
_NON_KEY_ENV = frozenset({"RAGWEED_REQUIRE_TOOLS", "RAGWEED_CONFIG"})


def _parse_toml(text: str, origin: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{origin}: not valid TOML: {e}") from None


def _allowed_in(section: str) -> str:
    return "allowed keys: " + ", ".join(k.name for k in KEYS if k.section == section)


def _suggest(name: str) -> str:
    close = difflib.get_close_matches(name, [k.attr for k in KEYS], n=3)
    return ("did you mean " + " or ".join(close) + "?") if close else "see docs/config.md for every key"


def default_config() -> Config:
    return load_config(env={})
