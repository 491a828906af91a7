//! Value files: payloads of at least `disk_min_file_size` bytes live beside the database.
//!
//! A file is written completely before the row that names it is committed, and unlinked only
//! after the row that named it is gone, so a crash leaves at worst an orphan file. Names are
//! random and validated on every use, and every path component is opened with `O_NOFOLLOW`
//! relative to the cache directory, so a row can never make us read or delete outside it.

use crate::settings::SettingValue;
use crate::stored::{checksum, Checksum};
use crate::{Error, Result};
use std::ffi::CString;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

pub(crate) const VALUES_DIR: &str = "values";
const NAME_LEN: usize = 2 + 1 + 30 + 4; // "ab/" + 30 hex + ".val"

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

pub(crate) struct ValueFiles {
    root: PathBuf,
    modes: Modes,
}

/// What a read found: the bytes, or that the file is not there (a race with a delete, or damage).
pub(crate) enum Found<T> {
    Yes(T),
    Missing,
}

impl ValueFiles {
    pub(crate) fn new(directory: &Path, modes: Modes) -> ValueFiles {
        ValueFiles {
            root: directory.join(VALUES_DIR),
            modes,
        }
    }

    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }

    /// A fresh random name, "ab/<30 hex>.val".
    pub(crate) fn new_name() -> Result<String> {
        let mut raw = [0u8; 16];
        getrandom::fill(&mut raw).map_err(|e| {
            Error::io(
                "drawing a random value file name",
                None,
                io::Error::other(e.to_string()),
            )
        })?;
        let hex: String = raw.iter().map(|b| format!("{b:02x}")).collect();
        Ok(format!("{}/{}.val", &hex[..2], &hex[2..]))
    }

    /// Split a stored name into (subdirectory, file), refusing anything we did not generate.
    pub(crate) fn validate(name: &str) -> Result<(&str, &str)> {
        let b = name.as_bytes();
        let hex = |s: &[u8]| {
            s.iter()
                .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
        };
        if b.len() == NAME_LEN
            && b[2] == b'/'
            && name.ends_with(".val")
            && hex(&b[..2])
            && hex(&b[3..33])
        {
            Ok((&name[..2], &name[3..]))
        } else {
            Err(Error::corrupt(format!(
                "a row names the value file {name:?}, which is not a name this cache writes; \
                 it was not opened (run check(fix=True) to drop such rows)"
            )))
        }
    }

    fn open_root(&self) -> io::Result<OwnedFd> {
        let c = cstring(self.root.as_os_str().as_encoded_bytes())?;
        open_fd(
            libc::AT_FDCWD,
            &c,
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
        )
    }

    fn open_sub(&self, sub: &str, create: bool) -> io::Result<OwnedFd> {
        let root = match self.open_root() {
            Err(e) if create && e.kind() == io::ErrorKind::NotFound => {
                match std::fs::DirBuilder::new()
                    .mode(self.modes.dir & 0o777)
                    .create(&self.root)
                {
                    Ok(()) => std::fs::set_permissions(
                        &self.root,
                        std::fs::Permissions::from_mode(self.modes.dir),
                    )?,
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                    Err(e) => return Err(e),
                }
                self.open_root()?
            }
            other => other?,
        };
        let c = cstring(sub.as_bytes())?;
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW;
        match open_fd(root.as_raw_fd(), &c, flags) {
            Err(e) if create && e.kind() == io::ErrorKind::NotFound => {
                // SAFETY: valid fd and NUL-terminated name.
                let mode = (self.modes.dir & 0o777) as libc::mode_t;
                let rc = unsafe { libc::mkdirat(root.as_raw_fd(), c.as_ptr(), mode) };
                let made = rc == 0;
                if !made {
                    let err = io::Error::last_os_error();
                    if err.kind() != io::ErrorKind::AlreadyExists {
                        return Err(err);
                    }
                }
                let dir = open_fd(root.as_raw_fd(), &c, flags)?;
                if made && self.modes != Modes::PRIVATE {
                    // SAFETY: a directory descriptor we own.
                    if unsafe { libc::fchmod(dir.as_raw_fd(), self.modes.dir as libc::mode_t) } != 0
                    {
                        return Err(io::Error::last_os_error());
                    }
                }
                Ok(dir)
            }
            other => other,
        }
    }

    /// Open a value file for reading; with it, its length (from the same `fstat`).
    fn open_file(&self, name: &str) -> Result<Found<(File, u64)>> {
        let (sub, file) = Self::validate(name)?;
        let opened = self.open_sub(sub, false).and_then(|dir| {
            let c = cstring(file.as_bytes())?;
            open_fd(dir.as_raw_fd(), &c, libc::O_RDONLY | libc::O_NOFOLLOW)
        });
        match opened {
            Ok(fd) => {
                let f = File::from(fd);
                let meta = f.metadata().map_err(|e| Error::io("reading a value file", Some(self.path(name)), e))?;
                if !meta.is_file() {
                    return Err(Error::corrupt(format!("value file {name:?} is not a regular file")));
                }
                Ok(Found::Yes((f, meta.len())))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Found::Missing),
            // O_NOFOLLOW on a symlink gives ELOOP: someone replaced the file or a directory.
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) || e.raw_os_error() == Some(libc::ENOTDIR) => {
                Err(Error::corrupt(format!(
                    "value file {name:?} or its directory was replaced by a symbolic link; it was not followed"
                )))
            }
            Err(e) => Err(Error::io("opening a value file", Some(self.path(name)), e)),
        }
    }

    /// Write a new value file in one `write` call. The name is fresh, so `O_EXCL` never races.
    pub(crate) fn write(&self, name: &str, data: &[u8]) -> Result<()> {
        let mut f = self.create(name)?;
        if let Err(e) = f.write_all(data) {
            drop(f);
            self.remove(name);
            return Err(Error::io("writing a value file", Some(self.path(name)), e));
        }
        Ok(())
    }

    /// Stream a reader into a new value file. Returns (size, crc32c).
    pub(crate) fn write_from(&self, name: &str, reader: &mut dyn Read) -> Result<(u64, u32)> {
        let mut f = self.create(name)?;
        let mut buf = vec![0u8; 1 << 20];
        let (mut size, mut crc) = (0u64, Checksum::new());
        let result = (|| -> io::Result<()> {
            loop {
                let n = match reader.read(&mut buf) {
                    Ok(0) => return Ok(()),
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                };
                f.write_all(&buf[..n])?;
                crc.update(&buf[..n]);
                size += n as u64;
            }
        })();
        if let Err(e) = result {
            drop(f);
            self.remove(name);
            return Err(Error::io(
                "writing a value file from a reader",
                Some(self.path(name)),
                e,
            ));
        }
        Ok((size, crc.value()))
    }

    fn create(&self, name: &str) -> Result<File> {
        let (sub, file) = Self::validate(name)?;
        let fd = self.open_sub(sub, true).and_then(|dir| {
            let c = cstring(file.as_bytes())?;
            let flags =
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
            // SAFETY: valid fd and NUL-terminated name.
            let raw = unsafe {
                libc::openat(
                    dir.as_raw_fd(),
                    c.as_ptr(),
                    flags,
                    self.modes.file as libc::c_uint,
                )
            };
            if raw < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: openat returned a fresh descriptor we own.
            let f = File::from(unsafe { OwnedFd::from_raw_fd(raw) });
            self.modes.widen(&f)?;
            Ok(f)
        });
        fd.map_err(|e| Error::io("creating a value file", Some(self.path(name)), e))
    }

    /// Read a whole value file and check its checksum.
    pub(crate) fn read(&self, name: &str, crc: u32) -> Result<Found<Vec<u8>>> {
        let (mut f, len) = match self.open_file(name)? {
            Found::Yes(opened) => opened,
            Found::Missing => return Ok(Found::Missing),
        };
        let mut data = Vec::with_capacity(len as usize);
        f.read_to_end(&mut data)
            .map_err(|e| Error::io("reading a value file", Some(self.path(name)), e))?;
        if checksum(&data) != crc {
            return Err(checksum_error(name));
        }
        Ok(Found::Yes(data))
    }

    /// Read a value file into `buf`, which must be exactly as long as the file, and check its
    /// checksum.
    pub(crate) fn read_into(&self, name: &str, crc: u32, buf: &mut [u8]) -> Result<Found<()>> {
        let (mut f, len) = match self.open_file(name)? {
            Found::Yes(opened) => opened,
            Found::Missing => return Ok(Found::Missing),
        };
        if len != buf.len() as u64 {
            return Err(Error::corrupt(format!(
                "value file {name:?} is {len} bytes long, but its row says {}",
                buf.len()
            )));
        }
        f.read_exact(buf)
            .map_err(|e| Error::io("reading a value file", Some(self.path(name)), e))?;
        if checksum(buf) != crc {
            return Err(checksum_error(name));
        }
        Ok(Found::Yes(()))
    }

    /// Check a value file's checksum without keeping its contents (for read handles).
    pub(crate) fn verify(&self, name: &str, crc: u32) -> Result<Found<u64>> {
        let mut f = match self.open_file(name)? {
            Found::Yes((f, _)) => f,
            Found::Missing => return Ok(Found::Missing),
        };
        let mut buf = vec![0u8; 1 << 20];
        let (mut size, mut actual) = (0u64, Checksum::new());
        loop {
            let n = f
                .read(&mut buf)
                .map_err(|e| Error::io("reading a value file", Some(self.path(name)), e))?;
            if n == 0 {
                break;
            }
            actual.update(&buf[..n]);
            size += n as u64;
        }
        if actual.value() != crc {
            return Err(checksum_error(name));
        }
        Ok(Found::Yes(size))
    }

    /// Size of a value file, if it is there.
    pub(crate) fn size(&self, name: &str) -> Result<Found<u64>> {
        match self.open_file(name)? {
            Found::Yes((_, len)) => Ok(Found::Yes(len)),
            Found::Missing => Ok(Found::Missing),
        }
    }

    /// Best-effort unlink of a file we named. A symlink in its place is removed itself, never
    /// followed; a name we did not generate is left alone.
    pub(crate) fn remove(&self, name: &str) {
        let Ok((sub, file)) = Self::validate(name) else {
            return;
        };
        if let Ok(dir) = self.open_sub(sub, false) {
            if let Ok(c) = cstring(file.as_bytes()) {
                // SAFETY: valid fd and NUL-terminated name; unlinkat never follows the last component.
                unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), 0) };
            }
        }
    }

    /// Every entry under `values/`, as (relative name, is a plain file), for `check`.
    pub(crate) fn list(&self) -> Result<Vec<(String, bool)>> {
        let mut out = Vec::new();
        let top = match std::fs::read_dir(&self.root) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(Error::io("listing value files", Some(self.root.clone()), e)),
        };
        for sub in top.flatten() {
            let sub_name = sub.file_name().to_string_lossy().into_owned();
            let is_dir = sub.file_type().map(|t| t.is_dir()).unwrap_or(false);
            if !is_dir {
                out.push((sub_name, false));
                continue;
            }
            let entries = std::fs::read_dir(sub.path())
                .map_err(|e| Error::io("listing value files", Some(sub.path()), e))?;
            for entry in entries.flatten() {
                let plain = entry.file_type().map(|t| t.is_file()).unwrap_or(false);
                out.push((
                    format!("{sub_name}/{}", entry.file_name().to_string_lossy()),
                    plain,
                ));
            }
        }
        Ok(out)
    }

    /// Remove an entry found by `list` that no row names (only plain files and symlinks).
    pub(crate) fn remove_unknown(&self, relative: &str) -> io::Result<()> {
        let path = self.root.join(relative);
        let meta = std::fs::symlink_metadata(&path)?;
        if meta.is_dir() {
            std::fs::remove_dir(&path)
        } else {
            std::fs::remove_file(&path)
        }
    }
}

fn checksum_error(name: &str) -> Error {
    Error::corrupt(format!(
        "value file {name:?} does not match its checksum; the bytes on disk were damaged"
    ))
}

fn cstring(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
}

fn open_fd(dir: RawFd, name: &CString, flags: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: `name` is NUL-terminated; `dir` is AT_FDCWD or an open directory.
    let raw = unsafe { libc::openat(dir, name.as_ptr(), flags | libc::O_CLOEXEC) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: openat returned a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}
