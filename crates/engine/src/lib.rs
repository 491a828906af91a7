//! The storage engine of diskcache_oxide: a disk-backed cache and work queue on SQLite.
//!
//! One directory is one cache. Any number of threads and processes may open it at once;
//! each thread gets its own SQLite connection. Values are stored in a safe, language-neutral
//! format ([`value`]) with a CRC32C checksum, small ones in the database and large ones in
//! value files beside it.
//!
//! ```no_run
//! use diskcache_oxide_engine::{Cache, Key, OpenOptions, ValueRef, WriteOptions};
//! use diskcache_oxide_engine::value::Value;
//!
//! let cache = Cache::open("/tmp/my-cache", OpenOptions::default())?;
//! cache.set(&Key::from("greeting"), ValueRef::Str("hello"), &WriteOptions::default())?;
//! let entry = cache.get(&Key::from("greeting"), false)?.expect("just stored");
//! assert_eq!(entry.value.into_value()?, Value::Str("hello".into()));
//! # Ok::<(), diskcache_oxide_engine::Error>(())
//! ```

mod bell;
mod cache;
mod claims;
mod conn;
mod error;
mod files;
mod fork;
mod jobs;
mod key;
mod layout;
mod lock;
pub mod platform;
mod queue;
mod recent;
mod reserve;
mod settings;
mod spin;
mod statements;
mod stored;
pub mod value;
mod vfs;

pub use cache::{Cache, Imported, Incr, OpenOptions, WriteOptions, DB_NAME, FORMAT_VERSION};
pub use claims::{ClaimInfo, Claims, ListedClaim};
pub use error::{Error, Result};
pub use jobs::{
    pass_delay, Job, JobCounts, JobInfo, JobOptions, JobState, JobValueError, Jobs, ListState,
    ListValues, ListedJob, Put, Swept, TakeVerdict, Taken, PASSES_PER_TAKE,
};
pub use key::{Key, Scalar, Side};
pub use layout::{claim_fanout, fanout_shards, FANOUT_MARKER};
pub use queue::{Candidate, Queue, QueueStats, Verdict, QUEUE_MAX, QUEUE_START};
pub use settings::{EvictionPolicy, SettingValue, Settings, SETTING_NAMES};
pub use stored::{checksum, Entry, Kind, StoredValue, ValueFile, ValueHandle, ValueRef};
