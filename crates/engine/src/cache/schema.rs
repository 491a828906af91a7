//! The schema, format version and settings persistence (D-001, D-006).

use super::*;

pub(super) const SCHEMA: &str = "
CREATE TABLE settings (name TEXT PRIMARY KEY, value) WITHOUT ROWID;
CREATE TABLE meta (
    id INTEGER PRIMARY KEY CHECK (id = 0),
    count INTEGER NOT NULL,
    size INTEGER NOT NULL,
    hits INTEGER NOT NULL,
    misses INTEGER NOT NULL
);
INSERT INTO meta VALUES (0, 0, 0, 0, 0);
CREATE TABLE cache (
    rowid INTEGER PRIMARY KEY,
    key NOT NULL,
    raw INTEGER NOT NULL,
    store_time REAL NOT NULL,
    expire_time REAL,
    access_time REAL NOT NULL,
    access_count INTEGER NOT NULL DEFAULT 0,
    tag,
    size INTEGER NOT NULL DEFAULT 0,
    kind INTEGER NOT NULL,
    crc INTEGER NOT NULL,
    filename TEXT,
    value
);
CREATE UNIQUE INDEX cache_key ON cache (key, raw);
CREATE INDEX cache_expire ON cache (expire_time) WHERE expire_time IS NOT NULL;
CREATE TABLE jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    queue TEXT NOT NULL,
    state INTEGER NOT NULL,
    due REAL NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    lease INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL DEFAULT 0,
    dedupe TEXT,
    created REAL NOT NULL,
    error TEXT,
    kind INTEGER NOT NULL,
    crc INTEGER NOT NULL,
    size INTEGER NOT NULL DEFAULT 0,
    filename TEXT,
    value,
    taken REAL
);
CREATE INDEX jobs_due ON jobs (queue, state, due, id);
CREATE UNIQUE INDEX jobs_dedupe ON jobs (queue, dedupe) WHERE dedupe IS NOT NULL AND state < 2;
";

/// The claims table (D-044): apart from the cache's entries, so that no clear, eviction,
/// expiry or cull removes a live claim. Added to a directory made before it at its first
/// writable open; the format version stays 1, since older builds ignore the table.
pub(super) const CLAIMS_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS claims (
    namespace TEXT NOT NULL,
    key NOT NULL,
    raw INTEGER NOT NULL,
    token TEXT NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    acquired REAL NOT NULL,
    expires REAL NOT NULL,
    PRIMARY KEY (namespace, key, raw)
) WITHOUT ROWID;
";

