//! Value files: payloads of at least `disk_min_file_size` bytes live beside the database.
//!
//! A file is written completely before the row that names it is committed, and unlinked only
//! after the row that named it is gone, so a crash leaves at worst an orphan file. Names are
//! random and validated on every use, and every path component is opened with `O_NOFOLLOW`
//! relative to the cache directory, so a row can never make us read or delete outside it.

use crate::basics::{kind_of, reserve};
use crate::error::Repair;
use crate::format::stored::{checksum, Checksum};
use crate::os::modes::Modes;
use crate::{Error, Result};
use std::ffi::{CString, OsString};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, FileExt};
use std::path::{Path, PathBuf};

pub(crate) const VALUES_DIR: &str = "values";
const NAME_LEN: usize = 2 + 1 + 30 + 4; // "ab/" + 30 hex + ".val"

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
            Err(Error::corrupt_fixed_by(
                format!(
                    "a row names the value file {name:?}, which is not a name this cache writes; \
                 it was not opened"
                ),
                Repair::DropRows,
            ))
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
                let made = match std::fs::DirBuilder::new()
                    .mode(self.modes.dir & 0o777)
                    .create(&self.root)
                {
                    Ok(()) => true,
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => false,
                    Err(e) => return Err(e),
                };
                let root = self.open_root()?;
                if made {
                    // Through the descriptor: a chmod by path would follow a symlink that
                    // replaced the new directory.
                    // SAFETY: a directory descriptor we own.
                    let mode = self.modes.dir as libc::mode_t;
                    if unsafe { libc::fchmod(root.as_raw_fd(), mode) } != 0 {
                        return Err(io::Error::last_os_error());
                    }
                }
                root
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

    /// Open a value file for reading and check, with one `fstat` of the open descriptor, that
    /// it is a regular file exactly `expected` bytes long (D-035). Nothing is ever sized from the
    /// file's own length. `O_NONBLOCK` keeps a FIFO or a device put in its place from blocking
    /// the open; `O_NOFOLLOW` (here and on its directories) refuses a symlink.
    fn open_file(&self, name: &str, expected: i64) -> Result<Found<File>> {
        let (sub, file) = Self::validate(name)?;
        let opened = self.open_sub(sub, false).and_then(|dir| {
            let c = cstring(file.as_bytes())?;
            open_fd(
                dir.as_raw_fd(),
                &c,
                libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY,
            )
        });
        let fd = match opened {
            Ok(fd) => fd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Found::Missing),
            Err(e) => return Err(self.open_error(name, e)),
        };
        let f = File::from(fd);
        let meta = f
            .metadata()
            .map_err(|e| Error::io("reading a value file", Some(self.path(name)), e))?;
        if !meta.is_file() {
            return Err(Error::corrupt_fixed_by(
                format!(
                    "value file {name:?} is {}, not a regular file; it was not read",
                    kind_of(&meta.file_type())
                ),
                Repair::DropEntry,
            ));
        }
        let len = meta.len();
        if u64::try_from(expected).ok() != Some(len) {
            return Err(Error::corrupt_fixed_by(
                format!(
                    "value file {name:?} is {len} bytes long, but its row says {expected}; it was \
                 not read"
                ),
                Repair::DropEntry,
            ));
        }
        Ok(Found::Yes(f))
    }

    /// The error for a value file that could not be opened (other than "not there").
    fn open_error(&self, name: &str, e: io::Error) -> Error {
        match e.raw_os_error() {
            // O_NOFOLLOW on a symlink gives ELOOP; O_DIRECTORY on a non-directory, ENOTDIR.
            Some(libc::ELOOP) | Some(libc::ENOTDIR) => Error::corrupt_fixed_by(
                format!(
                    "value file {name:?} or one of its directories (values/ or values/{}) was \
                 replaced by a symbolic link or by something that is not a directory; nothing \
                 was followed",
                    &name[..2.min(name.len())]
                ),
                Repair::DropEntry,
            ),
            // open() of a socket, or of a device with no driver behind it.
            Some(libc::ENXIO) | Some(libc::EOPNOTSUPP) | Some(libc::ENODEV) => {
                Error::corrupt_fixed_by(
                    format!(
                        "value file {name:?} is a socket or a device, not a regular file; it was \
                     not read"
                    ),
                    Repair::DropEntry,
                )
            }
            _ => Error::io("opening a value file", Some(self.path(name)), e),
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
        fd.map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP | libc::ENOTDIR) => Error::io_advised(
                format!(
                    "creating a value file: values/ or values/{sub} is a symbolic link or not a \
                     directory, and the cache never follows one"
                ),
                crate::error::IoAdvice::CheckRemoves,
                Some(self.path(name)),
                e,
            ),
            _ => Error::io("creating a value file", Some(self.path(name)), e),
        })
    }

    /// Read a whole value file, which its row says is `expected` bytes long, and check its
    /// checksum.
    pub(crate) fn read(&self, name: &str, crc: u32, expected: i64) -> Result<Found<Vec<u8>>> {
        let f = match self.open_file(name, expected)? {
            Found::Yes(f) => f,
            Found::Missing => return Ok(Found::Missing),
        };
        // open_file checked that the file is exactly `expected` (>= 0) bytes long.
        let len = expected as u64;
        let mut data = Vec::new();
        reserve(&mut data, len, name)?;
        // At most `len` bytes, however the file changes while it is read.
        f.take(len)
            .read_to_end(&mut data)
            .map_err(|e| Error::io("reading a value file", Some(self.path(name)), e))?;
        if data.len() as u64 != len {
            return Err(changed_error(name));
        }
        if checksum(&data) != crc {
            return Err(checksum_error(name));
        }
        Ok(Found::Yes(data))
    }

    /// The first `max` bytes (or fewer, if shorter) of a value file its row says is `expected`
    /// bytes long, for a preview (D-046): opened and checked as for a whole read (a regular file
    /// of that length, no link followed), but the checksum is not checked, since it covers
    /// bytes not read. The caller checks it when it got them all.
    pub(crate) fn read_prefix(
        &self,
        name: &str,
        expected: i64,
        max: usize,
    ) -> Result<Found<Vec<u8>>> {
        let f = match self.open_file(name, expected)? {
            Found::Yes(f) => f,
            Found::Missing => return Ok(Found::Missing),
        };
        let want = (expected as u64).min(max as u64) as usize;
        let mut data = vec![0u8; want];
        let mut at = 0;
        while at < want {
            match f.read_at(&mut data[at..], at as u64) {
                Ok(0) => return Err(changed_error(name)),
                Ok(n) => at += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Error::io("reading a value file", Some(self.path(name)), e)),
            }
        }
        Ok(Found::Yes(data))
    }

    /// Read a value file into `buf`, which must be exactly as long as the file, and check its
    /// checksum.
    pub(crate) fn read_into(&self, name: &str, crc: u32, buf: &mut [u8]) -> Result<Found<()>> {
        let mut f = match self.open_file(name, buf.len() as i64)? {
            Found::Yes(f) => f,
            Found::Missing => return Ok(Found::Missing),
        };
        f.read_exact(buf).map_err(|e| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                changed_error(name)
            } else {
                Error::io("reading a value file", Some(self.path(name)), e)
            }
        })?;
        if checksum(buf) != crc {
            return Err(checksum_error(name));
        }
        Ok(Found::Yes(()))
    }

    /// Check a value file's checksum without keeping its contents, and return it open at its
    /// start (for read handles: whatever happens to the name afterwards, the caller reads the
    /// bytes that were verified).
    pub(crate) fn verify(&self, name: &str, crc: u32, expected: i64) -> Result<Found<File>> {
        let f = match self.open_file(name, expected)? {
            Found::Yes(f) => f,
            Found::Missing => return Ok(Found::Missing),
        };
        let len = expected as u64;
        let mut buf = vec![0u8; 1 << 20];
        let (mut at, mut actual) = (0u64, Checksum::new());
        while at < len {
            let want = buf.len().min((len - at) as usize);
            let n = match f.read_at(&mut buf[..want], at) {
                Ok(0) => return Err(changed_error(name)),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Error::io("reading a value file", Some(self.path(name)), e)),
            };
            actual.update(&buf[..n]);
            at += n as u64;
        }
        if actual.value() != crc {
            return Err(checksum_error(name));
        }
        // A regular file ignores O_NONBLOCK; the caller's handle gets plain blocking reads
        // anyway, as from open().
        // SAFETY: a descriptor we own; F_GETFL/F_SETFL only change its status flags.
        unsafe {
            let flags = libc::fcntl(f.as_raw_fd(), libc::F_GETFL);
            if flags >= 0 {
                libc::fcntl(f.as_raw_fd(), libc::F_SETFL, flags & !libc::O_NONBLOCK);
            }
        }
        Ok(Found::Yes(f))
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

    /// What `values/` is: a directory (or absent), or something else, which is never followed.
    pub(crate) fn root_kind(&self) -> Result<Option<&'static str>> {
        match std::fs::symlink_metadata(&self.root) {
            Ok(m) if m.is_dir() => Ok(None),
            Ok(m) => Ok(Some(kind_of(&m.file_type()))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io("reading value files", Some(self.root.clone()), e)),
        }
    }

    /// Remove `values/` when it is not a directory (a symlink is removed itself, its target
    /// left alone), so that the next write makes a fresh one.
    pub(crate) fn remove_root(&self) -> io::Result<()> {
        let parent = self.root.parent().unwrap_or(Path::new("."));
        let dir = open_fd(
            libc::AT_FDCWD,
            &cstring(parent.as_os_str().as_encoded_bytes())?,
            libc::O_RDONLY | libc::O_DIRECTORY,
        )?;
        let name = cstring(VALUES_DIR.as_bytes())?;
        if stat_at(&dir, &name)?.st_mode & libc::S_IFMT == libc::S_IFDIR {
            return Ok(()); // it became a directory meanwhile: nothing to remove
        }
        unlink_at(&dir, &name, 0)
    }

    /// Every entry under `values/` and its subdirectories, for `check`. Read through
    /// descriptors opened with `O_NOFOLLOW`, so a symlink anywhere is listed, never entered.
    pub(crate) fn list(&self) -> Result<Vec<Listed>> {
        let fail = |e: io::Error| Error::io("listing value files", Some(self.root.clone()), e);
        let mut out = Vec::new();
        let root = match self.open_root() {
            Ok(fd) => fd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(fail(e)),
        };
        for (sub, kind) in read_dir_fd(&root).map_err(fail)? {
            if kind != libc::DT_DIR {
                out.push(Listed {
                    sub: None,
                    name: sub,
                    plain: false,
                });
                continue;
            }
            let dir = match open_fd(
                root.as_raw_fd(),
                &cstring(sub.as_bytes()).map_err(fail)?,
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
            ) {
                Ok(d) => d,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)) => {
                    // Replaced by something else since it was listed.
                    out.push(Listed {
                        sub: None,
                        name: sub,
                        plain: false,
                    });
                    continue;
                }
                Err(e) => return Err(fail(e)),
            };
            for (name, kind) in read_dir_fd(&dir).map_err(fail)? {
                out.push(Listed {
                    sub: Some(sub.clone()),
                    name,
                    plain: kind == libc::DT_REG,
                });
            }
        }
        Ok(out)
    }

    /// Remove an entry found by `list` that no row names: a file, a symlink (itself, never
    /// what it points to) or an empty directory. Only ever inside `values/`, through
    /// descriptors opened with `O_NOFOLLOW`.
    pub(crate) fn remove_unknown(&self, entry: &Listed) -> io::Result<()> {
        let root = self.open_root()?;
        let dir = match &entry.sub {
            Some(sub) => open_fd(
                root.as_raw_fd(),
                &cstring(sub.as_bytes())?,
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
            )?,
            None => root,
        };
        let name = cstring(entry.name.as_bytes())?;
        let is_dir = stat_at(&dir, &name)?.st_mode & libc::S_IFMT == libc::S_IFDIR;
        unlink_at(&dir, &name, if is_dir { libc::AT_REMOVEDIR } else { 0 })
    }
}

