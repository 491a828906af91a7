//! Where there is no inotify: no directory watch, so a blocked worker polls with backoff
//! (`Cache::wait_for`, D-013). `Watch::new` never gives one.

use std::path::Path;
use std::time::Duration;

pub(crate) enum Watch {}

impl Watch {
    pub(crate) fn new(_directory: &Path) -> Option<Watch> {
        None
    }

    pub(crate) fn gone(&self) -> bool {
        match *self {}
    }

    pub(crate) fn wait(&self, _timeout: Duration) {
        match *self {}
    }

    pub(crate) fn drain(&self) -> bool {
        match *self {}
    }
}
