"""DuckDB schema of the capaudit store.

One file holds everything a user may want to query with plain SQL:

- ``caption_sets`` / ``captions``: each registered set and its rows;
- ``annotation_sources`` + ``instance_categories``, ``chair_gt``,
  ``demographics``: image-level annotations, each row tagged with its source;
- ``runs``: every command that wrote results (resolved config, seed, package
  versions, start/end, status);
- ``metrics``: one row per (run, set, metric, group) with value, n, the
  bootstrap interval, the images the value rests on (``n_images``) and its
  ``status``; ``caption_details``: per-caption audit details (core
  columns here; each metric's own columns are added on first write,
  :mod:`capaudit.store.details`);
- ``lic_cache``: LIC results keyed by (fingerprint, config, seed);
- ``annotation_cache``: parsed annotation files keyed by (sha256, kind), so a
  file given on the command line is parsed once, not on every audit;
- ``filter_log`` / ``filter_runs``: every sentence a filter judged, with its
  action and reason, and one row per filter run;
- ``judges`` / ``judge_items``: judged metrics per sentence or unit (see ``JUDGE_DDL``);
- ``parse_cache``: spaCy features of a caption text keyed by (model, feature
  version, text hash); ``image_embeddings``: CLIP image embeddings keyed by
  (model, image sha256) -- both written by :mod:`capaudit.store.caches`;
- ``filter_validations`` / ``filter_validation_units``: a filter run checked against human
  labels (``capaudit filter validate``, see ``VALIDATION_DDL``).

``SCHEMA_VERSION`` is stored in ``meta``; :func:`migrate` upgrades older files.
"""

SCHEMA_VERSION = 1

DDL = [
    "CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR)",
    "CREATE SEQUENCE IF NOT EXISTS set_id_seq START 1",
    """CREATE TABLE IF NOT EXISTS caption_sets (
        set_id INTEGER PRIMARY KEY,
        name VARCHAR UNIQUE NOT NULL,
        source_path VARCHAR,
        format VARCHAR,
        sha256 VARCHAR,
        n_captions BIGINT,
        n_images BIGINT,
        parent VARCHAR,
        options JSON,
        meta JSON,
        created_at TIMESTAMP DEFAULT current_timestamp)""",
    """CREATE TABLE IF NOT EXISTS captions (
        set_id INTEGER NOT NULL,
        row_idx BIGINT NOT NULL,
        image_key VARCHAR,
        image_id BIGINT,
        caption VARCHAR NOT NULL,
        meta JSON)""",
    """CREATE TABLE IF NOT EXISTS annotation_sources (
        name VARCHAR PRIMARY KEY,
        kind VARCHAR NOT NULL,
        path VARCHAR,
        sha256 VARCHAR,
        n_images BIGINT,
        added_at TIMESTAMP DEFAULT current_timestamp)""",
    """CREATE TABLE IF NOT EXISTS instance_categories (
        source VARCHAR, image_id BIGINT, category VARCHAR, count INTEGER)""",
    "CREATE TABLE IF NOT EXISTS chair_gt (source VARCHAR, image_id BIGINT, object VARCHAR)",
    """CREATE TABLE IF NOT EXISTS demographics (
        source VARCHAR, image_id BIGINT, gender VARCHAR, skin_tone VARCHAR)""",
    "CREATE SEQUENCE IF NOT EXISTS run_id_seq START 1",
    """CREATE TABLE IF NOT EXISTS runs (
        run_id INTEGER PRIMARY KEY,
        command VARCHAR,
        config JSON,
        seed BIGINT,
        versions JSON,
        started_at TIMESTAMP,
        ended_at TIMESTAMP,
        status VARCHAR)""",
    # pid + host of the recording process: a later process marks a run whose pid is gone
    # as 'killed' (Store.mark_orphaned_runs); added by ALTER so older stores upgrade too
    "ALTER TABLE runs ADD COLUMN IF NOT EXISTS pid BIGINT",
    "ALTER TABLE runs ADD COLUMN IF NOT EXISTS host VARCHAR",
    """CREATE TABLE IF NOT EXISTS metrics (
        run_id INTEGER,
        set_name VARCHAR,
        metric VARCHAR,
        grp VARCHAR,
        value DOUBLE,
        n BIGINT,
        ci_low DOUBLE,
        ci_high DOUBLE,
        extra JSON)""",
    """CREATE TABLE IF NOT EXISTS caption_details (
        run_id INTEGER,
        set_name VARCHAR,
        row_idx BIGINT,
        image_id BIGINT,
        n_tokens INTEGER,
        n_sentences INTEGER,
        mentioned VARCHAR[],
        hallucinated VARCHAR[],
        gender_pred VARCHAR,
        chair_s BOOLEAN,
        recall DOUBLE)""",
    """CREATE TABLE IF NOT EXISTS annotation_cache (
        sha256 VARCHAR, kind VARCHAR, image_id BIGINT, items VARCHAR[])""",
    """CREATE TABLE IF NOT EXISTS lic_cache (
        key VARCHAR PRIMARY KEY, value JSON, created_at TIMESTAMP DEFAULT current_timestamp)""",
    "CREATE TABLE IF NOT EXISTS parse_cache (key VARCHAR PRIMARY KEY, features JSON)",
    """CREATE TABLE IF NOT EXISTS image_embeddings (
        model VARCHAR, image_sha256 VARCHAR, embedding FLOAT[],
        PRIMARY KEY (model, image_sha256))""",
]

