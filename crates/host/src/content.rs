//! File contents of an image, by id: the host files a scan found, with what they looked like
//! then, so a file that changes before it is copied is an error and not a wrong image.

use std::fs::{self, File};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use blockwise_geometry::{ContentError, ContentSource};
use rustix::fs::{Mode, OFlags};

use crate::Error;

/// What identifies a file's state: where it lives, how long it is, when it last changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Identity {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: i64,
    mtime_nsec: i64,
}

impl Identity {
    /// The identity a scan's `statx` found.
    pub(crate) fn new(dev: u64, ino: u64, size: u64, mtime: i64, mtime_nsec: i64) -> Self {
        Identity {
            dev,
            ino,
            size,
            mtime,
            mtime_nsec,
        }
    }

    fn of(md: &fs::Metadata) -> Self {
        Identity {
            dev: md.dev(),
            ino: md.ino(),
            size: md.len(),
            mtime: md.mtime(),
            mtime_nsec: md.mtime_nsec(),
        }
    }

    /// How `now` differs from `self`, in words; `None` when it does not.
    fn differs(&self, now: &Identity) -> Option<String> {
        if (self.dev, self.ino) != (now.dev, now.ino) {
            Some("replaced by another file".into())
        } else if self.size != now.size {
            Some(format!("size {} → {} bytes", self.size, now.size))
        } else if (self.mtime, self.mtime_nsec) != (now.mtime, now.mtime_nsec) {
            Some("modified (mtime changed)".into())
        } else {
            None
        }
    }
}

/// Opens `path` read-only without blocking: a FIFO or a device put where a regular file was
/// must not hang the build (the caller checks the type).
pub(crate) fn open_nonblocking(path: &Path) -> std::io::Result<File> {
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
        Mode::empty(),
    )?;
    Ok(File::from(fd))
}

/// Where a content file is: its identity and its path as a directory run and a name, packed
/// (40 bytes: one per file of a tree, a million files are 40 MB).
#[derive(Debug)]
struct Entry {
    ino: u64,
    size: u64,
    mtime: i64,
    mtime_nsec: u32,
    /// Index into [`HostContent::devs`].
    dev: u32,
    /// Index into [`HostContent::dirs`].
    dir: u32,
    /// Where the name starts in [`HostContent::names`], from its directory run's start; it
    /// ends where the next file of the run starts, or where the run ends.
    name_at: u32,
}

/// A run of files in one directory: its path and where its names are.
#[derive(Debug)]
struct DirRun {
    path: PathBuf,
    /// The run's names are `names[start..end]`.
    start: usize,
    end: usize,
}

/// Most bytes of a file the scan reads into memory ([`HostContent::add_inline`]): one 4 KiB
/// block or cluster.
pub(crate) const INLINE_FILE: u64 = 4096;

/// Most bytes of small files held in memory in all; files past it are copied from their
/// source like large ones. 8 MiB: at 32 MiB, 100,000 files of ~10 KB (T3) peaked 25 MiB
/// higher (ext4 138 → 113 MiB, FAT32 111 → 86 MiB) for no time measured (1.91 s and 1.92 s).
pub(crate) const INLINE_TOTAL: usize = 8 << 20;

/// The contents of an image: regular host files, registered by the scan with their
/// [identity](HostContent::add) and checked against it whenever they are opened. Small
/// files the scan has read already ([`HostContent::inline`]) are served from memory.
#[derive(Debug, Default)]
pub struct HostContent {
    /// Per content id: its identity and where its path is (directory, name).
    files: Vec<Entry>,
    /// Devices of the files.
    devs: Vec<u64>,
    /// Directories of the files' paths, each once per run of files in it.
    dirs: Vec<DirRun>,
    /// File names, end to end (a path per file cost ~100 bytes per file of a large tree).
    names: Vec<u8>,
    /// Content ids read by the scan (ascending) with where their bytes start in `arena`
    /// (their length is the identity's size).
    inline: Vec<(u64, usize)>,
    arena: Vec<u8>,
    /// Inputs the image does not reference but the build read (the spec file): no output
    /// may be one of them.
    read_only: Vec<(PathBuf, (u64, u64))>,
    /// The file [`ContentSource::read_at`] read last, kept open for the next read. A lock,
    /// not a cell: the output writer reads files on a second thread.
    open: std::sync::Mutex<Option<(u64, File)>>,
}

