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

// The layers, each importing only from those above it in this list (D-050): the leaves
// (`names`, `error`, `basics`, `settings`), the OS plumbing (`os`), the formats (`format`), the
// directory's storage (`store`), then the features (`cache`, and `queue`, `jobs` and `claims`
// on it).
mod basics;
mod error;
mod names;
mod settings;

mod format;
mod os;
mod store;

mod cache;
mod claims;
mod jobs;
mod queue;

// The public modules keep their paths from before the layers.
pub use format::frame;
pub use format::value;
pub use os::platform;
pub use store::conn::{checkpoint_deferred, without_waiting};

pub use cache::{
    Cache, Imported, Incr, OpenOptions, Problem, WriteOptions, DB_NAME, FORMAT_VERSION,
};
pub use claims::{ClaimInfo, Claims, ListedClaim};
pub use error::{
    Corruption, Error, IoAdvice, Mismatch, NotCache, Pickled, Repair, Result, StorageFailure,
};
pub use format::key::{Key, Scalar, Side};
pub use format::stored::{checksum, Entry, Kind, StoredValue, ValueFile, ValueHandle, ValueRef};
pub use jobs::{
    pass_delay, Job, JobCounts, JobInfo, JobOptions, JobState, JobValueError, Jobs, ListState,
    ListValues, ListedJob, Put, Swept, TakeVerdict, Taken, PASSES_PER_TAKE,
};
pub use names::FANOUT_MARKER;
pub use queue::{Candidate, Queue, QueueStats, Verdict, QUEUE_MAX, QUEUE_START};
pub use settings::{EvictionPolicy, SettingValue, Settings, SETTING_NAMES};
pub use store::layout::{claim_fanout, fanout_shards};
