"""The workspace database's named, append-only migrations, each applied once in its own transaction.

`MIGRATIONS` lists them in order; a new one is appended with the next free number. `Store`
(`state/store.py`) runs `migrate` when it opens a writable workspace.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable

from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.state import judge_words, requests
from lexpilot_batch.util import clock


def _run_script(db: sqlite3.Connection, script: str) -> None:
    """Execute statements one by one: `executescript` would COMMIT the migration's transaction."""
    statement = ""
    for line in script.splitlines(keepends=True):
        statement += line
        if sqlite3.complete_statement(statement):
            db.execute(statement)
            statement = ""
    if statement.strip():
        raise ValueError(f"incomplete SQL statement in migration: {statement[:60]!r}")


def _m0001_initial(db: sqlite3.Connection) -> None:
    _run_script(
        db,
        """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);

        -- Cases are copied in, so a workspace can be rescored even if the dataset file moves.
        CREATE TABLE cases (
            dataset TEXT NOT NULL,          -- SHA-256 of the dataset file
            idx INTEGER NOT NULL,           -- position in the file
            case_number TEXT NOT NULL,
            cause_class TEXT NOT NULL,
            data TEXT NOT NULL,             -- the case as JSON
            PRIMARY KEY (dataset, idx)
        );

        CREATE TABLE runs (
            pk INTEGER PRIMARY KEY,
            run_id TEXT NOT NULL,
            model TEXT NOT NULL,
            key TEXT NOT NULL UNIQUE,       -- short hash of (run_id, model), starts every custom_id
            dataset TEXT NOT NULL,
            manifest TEXT NOT NULL,         -- JSON; compared on every prepare
            templates TEXT NOT NULL,        -- JSON of the effective prompt templates
            speculate INTEGER NOT NULL DEFAULT 0,
            created_at REAL NOT NULL,
            UNIQUE (run_id, model)
        );

        CREATE TABLE threads (
            pk INTEGER PRIMARY KEY,
            run_pk INTEGER NOT NULL REFERENCES runs(pk),
            task TEXT NOT NULL,
            case_idx INTEGER NOT NULL,
            variant TEXT NOT NULL,
            status TEXT NOT NULL,           -- active | done | failed
            record TEXT,                    -- JSON result record when done
            reason TEXT,                    -- why it failed
            UNIQUE (run_pk, task, case_idx, variant)
        );
        CREATE INDEX threads_active ON threads(status, run_pk, case_idx);

        CREATE TABLE waves (
            n INTEGER PRIMARY KEY,
            compiled_at REAL NOT NULL,
            closed_at REAL                  -- every batch terminal and ingested
        );

        -- One compiled request file; once submitted, exactly one batch.
        CREATE TABLE files (
            pk INTEGER PRIMARY KEY,
            wave INTEGER NOT NULL REFERENCES waves(n),
            path TEXT NOT NULL UNIQUE,      -- relative to the workspace root, '/' separated
            roles TEXT NOT NULL,
            model TEXT NOT NULL,
            endpoint TEXT NOT NULL,
            shard INTEGER NOT NULL,
            n_requests INTEGER NOT NULL,
            bytes INTEGER NOT NULL,
            sha256 TEXT NOT NULL,
            status TEXT NOT NULL,           -- compiled | uploaded | creating | submitted | downloaded | ingested
            provider_file_id TEXT,
            batch_id TEXT,
            batch_status TEXT,
            request_counts TEXT,
            batch_errors TEXT,
            output_file_id TEXT,
            error_file_id TEXT,
            output_path TEXT,
            error_path TEXT,
            submitted_at REAL,
            finished_at REAL
        );
        CREATE INDEX files_status ON files(status, wave);

        CREATE TABLE requests (
            pk INTEGER PRIMARY KEY,
            custom_id TEXT NOT NULL UNIQUE,
            run_pk INTEGER NOT NULL REFERENCES runs(pk),
            case_idx INTEGER NOT NULL,
            step TEXT NOT NULL,
            attempt INTEGER NOT NULL,
            role TEXT NOT NULL,
            model TEXT NOT NULL,
            parser TEXT NOT NULL,
            n_claims INTEGER NOT NULL DEFAULT 0,
            wave INTEGER NOT NULL,
            file_pk INTEGER NOT NULL REFERENCES files(pk),
            status TEXT NOT NULL,           -- pending | answered | failed | discarded
            text TEXT,
            value TEXT,                     -- JSON of the parsed value
            error TEXT,
            error_kind TEXT,                -- transport | invalid
            prompt_chars INTEGER NOT NULL,
            prompt_tokens INTEGER,
            completion_tokens INTEGER,
            reasoning_tokens INTEGER,
            cached_tokens INTEGER,
            UNIQUE (run_pk, case_idx, step, attempt)
        );
        CREATE INDEX requests_case ON requests(run_pk, case_idx);
        CREATE INDEX requests_file ON requests(file_pk);

        -- What ingest saw that it could not apply: unknown or duplicated custom_ids, bad lines.
        CREATE TABLE anomalies (
            pk INTEGER PRIMARY KEY,
            file_pk INTEGER,
            kind TEXT NOT NULL,
            custom_id TEXT,
            detail TEXT NOT NULL,
            at REAL NOT NULL
        );
        """,
    )


