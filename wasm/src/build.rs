//! Building in the page: a spec plus the names, sizes and times of the files → the image as
//! an [`ImageMap`] (metadata bytes in memory, file data as references into the files). No
//! file is read to build it: the front end composes the image from the map's pieces and the
//! files themselves (`File.slice()`), so the tab never holds a second copy of the content.
//!
//! The trees follow the CLI's scan (`blockwise_host::tree`), with what a browser can know:
//!
//! - names sorted byte-wise in each directory (the [`Tree`] keeps children sorted);
//! - files `0644`, directories `0755`, owner and group 0 (a browser sees no modes or owners);
//! - a file's time is its `lastModified` (ms precision), clamped to the spec's `timestamp`
//!   when the spec has one, exactly as the CLI clamps (`mtime > timestamp` → `timestamp`,
//!   nanoseconds 0);
//! - a directory's time: its own time when the front end knows it (entries of a drop carry
//!   it), clamped the same way; otherwise the spec's `timestamp` (what the CLI gives every
//!   directory changed after it: any directory written since), and without a `timestamp`
//!   the newest time of the partition's files — never 1970 unless the spec says so;
//! - a partition without files is an empty root with every time = `timestamp` (the CLI's
//!   rule for a partition without `contents`).
//!
//! With the same files, modes and a `timestamp` not older than the directories, the bytes
//! equal `blockwise build` of the same spec (wasm/tests/e2e.mjs compares them).

use std::borrow::Cow;

use blockwise_erofs::ErofsBackend;
use blockwise_geometry::{
    BlockSink, ContentError, ContentSource, FsKind, FsPlan, ImageMap, Meta, NodeKind, Piece, Plan,
    Tree,
};
use blockwise_image::{apply_entries, assemble, plan_full, Fill, Spec};
use blockwise_squashfs::SquashfsBackend;

use crate::api::{dir_meta, timestamp, Failure};

/// One file or directory for a build, without its bytes.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct FileEntry {
    /// Path with `/` separators, relative: inside the partition when `partition` is given,
    /// else starting with the `contents` directory of a partition (`boot/config.txt`).
    pub path: String,
    /// Size in bytes (0 for a directory).
    pub size: u64,
    /// Modification time, ms since the Unix epoch (`File.lastModified`); `None` = unknown.
    pub mtime_ms: Option<i64>,
    /// The partition (1-based, in spec order) it goes into; `None` = by `contents`.
    pub partition: Option<usize>,
    /// A directory (e.g. an empty one of a dropped folder), not a file.
    pub dir: bool,
}

/// A planned and assembled image: content id `i` is entry `i`'s file.
#[derive(Debug)]
pub struct Job {
    /// The plan it follows.
    pub plan: Plan,
    /// The image: metadata bytes plus references into the entries' files.
    pub map: ImageMap,
    /// The writers' warnings.
    pub warnings: Vec<String>,
    /// Size of each entry, by content id (to check what the front end reads).
    pub sizes: Vec<u64>,
    /// The dm-verity root hashes: `(name, hex)`, as `blockwise build` writes them to
    /// `OUT.roothash` / `OUT.NAME.roothash`.
    pub root_hashes: Vec<(String, String)>,
}

/// A squashfs image made before the layout.
pub(crate) struct Made {
    si: usize,
    bytes: Vec<u8>,
    warnings: Vec<String>,
}

/// Bytes written by the squashfs writer, kept in memory (the compressed filesystem).
#[derive(Default)]
struct VecSink(Vec<u8>);

impl BlockSink for VecSink {
    type Error = core::convert::Infallible;
    fn len(&self) -> u64 {
        u64::MAX
    }
    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<(), Self::Error> {
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        let end = start.saturating_add(data.len());
        if self.0.len() < end {
            self.0.resize(end, 0);
        }
        if let Some(dst) = self.0.get_mut(start..end) {
            dst.copy_from_slice(data);
        }
        Ok(())
    }
}

