//! Host directories as [`Tree`]s; file contents are registered with [`HostContent`].

use std::collections::HashMap;
use std::fs;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use blockwise_geometry::{Meta, NodeId, NodeKind, Tree};

use crate::content::{HostContent, Identity};

use crate::Error;

/// Most directory levels followed below a `contents` directory.
const MAX_DEPTH: usize = 256;

fn meta_of(md: &fs::Metadata, clamp: Option<i64>) -> Meta {
    let mut mtime = md.mtime();
    let mut nsec = u32::try_from(md.mtime_nsec()).unwrap_or(0);
    if let Some(c) = clamp {
        if mtime > c {
            mtime = c;
            nsec = 0;
        }
    }
    Meta {
        mode: md.mode() & 0o7777,
        uid: md.uid(),
        gid: md.gid(),
        mtime,
        mtime_nsec: nsec,
        xattrs: Vec::new(),
    }
}

/// Namespaces of the extended attributes copied from a contents tree. Others (`system.*`
/// besides the POSIX ACLs, `btrfs.*`, NFSv4 ACLs, …) are filesystem-specific and skipped,
/// as the kernel would not let a filesystem image carry them anyway.
fn copied_xattr(name: &[u8]) -> bool {
    ["user.", "trusted.", "security."]
        .iter()
        .any(|p| name.starts_with(p.as_bytes()) && name.len() > p.len())
        || name == b"system.posix_acl_access"
        || name == b"system.posix_acl_default"
}

/// Where extended attributes are read from: a path (`llistxattr`/`lgetxattr`, a symlink's
/// own) or a file the scan has open (`flistxattr`/`fgetxattr`, no second path lookup).
#[derive(Clone, Copy)]
pub(crate) enum XattrAt<'a> {
    /// By path, not following a symlink.
    Path(&'a Path),
    /// An open file, named by `path` in messages.
    Fd(rustix::fd::BorrowedFd<'a>, &'a Path),
}

impl XattrAt<'_> {
    fn path(&self) -> &Path {
        match *self {
            XattrAt::Path(p) | XattrAt::Fd(_, p) => p,
        }
    }

    fn list(&self, buf: &mut [u8]) -> rustix::io::Result<usize> {
        match *self {
            XattrAt::Path(p) => rustix::fs::llistxattr(p, buf),
            XattrAt::Fd(fd, _) => rustix::fs::flistxattr(fd, buf),
        }
    }

    fn get(&self, name: &[u8], buf: &mut [u8]) -> rustix::io::Result<usize> {
        match *self {
            XattrAt::Path(p) => rustix::fs::lgetxattr(p, name, buf),
            XattrAt::Fd(fd, _) => rustix::fs::fgetxattr(fd, name, buf),
        }
    }
}

/// Bytes of the first list asked for: the kernel allocates what it is offered, and a 64 KiB
/// offer per file was a tenth of a million-file scan.
const XATTR_FIRST_LIST: usize = 512;

/// Reads extended attributes with one reused 64 KiB buffer, the kernel's limit for a list
/// and a value. A file system that answers `ENOTSUP` once (its device noted) is not asked
/// again.
pub(crate) struct XattrReader {
    buf: Vec<u8>,
    unsupported: Vec<u64>,
}

impl Default for XattrReader {
    fn default() -> Self {
        XattrReader {
            buf: vec![0u8; 1 << 16],
            unsupported: Vec::new(),
        }
    }
}