FILTER_DDL = [
    """CREATE TABLE IF NOT EXISTS filter_log (
        set_name VARCHAR NOT NULL,
        filter VARCHAR,
        run_id INTEGER,
        row_idx BIGINT,
        new_row_idx BIGINT,
        image_id BIGINT,
        sentence_idx INTEGER,
        action VARCHAR,
        reason VARCHAR,
        original VARCHAR,
        revised VARCHAR,
        critique VARCHAR,
        score DOUBLE)""",
    """CREATE TABLE IF NOT EXISTS filter_runs (
        set_name VARCHAR NOT NULL,
        parent VARCHAR,
        filter VARCHAR,
        version VARCHAR,
        run_id INTEGER,
        config JSON,
        summary JSON,
        created_at TIMESTAMP DEFAULT current_timestamp)""",
]
DDL += FILTER_DDL

# -- judged metrics (capaudit.judge; SQL in store/judge.py) ----------------------------
# ``judges``: one row per judge identity (backend, model, parameters, prompt hashes,
# evidence kind); ``judge_items``: one row per judged sentence / unit / element / caption,
# carrying the judge's model, backend and prompt hash, so results of two judges are never
# mixed (every metric row's ``extra`` holds the same ``judge_id``).
JUDGE_DDL = [
    """CREATE TABLE IF NOT EXISTS judges (
        judge_id VARCHAR PRIMARY KEY,
        backend VARCHAR,
        model VARCHAR,
        params JSON,
        prompts JSON,
        evidence VARCHAR)""",
    """CREATE TABLE IF NOT EXISTS judge_items (
        run_id INTEGER,
        judge_id VARCHAR,
        judge_model VARCHAR,
        judge_backend VARCHAR,
        prompt_hash VARCHAR,
        evidence VARCHAR,
        metric VARCHAR,
        set_name VARCHAR,
        caption_idx BIGINT,
        image_id BIGINT,
        kind VARCHAR,
        unit_idx INTEGER,
        text VARCHAR,
        status VARCHAR,
        label VARCHAR,
        score DOUBLE,
        p_yes DOUBLE,
        critique VARCHAR,
        detail JSON)""",
]
DDL += JUDGE_DDL

# -- filter validations (capaudit filter validate; SQL in store/validations.py) ----------
# ``filter_validations``: one row per (filtered set, label file, layout): the matching, the
# status (ok / partial / too-few) and the scores as JSON; ``filter_validation_units``: each
# labelled caption and sentence with its label and the filter's decision, for plain SQL.
VALIDATION_DDL = [
    """CREATE TABLE IF NOT EXISTS filter_validations (
        set_name VARCHAR NOT NULL,
        labels VARCHAR,
        labels_sha256 VARCHAR,
        layout VARCHAR,
        status VARCHAR,
        run_id INTEGER,
        matching JSON,
        result JSON,
        created_at TIMESTAMP DEFAULT current_timestamp)""",
    """CREATE TABLE IF NOT EXISTS filter_validation_units (
        set_name VARCHAR NOT NULL,
        labels_sha256 VARCHAR,
        layout VARCHAR,
        level VARCHAR,
        row_idx BIGINT,
        image_id BIGINT,
        sentence_idx INTEGER,
        label INTEGER,
        grade DOUBLE,
        flagged BOOLEAN,
        action VARCHAR,
        reason VARCHAR,
        evidence VARCHAR,
        label_row BIGINT)""",
]
DDL += VALIDATION_DDL