/// Compresses every squashfs partition of `spec` from its tree (reading the files through
/// `content`) and records its size and plan in `spec` (`prebuilt`), as the CLI does before
/// planning.
///
/// `for_plan`: only those whose plan needs the image (no size given, or an appended hash
/// tree), as `blockwise plan` compresses only those.
pub(crate) fn make_squashfs(
    spec: &mut Spec,
    trees: &[Option<Tree>],
    content: &dyn ContentSource,
    ts: i64,
    for_plan: bool,
) -> Result<Vec<Made>, Failure> {
    let mut made = Vec::new();
    for si in 0..spec.partitions.len() {
        let Some(p) = spec.partitions.get(si) else {
            continue;
        };
        let needed_by_plan = p.size == blockwise_geometry::SizeSpec::Source || p.verity.is_some();
        if p.fs != FsKind::Squashfs || (for_plan && !needed_by_plan) {
            continue;
        }
        let req = blockwise_image::rofs::squashfs_request(spec, si, u64::MAX, ts)
            .ok_or_else(|| Failure::internal(format!("partition[{}]: no request", si + 1)))?;
        let empty = Tree::default();
        let tree = trees.get(si).and_then(Option::as_ref).unwrap_or(&empty);
        let mut sink = VecSink::default();
        let w = blockwise_squashfs::write(&mut sink, &req, tree, content)
            .map_err(|e| blockwise_image::rofs::squashfs_failure(si, e))?;
        let warnings: Vec<String> =
            blockwise_image::rofs::dropped_xattrs_warning(si + 1, &w.dropped_xattrs)
                .into_iter()
                .collect();
        let Some(ps) = spec.partitions.get_mut(si) else {
            continue;
        };
        let fs = blockwise_squashfs::plan_of(&ps.squashfs, Some(w.bytes_used), Some(w.inodes));
        ps.prebuilt = Some(blockwise_image::rofs::Prebuilt {
            len: w.padded_bytes,
            fs: Some(FsPlan::Squashfs(fs)),
        });
        made.push(Made {
            si,
            bytes: sink.0,
            warnings,
        });
    }
    Ok(made)
}

/// A [`ContentSource`] that is never read: an [`ImageMap`] keeps references.
pub(crate) struct Unread;

impl ContentSource for Unread {
    fn read_at(&self, content: u64, _offset: u64, _buf: &mut [u8]) -> Result<(), ContentError> {
        Err(ContentError {
            content,
            message: "file contents are read by the page when it composes the image".into(),
        })
    }
}

/// A time in ms → (seconds, nanoseconds), clamped to `clamp` as the CLI's scan does.
#[must_use]
pub fn clamp_time(ms: i64, clamp: Option<i64>) -> (i64, u32) {
    let secs = ms.div_euclid(1000);
    let nsec = u32::try_from(ms.rem_euclid(1000) * 1_000_000).unwrap_or(0);
    match clamp {
        Some(c) if secs > c => (c, 0),
        _ => (secs, nsec),
    }
}

/// Which partition (spec index) an entry goes to, and its path inside it.
fn route<'a>(spec: &Spec, e: &'a FileEntry, key: &str) -> Result<(usize, &'a str), Failure> {
    let path = e.path.trim_start_matches('/');
    if let Some(n) = e.partition {
        if n == 0 || n > spec.partitions.len() {
            return Err(Failure::spec(
                key.replace(".path", ".partition"),
                format!(
                    "{n}: the spec has partitions 1 to {}",
                    spec.partitions.len()
                ),
            ));
        }
        return Ok((n - 1, path));
    }
    let named = spec.partitions.iter().any(|p| p.contents.is_some());
    let found = if named {
        spec.partitions.iter().enumerate().find_map(|(i, p)| {
            let c = p.contents.as_deref()?.trim_matches('/');
            let rest = path.strip_prefix(c)?;
            (rest.is_empty() || rest.starts_with('/')).then(|| (i, rest.trim_start_matches('/')))
        })
    } else {
        spec.partitions
            .iter()
            .position(|p| blockwise_image::takes_tree(p.fs))
            .map(|i| (i, path))
    };
    found.ok_or_else(|| {
        Failure::spec(
            key,
            format!(
                "{:?} belongs to no partition: give it a partition, or a partition with a filesystem and contents = \"{}\"",
                e.path,
                path.split('/').next().unwrap_or_default()
            ),
        )
    })
}

/// The components of a path, refusing `.`/`..`.
fn components<'a>(path: &'a str, key: &str) -> Result<Vec<&'a str>, Failure> {
    let comps: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
    if let Some(bad) = comps.iter().find(|c| **c == "." || **c == "..") {
        return Err(Failure::spec(key, format!("{path:?} contains {bad:?}")));
    }
    Ok(comps)
}