impl HostContent {
    /// Registers the regular file `path`, whose metadata (taken when it was scanned) is `md`,
    /// and returns its content id.
    pub fn add(&mut self, path: PathBuf, md: &fs::Metadata) -> u64 {
        match (path.parent(), path.file_name()) {
            (Some(dir), Some(name)) => self.add_identity(dir, name.as_bytes(), Identity::of(md)),
            _ => self.add_identity(&path, b"", Identity::of(md)),
        }
    }

    /// Registers the regular file `name` in the directory `dir` with the identity its scan
    /// found.
    pub(crate) fn add_identity(&mut self, dir: &Path, name: &[u8], id: Identity) -> u64 {
        // A run's names are addressed with 32 bits: past that, a new run.
        let room = |r: &DirRun| {
            (r.end - r.start).saturating_add(name.len()) <= u32::MAX as usize && r.path == dir
        };
        if self.dirs.last().is_none_or(|r| !room(r)) {
            self.dirs.push(DirRun {
                path: dir.to_path_buf(),
                start: self.names.len(),
                end: self.names.len(),
            });
        }
        let dev = match self.devs.iter().rposition(|&d| d == id.dev) {
            Some(i) => i,
            None => {
                self.devs.push(id.dev);
                self.devs.len() - 1
            }
        };
        let run = self.dirs.len() - 1;
        let name_at = self.names.len() - self.dirs.last().map_or(0, |r| r.start);
        self.names.extend_from_slice(name);
        if let Some(r) = self.dirs.last_mut() {
            r.end = self.names.len();
        }
        self.files.push(Entry {
            ino: id.ino,
            size: id.size,
            mtime: id.mtime,
            // Nanoseconds are below 10⁹.
            mtime_nsec: u32::try_from(id.mtime_nsec).unwrap_or(u32::MAX),
            dev: u32::try_from(dev).unwrap_or(u32::MAX),
            dir: u32::try_from(run).unwrap_or(u32::MAX),
            name_at: u32::try_from(name_at).unwrap_or(u32::MAX),
        });
        self.files.len() as u64 - 1
    }

    /// The identity of entry `i`.
    fn identity_of(&self, e: &Entry) -> Identity {
        Identity {
            dev: usize::try_from(e.dev)
                .ok()
                .and_then(|i| self.devs.get(i))
                .copied()
                .unwrap_or(u64::MAX),
            ino: e.ino,
            size: e.size,
            mtime: e.mtime,
            mtime_nsec: i64::from(e.mtime_nsec),
        }
    }

    /// Whether `len` more bytes may be held in memory ([`HostContent::add_inline`]).
    pub(crate) fn inline_room(&self, len: u64) -> bool {
        len <= INLINE_FILE
            && usize::try_from(len)
                .is_ok_and(|l| self.arena.len().saturating_add(l) <= INLINE_TOTAL)
    }

    /// Bytes of small files that can still be held in memory.
    pub(crate) fn inline_left(&self) -> usize {
        INLINE_TOTAL.saturating_sub(self.arena.len())
    }

    /// Registers the regular file `path`, whose bytes the scan read (`data`, as long as the
    /// identity's size): the image takes them from memory, the file is not opened again.
    pub(crate) fn add_inline(&mut self, dir: &Path, name: &[u8], id: Identity, data: &[u8]) -> u64 {
        let n = self.add_identity(dir, name, id);
        self.inline.push((n, self.arena.len()));
        self.arena.extend_from_slice(data);
        n
    }

    /// The bytes of content `id` when the scan read them, `None` for files read from disk.
    #[must_use]
    pub fn inline(&self, id: u64) -> Option<&[u8]> {
        let i = self.inline.binary_search_by_key(&id, |&(c, _)| c).ok()?;
        let &(_, start) = self.inline.get(i)?;
        let e = usize::try_from(id).ok().and_then(|i| self.files.get(i))?;
        let len = usize::try_from(e.size).ok()?;
        self.arena.get(start..start.checked_add(len)?)
    }