/// An entry under `values/`, as `check` lists it.
pub(crate) struct Listed {
    /// The subdirectory it is in, or `None` for an entry of `values/` itself.
    sub: Option<OsString>,
    name: OsString,
    /// A regular file inside a subdirectory: what a row may name.
    pub(crate) plain: bool,
}

impl Listed {
    /// The name relative to `values/`, as rows store it (lossy for names we never write).
    pub(crate) fn relative(&self) -> String {
        match &self.sub {
            Some(sub) => format!("{}/{}", sub.to_string_lossy(), self.name.to_string_lossy()),
            None => self.name.to_string_lossy().into_owned(),
        }
    }
}

/// Refuse a cache directory whose database files are symlinks or not regular files (D-035):
/// SQLite follows links (it would create or write the target, wherever it is) and blocks
/// forever reading a FIFO. Checked when a handle opens and whenever it opens a connection.
pub(crate) fn refuse_unsafe_db_files(db_path: &Path) -> Result<()> {
    for suffix in ["", "-wal", "-shm"] {
        let mut path = db_path.as_os_str().to_owned();
        path.push(suffix);
        let path = PathBuf::from(path);
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => {
                return Err(Error::io(
                    "inspecting the cache's database files",
                    Some(path),
                    e,
                ))
            }
        };
        if !meta.is_file() {
            return Err(Error::NotACache(crate::error::NotCache::DatabaseFile {
                kind: kind_of(&meta.file_type()),
                path,
            }));
        }
    }
    Ok(())
}

