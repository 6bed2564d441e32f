"""The keyword leg on PostgreSQL: full text search over ``chunks.tsv`` (GIN), ranked by BM25.

The query planner (query/fts_plan.py) makes a keyword query tree (store/types.py): words and
phrases of index terms joined by all-of and any-of. ``tsquery_sql`` renders it as a tsquery of
tsquery literals, one per word or phrase (``'term'``, or ``'a' <-> 'b'`` for a phrase:
store/postgres/pg_terms.py), passed as parameters: no text of a query ever becomes SQL, and the
terms are looked up as the index form holds them, without a PostgreSQL dictionary between.

Ranking: BM25 as FTS5's bm25() computes it (query/bm25.py), in SQL over the tsvector: PostgreSQL's
own ``ts_rank_cd`` knows no document frequencies and ranked SciFact far worse (docs/postgres.md).

Terms given to ``df_term`` and ``row_stats`` are index terms (ragweedd/keyterms.py), the lexemes
``tsv`` holds, looked up as they are.
"""

from __future__ import annotations

from typing import Any

from ragweedd.store.postgres.connection import PgConn
from ragweedd.store.postgres.pg_terms import tsquery_literal
from ragweedd.store.types import AllOf, KeywordQuery, Terms, leaves

# FTS5's bm25() constants, which query/bm25.py rescoring uses too: scores of both add up.
K1 = 1.2
B = 0.75

def tsquery_sql(query: KeywordQuery) -> tuple[str, list[str]]:
    """(SQL of a tsquery, its parameters) for a keyword query: each word or phrase one tsquery
    literal passed as a parameter (store/postgres/pg_terms.py), joined by && and ||."""
    params: list[str] = []

    def render(q: KeywordQuery) -> str:
        if isinstance(q, Terms):
            params.append(tsquery_literal(" ".join(q.terms)))
            return "%s::tsquery"
        op = " && " if isinstance(q, AllOf) else " || "
        return "(" + op.join(render(p) for p in q.parts) + ")"

    return render(query), params


class PgKeyword:
    """Keyword reads of one collection; mixed into PgRag and used alone as its KeywordReader."""

    db: PgConn
    collection_id: int

    def keyword_match(self, query: KeywordQuery, limit: int) -> list[tuple[int, float]]:
        """[(chunk id, BM25 score, higher is better)] of the rows the query finds, best first.

        Rows are found by the tsquery (GIN) and scored in the database by BM25 with FTS5's formula
        and constants (query/bm25.py): the expression's lexemes, their document frequencies in the
        collection, each row's term counts from its tsvector positions and its token count. Every
        step is MATERIALIZED: inlined, the planner may count a term's rows once per candidate."""
        q, params = tsquery_sql(query)
        words = [" ".join(t.terms) for t in leaves(query)]
        rows = self.db.all(
            f"""WITH t AS MATERIALIZED (SELECT {q} AS q),
            terms AS MATERIALIZED (SELECT DISTINCT unnest(string_to_array(w, ' ')) AS lex
                      FROM unnest(%s::text[]) AS w),
            stats AS MATERIALIZED (SELECT count(*)::float8 AS n, greatest(avg(tokens), 1)::float8 AS avgdl
                      FROM chunks WHERE collection_id = %s),
            df AS MATERIALIZED (SELECT terms.lex, greatest(ln((stats.n - d.n + 0.5) / (d.n + 0.5)), 1e-6) AS idf
                   FROM terms, stats, LATERAL (SELECT count(*)::float8 AS n FROM chunks c
                        WHERE c.collection_id = %s AND c.tsv @@ quote_literal(terms.lex)::tsquery) d),
            cand AS MATERIALIZED (SELECT c.id, c.tsv, c.tokens FROM chunks c, t
                                  WHERE c.collection_id = %s AND c.tsv @@ t.q)
            SELECT cand.id, sum(df.idf * f.tf * {K1 + 1} / (f.tf + {K1} * (1 - {B} + {B} * cand.tokens / stats.avgdl)))
                   AS s
            FROM cand CROSS JOIN stats CROSS JOIN LATERAL unnest(cand.tsv) AS u
                 JOIN df ON df.lex = u.lexeme
                 CROSS JOIN LATERAL (SELECT coalesce(array_length(u.positions, 1), 1)::float8 AS tf) f
            GROUP BY cand.id ORDER BY s DESC, cand.id LIMIT %s""",
            [*params, words, self.collection_id, self.collection_id, self.collection_id, limit])
        return [(int(r["id"]), float(r["s"])) for r in rows]

    def match(self, query: KeywordQuery, limit: int) -> list[tuple[int, float]]:
        return self.keyword_match(query, limit)

    def df_term(self, term: str) -> int:
        """Rows holding the lexeme ``term`` as it is (not stemmed again)."""
        return int(self.db.value("SELECT count(*) FROM chunks WHERE collection_id=%s AND tsv @@ %s::tsquery",
                                 (self.collection_id, tsquery_literal(term))))

    def df_match(self, term: str) -> int:
        """Rows holding the words of ``term`` as a phrase."""
        return int(self.db.value("SELECT count(*) FROM chunks WHERE collection_id=%s AND tsv @@ %s::tsquery",
                                 (self.collection_id, tsquery_literal(term))))

    def df_word(self, word: str) -> int:
        """df of an index form: a term's rows; a phrase's (a multi-word synonym) bounded by its
        rarest term, as in SQLite (store/sqlite/fts_reader.py)."""
        terms = word.split()
        if not terms:
            return 0
        return min(self.df_term(t) for t in terms)

    def languages(self) -> dict[str, int]:
        """{language: chunks} the collection's keyword rows were written in."""
        return {str(r["lang"]): int(r["chunks"]) for r in self.db.all(
            "SELECT lang, chunks FROM keyword_languages WHERE collection_id=%s", (self.collection_id,))}

    def row_stats(self, ids: list[int], terms: list[str]) -> tuple[dict[int, int], dict[int, dict[str, int]]]:
        lengths = {int(r["id"]): int(r["tokens"]) for r in self.db.all(
            "SELECT id, tokens FROM chunks WHERE collection_id=%s AND id = ANY(%s)", (self.collection_id, list(ids)))}
        counts: dict[int, dict[str, int]] = {}
        if terms:
            for r in self.db.all(
                    "SELECT c.id, t.lexeme, coalesce(array_length(t.positions, 1), 1) AS n FROM chunks c,"
                    " unnest(c.tsv) AS t WHERE c.collection_id=%s AND c.id = ANY(%s) AND t.lexeme = ANY(%s)",
                    (self.collection_id, list(ids), list(terms))):
                counts.setdefault(int(r["id"]), {})[r["lexeme"]] = int(r["n"])
        return lengths, counts

    def mean_row_tokens(self) -> float:
        return float(self.db.value("SELECT coalesce(avg(tokens), 0) FROM chunks WHERE collection_id=%s",
                                   (self.collection_id,)))

    def version(self) -> tuple[int, int]:
        r: Any = self.db.one(
            "SELECT (SELECT coalesce(max(seq), 0) FROM changes WHERE collection_id=%(c)s) AS a,"
            " (SELECT coalesce(max(id), 0) FROM chunks WHERE collection_id=%(c)s) AS b", {"c": self.collection_id})
        return int(r["a"]), int(r["b"])