    /// Registers a file the build reads but the image does not hold (the spec file), so that
    /// [`HostContent::inputs`] names it and no output may be it.
    pub fn add_input(&mut self, path: PathBuf, md: &fs::Metadata) {
        self.read_only.push((path, (md.dev(), md.ino())));
    }

    /// Every input of the build with its identity: the files the image references (content
    /// files of the trees, raw sources, the mke2fs backend's temp filesystems) and those
    /// registered with [`HostContent::add_input`]. What [`crate::check_outputs`] and a
    /// `write` to a device compare their targets with.
    #[must_use]
    pub fn inputs(&self) -> Vec<(PathBuf, blockwise_flash::DataId)> {
        (0..self.files.len() as u64)
            .filter_map(|i| Some((self.path(i)?, self.files.get(usize::try_from(i).ok()?)?)))
            .map(|(p, e)| (p, (self.identity_of(e).dev, e.ino)))
            .chain(self.read_only.iter().cloned())
            .map(|(p, (dev, ino))| (p, blockwise_flash::DataId::file(dev, ino)))
            .collect()
    }

    /// The first input (as in [`HostContent::inputs`]) that is the file `(dev, ino)`
    /// according to `is`, without listing them all.
    pub(crate) fn input_where(&self, is: impl Fn(u64, u64) -> bool) -> Option<PathBuf> {
        if let Some(i) = self
            .files
            .iter()
            .position(|e| is(self.identity_of(e).dev, e.ino))
        {
            return self.path(i as u64);
        }
        self.read_only
            .iter()
            .find(|(_, (dev, ino))| is(*dev, *ino))
            .map(|(p, _)| p.clone())
    }

    /// The path of content `id`.
    #[must_use]
    pub fn path(&self, id: u64) -> Option<PathBuf> {
        let e = usize::try_from(id).ok().and_then(|i| self.files.get(i))?;
        let run = self.dirs.get(usize::try_from(e.dir).ok()?)?;
        let start = run.start.checked_add(usize::try_from(e.name_at).ok()?)?;
        // The name ends where the next file of the same run starts, else where the run ends.
        let end = usize::try_from(id)
            .ok()
            .and_then(|i| self.files.get(i.checked_add(1)?))
            .filter(|n| n.dir == e.dir)
            .and_then(|n| run.start.checked_add(usize::try_from(n.name_at).ok()?))
            .unwrap_or(run.end);
        let name = self.names.get(start..end)?;
        Some(if name.is_empty() {
            run.path.clone()
        } else {
            run.path.join(std::ffi::OsStr::from_bytes(name))
        })
    }

    /// How many files are registered.
    #[must_use]
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// True when no file is registered.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    fn entry(&self, id: u64) -> Result<(PathBuf, Identity), Error> {
        usize::try_from(id)
            .ok()
            .and_then(|i| Some((self.path(id)?, self.identity_of(self.files.get(i)?))))
            .ok_or_else(|| Error::NotUsable {
                path: PathBuf::from(format!("content #{id}")),
                what: "no such content".into(),
            })
    }

    /// The identity of content `id`.
    fn identity(&self, id: u64) -> Result<Identity, Error> {
        usize::try_from(id)
            .ok()
            .and_then(|i| self.files.get(i))
            .map(|e| self.identity_of(e))
            .ok_or_else(|| Error::NotUsable {
                path: PathBuf::from(format!("content #{id}")),
                what: "no such content".into(),
            })
    }

    /// Opens content `id` and checks that it is still the regular file that was scanned.
    pub fn open(&self, id: u64) -> Result<File, Error> {
        let (path, _) = self.entry(id)?;
        let f = open_nonblocking(&path).map_err(|e| Error::io(&path, e))?;
        self.check(id, &f)?;
        Ok(f)
    }

    /// Checks that the open file `f` of content `id` still matches the scan (call it again
    /// after copying, to catch writes during the copy).
    pub fn check(&self, id: u64, f: &File) -> Result<(), Error> {
        let was = self.identity(id)?;
        let path = || self.path(id).unwrap_or_default();
        let md = f.metadata().map_err(|e| Error::io(path(), e))?;
        if !md.is_file() {
            return Err(Error::Changed {
                path: path(),
                what: "no longer a regular file".into(),
            });
        }
        match was.differs(&Identity::of(&md)) {
            Some(what) => Err(Error::Changed { path: path(), what }),
            None => Ok(()),
        }
    }

    /// The error for content `id` having fewer bytes than the scan promised.
    pub(crate) fn shrunk(&self, id: u64) -> Error {
        let path = self.path(id).unwrap_or_default();
        Error::Changed {
            path,
            what: "shorter than when it was scanned".into(),
        }
    }
}

