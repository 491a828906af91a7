//! Waiting for another process's write without polling the database (D-013).
//!
//! A waiter arms a watch on the cache directory (`platform::Watch`: inotify on Linux), checks,
//! and sleeps until the watch rings or its time is up. Where there is no watch (another
//! platform, or the portable fallbacks forced, D-040) it sleeps with backoff instead. Each
//! thread keeps its bells armed between waits, since closing an inotify descriptor takes
//! milliseconds.

use crate::os::fork::fork_generation;
use crate::os::platform::Watch;
use crate::Result;
use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Bells each thread keeps armed between waits, at most this many (one per directory).
const KEPT_BELLS: usize = 4;

thread_local! {
    /// Armed bells kept for this thread's next wait on the same directory. Closing an inotify
    /// descriptor costs milliseconds (the kernel waits for a grace period), more than a wait
    /// that finds work at once: a bell closed at the end of every wait would add that to each.
    static KEPT: RefCell<Vec<Bell>> = const { RefCell::new(Vec::new()) };
}

struct Bell {
    watch: Watch,
    directory: PathBuf,
    /// `fork_generation()` when made: a forked child shares the descriptor with its parent
    /// (they would read each other's events), so it never reuses one made before the fork.
    fork: u64,
}

impl Bell {
    /// This thread's kept bell for `directory`, its old events drained, or a new one.
    fn take(directory: &Path) -> Option<Bell> {
        let fork = fork_generation();
        let kept = KEPT
            .try_with(|kept| {
                let mut kept = kept.try_borrow_mut().ok()?;
                kept.retain(|b| b.fork == fork);
                let at = kept.iter().position(|b| b.directory == directory)?;
                Some(kept.swap_remove(at))
            })
            .ok()
            .flatten();
        if let Some(bell) = kept {
            bell.watch.drain();
            // Unless the directory was deleted since (and perhaps made again under its path).
            if !bell.watch.gone() {
                return Some(bell);
            }
        }
        Some(Bell {
            watch: Watch::new(directory)?,
            directory: directory.to_path_buf(),
            fork,
        })
    }

    /// Keep this bell for the thread's next wait (closing it only if too many are kept).
    fn keep(self) {
        if self.watch.gone() {
            return;
        }
        let _ = KEPT.try_with(|kept| {
            if let Ok(mut kept) = kept.try_borrow_mut() {
                if kept.len() >= KEPT_BELLS {
                    kept.remove(0);
                }
                kept.push(self);
            }
        });
    }
}

/// Call `attempt` until it returns `Some` or `timeout` has passed, sleeping between tries
/// until some process writes in `directory`. Returns `None` on timeout.
pub(crate) fn wait_for<T>(
    directory: &Path,
    timeout: Duration,
    mut attempt: impl FnMut() -> Result<Option<T>>,
) -> Result<Option<T>> {
    let deadline = Instant::now() + timeout;
    // Armed before the first check, so a write between the check and the sleep still rings.
    let bell = Bell::take(directory);
    let result = wait_with(deadline, bell.as_ref(), &mut attempt);
    if let Some(bell) = bell {
        bell.keep();
    }
    result
}

fn wait_with<T>(
    deadline: Instant,
    bell: Option<&Bell>,
    attempt: &mut impl FnMut() -> Result<Option<T>>,
) -> Result<Option<T>> {
    let mut pause = Duration::from_millis(1);
    loop {
        if let Some(v) = attempt()? {
            return Ok(Some(v));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(None);
        }
        match bell.filter(|b| !b.watch.gone()) {
            Some(b) => b.watch.wait(left),
            None => {
                std::thread::sleep(pause.min(left));
                pause = (pause * 2).min(Duration::from_millis(50));
            }
        }
    }
}