def _m0002_file_backend(db: sqlite3.Connection) -> None:
    # Which backend carries a file: batch (Files + Batches), sync, manual or simulated.
    db.execute("ALTER TABLE files ADD COLUMN backend TEXT NOT NULL DEFAULT 'batch'")


def _m0003_drop_requests_case(db: sqlite3.Connection) -> None:
    # The UNIQUE (run_pk, case_idx, step, attempt) index serves every (run, case) lookup, in the
    # step and attempt order the compiler reads; a second index only slowed every insert.
    db.execute("DROP INDEX IF EXISTS requests_case")


def _m0004_scores_and_usage(db: sqlite3.Connection) -> None:
    # What the report scores of each finished record (tasks.Task.scored), so that reporting never
    # decodes records; NULL for threads finished before this migration (read from the record).
    db.execute("ALTER TABLE threads ADD COLUMN score TEXT")
    # Usage by run and role read from the index alone, not from every request row and its texts.
    db.execute("CREATE INDEX requests_usage ON requests(run_pk, role, status, prompt_tokens, completion_tokens)")


def _m0005_usage_by_file(db: sqlite3.Connection) -> None:
    # Usage is costed per backend (`prices.cost_usd`), which each request's file records: the covering
    # index gains file_pk so that reporting still reads no request row.
    db.execute("DROP INDEX IF EXISTS requests_usage")
    db.execute(
        "CREATE INDEX requests_usage ON requests(run_pk, role, status, file_pk, prompt_tokens, completion_tokens)"
    )


def _m0006_categories(db: sqlite3.Connection) -> None:
    # The cause-class mapping is part of a run's identity (its hash is the manifest's
    # `categories_sha256`): each mapping a run was registered with is stored once, and each case
    # keeps its cause of action, so that every run is classed with its own mapping.
    # `cases.cause_class` stays the class under the mapping of the run that copied the case: it is
    # read only for runs registered before this migration, whose manifests name no mapping.
    _run_script(
        db,
        """
        CREATE TABLE categories (
            sha256 TEXT PRIMARY KEY,        -- categories.mapping_sha256: the cause -> class pairs
            classes TEXT NOT NULL           -- JSON {class: [cause, ...]}, in the file's order
        );
        ALTER TABLE cases ADD COLUMN cause TEXT;
        """,
    )
    rows = db.execute("SELECT rowid, data FROM cases")
    while batch := rows.fetchmany(1000):
        db.executemany(
            "UPDATE cases SET cause = ? WHERE rowid = ?",
            [(json.loads(data).get("cause_of_action"), rowid) for rowid, data in batch],
        )


def _m0007_file_provider(db: sqlite3.Connection) -> None:
    # The provider prefix of a file's model (`registry.ModelName.key`: "openai", "openai-api/sima"),
    # so that sending it finds its route; NULL for a bare name, sent where its role's variables say.
    db.execute("ALTER TABLE files ADD COLUMN provider TEXT")


def _m0008_rescore_interaction_fields(db: sqlite3.Connection) -> None:
    # The report's interaction statistics read DCG's per-round decisions and Interaction LJP's stop
    # reason from the stored scores (tasks.Task.scored), which used to leave them out: those scores
    # are cleared, so that the report reads them from the records instead (what it does for threads
    # finished before scores were stored), and every thread finished from now on stores them.
    db.execute("UPDATE threads SET score = NULL WHERE task IN ('dcg', 'ljp_interaction') AND status = 'done'")


