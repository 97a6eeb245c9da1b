//! Reading filesystems back with independent crates: `fatfs` for FAT, `ext4-view` for ext4,
//! over an in-memory image (or a window of it), and what a [`Tree`] should read back as.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom, Write};

use blockwise_geometry::{BlockSink, BlockSource, NodeKind, SparseImage, Tree};

/// What a filesystem holds: path → `Some(content)` for files, `None` for directories.
pub type Files = BTreeMap<String, Option<Vec<u8>>>;

/// Read/Write/Seek over `len` bytes at `start` of an image, for `fatfs`.
pub struct Cursor {
    /// The image.
    pub img: SparseImage,
    /// Where the window starts.
    pub start: u64,
    /// Its length.
    pub len: u64,
    /// The position inside the window.
    pub pos: u64,
}

impl Cursor {
    /// A window onto the whole image.
    pub fn whole(img: SparseImage) -> Self {
        let len = img.size();
        Cursor {
            img,
            start: 0,
            len,
            pos: 0,
        }
    }
}

impl Read for Cursor {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = usize::try_from(self.len.saturating_sub(self.pos))
            .unwrap_or(usize::MAX)
            .min(buf.len());
        let dst = buf.get_mut(..n).unwrap_or_default();
        self.img
            .read_at(self.start + self.pos, dst)
            .map_err(std::io::Error::other)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl Write for Cursor {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.img
            .write_at(self.start + self.pos, buf)
            .map_err(std::io::Error::other)?;
        self.pos += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Seek for Cursor {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        self.pos = match to {
            SeekFrom::Start(p) => p,
            SeekFrom::End(d) => self.len.checked_add_signed(d).unwrap_or(0),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d).unwrap_or(0),
        };
        Ok(self.pos)
    }
}

/// What `fatfs` reads from the FAT volume in `cursor`'s window.
pub fn fatfs_files(cursor: Cursor) -> Files {
    let fs = fatfs::FileSystem::new(cursor, fatfs::FsOptions::new()).expect("fatfs mount");
    let mut out = BTreeMap::new();
    fn go<T: fatfs::ReadWriteSeek>(dir: fatfs::Dir<T>, prefix: &str, out: &mut Files) {
        for e in dir.iter() {
            let e = e.expect("dir entry");
            let name = e.file_name();
            if name == "." || name == ".." {
                continue;
            }
            let path = format!("{prefix}/{name}");
            if e.is_dir() {
                out.insert(path.clone(), None);
                go(e.to_dir(), &path, out);
            } else {
                let mut v = Vec::new();
                e.to_file().read_to_end(&mut v).expect("read file");
                out.insert(path, Some(v));
            }
        }
    }
    go(fs.root_dir(), "", &mut out);
    out
}

/// A window of an image for `ext4-view`.
struct Ext4Window {
    img: SparseImage,
    start: u64,
}

impl ext4_view::Ext4Read for Ext4Window {
    fn read(
        &mut self,
        start: u64,
        dst: &mut [u8],
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        self.img
            .read_at(self.start + start, dst)
            .map_err(|e| Box::new(e) as _)
    }
}

/// Loads the ext4 filesystem at `start` of `img` with `ext4-view`.
pub fn ext4_view_at(img: SparseImage, start: u64) -> ext4_view::Ext4 {
    ext4_view::Ext4::load(Box::new(Ext4Window { img, start })).expect("ext4-view load")
}

/// What `ext4-view` reads from the ext4 filesystem at `start` of `img` (files and
/// directories; `lost+found` left out).
pub fn ext4_files(img: SparseImage, start: u64) -> Files {
    let fs = ext4_view_at(img, start);
    let mut out = BTreeMap::new();
    let mut stack = vec![String::from("/")];
    while let Some(dir) = stack.pop() {
        for e in fs.read_dir(dir.as_str()).expect("read_dir") {
            let e = e.expect("dir entry");
            let name = e.file_name().as_str().expect("utf-8 name").to_string();
            if name == "." || name == ".." || (dir == "/" && name == "lost+found") {
                continue;
            }
            let path = format!("{}/{name}", dir.trim_end_matches('/'));
            let ft = e.file_type().expect("file type");
            if ft.is_dir() {
                out.insert(path.clone(), None);
                stack.push(path);
            } else if ft.is_regular_file() {
                out.insert(path.clone(), Some(fs.read(path.as_str()).expect("read")));
            }
        }
    }
    out
}

/// The files and directories of `tree` (contents from `content`, handle = index), as a
/// filesystem should read them back. Symlinks and special files are left out.
pub fn tree_files(tree: &Tree, content: &[Vec<u8>]) -> Files {
    let mut out = BTreeMap::new();
    for (id, n) in tree.nodes.iter().enumerate().skip(1) {
        match &n.kind {
            NodeKind::Dir { .. } => {
                out.insert(tree.path(id), None);
            }
            NodeKind::File { content: h, .. } => {
                let data = usize::try_from(*h)
                    .ok()
                    .and_then(|i| content.get(i))
                    .cloned()
                    .unwrap_or_default();
                out.insert(tree.path(id), Some(data));
            }
            _ => {}
        }
    }
    out
}