/// Create or validate the database and reconcile settings. Runs under the exclusive directory
/// lock. Returns the settings in force.
pub(super) fn init_database(
    db: &Connection,
    overrides: &[(String, SettingValue)],
    read_only: bool,
) -> Result<Settings> {
    let version: i64 = db
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(|e| match &e {
            rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::NotADatabase => {
                Error::NotACache(NotCache::NotSqlite)
            }
            _ => sql_error("reading the format version", e),
        })?;
    let app_id: i64 = db
        .query_row("PRAGMA application_id", [], |r| r.get(0))
        .ctx("reading the format version")?;
    if version > FORMAT_VERSION {
        return Err(Error::FormatVersion {
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    let mut settings = Settings::default();
    if version == 0 {
        let tables: i64 = db
            .query_row("SELECT COUNT(*) FROM sqlite_master", [], |r| r.get(0))
            .ctx("inspecting the database")?;
        if tables > 0 {
            return Err(not_ours());
        }
        if read_only {
            return Err(Error::NotACache(NotCache::Empty));
        }
        for (name, value) in overrides {
            settings.set(name, value)?;
        }
        // auto_vacuum first: switching to WAL writes the database header, and from then on
        // SQLite ignores a change of auto_vacuum until a VACUUM. Without it, deleted entries'
        // pages stay in the file, `volume()` never falls, and culling empties the cache.
        db.execute_batch(&format!(
            "PRAGMA auto_vacuum = {}",
            settings.sqlite_auto_vacuum
        ))
        .ctx("creating the schema")?;
        let mode: String = db
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .ctx("switching to WAL")?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(Error::NotACache(NotCache::NoWal { mode }));
        }
        db.execute_batch("BEGIN IMMEDIATE")
            .map_err(|e| sql_error("creating the schema", e))?;
        let created = (|| {
            db.execute_batch(SCHEMA).ctx("creating the schema")?;
            db.execute_batch(CLAIMS_SCHEMA).ctx("creating the schema")?;
            for name in crate::SETTING_NAMES {
                persist_setting(db, name, &settings.get(name)?)?;
            }
            schema_for_setting(db, "eviction_policy", &settings)?;
            schema_for_setting(db, "tag_index", &settings)?;
            db.execute_batch(&format!(
                "PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = {FORMAT_VERSION};"
            ))
            .ctx("creating the schema")
        })();
        return match created.and_then(|()| db.execute_batch("COMMIT").ctx("creating the schema")) {
            Ok(()) => Ok(settings),
            Err(e) => {
                let _ = db.execute_batch("ROLLBACK");
                Err(e)
            }
        };
    }
    if app_id != APPLICATION_ID {
        return Err(not_ours());
    }
    {
        let mut stmt = db
            .prepare("SELECT name, value FROM settings")
            .ctx("reading settings")?;
        let rows = stmt
            .query_map([], |r| {
                Ok((r.get::<_, String>(0)?, setting_from(r.get_ref(1)?)))
            })
            .and_then(|it| it.collect::<rusqlite::Result<Vec<_>>>())
            .ctx("reading settings")?;
        for (name, value) in rows {
            if let Some(v) = value {
                // A setting a newer build added is kept on disk but ignored here.
                let _ = settings.set(&name, &v);
            }
        }
    }
    let mut changed = Vec::new();
    for (name, value) in overrides {
        let before = settings.get(name)?;
        settings.set(name, value)?;
        if settings.get(name)? != before {
            changed.push(name.as_str());
        }
    }
    if !read_only {
        reconcile_auto_vacuum(db, settings.sqlite_auto_vacuum)?;
        add_claims_table(db)?;
        add_jobs_taken(db)?;
    }
    if changed.is_empty() {
        return Ok(settings);
    }
    if read_only {
        let listed: Vec<String> = changed
            .iter()
            .map(|name| Ok(format!("{name}={}", settings.get(name)?)))
            .collect::<Result<_>>()?;
        return Err(Error::ReadOnlySettings { differ: listed });
    }
    db.execute_batch("BEGIN IMMEDIATE")
        .map_err(|e| sql_error("saving settings", e))?;
    let saved = changed.iter().try_for_each(|name| {
        persist_setting(db, name, &settings.get(name)?)?;
        schema_for_setting(db, name, &settings)
    });
    match saved.and_then(|()| db.execute_batch("COMMIT").ctx("saving settings")) {
        Ok(()) => Ok(settings),
        Err(e) => {
            let _ = db.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}

/// Make the file's auto_vacuum mode the one the settings ask for (D-036). Builds before 0.1.1
/// switched to WAL before setting it, so their directories never reclaimed a page; a change
/// of `sqlite_auto_vacuum` likewise takes effect only through a VACUUM. Runs at open, under
/// the exclusive directory lock, and only when the two differ, so once per directory.
fn reconcile_auto_vacuum(db: &Connection, wanted: i64) -> Result<()> {
    let found: i64 = db
        .query_row("PRAGMA auto_vacuum", [], |r| r.get(0))
        .ctx("reading the auto_vacuum mode")?;
    if found == wanted {
        return Ok(());
    }
    db.execute_batch(&format!("PRAGMA auto_vacuum = {wanted}; VACUUM;"))
        .map_err(|e| {
            sql_error(
                "reclaiming free pages (VACUUM) to apply sqlite_auto_vacuum; it needs free disk \
                 space about the size of cache.db",
                e,
            )
        })
}

/// Give a directory made before the claims table its table (once: afterwards this only reads
/// the schema).
fn add_claims_table(db: &Connection) -> Result<()> {
    let has: bool = db
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'claims')",
            [],
            |r| r.get(0),
        )
        .ctx("inspecting the database")?;
    if !has {
        db.execute_batch(CLAIMS_SCHEMA)
            .ctx("adding the claims table")?;
    }
    Ok(())
}

/// Give a jobs table made before it the `taken` column (when the current lease was taken,
/// for the age an operator sees); older builds ignore it. Once: afterwards this only reads.
fn add_jobs_taken(db: &Connection) -> Result<()> {
    let has: bool = db
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM pragma_table_info('jobs') WHERE name = 'taken')",
            [],
            |r| r.get(0),
        )
        .ctx("inspecting the database")?;
    if !has {
        db.execute_batch("ALTER TABLE jobs ADD COLUMN taken REAL")
            .ctx("adding the jobs table's taken column")?;
    }
    Ok(())
}

