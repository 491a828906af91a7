//! OS plumbing (D-050): what the engine needs from a Unix, below any notion of a value or a
//! cache. Nothing here imports `format`, `store` or the features.
//!
//! | module | what |
//! |---|---|
//! | [`platform`] | everything that differs between Unixes, with its fallbacks (D-040) |
//! | `vfs` | the SQLite VFS that takes the WAL index locks itself (D-033) |
//! | `spin` | a spin lock safe to take in a fork handler |
//! | `fork` | fork handlers and inherited connections (D-028) |
//! | `lock` | the directory lock on `.lock` |
//! | `modes` | the modes of what a cache creates (D-027) |
//! | `reserve` | disk space held back for removals (D-039) |
//! | `bell` | waiting for another process's write (D-013) |

pub(crate) mod bell;
pub(crate) mod fork;
pub(crate) mod lock;
pub(crate) mod modes;
pub mod platform;
pub(crate) mod reserve;
pub(crate) mod spin;
pub(crate) mod vfs;
