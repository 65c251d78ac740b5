//! Schema migrations, applied in order and recorded in `PRAGMA user_version`.
//! Never edit a migration that has shipped: add the next one.

/// Migration `i` brings the schema from version `i` to `i + 1`.
pub(crate) const MIGRATIONS: &[&str] = &[
    // 1: DESIGN.md's schema, plus the owning process (pid, host) so that a run
    // whose process died can be told from one still in progress.
    r#"
    CREATE TABLE runs (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        uuid        TEXT NOT NULL UNIQUE,
        kind        TEXT NOT NULL,
        label       TEXT NOT NULL,
        started_at  TEXT NOT NULL,
        finished_at TEXT,
        status      TEXT NOT NULL CHECK (status IN ('running','complete','interrupted','failed')),
        config_json TEXT NOT NULL,
        env_json    TEXT NOT NULL,
        plan        TEXT,
        cell        TEXT,
        pid         INTEGER,
        host        TEXT
    );
    CREATE INDEX runs_plan_cell ON runs(plan, cell);
    CREATE TABLE steps (
        run_id      INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        idx         INTEGER NOT NULL,
        label       TEXT NOT NULL,
        params_json TEXT NOT NULL,
        started_at  TEXT NOT NULL,
        finished_at TEXT NOT NULL,
        PRIMARY KEY (run_id, idx)
    );
    CREATE TABLE metrics (
        run_id   INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        step_idx INTEGER NOT NULL,
        name     TEXT NOT NULL,
        value    REAL NOT NULL,
        unit     TEXT NOT NULL,
        PRIMARY KEY (run_id, step_idx, name)
    );
    CREATE TABLE samples (
        run_id   INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        step_idx INTEGER NOT NULL,
        t_ms     INTEGER NOT NULL,
        name     TEXT NOT NULL,
        value    REAL NOT NULL
    );
    CREATE INDEX samples_run_step ON samples(run_id, step_idx, name, t_ms);
    CREATE TABLE histograms (
        run_id   INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        step_idx INTEGER NOT NULL,
        name     TEXT NOT NULL,
        hdr      BLOB NOT NULL,
        PRIMARY KEY (run_id, step_idx, name)
    );
    "#,
    // 2: text beside a step's figures (issue 28): `verdict.kind` and
    // `verdict.evidence`, which a number column cannot hold.
    r#"
    CREATE TABLE notes (
        run_id   INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        step_idx INTEGER NOT NULL,
        name     TEXT NOT NULL,
        text     TEXT NOT NULL,
        PRIMARY KEY (run_id, step_idx, name)
    );
    "#,
];