impl XattrReader {
    /// The copied attributes of `at` on the file system `dev` (when known), sorted by name.
    /// A filesystem without xattr support has none; `trusted.*` can be listed by root only,
    /// so a normal user's build does not see them (as with `mke2fs -d`).
    pub(crate) fn read_at(
        &mut self,
        at: XattrAt<'_>,
        dev: Option<u64>,
    ) -> Result<Vec<(String, Vec<u8>)>, Error> {
        use rustix::io::Errno;
        if dev.is_some_and(|d| self.unsupported.contains(&d)) {
            return Ok(Vec::new());
        }
        let path = at.path();
        let first = self.buf.get_mut(..XATTR_FIRST_LIST).unwrap_or_default();
        let n = match at.list(first) {
            Ok(n) => n,
            Err(Errno::RANGE) => at
                .list(&mut self.buf[..])
                .map_err(|e| Error::io(path, e.into()))?,
            Err(Errno::NOTSUP | Errno::NOSYS) => {
                if let Some(d) = dev {
                    self.unsupported.push(d);
                }
                return Ok(Vec::new());
            }
            Err(e) => return Err(Error::io(path, e.into())),
        };
        if n == 0 {
            return Ok(Vec::new());
        }
        let list = self.buf.get(..n).unwrap_or_default().to_vec();
        let mut out = Vec::new();
        for name in list.split(|&b| b == 0).filter(|n| !n.is_empty()) {
            if !copied_xattr(name) {
                continue;
            }
            let value = match at.get(name, &mut self.buf[..]) {
                Ok(len) => self.buf.get(..len).unwrap_or_default().to_vec(),
                // Removed between the list and the read.
                Err(Errno::NODATA) => continue,
                Err(e) => return Err(Error::io(path, e.into())),
            };
            // Names in these namespaces are text; a non-UTF-8 one cannot be named in a spec.
            let Ok(name) = String::from_utf8(name.to_vec()) else {
                return Err(Error::io(
                    path,
                    std::io::Error::other(format!(
                        "extended attribute name {} is not valid UTF-8",
                        blockwise_geometry::display_bytes(name)
                    )),
                ));
            };
            out.push((name, value));
        }
        out.sort();
        Ok(out)
    }
}

/// Kernel pseudo filesystems (`statfs` magic numbers) whose files are not data: their
/// contents change while read and some block. A `contents` directory on one is refused.
const PSEUDO_FS: [(i64, &str); 12] = [
    (0x9fa0, "proc"),
    (0x6265_6572, "sysfs"),
    (0x6462_6720, "debugfs"),
    (0x7472_6163, "tracefs"),
    (0x0027_e0eb, "cgroup"),
    (0x6367_7270, "cgroup2"),
    (0x7363_6673, "securityfs"),
    (0xcafe_4a11, "bpf"),
    (0x1cd1, "devpts"),
    (0x6265_6570, "configfs"),
    (0xde5e_81e4, "efivarfs"),
    (0x6165_676c, "pstore"),
];

/// Refuses `dir` when it lies on a kernel pseudo filesystem (/proc, /sys, …).
fn refuse_pseudo_fs(dir: &Path) -> Result<(), Error> {
    let Ok(st) = rustix::fs::statfs(dir) else {
        return Ok(());
    };
    #[allow(
        clippy::unnecessary_cast,
        reason = "f_type's width differs between targets"
    )]
    let magic = st.f_type as i64;
    match PSEUDO_FS.iter().find(|(m, _)| *m == magic) {
        Some((_, name)) => Err(Error::NotUsable {
            path: dir.to_path_buf(),
            what: format!("is on the {name} pseudo filesystem, whose files are kernel state, not data: copy what you need into a real directory"),
        }),
        None => Ok(()),
    }
}

/// Splits a Linux `dev_t` into major and minor.
pub(crate) fn split_dev(rdev: u64) -> (u32, u32) {
    let major = ((rdev >> 8) & 0xfff) | ((rdev >> 32) & !0xfff);
    let minor = (rdev & 0xff) | ((rdev >> 12) & !0xff);
    (
        u32::try_from(major).unwrap_or(0),
        u32::try_from(minor).unwrap_or(0),
    )
}

/// Data ranges of a file that may be sparse: only when it has fewer allocated blocks than its
/// size (`blocks` of 512 bytes), 4 KiB blocks of zeros are treated as holes. `f` is the file,
/// open for reading. `progress` can stop it between 1 MiB reads.
fn data_ranges(
    path: &Path,
    f: &fs::File,
    size: u64,
    blocks: u64,
    progress: &mut dyn crate::Progress,
) -> Result<Option<Vec<(u64, u64)>>, Error> {
    if size == 0 || blocks.saturating_mul(512) >= size {
        return Ok(None);
    }
    // Only the allocated extents are read (SEEK_DATA/SEEK_HOLE), so a 100 GiB sparse file
    // costs what it holds; inside them, 4 KiB blocks of zeros count as holes too.
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut pos = 0u64;
    while pos < size {
        let data = match rustix::fs::seek(f, rustix::fs::SeekFrom::Data(pos)) {
            Ok(d) => d,
            Err(rustix::io::Errno::NXIO) => break,
            // No SEEK_DATA here: read everything from `pos` on.
            Err(_) => pos,
        };
        let hole = rustix::fs::seek(f, rustix::fs::SeekFrom::Hole(data)).unwrap_or(size);
        let (start, end) = (
            data / 4096 * 4096,
            hole.div_ceil(4096).saturating_mul(4096).min(size),
        );
        let mut off = start.max(pos);
        while off < end {
            Error::check(progress)?;
            let n = usize::try_from((end - off).min(buf.len() as u64)).unwrap_or(0);
            let chunk = buf.get_mut(..n).unwrap_or_default();
            f.read_exact_at(chunk, off)
                .map_err(|e| Error::io(path, e))?;
            for (j, block) in chunk.chunks(4096).enumerate() {
                if block.iter().all(|&b| b == 0) {
                    continue;
                }
                let s = off + (j as u64) * 4096;
                let e = s + block.len() as u64;
                match ranges.last_mut() {
                    Some(last) if last.1 == s => last.1 = e,
                    _ => ranges.push((s, e)),
                }
            }
            off += n as u64;
        }
        pos = end.max(pos + 1);
    }
    Ok(Some(ranges))
}