/// The directory at `comps` under the root, created with `meta` where missing.
fn ensure_dir(
    tree: &mut Tree,
    comps: &[&str],
    meta: &Meta,
    path: &str,
    key: &str,
) -> Result<usize, Failure> {
    let mut parent = 0;
    for d in comps {
        parent = match tree.child(parent, d) {
            Some(c) if tree.children(c).is_some() => c,
            Some(_) => return Err(Failure::spec(key, format!("{d} in {path:?} is a file"))),
            None => tree
                .add(
                    parent,
                    d,
                    NodeKind::Dir {
                        children: Vec::new(),
                    },
                    meta.clone(),
                )
                .ok_or_else(|| Failure::spec(key, format!("{d} in {path:?} is not a directory")))?,
        };
    }
    Ok(parent)
}

/// Plans and assembles `spec` with `entries` into an [`ImageMap`] without reading any file:
/// FAT, exFAT and ext4 only need names, sizes and times; squashfs, EROFS (file tails beside
/// their inodes) and dm-verity need the bytes, see [`prepare_with`].
pub fn prepare(spec: &Spec, entries: &[FileEntry]) -> Result<Job, Failure> {
    prepare_with(spec, entries, &Unread)
}

/// [`prepare`], reading file bytes through `content` (content id `i` = entry `i`) where the
/// writers need them: squashfs compresses the files, EROFS packs their tails beside their
/// inodes, dm-verity hashes the partitions it covers. Everything else stays a reference.
pub fn prepare_with(
    spec: &Spec,
    entries: &[FileEntry],
    content: &dyn ContentSource,
) -> Result<Job, Failure> {
    for (i, p) in spec.partitions.iter().enumerate() {
        if p.source.is_some() {
            return Err(Failure::unsupported(format!(
                "partition[{}].source: raw partitions from a file are not built in the page; use `blockwise build`",
                i + 1
            )));
        }
        if !p.files.is_empty() {
            return Err(Failure::unsupported(format!(
                "partition[{}].files: the page fills a partition from the folder you drop, not from files lists; use `blockwise build`",
                i + 1
            )));
        }
    }
    if !spec.raw.is_empty() {
        return Err(Failure::unsupported(
            "raw[1].source: raw writes from a file are not built in the page; use `blockwise build`"
                .to_string(),
        ));
    }
    // The tool backends read a directory on disk; the page has the pure writers only.
    for (i, p) in spec.partitions.iter().enumerate() {
        let tool = match p.fs {
            FsKind::Squashfs if p.squashfs.backend == SquashfsBackend::Mksquashfs => {
                Some(("squashfs.backend", "mksquashfs"))
            }
            FsKind::Erofs if p.erofs.backend == ErofsBackend::MkfsErofs => {
                Some(("erofs.backend", "mkfs.erofs"))
            }
            _ => None,
        };
        if let Some((key, what)) = tool {
            return Err(Failure::unsupported(format!(
                "partition[{}].{key}: {what} is a program the page cannot run; use the native writer (leave the backend out) or `blockwise build`",
                i + 1
            )));
        }
    }
    let ts = timestamp(spec);
    let clamp = spec.image.timestamp.map(|_| ts);
    // Route every entry first: the directory times of a partition depend on its files.
    let mut routed: Vec<(usize, Vec<&str>, usize)> = Vec::with_capacity(entries.len());
    for (i, e) in entries.iter().enumerate() {
        let key = format!("files[{i}].path");
        let (si, inner) = route(spec, e, &key)?;
        let fs = spec.partitions.get(si).map(|p| p.fs);
        if !fs.is_some_and(blockwise_image::takes_tree) {
            return Err(Failure::spec(
                key,
                format!(
                    "{:?} goes to partition {}, which holds no files (not a filesystem that takes a folder)",
                    e.path,
                    si + 1
                ),
            ));
        }
        let comps = components(inner, &key)?;
        if comps.is_empty() && !e.dir {
            return Err(Failure::spec(key, "is empty or a directory"));
        }
        routed.push((si, comps, i));
    }
    // Parents before children, and each directory's entries in byte order, as the scan.
    routed.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    let newest: Vec<Option<(i64, u32)>> = (0..spec.partitions.len())
        .map(|si| {
            routed
                .iter()
                .filter(|(s, _, i)| *s == si && entries.get(*i).is_some_and(|e| !e.dir))
                .filter_map(|(_, _, i)| entries.get(*i)?.mtime_ms)
                .map(|ms| clamp_time(ms, clamp))
                .max()
        })
        .collect();
    let dir_time = |si: usize| -> (i64, u32) {
        match clamp {
            Some(c) => (c, 0),
            None => newest.get(si).copied().flatten().unwrap_or((ts, 0)),
        }
    };
    let mut trees: Vec<Option<Tree>> = spec
        .partitions
        .iter()
        .enumerate()
        .map(|(si, p)| {
            blockwise_image::takes_tree(p.fs).then(|| {
                let (mtime, mtime_nsec) = dir_time(si);
                Tree::new(Meta {
                    mtime_nsec,
                    ..dir_meta(mtime)
                })
            })
        })
        .collect();
    let mut sizes = vec![0u64; entries.len()];
    for (si, comps, i) in &routed {
        let key = format!("files[{i}].path");
        let Some(e) = entries.get(*i) else { continue };
        let Some(Some(tree)) = trees.get_mut(*si) else {
            continue;
        };
        let (dmtime, dnsec) = dir_time(*si);
        let implied = Meta {
            mtime_nsec: dnsec,
            ..dir_meta(dmtime)
        };
        let own = |mode: u32| -> Meta {
            let (mtime, mtime_nsec) = match e.mtime_ms {
                Some(ms) => clamp_time(ms, clamp),
                None if e.dir => (dmtime, dnsec),
                None => (ts, 0),
            };
            Meta {
                mode,
                mtime,
                mtime_nsec,
                ..Meta::default()
            }
        };
        if e.dir {
            let meta = own(0o755);
            match comps.split_last() {
                None => {
                    if let Some(root) = tree.nodes.first_mut() {
                        root.meta = meta;
                    }
                }
                Some((name, parents)) => {
                    let parent = ensure_dir(tree, parents, &implied, &e.path, &key)?;
                    match tree.child(parent, name) {
                        Some(c) if tree.children(c).is_some() => {
                            if let Some(n) = tree.nodes.get_mut(c) {
                                n.meta = meta;
                            }
                        }
                        Some(_) => {
                            return Err(Failure::spec(key, format!("{:?} is given twice", e.path)))
                        }
                        None => {
                            tree.add(
                                parent,
                                name,
                                NodeKind::Dir {
                                    children: Vec::new(),
                                },
                                meta,
                            );
                        }
                    }
                }
            }
            continue;
        }
        let Some((name, parents)) = comps.split_last() else {
            continue;
        };
        let parent = ensure_dir(tree, parents, &implied, &e.path, &key)?;
        let file = NodeKind::File {
            size: e.size,
            content: *i as u64,
            data_ranges: None,
            link: None,
        };
        tree.add(parent, name, file, own(0o644))
            .ok_or_else(|| Failure::spec(&key, format!("{:?} is given twice", e.path)))?;
        if let Some(s) = sizes.get_mut(*i) {
            *s = e.size;
        }
    }
    // Mount points and exclude, as the CLI cuts its scanned trees; then the entries.
    blockwise_image::split_mounts(spec, &mut trees)?;
    for (i, (t, p)) in trees.iter_mut().zip(&spec.partitions).enumerate() {
        if let Some(t) = t {
            apply_entries(t, &p.entries, &format!("partition[{}]", i + 1), ts)?;
        }
    }
    // image.seed as the CLI resolves it (the page builds no raw sources).
    let mut seeded = spec.clone();
    crate::api::resolve_seed(&mut seeded, &trees);
    // squashfs is compressed before the layout, as the CLI does (`make_first`): its size and
    // plan go into the spec, its bytes are placed at each of its partitions' starts.
    let made = make_squashfs(&mut seeded, &trees, content, ts, false)?;
    let spec = &seeded;
    let mut warnings: Vec<String> = made.iter().flat_map(|m| m.warnings.clone()).collect();
    let mut plan = plan_full(spec, &trees, ts)?;
    let fills: Vec<Fill<'_>> = trees
        .iter()
        .zip(&spec.partitions)
        .map(|(t, p)| match t {
            _ if p.fs == FsKind::Squashfs => Fill::External,
            Some(t) => Fill::Tree(t),
            None => Fill::Nothing,
        })
        .collect();
    let mut map = ImageMap::new(plan.size_bytes);
    warnings.extend(assemble(&mut map, spec, &plan, &fills, content, ts)?);
    for m in &made {
        for p in plan.partitions.iter().filter(|p| p.spec_index == m.si) {
            map.write_at(p.start_bytes, &m.bytes).map_err(|e| {
                Failure::internal(format!(
                    "partition[{}]: placing the squashfs image: {e}",
                    m.si + 1
                ))
            })?;
        }
    }
    drop(made);
    // dm-verity trees last: they hash what every partition above holds (the files are read
    // through `content`), as the CLI's `finish_verity`.
    let regions = blockwise_image::verity_data_regions(&plan);
    if !regions.is_empty() {
        let mapped = map.mapped_ranges();
        blockwise_image::fill_unmapped(&mut map, &mapped, &regions)?;
        let vt = blockwise_image::verity_trees(&plan, &map.reader(content))?;
        blockwise_image::write_verity(&mut map, &mut plan, &vt)?;
    }
    let root_hashes = blockwise_image::root_hashes(&plan, spec);
    Ok(Job {
        plan,
        map,
        warnings,
        sizes,
        root_hashes,
    })
}