def _m0009_operations(db: sqlite3.Connection) -> None:
    # What a long run against real providers needs (issue 16):
    # - threads.fresh_after: `lexpilot-batch retry` gave the thread fresh attempts; attempts made in
    #   waves up to this one no longer count against its budgets (`engine.due.exhausted`).
    # - retries: what each `retry` made due again, shown by `status`.
    # - files.url: the endpoint path its lines name, which its batch is created for.
    # - files.tokens: estimated input tokens of its requests (`budgets`), for enqueued-token budgets.
    # - files.creates: batches created for it so far; the number joins its metadata tag, so that a
    #   batch created again after a token-limit refusal is never mistaken for the refused one.
    # - files.creating_at: when its last create was sent (the grace period of an uncertain create).
    # - files.not_found: retrieves in a row the provider answered 404 (a batch it lost).
    # - other_batches: batches of a file besides its current one: duplicates found and cancelled,
    #   batches refused for the enqueued-token limit. Their results are never applied.
    _run_script(
        db,
        """
        ALTER TABLE threads ADD COLUMN fresh_after INTEGER NOT NULL DEFAULT 0;
        CREATE TABLE retries (
            pk INTEGER PRIMARY KEY,
            at REAL NOT NULL,
            selection TEXT NOT NULL,        -- JSON of the command's filters
            threads INTEGER NOT NULL,       -- threads made due again
            after_wave INTEGER NOT NULL     -- attempts up to this wave no longer count
        );
        ALTER TABLE files ADD COLUMN url TEXT;
        ALTER TABLE files ADD COLUMN tokens INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE files ADD COLUMN creates INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE files ADD COLUMN creating_at REAL;
        ALTER TABLE files ADD COLUMN not_found INTEGER NOT NULL DEFAULT 0;
        CREATE TABLE other_batches (
            batch_id TEXT PRIMARY KEY,
            file_pk INTEGER REFERENCES files(pk),  -- NULL once its file was discarded
            path TEXT NOT NULL,             -- the file it was created for
            why TEXT NOT NULL,              -- duplicate | token_limit
            status TEXT,                    -- as last seen
            at REAL NOT NULL
        );
        """,
    )


def _m0010_compacted_files(db: sqlite3.Connection) -> None:
    # Request and result files of finished waves are kept gzip-compressed (`compaction`): the hash
    # and size of each one's plain bytes, so that it stays verifiable once the plain file is gone.
    _run_script(
        db,
        """
        CREATE TABLE compacted (
            path TEXT PRIMARY KEY,          -- workspace-relative path of the plain file; kept as path + '.gz'
            sha256 TEXT NOT NULL,           -- of the plain bytes
            bytes INTEGER NOT NULL,         -- plain size
            stored_bytes INTEGER NOT NULL,  -- compressed size
            at REAL NOT NULL
        );
        """,
    )


def _m0011_usage_cached(db: sqlite3.Connection) -> None:
    # Cached prompt tokens, and those written to a cache (Anthropic's cache_creation_input_tokens),
    # are priced apart (`prices.cost_usd`): the covering index gains both so that reporting still
    # reads no request row.
    db.execute("ALTER TABLE requests ADD COLUMN cache_write_tokens INTEGER")
    db.execute("DROP INDEX IF EXISTS requests_usage")
    db.execute(
        "CREATE INDEX requests_usage ON requests"
        "(run_pk, role, status, file_pk, prompt_tokens, completion_tokens, cached_tokens, cache_write_tokens)"
    )


def _m0012_uploading(db: sqlite3.Connection) -> None:
    # files.uploading_at: when its last upload was sent. An upload whose answer was lost (or whose
    # command died before recording the file id) is looked for in the provider's listing of files
    # from then on before the file is uploaded again (`recovery.upload_once`).
    db.execute("ALTER TABLE files ADD COLUMN uploading_at REAL")


def _m0013_download_checks(db: sqlite3.Connection) -> None:
    for column in ("held TEXT", "damaged INTEGER NOT NULL DEFAULT 0", "redacted INTEGER NOT NULL DEFAULT 0"):
        db.execute(f"ALTER TABLE files ADD COLUMN {column}")  # why each: `waves.FileRow`, `engine.downloads`