impl ContentSource for HostContent {
    fn read_at(&self, content: u64, offset: u64, buf: &mut [u8]) -> Result<(), ContentError> {
        let err = |e: Error| ContentError {
            content,
            message: e.to_string(),
        };
        if let Some(data) = self.inline(content) {
            let src = usize::try_from(offset)
                .ok()
                .and_then(|o| data.get(o..o.checked_add(buf.len())?));
            return match src {
                Some(src) => {
                    buf.copy_from_slice(src);
                    Ok(())
                }
                None => Err(err(self.shrunk(content))),
            };
        }
        let mut open = self
            .open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if open.as_ref().is_none_or(|(c, _)| *c != content) {
            *open = Some((content, self.open(content).map_err(err)?));
        }
        let Some((_, f)) = open.as_ref() else {
            return Err(err(self.shrunk(content)));
        };
        f.read_exact_at(buf, offset).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                err(self.shrunk(content))
            } else {
                err(Error::io(
                    self.path(content).unwrap_or_else(|| "?".into()),
                    e,
                ))
            }
        })?;
        self.check(content, f).map_err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Paths come back as registered (directory + name, or a path without a name), small
    /// files read by the scan are served from memory, and an input is found by identity.
    #[test]
    fn r34_paths_inline_bytes_and_inputs() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big.bin");
        fs::write(&big, vec![7u8; 10_000]).unwrap();
        let md = fs::metadata(&big).unwrap();
        let mut c = HostContent::default();
        let a = c.add(big.clone(), &md);
        let id = Identity::new(1, 2, 5, 0, 0);
        let b = c.add_inline(Path::new("tree/sub"), b"small", id, b"hello");
        let e = c.add_identity(
            Path::new("tree/sub"),
            b"empty",
            Identity::new(1, 3, 0, 0, 0),
        );
        let root = c.add(PathBuf::from("/"), &md);
        assert_eq!(c.path(a).unwrap(), big);
        assert_eq!(c.path(b).unwrap(), Path::new("tree/sub/small"));
        assert_eq!(c.path(e).unwrap(), Path::new("tree/sub/empty"));
        assert_eq!(c.path(root).unwrap(), Path::new("/"));
        assert_eq!(c.path(99), None);
        assert_eq!(c.dirs.len(), 3, "one directory per run of files in it");
        assert_eq!(c.inline(a), None);
        assert_eq!(c.inline(b), Some(&b"hello"[..]));
        let mut buf = [0u8; 3];
        c.read_at(b, 1, &mut buf).unwrap();
        assert_eq!(&buf, b"ell");
        assert!(
            c.read_at(b, 3, &mut buf).is_err(),
            "past the end is an error"
        );
        c.read_at(a, 9_997, &mut buf).unwrap();
        assert_eq!(buf, [7; 3]);
        assert_eq!(
            c.input_where(|d, i| (d, i) == (1, 3)).unwrap(),
            Path::new("tree/sub/empty")
        );
        assert_eq!(
            c.input_where(|d, i| (d, i) == (md.dev(), md.ino()))
                .unwrap(),
            big
        );
        assert_eq!(c.input_where(|_, _| false), None);
        assert!(c.inline_room(INLINE_FILE) && !c.inline_room(INLINE_FILE + 1));
    }
}