/// A piece of the image in offset order, holes included.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Part<'a> {
    /// Metadata bytes.
    Bytes(Cow<'a, [u8]>),
    /// `len` bytes of entry `content`'s file from `offset`.
    File {
        /// Content id = entry index.
        content: u64,
        /// Offset in the file.
        offset: u64,
        /// Length.
        len: u64,
    },
    /// This many zero bytes.
    Zeros(u64),
}

impl Part<'_> {
    /// Its length.
    #[must_use]
    pub fn len(&self) -> u64 {
        match *self {
            Part::Bytes(ref b) => b.len() as u64,
            Part::File { len, .. } | Part::Zeros(len) => len,
        }
    }

    /// True for an empty part (never produced).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Job {
    /// The image as parts that cover it exactly, in offset order.
    #[must_use]
    pub fn parts(&self) -> Vec<Part<'_>> {
        let mut out = Vec::new();
        let mut pos = 0u64;
        for piece in self.map.pieces() {
            let off = piece.offset();
            if off > pos {
                out.push(Part::Zeros(off - pos));
            }
            out.push(match piece {
                Piece::Bytes(_, b) => Part::Bytes(Cow::Borrowed(b)),
                // The page's maps are made with `ImageMap::new`: they have no store, so
                // they never spill; read back all the same should one ever do.
                Piece::Spilled(o, len) => {
                    let mut b = vec![0u8; usize::try_from(len).unwrap_or(0)];
                    if self.map.load_spilled(o, &mut b).is_err() {
                        b.clear();
                        b.resize(usize::try_from(len).unwrap_or(0), 0);
                    }
                    Part::Bytes(Cow::Owned(b))
                }
                Piece::Content(_, r) => Part::File {
                    content: r.content,
                    offset: r.offset,
                    len: r.len,
                },
            });
            pos = off.saturating_add(piece.len());
        }
        if self.map.size() > pos {
            out.push(Part::Zeros(self.map.size() - pos));
        }
        out
    }

    /// The image read with the files' bytes from `content` (tests and small in-memory
    /// builds: the page composes a `Blob` instead).
    pub fn read_at(
        &self,
        content: &dyn ContentSource,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<(), Failure> {
        use blockwise_geometry::BlockSource as _;
        self.map
            .reader(content)
            .read_at(offset, buf)
            .map_err(Failure::io)
    }

    /// Image size.
    #[must_use]
    pub fn size(&self) -> u64 {
        self.map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A spec with `files` is refused by name: the page has no host paths to read them from.
    #[test]
    fn files_lists_are_refused_in_the_page() {
        let spec = Spec::from_toml(
            "[image]\nsize = \"64MiB\"\n[[partition]]\nfs = \"fat16\"\nsize = \"16MiB\"\nfiles = [\"u-boot.bin\"]\n",
        )
        .unwrap();
        let Err(e) = prepare(&spec, &[]) else {
            panic!("a files list was accepted")
        };
        assert!(
            e.message.starts_with("partition[1].files: "),
            "{}",
            e.message
        );
    }
}