fn changed_error(name: &str) -> Error {
    Error::corrupt(format!(
        "value file {name:?} changed length while it was read; something other than the \
         cache is writing it"
    ))
}

fn stat_at(dir: &OwnedFd, name: &CString) -> io::Result<libc::stat> {
    // SAFETY: an all-zero stat is valid output space; valid fd and NUL-terminated name.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let rc = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

fn unlink_at(dir: &OwnedFd, name: &CString, flags: libc::c_int) -> io::Result<()> {
    // SAFETY: valid fd and NUL-terminated name; unlinkat never follows the last component.
    if unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), flags) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The entries of an open directory (without `.` and `..`), with their types (`DT_*`; an
/// entry the file system gives no type is `lstat`ed). Reads a duplicate of `dir`.
fn read_dir_fd(dir: &OwnedFd) -> io::Result<Vec<(OsString, u8)>> {
    use std::os::unix::ffi::OsStrExt;
    // SAFETY: dup of a valid descriptor; fdopendir takes ownership of the duplicate (closed by
    // closedir below, or here if fdopendir fails).
    let dup = unsafe { libc::fcntl(dir.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) };
    if dup < 0 {
        return Err(io::Error::last_os_error());
    }
    let stream = unsafe { libc::fdopendir(dup) };
    if stream.is_null() {
        let e = io::Error::last_os_error();
        unsafe { libc::close(dup) };
        return Err(e);
    }
    // The duplicate shares the offset: start at the beginning whatever an earlier read did.
    unsafe { libc::rewinddir(stream) };
    let mut out = Vec::new();
    let result = loop {
        crate::os::platform::clear_errno();
        let entry = unsafe { libc::readdir(stream) };
        if entry.is_null() {
            let errno = io::Error::last_os_error();
            break match errno.raw_os_error() {
                Some(0) | None => Ok(()),
                _ => Err(errno),
            };
        }
        // SAFETY: readdir returned a valid entry whose d_name is NUL-terminated.
        let (name, kind) = unsafe {
            let e = &*entry;
            (std::ffi::CStr::from_ptr(e.d_name.as_ptr()), e.d_type)
        };
        let bytes = name.to_bytes();
        if bytes == b"." || bytes == b".." {
            continue;
        }
        let kind = if kind == libc::DT_UNKNOWN {
            match stat_at(dir, &name.to_owned()) {
                Ok(st) => match st.st_mode & libc::S_IFMT {
                    libc::S_IFDIR => libc::DT_DIR,
                    libc::S_IFREG => libc::DT_REG,
                    _ => libc::DT_UNKNOWN,
                },
                Err(_) => continue, // gone meanwhile
            }
        } else {
            kind
        };
        out.push((std::ffi::OsStr::from_bytes(bytes).to_owned(), kind));
    };
    // SAFETY: a stream we own, closed once.
    unsafe { libc::closedir(stream) };
    result.map(|()| out)
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