def _m0014_provider_times(db: sqlite3.Connection) -> None:
    # files.sent_after: a time by the provider's own clock before which nothing of the file's last
    # upload or create exists there (the newest batch the provider listed just before it was sent,
    # or its batch's own `created_at`). Listings that look for a lost upload or create, or sweep
    # for duplicates, start there: no decision compares our clock with the provider's
    # (`recovery.ProviderTimes`). NULL for a file sent before this migration: listed without a cut.
    db.execute("ALTER TABLE files ADD COLUMN sent_after REAL")


def _m0015_instances(db: sqlite3.Connection) -> None:
    # Which copy of the workspace a folder is (`instances`): each instance made (the first, or a
    # copy found or claimed), and, per file, the instance whose tag its last upload and create
    # carried (`files.instance`, NULL before this migration) and how many of its creates lost their
    # answer (`files.lost_answers`): only then can a batch of its upload the workspace does not know
    # be its own where batches carry no tag (Together's; a copy shares the upload there).
    _run_script(
        db,
        """
        CREATE TABLE instances (
            id TEXT PRIMARY KEY,            -- 16 hex digits: the `lexpilot_instance` of its batches
            parent TEXT,                    -- the instance it is a copy of (NULL: the first)
            why TEXT NOT NULL,              -- first | copy (found) | claimed (doctor --claim-copy)
            place TEXT NOT NULL,            -- JSON: machine, folder, database file where it was made
            at REAL NOT NULL
        );
        ALTER TABLE files ADD COLUMN instance TEXT;
        ALTER TABLE files ADD COLUMN lost_answers INTEGER NOT NULL DEFAULT 0;
        """,
    )


def _m0016_cancel_asked(db: sqlite3.Connection) -> None:
    # files.cancel_asked: when this workspace asked the provider to cancel the file's own batch (our
    # clock; past `--max-wave-age` or the `--hedge` deadline, or by `lexpilot-batch cancel`: the only
    # cancels of a file's own batch it sends). A batch that ends cancelled without it was cancelled by someone else (another copy
    # of the workspace, the provider's console), which `doctor` names (`batches_cancelled_elsewhere`).
    # A batch cancelled before this migration is taken as asked for: the database cannot say who.
    db.execute("ALTER TABLE files ADD COLUMN cancel_asked REAL")
    db.execute(
        "UPDATE files SET cancel_asked = COALESCE(finished_at, submitted_at, 0)"
        " WHERE batch_status IN ('cancelling', 'cancelled')"
    )


MIGRATIONS: list[tuple[str, Callable[[sqlite3.Connection], None]]] = [
    ("0001_initial", _m0001_initial),
    ("0002_file_backend", _m0002_file_backend),
    ("0003_drop_requests_case", _m0003_drop_requests_case),
    ("0004_scores_and_usage", _m0004_scores_and_usage),
    ("0005_usage_by_file", _m0005_usage_by_file),
    ("0006_categories", _m0006_categories),
    ("0007_file_provider", _m0007_file_provider),
    ("0008_rescore_interaction_fields", _m0008_rescore_interaction_fields),
    ("0009_operations", _m0009_operations),
    ("0010_compacted_files", _m0010_compacted_files),
    ("0011_usage_cached", _m0011_usage_cached),
    ("0012_uploading", _m0012_uploading),
    ("0013_download_checks", _m0013_download_checks),
    ("0014_provider_times", _m0014_provider_times),
    ("0015_instances", _m0015_instances),
    ("0016_cancel_asked", _m0016_cancel_asked),
    ("0017_judge_words", judge_words.create_table),
    ("0018_reported_cost", requests.add_reported_cost),
    ("0023_answered_at", requests.add_answered_at),
]


def migrate(db: sqlite3.Connection) -> list[str]:
    """Apply every migration not yet recorded, each with its record in one transaction."""
    db.execute("CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
    done = {row[0] for row in db.execute("SELECT name FROM migrations")}
    known = {name for name, _ in MIGRATIONS}
    unknown = done - known
    if unknown:
        raise LexpilotError(
            f"the workspace database has migrations this version does not know ({', '.join(sorted(unknown))}); "
            "it was written by a newer lexpilot-batch: upgrade to use it"
        )
    applied = []
    for name, step in MIGRATIONS:
        if name in done:
            continue
        db.execute("BEGIN IMMEDIATE")
        try:
            step(db)
            db.execute("INSERT INTO migrations VALUES (?, ?)", (name, clock.now()))
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:  # not rolled back by SQLite itself (SQLITE_FULL)
                db.execute("ROLLBACK")
            raise
        applied.append(name)
    return applied
