//! Where a build's [`ImageMap`] keeps the metadata it no longer holds in memory: an unnamed
//! file in the work directory (the output's directory), read back when the image is written.
//! A million inodes are 256 MB of inode tables; with the store the map holds at most
//! [`budget`] of them at a time.

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

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

/// A spill store: a file nobody else can open (unlinked as soon as it is created).
struct FileStore(File);

impl SpillStore for FileStore {
    fn store(&mut self, offset: u64, data: &[u8]) -> Result<(), SpillError> {
        self.0.write_all_at(data, offset).map_err(|e| SpillError {
            offset,
            message: e.to_string(),
        })
    }
    fn load(&self, offset: u64, buf: &mut [u8]) -> Result<(), SpillError> {
        self.0.read_exact_at(buf, offset).map_err(|e| SpillError {
            offset,
            message: e.to_string(),
        })
    }
}

/// An image map of `size` bytes that spills past [`budget`] to an unnamed file in `dir`; a
/// map that keeps everything in memory when no such file can be made there (the build then
/// needs the memory, as it did before, but does not fail for it).
pub(crate) fn image_map(size: u64, dir: &Path) -> ImageMap {
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
            ImageMap::with_spill(size, Box::new(FileStore(f)), budget())
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
        let mut m = ImageMap::with_spill(8 << 20, Box::new(FileStore(f)), 1);
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
