//! The modes of what a cache creates in its directory (D-027), and the cache directory itself.

use crate::settings::SettingValue;
use crate::{Error, Result};
use std::fs::File;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// The open-time option (passed among the settings, never persisted) that picks [`Modes`].
pub(crate) const PERMISSIONS: &str = "permissions";

/// The modes of what a cache creates in its directory (D-027): private to the owner by
/// default, or shared with the directory's group. Every handle takes them from the cache
/// directory itself (group-shared when it grants its group rwx), so processes that open a
/// group queue without the option keep it shared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Modes {
    pub(crate) dir: u32,
    pub(crate) file: u32,
}

impl Modes {
    pub(crate) const PRIVATE: Modes = Modes {
        dir: 0o700,
        file: 0o600,
    };
    /// setgid on directories, so files take the directory's group.
    pub(crate) const GROUP: Modes = Modes {
        dir: 0o2770,
        file: 0o660,
    };

    fn name(self) -> &'static str {
        if self == Modes::GROUP {
            "group"
        } else {
            "private"
        }
    }

    fn of_directory(mode: u32) -> Modes {
        if mode & 0o070 == 0o070 {
            Modes::GROUP
        } else {
            Modes::PRIVATE
        }
    }

    /// Remove `permissions` from the settings an open was given.
    pub(crate) fn take(settings: &mut Vec<(String, SettingValue)>) -> Result<Option<Modes>> {
        let mut found = None;
        let mut error = None;
        settings.retain(|(name, value)| {
            if name != PERMISSIONS {
                return true;
            }
            match value {
                SettingValue::Str(s) if s == "private" => found = Some(Modes::PRIVATE),
                SettingValue::Str(s) if s == "group" => found = Some(Modes::GROUP),
                other => {
                    error = Some(Error::Setting(format!(
                        "permissions: expected 'private' or 'group', got {other}"
                    )))
                }
            }
            false
        });
        match error {
            Some(e) => Err(e),
            None => Ok(found),
        }
    }

    /// Create the cache directory (mode `dir`) if it is missing, and return the modes for what
    /// the cache creates inside it. An explicit request that contradicts an existing cache's
    /// directory is refused rather than silently ignored; one for a directory that holds no
    /// cache yet is applied to it (if this user owns it).
    pub(crate) fn prepare(directory: &Path, requested: Option<Modes>, db: &Path) -> Result<Modes> {
        let fail = |what: &str, e: io::Error| Error::io(what, Some(directory.to_path_buf()), e);
        let want = requested.unwrap_or(Modes::PRIVATE);
        if let Some(parent) = directory.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| {
                // create_dir_all reports a file in the way as "exists"; say what it is, with
                // the errno os.makedirs gives (NotADirectoryError), as python-diskcache does.
                if e.kind() == io::ErrorKind::AlreadyExists && !parent.is_dir() {
                    return Error::io(
                        "creating the cache directory: a part of its path is a file, not a \
                         directory; choose another directory",
                        Some(parent.into()),
                        io::Error::from_raw_os_error(libc::ENOTDIR),
                    );
                }
                Error::io(
                    "creating the cache directory's parent",
                    Some(parent.into()),
                    e,
                )
            })?;
        }
        match std::fs::DirBuilder::new()
            .mode(want.dir & 0o777)
            .create(directory)
        {
            Ok(()) => {
                // Exact bits, whatever the umask (it only narrows private ones).
                std::fs::set_permissions(directory, std::fs::Permissions::from_mode(want.dir))
                    .map_err(|e| fail("setting the cache directory's mode", e))?;
                return Ok(want);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(fail("creating the cache directory", e)),
        }
        let meta =
            std::fs::metadata(directory).map_err(|e| fail("reading the cache directory", e))?;
        let found = Modes::of_directory(meta.mode());
        match requested {
            Some(m) if m != found => {
                // SAFETY: geteuid cannot fail.
                let owner = meta.uid() == unsafe { libc::geteuid() };
                if owner && !db.exists() {
                    let mode = (meta.mode() & 0o7707 & !0o2000) | (m.dir & 0o2070);
                    std::fs::set_permissions(directory, std::fs::Permissions::from_mode(mode))
                        .map_err(|e| fail("setting the cache directory's mode", e))?;
                    Ok(m)
                } else {
                    Err(Error::Setting(format!(
                        "permissions: {} already holds a cache whose directory is {} (mode \
                         {:o}), not {:?}; change an existing cache's modes with chmod (for a \
                         group: chmod -R g+rwX and chmod g+s on the directory and values/)",
                        directory.display(),
                        found.name(),
                        meta.mode() & 0o7777,
                        m.name()
                    )))
                }
            }
            _ => Ok(found),
        }
    }

    /// Give a file this process just opened or created the group bits it lacks (the umask
    /// may have removed them). Private modes need nothing: the umask only narrows.
    pub(crate) fn widen(self, file: &File) -> io::Result<()> {
        if self.file & 0o070 == 0 {
            return Ok(());
        }
        let meta = file.metadata()?;
        // SAFETY: geteuid cannot fail.
        let mine = meta.uid() == unsafe { libc::geteuid() };
        let mode = meta.mode() & 0o7777;
        if mine && mode & self.file != self.file {
            file.set_permissions(std::fs::Permissions::from_mode(mode | self.file))?;
        }
        Ok(())
    }

    /// Create `path` (mode `file`) if it is missing, so SQLite opens a file with our mode and
    /// gives its `-wal` and `-shm` the same one.
    pub(crate) fn precreate(self, path: &Path) -> Result<()> {
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(self.file)
            .open(path)
        {
            Ok(f) => self
                .widen(&f)
                .map_err(|e| Error::io("setting the cache database's mode", Some(path.into()), e)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
            Err(e) => Err(Error::io(
                "creating the cache database",
                Some(path.into()),
                e,
            )),
        }
    }
}