pub(super) fn not_ours() -> Error {
    Error::NotACache(NotCache::Foreign)
}

pub(super) fn persist_setting(db: &Connection, name: &str, value: &SettingValue) -> Result<()> {
    let v = match value {
        SettingValue::Int(i) => SqlValue::Integer(*i),
        SettingValue::Str(s) => SqlValue::Text(s.clone()),
    };
    db.execute(
        "INSERT OR REPLACE INTO settings (name, value) VALUES (?1, ?2)",
        params![name, v],
    )
    .ctx("saving a setting")?;
    Ok(())
}

/// The indexes a setting implies: one for the eviction policy's order, and the tag index.
pub(super) fn schema_for_setting(db: &Connection, name: &str, s: &Settings) -> Result<()> {
    let sql = match name {
        "eviction_policy" => {
            let mut sql = String::new();
            for (policy, index, column) in [
                (
                    EvictionPolicy::LeastRecentlyStored,
                    "cache_store_time",
                    "store_time",
                ),
                (
                    EvictionPolicy::LeastRecentlyUsed,
                    "cache_access_time",
                    "access_time",
                ),
                (
                    EvictionPolicy::LeastFrequentlyUsed,
                    "cache_access_count",
                    "access_count",
                ),
            ] {
                if policy == s.eviction_policy {
                    sql += &format!("CREATE INDEX IF NOT EXISTS {index} ON cache ({column});");
                } else {
                    sql += &format!("DROP INDEX IF EXISTS {index};");
                }
            }
            sql
        }
        "tag_index" if s.tag_index => {
            "CREATE INDEX IF NOT EXISTS cache_tag ON cache (tag, rowid) WHERE tag IS NOT NULL"
                .into()
        }
        "tag_index" => "DROP INDEX IF EXISTS cache_tag".into(),
        _ => return Ok(()),
    };
    db.execute_batch(&sql).ctx("updating indexes for a setting")
}

pub(super) fn setting_from(v: Sql<'_>) -> Option<SettingValue> {
    match v {
        Sql::Integer(i) => Some(SettingValue::Int(i)),
        Sql::Real(f) => Some(SettingValue::Int(f as i64)),
        Sql::Text(t) => std::str::from_utf8(t)
            .ok()
            .map(|s| SettingValue::Str(s.to_owned())),
        _ => None,
    }
}

/// The policy's eviction order: up to `?1` entries to evict first. None for `none`.
pub(super) fn policy_victims(policy: EvictionPolicy) -> Option<&'static str> {
    match policy {
        EvictionPolicy::LeastRecentlyStored => Some(
            "SELECT rowid, filename, size FROM cache ORDER BY store_time LIMIT CAST(?1 AS INTEGER)",
        ),
        EvictionPolicy::LeastRecentlyUsed => Some(
            "SELECT rowid, filename, size FROM cache ORDER BY access_time LIMIT CAST(?1 AS INTEGER)",
        ),
        EvictionPolicy::LeastFrequentlyUsed => Some(
            "SELECT rowid, filename, size FROM cache ORDER BY access_count LIMIT CAST(?1 AS INTEGER)",
        ),
        EvictionPolicy::None => None,
    }
}
