//! File contents of an image, by id: the host files a scan found, with what they looked like
//! then, so a file that changes before it is copied is an error and not a wrong image.

use std::cell::RefCell;
use std::fs::{self, File};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use blockwise_geometry::{ContentError, ContentSource};
use rustix::fs::{Mode, OFlags};

use crate::Error;

/// What identifies a file's state: where it lives, how long it is, when it last changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Identity {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: i64,
    mtime_nsec: i64,
}

impl Identity {
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

/// The contents of an image: regular host files, registered by the scan with their
/// [identity](HostContent::add) and checked against it whenever they are opened.
#[derive(Debug, Default)]
pub struct HostContent {
    files: Vec<(PathBuf, Identity)>,
    /// Inputs the image does not reference but the build read (the spec file): no output
    /// may be one of them.
    read_only: Vec<(PathBuf, (u64, u64))>,
    open: RefCell<Option<(u64, File)>>,
}

impl HostContent {
    /// Registers the regular file `path`, whose metadata (taken when it was scanned) is `md`,
    /// and returns its content id.
    pub fn add(&mut self, path: PathBuf, md: &fs::Metadata) -> u64 {
        self.files.push((path, Identity::of(md)));
        self.files.len() as u64 - 1
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
        self.files
            .iter()
            .map(|(p, id)| (p.clone(), (id.dev, id.ino)))
            .chain(self.read_only.iter().cloned())
            .map(|(p, (dev, ino))| (p, blockwise_flash::DataId::file(dev, ino)))
            .collect()
    }

    /// The path of content `id`.
    #[must_use]
    pub fn path(&self, id: u64) -> Option<&Path> {
        usize::try_from(id)
            .ok()
            .and_then(|i| self.files.get(i))
            .map(|(p, _)| p.as_path())
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

    fn entry(&self, id: u64) -> Result<&(PathBuf, Identity), Error> {
        usize::try_from(id)
            .ok()
            .and_then(|i| self.files.get(i))
            .ok_or_else(|| Error::NotUsable {
                path: PathBuf::from(format!("content #{id}")),
                what: "no such content".into(),
            })
    }

    /// Opens content `id` and checks that it is still the regular file that was scanned.
    pub fn open(&self, id: u64) -> Result<File, Error> {
        let (path, _) = self.entry(id)?;
        let f = open_nonblocking(path).map_err(|e| Error::io(path, e))?;
        self.check(id, &f)?;
        Ok(f)
    }

    /// Checks that the open file `f` of content `id` still matches the scan (call it again
    /// after copying, to catch writes during the copy).
    pub fn check(&self, id: u64, f: &File) -> Result<(), Error> {
        let (path, was) = self.entry(id)?;
        let md = f.metadata().map_err(|e| Error::io(path, e))?;
        if !md.is_file() {
            return Err(Error::Changed {
                path: path.clone(),
                what: "no longer a regular file".into(),
            });
        }
        match was.differs(&Identity::of(&md)) {
            Some(what) => Err(Error::Changed {
                path: path.clone(),
                what,
            }),
            None => Ok(()),
        }
    }

    /// The error for content `id` having fewer bytes than the scan promised.
    pub(crate) fn shrunk(&self, id: u64) -> Error {
        let path = self.path(id).map(Path::to_path_buf).unwrap_or_default();
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
        let mut open = self.open.borrow_mut();
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
                err(Error::io(self.path(content).unwrap_or(Path::new("?")), e))
            }
        })?;
        self.check(content, f).map_err(err)
    }
}