# Image-id namespaces (issue #12, see capaudit.io.imageids): which dataset a set's ids, each
# caption's id and an annotation source's ids belong to; NULL = unassigned (bare numbers).
# Added by ALTER so that stores written before keep working.
NAMESPACE_DDL = [
    "ALTER TABLE caption_sets ADD COLUMN IF NOT EXISTS namespace VARCHAR",
    "ALTER TABLE captions ADD COLUMN IF NOT EXISTS namespace VARCHAR",
    "ALTER TABLE annotation_sources ADD COLUMN IF NOT EXISTS namespace VARCHAR",
]


# A metric's images and status (``ok``, ``partial: 20 of 100 images``, ``circular``, ...) as
# columns of their own (#46: the README listed them as columns; they were only keys of
# ``extra``): added by ALTER, the rows written before filled from their ``extra`` once.
METRIC_COLUMNS_DDL = [
    "ALTER TABLE metrics ADD COLUMN IF NOT EXISTS n_images BIGINT",
    "ALTER TABLE metrics ADD COLUMN IF NOT EXISTS status VARCHAR",
    "UPDATE metrics SET n_images = TRY_CAST(json_extract_string(extra, '$.n_images') AS BIGINT), "
    "status = json_extract_string(extra, '$.status') WHERE n_images IS NULL AND status IS NULL",
]
METRIC_COLUMNS = ("run_id", "set_name", "metric", "grp", "value", "n", "ci_low", "ci_high",
                  "extra", "n_images", "status")


def _ddl_digest() -> str:
    import hashlib

    return hashlib.sha256("\n".join(DDL + NAMESPACE_DDL + METRIC_COLUMNS_DDL).encode()
                          ).hexdigest()


def needs_migration(state) -> bool:
    """Whether a store found by :func:`capaudit.store.opener.recognise` lacks some of this
    DDL: a new database, or one whose ``meta`` holds another DDL hash (an older capaudit)."""
    return state.new or state.ddl != _ddl_digest()


def migrate(con, state=None) -> None:
    """Create missing tables and columns and record the schema version, in one transaction.

    A store whose ``meta`` holds the hash of this exact DDL has had all of it run: opening
    it then costs no statement (the opener has read the hash). Any change to the DDL changes
    the hash, so the statements run again once. Every statement is idempotent (``IF NOT
    EXISTS``); run in one transaction, an interrupted migration leaves the store as it was."""
    digest = _ddl_digest()
    if state is None:   # a caller without the opener's reading (Store.in_memory)
        if con.execute("SELECT count(*) FROM duckdb_tables() WHERE schema_name = 'main' "
                       "AND table_name = 'meta'").fetchone()[0]:
            row = con.execute("SELECT value FROM meta WHERE key = 'schema_ddl'").fetchone()
            if row and row[0] == digest:
                return
    elif not needs_migration(state):
        return
    con.execute("BEGIN TRANSACTION")
    try:
        for stmt in DDL + NAMESPACE_DDL + METRIC_COLUMNS_DDL:
            con.execute(stmt)
        con.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?), "
                    "('schema_ddl', ?)", [str(SCHEMA_VERSION), digest])
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


# engine details column -> caption_details column
DETAIL_RENAMES = {"caption_index": "row_idx", "gender": "gender_pred"}


def add_columns(con, table: str, schema) -> None:
    """Add the columns of a pyarrow ``schema`` that ``table`` lacks (types as DuckDB maps them)."""
    # table_info, not information_schema: the latter's first query costs ~0.035 s
    have = {r[1] for r in con.execute("SELECT * FROM pragma_table_info(?)", [table]).fetchall()}
    missing = [f for f in schema if f.name not in have]
    if not missing:
        return
    import pyarrow as pa

    types = con.from_arrow(pa.table({f.name: pa.nulls(0, f.type) for f in missing})).types
    for f, t in zip(missing, types):
        con.execute(f'ALTER TABLE {table} ADD COLUMN "{f.name}" {t}')
