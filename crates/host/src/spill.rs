//! Where a build's [`ImageMap`] keeps the metadata it no longer holds in memory: an unnamed
//! file in the work directory (the output's directory), each byte at its image offset. A raw
//! output becomes that file ([`adopt`]); other outputs read the bytes back from it.
//! A million inodes are 256 MB of inode tables; with the store the map holds at most
//! [`budget`] of them at a time.

use std::fs::{self, File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rustix::fs::{AtFlags, Mode, OFlags, CWD};

use blockwise_geometry::{ImageMap, SpillError, SpillStore};

/// Metadata bytes a build holds in memory before it spills them (4 MiB), unless
/// `BLOCKWISE_METADATA_BUDGET` (bytes) says otherwise. At 16 MiB a build of 100,000 small
/// files peaked 12–30 MiB higher (the map's extents grow by doubling, and the allocator
/// keeps what the spilled ones freed) for no time saved: what is spilled is read back from
/// the page cache.
pub(crate) const DEFAULT_BUDGET: u64 = 4 << 20;

/// The budget: `BLOCKWISE_METADATA_BUDGET` when it is a whole number of bytes, else
/// [`DEFAULT_BUDGET`].
pub(crate) fn budget() -> u64 {
    std::env::var("BLOCKWISE_METADATA_BUDGET")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(DEFAULT_BUDGET)
}

/// A spill store: a file nobody else can open (made unnamed, `O_TMPFILE`, where the file
/// system can; else unlinked as soon as it is created).
struct FileStore {
    file: File,
    /// Made with `O_TMPFILE`: it can be given a name ([`adopt`]), once.
    linkable: bool,
    /// Given a name already: an output holds it.
    adopted: AtomicBool,
}

impl SpillStore for FileStore {
    fn store(&mut self, offset: u64, data: &[u8]) -> Result<(), SpillError> {
        self.file
            .write_all_at(data, offset)
            .map_err(|e| SpillError {
                offset,
                message: e.to_string(),
            })
    }
    fn load(&self, offset: u64, buf: &mut [u8]) -> Result<(), SpillError> {
        self.file
            .read_exact_at(buf, offset)
            .map_err(|e| SpillError {
                offset,
                message: e.to_string(),
            })
    }
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

/// The spill file of `img`, named `path` (a new name: it fails where `path` exists), when it
/// can be: made with `O_TMPFILE`, not adopted before, on the file system of `path`. Its
/// spilled ranges then already hold their bytes at their image offsets, and the output
/// writer leaves them be; every other byte of it is a hole, or lies under a range the map
/// holds in memory or by reference (the map stores whatever later lands on a spilled range,
/// zeros included), which the writer writes. The map keeps reading its spilled bytes from
/// the same file, where nothing else is written. `None`: the output is written as a file of
/// its own, as before.
pub(crate) fn adopt(img: &ImageMap, path: &Path) -> Option<File> {
    let store = img.spill_store()?.as_any()?.downcast_ref::<FileStore>()?;
    if !store.linkable || store.adopted.swap(true, Ordering::AcqRel) {
        return None;
    }
    let linked = store.file.try_clone().ok().and_then(|f| {
        let fd = format!("/proc/self/fd/{}", f.as_raw_fd());
        rustix::fs::linkat(CWD, fd.as_str(), CWD, path, AtFlags::SYMLINK_FOLLOW)
            .ok()
            .map(|()| f)
    });
    if linked.is_none() {
        // Another file system, no /proc, a name taken: the next output may try again.
        store.adopted.store(false, Ordering::Release);
    }
    linked
}

/// True when the spill file of `img` was given a name by [`adopt`].
#[cfg(test)]
pub(crate) fn adopted(img: &ImageMap) -> bool {
    img.spill_store()
        .and_then(|s| s.as_any())
        .and_then(|a| a.downcast_ref::<FileStore>())
        .is_some_and(|f| f.adopted.load(Ordering::Acquire))
}

/// An image map of `size` bytes that spills past [`budget`] to an unnamed file in `dir`; a
/// map that keeps everything in memory when no such file can be made there (the build then
/// needs the memory, as it did before, but does not fail for it).
pub(crate) fn image_map(size: u64, dir: &Path) -> ImageMap {
    image_map_with_budget(size, dir, budget())
}

/// [`image_map`] spilling past `budget` bytes.
pub(crate) fn image_map_with_budget(size: u64, dir: &Path, budget: u64) -> ImageMap {
    let store = |file, linkable| FileStore {
        file,
        linkable,
        adopted: AtomicBool::new(false),
    };
    // The mode an output made by `create_new` gets (0o666 less the umask).
    let unnamed = rustix::fs::openat(
        CWD,
        dir,
        OFlags::TMPFILE | OFlags::RDWR | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o666),
    );
    if let Ok(fd) = unnamed {
        return ImageMap::with_spill(size, Box::new(store(File::from(fd), true)), budget);
    }
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let name = format!(
        ".blockwise-spill-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    );
    let path = dir.join(name);
    match OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
    {
        Ok(f) => {
            // Unlinked now: the space is freed when the map is dropped, whatever happens.
            let _ = fs::remove_file(&path);
            ImageMap::with_spill(size, Box::new(store(f, false)), budget)
        }
        Err(_) => ImageMap::new(size),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use blockwise_geometry::{BlockSink, BlockSource};

    #[test]
    fn spilled_metadata_reads_back_and_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let f = File::options()
            .read(true)
            .write(true)
            .create_new(true)
            .open(dir.path().join("s"))
            .unwrap();
        let mut m = ImageMap::with_spill(
            8 << 20,
            Box::new(FileStore {
                file: f,
                linkable: false,
                adopted: AtomicBool::new(false),
            }),
            1,
        );
        let data: Vec<u8> = (0..(3u32 << 20)).map(|i| (i % 251) as u8 + 1).collect();
        m.write_at(4096, &data).unwrap();
        assert!(m.spilled_bytes() > 0);
        assert_eq!(m.metadata().data_bytes(), 0);
        let mut back = vec![0u8; data.len()];
        m.reader(&Vec::<Vec<u8>>::new())
            .read_at(4096, &mut back)
            .unwrap();
        assert_eq!(back, data);
        let m2 = image_map(1 << 20, dir.path());
        drop(m2);
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("s")]);
    }
}