/// The build's own output files (image, `.bmap`), which a `contents` tree may hold when the
/// output is written inside it (`contents = "."`, `-o out.img`): the scan leaves them out,
/// as `tar` leaves out its own archive, so an image never holds its previous self or its
/// temp files. Matched by the directory's identity (device, inode) and the name, so
/// relative paths and symlinked directories match too.
///
/// Only a file that [looks like a previous output](looks_like_output) (a disk image, a
/// block map, a compressed or sparse image) is left out: any other file at an output's path
/// is the user's data, scanned as an input, and the build then refuses to overwrite it
/// ([`crate::check_outputs`]).
#[derive(Debug, Default)]
pub(crate) struct OwnOutputs {
    /// (device, inode) of an output's directory, the output's file name, and whether the
    /// file there (if any) is left out too.
    outputs: Vec<((u64, u64), Vec<u8>, bool)>,
}

/// Whether the regular file at `path` looks like something a build writes, by its first
/// bytes: an MBR/GPT/FAT boot signature at 510, the ext2/3/4 magic at 1080, a bmaptool block
/// map, an Android sparse image, or a zstd/xz/gzip/bzip2 stream. A text file, a program, a
/// photo a user keeps in a `contents` tree is none of these.
pub(crate) fn looks_like_output(path: &Path) -> bool {
    let Ok(f) = crate::content::open_nonblocking(path) else {
        return false;
    };
    if !f.metadata().is_ok_and(|m| m.is_file()) {
        return false;
    }
    let mut head = [0u8; 2048];
    let mut got = 0usize;
    while got < head.len() {
        match f.read_at(head.get_mut(got..).unwrap_or_default(), got as u64) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    let head = head.get(..got).unwrap_or_default();
    let at = |off: usize, magic: &[u8]| head.get(off..off + magic.len()) == Some(magic);
    at(510, &[0x55, 0xaa])
        || at(1080, &[0x53, 0xef])
        || (at(0, b"<?xml") && head.windows(5).any(|w| w == b"<bmap"))
        || [
            &[0x3a_u8, 0xff, 0x26, 0xed][..],
            &[0xed, 0x26, 0xff, 0x3a],
            &[0x28, 0xb5, 0x2f, 0xfd],
            &[0xfd, b'7', b'z', b'X', b'Z', 0],
            &[0x1f, 0x8b],
            b"BZh",
        ]
        .iter()
        .any(|m| at(0, m))
}

impl OwnOutputs {
    /// The outputs among `paths` whose directory exists.
    pub(crate) fn new(paths: &[PathBuf]) -> Self {
        let mut outputs = Vec::new();
        for p in paths {
            let (Some(name), dir) = (p.file_name(), p.parent()) else {
                continue;
            };
            let dir = dir
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            if let Ok(md) = fs::metadata(dir) {
                let leave_out = !p.exists() || looks_like_output(p);
                outputs.push(((md.dev(), md.ino()), name.as_bytes().to_vec(), leave_out));
            }
        }
        OwnOutputs { outputs }
    }

    /// Whether `name` in the directory `dir` (device, inode) is an output that looks like
    /// one, a temp file of one (`.NAME.tmp-…`), or the mke2fs backend's temp filesystem next
    /// to it.
    fn holds(&self, dir: (u64, u64), name: &[u8]) -> bool {
        self.outputs.iter().any(|(d, out, leave_out)| {
            *d == dir
                && ((*leave_out && name == out.as_slice())
                    || name.strip_prefix(b".").is_some_and(|n| {
                        n.strip_prefix(out.as_slice())
                            .is_some_and(|rest| rest.starts_with(b".tmp-"))
                    })
                    || name.starts_with(b".blockwise-mke2fs-")
                    || name.starts_with(b".blockwise-rofs-"))
        })
    }

    /// Whether any output lies inside `dir` (at any depth), by path after resolving both.
    pub(crate) fn inside(paths: &[PathBuf], dir: &Path) -> Option<PathBuf> {
        let dir = fs::canonicalize(dir).ok()?;
        paths.iter().find_map(|p| {
            let parent = p
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            let parent = fs::canonicalize(parent).ok()?;
            parent.starts_with(&dir).then(|| p.clone())
        })
    }
}

/// Builds a [`Tree`] from a host directory. Symlinks are stored as symlinks (not followed);
/// device nodes, fifos and sockets are kept; hard links share a link id; file times are
/// clamped to `clamp` when given (reproducible builds). Names and symlink targets are kept
/// as bytes (they need not be UTF-8). Extended attributes are read without following
/// symlinks (`llistxattr`/`lgetxattr`).
pub fn tree_from_dir(
    dir: &Path,
    clamp: Option<i64>,
    content: &mut HostContent,
) -> Result<Tree, Error> {
    let mut warnings = Vec::new();
    scan_dir(
        dir,
        clamp,
        content,
        &OwnOutputs::default(),
        &mut warnings,
        &mut (),
    )
}

/// What the scan's one `statx` of an entry found.
struct Stat {
    mode: u32,
    uid: u32,
    gid: u32,
    size: u64,
    blocks: u64,
    nlink: u32,
    dev: u64,
    ino: u64,
    rdev: (u32, u32),
    mtime: i64,
    mtime_nsec: u32,
}

impl Stat {
    /// `statx` of `name` in the directory `dir`, not following a symlink.
    fn at(dir: rustix::fd::BorrowedFd<'_>, name: &std::ffi::CStr) -> rustix::io::Result<Self> {
        use rustix::fs::{AtFlags, StatxFlags};
        let st = rustix::fs::statx(
            dir,
            name,
            AtFlags::SYMLINK_NOFOLLOW | AtFlags::NO_AUTOMOUNT,
            StatxFlags::BASIC_STATS,
        )?;
        Ok(Stat {
            mode: u32::from(st.stx_mode),
            uid: st.stx_uid,
            gid: st.stx_gid,
            size: st.stx_size,
            blocks: st.stx_blocks,
            nlink: st.stx_nlink,
            dev: rustix::fs::makedev(st.stx_dev_major, st.stx_dev_minor),
            ino: st.stx_ino,
            rdev: (st.stx_rdev_major, st.stx_rdev_minor),
            mtime: st.stx_mtime.tv_sec,
            mtime_nsec: st.stx_mtime.tv_nsec,
        })
    }

    fn meta(&self, clamp: Option<i64>) -> Meta {
        let (mut mtime, mut nsec) = (self.mtime, self.mtime_nsec);
        if let Some(c) = clamp {
            if mtime > c {
                mtime = c;
                nsec = 0;
            }
        }
        Meta {
            mode: self.mode & 0o7777,
            uid: self.uid,
            gid: self.gid,
            mtime,
            mtime_nsec: nsec,
            xattrs: Vec::new(),
        }
    }

    fn kind(&self) -> u32 {
        self.mode & 0o170_000
    }
}

/// Opens the directory `path` for reading its entries (`nofollow`: not through a symlink).
fn open_dir(path: &Path, nofollow: bool) -> Result<rustix::fs::Dir, Error> {
    use rustix::fs::{Mode, OFlags};
    let mut flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    if nofollow {
        flags |= OFlags::NOFOLLOW;
    }
    let fd = rustix::fs::open(path, flags, Mode::empty()).map_err(|e| Error::io(path, e.into()))?;
    rustix::fs::Dir::new(fd).map_err(|e| Error::io(path, e.into()))
}

/// Reads a small regular file whole into `buf` (`size` bytes): a file that is longer or
/// shorter than its `statx` said has changed while scanned.
fn read_small(path: &Path, f: &fs::File, size: u64, buf: &mut Vec<u8>) -> Result<(), Error> {
    let want = usize::try_from(size).unwrap_or(usize::MAX);
    buf.clear();
    buf.resize(want.saturating_add(1), 0);
    let mut got = 0usize;
    while got < buf.len() {
        match f.read_at(buf.get_mut(got..).unwrap_or_default(), got as u64) {
            Ok(0) => break,
            Ok(n) => {
                got += n;
                // A regular file's read stops short only at its end: `size` bytes of a
                // `size + 1` request are all of it, without a second read to see 0.
                if got == want && n < want.saturating_add(1) {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::io(path, e)),
        }
    }
    if got != want {
        return Err(Error::Changed {
            path: path.to_path_buf(),
            what: format!("size {size} → {got} bytes while it was scanned"),
        });
    }
    buf.truncate(want);
    Ok(())
}

/// [`tree_from_dir`], leaving out the build's own outputs (a warning for each one left out)
/// and stopping between directories when `progress` asks to (Ctrl-C during a long scan).
///
/// Per entry one `statx` relative to its directory's descriptor; a regular file with data is
/// opened there too (which is the check that this process may read it, now and not after
/// the image has been half written), and one of at most [`crate::content::INLINE_FILE`]
/// bytes is read whole, so the image takes it from memory. Extended attributes are listed
/// once per entry where the filesystem has them.
pub(crate) fn scan_dir(
    dir: &Path,
    clamp: Option<i64>,
    content: &mut HostContent,
    own: &OwnOutputs,
    warnings: &mut Vec<String>,
    progress: &mut dyn crate::Progress,
) -> Result<Tree, Error> {
    scan_dir_only(dir, None, clamp, content, own, warnings, progress)
}

/// [`scan_dir`] of `dir` keeping only the entry `only` at its top (with everything under
/// it): how one file of `files = [...]` is read, with the same checks as a whole tree.
pub(crate) fn scan_dir_only(
    dir: &Path,
    only: Option<&[u8]>,
    clamp: Option<i64>,
    content: &mut HostContent,
    own: &OwnOutputs,
    warnings: &mut Vec<String>,
    progress: &mut dyn crate::Progress,
) -> Result<Tree, Error> {
    const S_IFDIR: u32 = 0o040_000;
    const S_IFREG: u32 = 0o100_000;
    const S_IFLNK: u32 = 0o120_000;
    const S_IFCHR: u32 = 0o020_000;
    const S_IFBLK: u32 = 0o060_000;
    const S_IFIFO: u32 = 0o010_000;
    let md = fs::metadata(dir).map_err(|e| Error::io(dir, e))?;
    if !md.is_dir() {
        return Err(Error::io(dir, std::io::Error::other("not a directory")));
    }
    refuse_pseudo_fs(dir)?;
    let mut xattrs = XattrReader::default();
    let mut xattrs2 = XattrReader::default();
    let mut root_meta = meta_of(&md, clamp);
    root_meta.xattrs = xattrs.read_at(XattrAt::Path(dir), Some(md.dev()))?;
    let mut tree = Tree::new(root_meta);
    let root_dev = md.dev();
    let mut links: HashMap<(u64, u64), u64> = HashMap::new();
    let mut small = Vec::new();
    let mut stack: Vec<(PathBuf, NodeId, usize, (u64, u64))> =
        vec![(dir.to_path_buf(), 0, 0, (md.dev(), md.ino()))];
    while let Some((path, node, depth, dir_id)) = stack.pop() {
        Error::check(progress)?;
        if depth > MAX_DEPTH {
            return Err(Error::io(
                &path,
                std::io::Error::other("directory nesting deeper than 256 levels"),
            ));
        }
        let mut dir_fd = open_dir(&path, depth > 0)?;
        let mut names: Vec<std::ffi::CString> = Vec::new();
        for e in dir_fd.by_ref() {
            let e = e.map_err(|e| Error::io(&path, e.into()))?;
            let name = e.file_name();
            let wanted = depth > 0 || only.is_none_or(|o| o == name.to_bytes());
            if name != c"." && name != c".." && wanted {
                names.push(name.to_owned());
            }
        }
        names.sort_unstable();
        let dfd = dir_fd.fd().map_err(|e| Error::io(&path, e.into()))?;
        for batch in names.chunks(SCAN_BATCH) {
            let room = content.inline_left();
            let probed = probe_batch(dfd, &path, batch, &mut xattrs, &mut xattrs2, room)?;
            for (cname, probed) in batch.iter().zip(probed) {
                // Checked per entry, not only per directory: one flat directory of 200,000 files
                // takes seconds to stat. Each entry is counted as it is reached.
                Error::check(progress)?;
                progress.advance(1);
                let name = cname.as_bytes();
                let p = || path.join(std::ffi::OsStr::from_bytes(name));
                if own.holds(dir_id, name) {
                    warnings.push(format!(
                        "{}: left out of the image: it is this build's output (or its temp file)",
                        blockwise_geometry::display_path(&p())
                    ));
                    continue;
                }
                let Found {
                    st,
                    xattrs: found_xattrs,
                    small: probed_small,
                } = probed?;
                let mut meta = st.meta(clamp);
                let kind = match st.kind() {
                    S_IFDIR => NodeKind::Dir {
                        children: Vec::new(),
                    },
                    S_IFREG => {
                        let link = (st.nlink > 1).then(|| {
                            let n = links.len() as u64;
                            *links.entry((st.dev, st.ino)).or_insert(n)
                        });
                        let ident = Identity::new(
                            st.dev,
                            st.ino,
                            st.size,
                            st.mtime,
                            i64::from(st.mtime_nsec),
                        );
                        let mut ranges = None;
                        let id = if st.size == 0 {
                            content.add_identity(&path, name, ident)
                        } else if let Some(bytes) = probed_small {
                            // Opened by the probe, its attributes read there.
                            if !content.inline_room(st.size) {
                                content.add_identity(&path, name, ident)
                            } else if let Some(b) = bytes {
                                content.add_inline(&path, name, ident, &b)
                            } else {
                                // Read here: the probe's share of the memory was used up.
                                let full = p();
                                let f =
                                    open_at(dfd, cname).map_err(|e| Error::io(&full, e.into()))?;
                                read_small(&full, &f, st.size, &mut small)?;
                                content.add_inline(&path, name, ident, &small)
                            }
                        } else {
                            let full = p();
                            // Empty files are never opened, so not checked.
                            let f = open_at(dfd, cname).map_err(|e| Error::io(&full, e.into()))?;
                            meta.xattrs = xattrs.read_at(
                                XattrAt::Fd(std::os::fd::AsFd::as_fd(&f), &full),
                                Some(st.dev),
                            )?;
                            ranges = data_ranges(&full, &f, st.size, st.blocks, progress)?;
                            if content.inline_room(st.size) {
                                read_small(&full, &f, st.size, &mut small)?;
                                content.add_inline(&path, name, ident, &small)
                            } else {
                                content.add_identity(&path, name, ident)
                            }
                        };
                        NodeKind::File {
                            size: st.size,
                            content: id,
                            data_ranges: ranges,
                            link,
                        }
                    }
                    S_IFLNK => {
                        let t = rustix::fs::readlinkat(dfd, cname, Vec::new())
                            .map_err(|err| Error::io(p(), err.into()))?;
                        NodeKind::Symlink {
                            target: t.into_bytes(),
                        }
                    }
                    S_IFCHR => NodeKind::CharDev {
                        major: st.rdev.0,
                        minor: st.rdev.1,
                    },
                    S_IFBLK => NodeKind::BlockDev {
                        major: st.rdev.0,
                        minor: st.rdev.1,
                    },
                    S_IFIFO => NodeKind::Fifo,
                    _ => NodeKind::Socket,
                };
                if let Some(x) = found_xattrs {
                    meta.xattrs = x;
                }
                let is_dir = matches!(kind, NodeKind::Dir { .. });
                let id = tree
                    .add(node, name, kind, meta)
                    .ok_or_else(|| Error::io(p(), std::io::Error::other("duplicate name")))?;
                if is_dir {
                    let sub = p();
                    // A mount point inside the tree: check what is mounted there.
                    if st.dev != root_dev {
                        refuse_pseudo_fs(&sub)?;
                    }
                    stack.push((sub, id, depth + 1, (st.dev, st.ino)));
                }
            }
        }
    }
    Ok(tree)
}

/// Entries of a directory probed at a time: their `statx` results wait in memory for the
/// tree, so a directory of millions is taken a few thousand at a time.
const SCAN_BATCH: usize = 4096;

/// Fewest entries worth a second thread.
const SCAN_SPLIT: usize = 256;

/// What the scan found of an entry before it is added to the tree.
struct Found {
    /// Its `statx`.
    st: Stat,
    /// The extended attributes of an entry the probe finished: one that is not opened (an
    /// empty file, a directory, a symlink, a special file) or a small file it read (through
    /// its descriptor). `None` for a file the scan's own thread opens.
    xattrs: Option<Vec<(String, Vec<u8>)>>,
    /// A small regular file the probe opened (which is the check that it can be read) and
    /// read whole: its bytes, or `None` when the probe's share of the memory for small files
    /// was used up (the scan's thread reads it if the build's share allows).
    small: Option<Option<Vec<u8>>>,
}

type Probed = Result<Found, Error>;

/// Whether the probe opens and reads a regular file itself: a small one (at most
/// [`INLINE_FILE`](crate::content::INLINE_FILE) bytes) with all its blocks allocated. A
/// sparse one, which [`data_ranges`] reads, is left to the scan's own thread.
fn probe_reads(st: &Stat) -> bool {
    st.kind() == 0o100_000
        && st.size > 0
        && st.size <= crate::content::INLINE_FILE
        && st.blocks.saturating_mul(512) >= st.size
}

/// Opens the regular file `name` of the directory `dir` for reading: not through a symlink,
/// never blocking (a FIFO put there since the `statx`), never as a controlling terminal.
fn open_at(dir: rustix::fd::BorrowedFd<'_>, name: &std::ffi::CStr) -> rustix::io::Result<fs::File> {
    use rustix::fs::{Mode, OFlags};
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NOFOLLOW,
        Mode::empty(),
    )?;
    Ok(fs::File::from(fd))
}

/// One entry's `statx`, its extended attributes, and for a small regular file
/// ([`probe_reads`]) its bytes when `room` (bytes this thread may still read) allows.
fn probe(
    dir: rustix::fd::BorrowedFd<'_>,
    path: &Path,
    name: &std::ffi::CStr,
    xattrs: &mut XattrReader,
    room: &mut usize,
) -> Probed {
    let p = || path.join(std::ffi::OsStr::from_bytes(name.to_bytes()));
    let st = Stat::at(dir, name).map_err(|e| Error::io(p(), e.into()))?;
    if probe_reads(&st) {
        let full = p();
        let f = open_at(dir, name).map_err(|e| Error::io(&full, e.into()))?;
        let found = xattrs.read_at(
            XattrAt::Fd(std::os::fd::AsFd::as_fd(&f), &full),
            Some(st.dev),
        )?;
        let size = usize::try_from(st.size).unwrap_or(usize::MAX);
        let small = if size <= *room {
            *room -= size;
            let mut buf = Vec::new();
            read_small(&full, &f, st.size, &mut buf)?;
            Some(buf)
        } else {
            None
        };
        return Ok(Found {
            st,
            xattrs: Some(found),
            small: Some(small),
        });
    }
    let opened = st.kind() == 0o100_000 && st.size > 0;
    let found = if opened {
        None
    } else {
        Some(xattrs.read_at(XattrAt::Path(&p()), Some(st.dev))?)
    };
    Ok(Found {
        st,
        xattrs: found,
        small: None,
    })
}

/// Probes `names` of the directory `dir` (at `path`) in order; a large batch on two threads
/// (the system calls are most of a scan's time, and the kernel runs them on both cores).
/// `room`: bytes of small files the probes may read in all, half of it per thread.
fn probe_batch(
    dir: rustix::fd::BorrowedFd<'_>,
    path: &Path,
    names: &[std::ffi::CString],
    xattrs: &mut XattrReader,
    xattrs2: &mut XattrReader,
    room: usize,
) -> Result<Vec<Probed>, Error> {
    let all = |names: &[std::ffi::CString], x: &mut XattrReader, mut room: usize| -> Vec<Probed> {
        names
            .iter()
            .map(|n| probe(dir, path, n, x, &mut room))
            .collect()
    };
    if names.len() < SCAN_SPLIT {
        return Ok(all(names, xattrs, room));
    }
    let (first, second) = names.split_at(names.len() / 2);
    std::thread::scope(|s| {
        let other = std::thread::Builder::new().spawn_scoped(s, || all(second, xattrs2, room / 2));
        let mut out = all(first, xattrs, room / 2);
        match other {
            Ok(h) => match h.join() {
                Ok(rest) => out.extend(rest),
                Err(_) => {
                    return Err(Error::io(
                        path,
                        std::io::Error::other("a scanning thread failed"),
                    ))
                }
            },
            // No second thread to be had: this one does the rest.
            Err(_) => out.extend(all(second, xattrs, room / 2)),
        }
        Ok(out)
    })
}
