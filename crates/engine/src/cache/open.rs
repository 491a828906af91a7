//! Opening a cache directory: the options, and the steps from a directory to a handle with
//! its first connection. Kept apart from the calls because it is the one place that creates
//! the directory, takes the exclusive directory lock and brings the schema and the settings
//! up to date; a read-only open does none of that and only checks what is there.

use super::*;

/// How to open a cache directory.
#[derive(Debug, Clone)]
pub struct OpenOptions {
    /// How long a call waits on a database another connection holds locked before `Error::Timeout`.
    pub timeout: Duration,
    /// Settings to apply; the rest come from the directory, or the defaults for a new one.
    pub settings: Vec<(String, SettingValue)>,
    /// Open an existing cache without writing a byte to its directory; every write then
    /// fails with `Error::ReadOnly` (D-019).
    pub read_only: bool,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            timeout: Duration::from_secs(60),
            settings: Vec::new(),
            read_only: false,
        }
    }
}

/// The least an open waits for the directory lock and for the database (D-055).
const OPEN_WAIT: Duration = Duration::from_secs(60);

impl Cache {
    /// Open (creating if needed) the cache in `directory`.
    ///
    /// Opening is serialised by a directory lock, so any number of processes may open a fresh
    /// directory at once. An existing cache is only read unless a given setting differs.
    pub fn open(directory: impl AsRef<Path>, mut options: OpenOptions) -> Result<Cache> {
        let requested = Modes::take(&mut options.settings)?;
        // A misspelled or out-of-range setting is refused before anything is created.
        let mut probe = Settings::default();
        for (name, value) in &options.settings {
            probe.set(name, value)?;
        }
        let directory = directory.as_ref().to_path_buf();
        crate::store::layout::refuse_fanout_root(&directory)?;
        let db_path = directory.join(DB_NAME);
        crate::store::files::refuse_unsafe_db_files(&db_path)?;
        // Opening waits at least OPEN_WAIT, whatever the handle's timeout: a FanoutCache or a
        // Django backend opens its shards with a timeout of 10 ms, and under load, handles
        // opening the same directory at once (a thread each) would otherwise time out on
        // each other's directory lock. python-diskcache 5.6.3 retries its opening statements
        // for 60 s for the same reason (D-055).
        let open_wait = options.timeout.max(OPEN_WAIT);
        let _deadline = Deadline::start(open_wait);
        let _active = fork::Active::enter();
        let kept = Arc::new(Kept::new());
        let memo = Arc::new(std::sync::Mutex::new(Memo::new()));
        let (conn, settings, modes) = if options.read_only {
            // Nothing is created: no directory, no lock file, no schema, no settings (D-019).
            match std::fs::metadata(&directory) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => {
                    return Err(Error::NotACache(NotCache::NotADirectory {
                        directory: directory.clone(),
                    }))
                }
                Err(e) => {
                    return Err(Error::io(
                        "opening a cache read-only: the directory cannot be read",
                        Some(directory),
                        e,
                    ))
                }
            }
            if let Err(e) = std::fs::metadata(&db_path) {
                return Err(Error::io_advised(
                    "opening a cache read-only: the directory holds no cache database",
                    crate::error::IoAdvice::ReadOnlyCreatesNothing,
                    Some(db_path),
                    e,
                ));
            }
            let (db, at_rest) = conn::open_read_only(&db_path)?;
            let notes = Notes::open(&directory, false, Modes::PRIVATE, kept.clone());
            let db = Conn::new(db, 0, at_rest, notes, memo.clone());
            let settings = {
                let _call = db.live.call();
                init_database(&db.db, &options.settings, true)?
            };
            (db, settings, Modes::PRIVATE)
        } else {
            // The directory and everything in it are private unless asked otherwise (D-027).
            let modes = Modes::prepare(&directory, requested, &db_path)?;
            let lock = DirLock::exclusive(&directory, open_wait, modes)?;
            modes.precreate(&db_path)?;
            let notes = Notes::open(&directory, true, modes, kept.clone());
            let db = Conn::new(conn::open(&db_path)?, 0, None, notes, memo.clone());
            let settings = {
                let _call = db.live.call();
                init_database(&db.db, &options.settings, false)?
            };
            drop(lock);
            (db, settings, modes)
        };
        let page_size: i64 = {
            let _call = conn.live.call();
            conn::apply_pragmas(&conn.db, &settings)?;
            conn.db
                .query_row("PRAGMA page_size", [], |r| r.get(0))
                .ctx("reading the page size")?
        };
        let reserve = (!options.read_only).then(|| Reserve::new(&directory));
        if let Some(reserve) = &reserve {
            reserve.ensure(modes.file);
        }
        let inner = Inner {
            reserve,
            files: ValueFiles::new(&directory, modes),
            modes,
            directory,
            db_path,
            timeout: options.timeout,
            settings: RwLock::new(settings),
            generation: AtomicU64::new(0),
            page_size,
            conns: ThreadLocal::new(),
            read_only: options.read_only,
            kept,
            memo,
        };
        *inner.conns.get_or(|| RefCell::new(None)).borrow_mut() = Some(conn);
        Ok(Cache {
            inner: Arc::new(inner),
        })
    }
}
