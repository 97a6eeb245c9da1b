//! The host side of building: spec files, content directories, raw sources, output files.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::{self, File};
use std::io::Write as _;
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use blockwise_geometry::{
    ContentError, ContentSource, EntryKind, EntrySpec, Ext4Backend, FsKind, Meta, NodeId, NodeKind,
    Plan, SizeSpec, SparseImage, Spec, SpecError, Tree,
};

use crate::assemble::{assemble, ext4_request, plan_full, Fill, RawReader};
use crate::Error;

/// Most directory levels followed below a `contents` directory.
const MAX_DEPTH: usize = 256;

/// A spec read from a file, with the directory its relative paths are resolved against.
#[derive(Clone, Debug)]
pub struct SpecFile {
    /// The parsed spec.
    pub spec: Spec,
    /// Directory of the spec file.
    pub base_dir: PathBuf,
}

impl SpecFile {
    /// Reads and validates a TOML spec file.
    pub fn load(path: &Path) -> Result<Self, Error> {
        let text = fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        let spec = Spec::from_toml(&text)?;
        let base_dir = path
            .parent()
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        let base_dir = if base_dir.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            base_dir
        };
        Ok(SpecFile { spec, base_dir })
    }

    /// A spec built in code, with relative paths resolved against `base_dir`.
    #[must_use]
    pub fn new(spec: Spec, base_dir: PathBuf) -> Self {
        SpecFile { spec, base_dir }
    }

    fn resolve(&self, rel: &str) -> PathBuf {
        self.base_dir.join(rel)
    }
}

/// The file-creation time: spec `timestamp`, else `SOURCE_DATE_EPOCH`, else 0.
#[must_use]
pub fn resolve_timestamp(spec: &Spec) -> i64 {
    spec.image
        .timestamp
        .and_then(|t| i64::try_from(t).ok())
        .or_else(|| {
            std::env::var("SOURCE_DATE_EPOCH")
                .ok()
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// File contents read on demand from host files.
#[derive(Debug, Default)]
pub struct HostContent {
    paths: Vec<PathBuf>,
    open: RefCell<Option<(u64, File)>>,
}

impl HostContent {
    fn add(&mut self, p: PathBuf) -> u64 {
        self.paths.push(p);
        self.paths.len() as u64 - 1
    }
}

impl ContentSource for HostContent {
    fn read_at(&self, content: u64, offset: u64, buf: &mut [u8]) -> Result<(), ContentError> {
        let path = usize::try_from(content)
            .ok()
            .and_then(|i| self.paths.get(i))
            .ok_or(ContentError {
                content,
                message: "no such content".into(),
            })?;
        let err = |e: std::io::Error| ContentError {
            content,
            message: format!("{}: {e}", path.display()),
        };
        let mut open = self.open.borrow_mut();
        if open.as_ref().is_none_or(|(c, _)| *c != content) {
            *open = Some((content, File::open(path).map_err(err)?));
        }
        let (_, f) = open.as_ref().ok_or(ContentError {
            content,
            message: "not open".into(),
        })?;
        f.read_exact_at(buf, offset).map_err(err)
    }
}

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

fn split_dev(rdev: u64) -> (u32, u32) {
    let major = ((rdev >> 8) & 0xfff) | ((rdev >> 32) & !0xfff);
    let minor = (rdev & 0xff) | ((rdev >> 12) & !0xff);
    (
        u32::try_from(major).unwrap_or(0),
        u32::try_from(minor).unwrap_or(0),
    )
}

/// Data ranges of a file that may be sparse: only when it has fewer allocated blocks than its
/// size, 4 KiB blocks of zeros are treated as holes.
fn data_ranges(path: &Path, md: &fs::Metadata) -> Result<Option<Vec<(u64, u64)>>, Error> {
    let size = md.len();
    if size == 0 || md.blocks().saturating_mul(512) >= size {
        return Ok(None);
    }
    let f = File::open(path).map_err(|e| Error::io(path, e))?;
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut off = 0u64;
    while off < size {
        let n = usize::try_from((size - off).min(buf.len() as u64)).unwrap_or(0);
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
    Ok(Some(ranges))
}

/// Builds a [`Tree`] from a host directory. Symlinks are stored as symlinks (not followed);
/// device nodes, fifos and sockets are kept; hard links share a link id; file times are
/// clamped to `clamp` when given (reproducible builds). Names must be UTF-8.
pub fn tree_from_dir(
    dir: &Path,
    clamp: Option<i64>,
    content: &mut HostContent,
) -> Result<Tree, Error> {
    let md = fs::metadata(dir).map_err(|e| Error::io(dir, e))?;
    if !md.is_dir() {
        return Err(Error::io(dir, std::io::Error::other("not a directory")));
    }
    let mut tree = Tree::new(meta_of(&md, clamp));
    let mut links: HashMap<(u64, u64), u64> = HashMap::new();
    let mut stack: Vec<(PathBuf, NodeId, usize)> = vec![(dir.to_path_buf(), 0, 0)];
    while let Some((path, node, depth)) = stack.pop() {
        if depth > MAX_DEPTH {
            return Err(Error::io(
                &path,
                std::io::Error::other("directory nesting deeper than 256 levels"),
            ));
        }
        let mut entries: Vec<_> = fs::read_dir(&path)
            .map_err(|e| Error::io(&path, e))?
            .collect::<Result<_, _>>()
            .map_err(|e| Error::io(&path, e))?;
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let p = e.path();
            let name = e.file_name().into_string().map_err(|_| {
                Error::io(
                    &p,
                    std::io::Error::other("the file name is not valid UTF-8"),
                )
            })?;
            let md = fs::symlink_metadata(&p).map_err(|err| Error::io(&p, err))?;
            let ft = md.file_type();
            let meta = meta_of(&md, clamp);
            let kind = if ft.is_dir() {
                NodeKind::Dir {
                    children: Vec::new(),
                }
            } else if ft.is_file() {
                let link = (md.nlink() > 1).then(|| {
                    let n = links.len() as u64;
                    *links.entry((md.dev(), md.ino())).or_insert(n)
                });
                let ranges = data_ranges(&p, &md)?;
                NodeKind::File {
                    size: md.len(),
                    content: content.add(p.clone()),
                    data_ranges: ranges,
                    link,
                }
            } else if ft.is_symlink() {
                let t = fs::read_link(&p).map_err(|err| Error::io(&p, err))?;
                let target = t.into_os_string().into_string().map_err(|_| {
                    Error::io(
                        &p,
                        std::io::Error::other("the symlink target is not valid UTF-8"),
                    )
                })?;
                NodeKind::Symlink { target }
            } else if ft.is_char_device() || ft.is_block_device() {
                let (major, minor) = split_dev(md.rdev());
                if ft.is_char_device() {
                    NodeKind::CharDev { major, minor }
                } else {
                    NodeKind::BlockDev { major, minor }
                }
            } else if ft.is_fifo() {
                NodeKind::Fifo
            } else {
                NodeKind::Socket
            };
            let is_dir = matches!(kind, NodeKind::Dir { .. });
            let id = tree
                .add(node, &name, kind, meta)
                .ok_or_else(|| Error::io(&p, std::io::Error::other("duplicate name")))?;
            if is_dir {
                stack.push((p, id, depth + 1));
            }
        }
    }
    Ok(tree)
}

/// Applies `[[partition.entry]]` overrides and creates the special files they declare.
pub fn apply_entries(
    tree: &mut Tree,
    entries: &[EntrySpec],
    key: &str,
    timestamp: i64,
) -> Result<(), Error> {
    for (j, en) in entries.iter().enumerate() {
        let ek = |k: &str| format!("{key}.entry[{}].{k}", j + 1);
        let existing = tree.lookup(&en.path);
        let id = match (existing, en.kind) {
            (Some(id), _) => {
                if let Some(node) = tree.nodes.get(id) {
                    let same = matches!(
                        (en.kind, &node.kind),
                        (EntryKind::Existing, _)
                            | (EntryKind::File, NodeKind::File { .. })
                            | (EntryKind::Dir, NodeKind::Dir { .. })
                    );
                    if !same {
                        return Err(SpecError::new(
                            ek("kind"),
                            format!(
                                "{} already exists in contents as a different kind of file",
                                en.path
                            ),
                        )
                        .into());
                    }
                }
                id
            }
            (None, EntryKind::Existing) => {
                return Err(SpecError::new(
                    ek("path"),
                    format!(
                        "{} is not in contents; give kind = \"file\", \"dir\", … to create it",
                        en.path
                    ),
                )
                .into())
            }
            (None, kind) => {
                let (parent_path, name) =
                    en.path.rsplit_once('/').unwrap_or(("", en.path.as_str()));
                // Create missing parent directories (root-owned, 0755).
                let mut parent = 0;
                for comp in parent_path.split('/').filter(|c| !c.is_empty()) {
                    parent = match tree.child(parent, comp) {
                        Some(c) => c,
                        None => tree
                            .add(
                                parent,
                                comp,
                                NodeKind::Dir {
                                    children: Vec::new(),
                                },
                                Meta {
                                    mode: 0o755,
                                    mtime: timestamp,
                                    ..Meta::default()
                                },
                            )
                            .ok_or_else(|| {
                                SpecError::new(
                                    ek("path"),
                                    format!("{comp} in {} is not a directory", en.path),
                                )
                            })?,
                    };
                }
                let (node_kind, mode) = match kind {
                    EntryKind::File => (
                        NodeKind::File {
                            size: 0,
                            content: u64::MAX,
                            data_ranges: None,
                            link: None,
                        },
                        0o644,
                    ),
                    EntryKind::Dir => (
                        NodeKind::Dir {
                            children: Vec::new(),
                        },
                        0o755,
                    ),
                    EntryKind::Symlink => (
                        NodeKind::Symlink {
                            target: en.target.clone().unwrap_or_default(),
                        },
                        0o777,
                    ),
                    EntryKind::Char => (
                        NodeKind::CharDev {
                            major: en.major.unwrap_or(0),
                            minor: en.minor.unwrap_or(0),
                        },
                        0o600,
                    ),
                    EntryKind::Block => (
                        NodeKind::BlockDev {
                            major: en.major.unwrap_or(0),
                            minor: en.minor.unwrap_or(0),
                        },
                        0o600,
                    ),
                    EntryKind::Fifo => (NodeKind::Fifo, 0o644),
                    EntryKind::Socket | EntryKind::Existing => (NodeKind::Socket, 0o755),
                };
                tree.add(
                    parent,
                    name,
                    node_kind,
                    Meta {
                        mode,
                        mtime: timestamp,
                        ..Meta::default()
                    },
                )
                .ok_or_else(|| {
                    SpecError::new(
                        ek("path"),
                        format!("the parent of {} is not a directory", en.path),
                    )
                })?
            }
        };
        if let Some(node) = tree.nodes.get_mut(id) {
            if let Some(m) = en.mode {
                node.meta.mode = m;
            }
            if let Some(u) = en.uid {
                node.meta.uid = u;
            }
            if let Some(g) = en.gid {
                node.meta.gid = g;
            }
            for (name, value) in &en.xattrs {
                node.meta.xattrs.retain(|(n, _)| n != name);
                node.meta.xattrs.push((name.clone(), value.clone()));
            }
            node.meta.xattrs.sort();
        }
    }
    Ok(())
}

/// Result of [`build`].
#[derive(Debug)]
pub struct Built {
    /// The plan the image follows (with filesystem geometry).
    pub plan: Plan,
    /// The image.
    pub image: SparseImage,
    /// Things the writers skipped or worried about.
    pub warnings: Vec<String>,
}

/// Fills in sizes of raw partitions without one (the length of `source`) and checks that
/// every `contents` and `source` exists.
pub fn resolve_inputs(sf: &mut SpecFile) -> Result<(), Error> {
    let base = sf.base_dir.clone();
    for (i, p) in sf.spec.partitions.iter_mut().enumerate() {
        let key = |k: &str| format!("partition[{}].{k}", i + 1);
        if let Some(src) = &p.source {
            let path = base.join(src);
            let md = fs::metadata(&path).map_err(|e| {
                SpecError::new(
                    key("source"),
                    format!("{src:?} cannot be read ({}): {e}", path.display()),
                )
            })?;
            if !md.is_file() {
                return Err(SpecError::new(
                    key("source"),
                    format!("{src:?} is not a regular file"),
                )
                .into());
            }
            if p.size == SizeSpec::Source {
                p.size = SizeSpec::Bytes(md.len().max(1));
            }
        }
        if let Some(c) = &p.contents {
            let path = base.join(c);
            if !path.is_dir() {
                return Err(SpecError::new(
                    key("contents"),
                    format!("{c:?} is not a directory ({})", path.display()),
                )
                .into());
            }
        }
    }
    Ok(())
}

/// Reads every FAT/ext4 partition's `contents` (plus its `[[partition.entry]]` overrides)
/// into a [`Tree`], in spec order (`None` for other partitions).
fn load_trees(sf: &SpecFile, timestamp: i64) -> Result<(Vec<Option<Tree>>, HostContent), Error> {
    let spec = &sf.spec;
    let clamp = spec.image.timestamp.is_some() || std::env::var_os("SOURCE_DATE_EPOCH").is_some();
    let clamp = clamp.then_some(timestamp);
    let mut content = HostContent::default();
    let mut trees: Vec<Option<Tree>> = Vec::new();
    for (i, p) in spec.partitions.iter().enumerate() {
        let wants_tree = p.fs.is_fat() || p.fs == FsKind::Ext4;
        if !wants_tree {
            trees.push(None);
            continue;
        }
        let mut tree = match &p.contents {
            Some(c) => tree_from_dir(&sf.resolve(c), clamp, &mut content)?,
            None => Tree::new(Meta {
                mode: 0o755,
                mtime: timestamp,
                ..Meta::default()
            }),
        };
        if p.contents.is_none() {
            tree.nodes.iter_mut().for_each(|n| n.meta.mtime = timestamp);
        }
        apply_entries(
            &mut tree,
            &p.entries,
            &format!("partition[{}]", i + 1),
            timestamp,
        )?;
        trees.push(Some(tree));
    }
    Ok((trees, content))
}

/// Plans a spec file: layout and filesystem geometry. Contents are scanned (metadata, and
/// sparse files for their holes)
/// so that the plan is the one `build` will follow, e.g. the ext4 inode count.
pub fn plan_file(sf: &mut SpecFile) -> Result<Plan, Error> {
    resolve_inputs(sf)?;
    let timestamp = resolve_timestamp(&sf.spec);
    let (trees, _) = load_trees(sf, timestamp)?;
    plan_full(&sf.spec, &trees, timestamp)
}

/// Builds the image of a spec file in memory. `work_dir` holds temporary files of the
/// mke2fs backend (use the output file's directory).
pub fn build(sf: &mut SpecFile, work_dir: &Path) -> Result<Built, Error> {
    resolve_inputs(sf)?;
    let spec = &sf.spec;
    let timestamp = resolve_timestamp(spec);
    let (trees, content) = load_trees(sf, timestamp)?;
    let plan = plan_full(spec, &trees, timestamp)?;
    let mut raw_files: Vec<Option<File>> = Vec::new();
    for p in &spec.partitions {
        raw_files.push(match &p.source {
            Some(s) => {
                let path = sf.resolve(s);
                Some(File::open(&path).map_err(|e| Error::io(path, e))?)
            }
            None => None,
        });
    }
    let mut readers: Vec<Box<RawReader<'static>>> = raw_files
        .into_iter()
        .map(|f| -> Box<RawReader<'static>> {
            match f {
                Some(f) => Box::new(move |off, buf: &mut [u8]| {
                    f.read_at(buf, off).map_err(|e| e.to_string())
                }),
                None => Box::new(|_, _: &mut [u8]| Ok(0)),
            }
        })
        .collect();
    let mut fills: Vec<Fill<'_>> = Vec::new();
    for ((p, tree), reader) in spec.partitions.iter().zip(&trees).zip(readers.iter_mut()) {
        fills.push(match (p.fs, tree) {
            (FsKind::Raw, _) => Fill::Raw(reader.as_mut()),
            (FsKind::Ext4, _) if p.ext4.backend == Ext4Backend::Mke2fs => Fill::External,
            (_, Some(t)) => Fill::Tree(t),
            _ => Fill::Nothing,
        });
    }
    let (mut image, warnings) = assemble(spec, &plan, &mut fills, &content, timestamp)?;
    // The mke2fs fallback writes its partitions through a real file.
    for (i, part) in plan.partitions.iter().enumerate() {
        let Some(ps) = spec.partitions.get(part.spec_index) else {
            continue;
        };
        if ps.fs != FsKind::Ext4 || ps.ext4.backend != Ext4Backend::Mke2fs {
            continue;
        }
        let Some(blockwise_geometry::FsPlan::Ext4(xp)) = &part.filesystem else {
            continue;
        };
        let req = ext4_request(spec, &plan, i, timestamp).ok_or_else(|| Error::Partition {
            index: part.spec_index + 1,
            message: "missing request".into(),
        })?;
        let mut sub =
            blockwise_geometry::SubSink::new(&mut image, part.start_bytes, part.size_bytes)
                .map_err(|e| Error::Partition {
                    index: part.spec_index + 1,
                    message: e.to_string(),
                })?;
        let dir = ps.contents.as_ref().map(|c| sf.resolve(c));
        crate::mke2fs::write_with_mke2fs(&mut sub, &req, xp, dir.as_deref(), &ps.entries, work_dir)
            .map_err(|e| Error::Partition {
                index: part.spec_index + 1,
                message: e.to_string(),
            })?;
    }
    Ok(Built {
        plan,
        image,
        warnings,
    })
}

/// Writes `img` to `path` atomically: a temp file next to it (holes kept), fsync, rename.
/// On any error the temp file is removed and `path` is untouched.
pub fn write_image_file(img: &SparseImage, path: &Path) -> Result<(), Error> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "image".into());
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| -> Result<(), Error> {
        let f = File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
        f.set_len(img.size()).map_err(|e| Error::io(&tmp, e))?;
        for (off, data) in img.extents() {
            f.write_all_at(data, off).map_err(|e| Error::io(&tmp, e))?;
        }
        f.sync_all().map_err(|e| Error::io(&tmp, e))?;
        fs::rename(&tmp, path).map_err(|e| Error::io(path, e))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Writes a bmaptool-compatible block map (format 2.0, SHA-256, 4 KiB blocks) of `img`:
/// every range that was written (data or explicit zeros) is mapped. Atomic like the image.
pub fn write_bmap(img: &SparseImage, path: &Path) -> Result<(), Error> {
    use blockwise_geometry::BlockSource;
    use sha2::{Digest, Sha256};
    const BS: u64 = 4096;
    let size = img.size();
    let blocks = size.div_ceil(BS);
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    for (s, e) in img.mapped_ranges() {
        let (b0, b1) = (s / BS, e.div_ceil(BS).saturating_sub(1));
        match ranges.last_mut() {
            Some(last) if b0 <= last.1 + 1 => last.1 = last.1.max(b1),
            _ => ranges.push((b0, b1)),
        }
    }
    let mut body = String::new();
    let mut mapped = 0u64;
    let mut buf = vec![0u8; 1 << 20];
    for (b0, b1) in &ranges {
        mapped += b1 - b0 + 1;
        let mut h = Sha256::new();
        let start = b0 * BS;
        let end = ((b1 + 1) * BS).min(size);
        let mut off = start;
        while off < end {
            let n = usize::try_from((end - off).min(buf.len() as u64)).unwrap_or(0);
            let chunk = buf.get_mut(..n).unwrap_or_default();
            img.read_at(off, chunk)
                .map_err(|e| Error::io(path, std::io::Error::other(e.to_string())))?;
            h.update(&*chunk);
            off += n as u64;
        }
        let r = if b0 == b1 {
            format!("{b0}")
        } else {
            format!("{b0}-{b1}")
        };
        body.push_str(&format!(
            "        <Range chksum=\"{:x}\"> {r} </Range>\n",
            h.finalize()
        ));
    }
    let zeros = "0".repeat(64);
    let text = format!(
        "<?xml version=\"1.0\" ?>\n<!-- written by blockwise -->\n<bmap version=\"2.0\">\n    <ImageSize> {size} </ImageSize>\n    <BlockSize> {BS} </BlockSize>\n    <BlocksCount> {blocks} </BlocksCount>\n    <MappedBlocksCount> {mapped} </MappedBlocksCount>\n    <ChecksumType> sha256 </ChecksumType>\n    <BmapFileChecksum> {zeros} </BmapFileChecksum>\n    <BlockMap>\n{body}    </BlockMap>\n</bmap>\n"
    );
    let digest = format!("{:x}", Sha256::digest(text.as_bytes()));
    let text = text.replacen(&zeros, &digest, 1);
    let tmp = path.with_extension("bmap.tmp");
    let result = (|| -> Result<(), Error> {
        let mut f = File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
        f.write_all(text.as_bytes())
            .map_err(|e| Error::io(&tmp, e))?;
        f.sync_all().map_err(|e| Error::io(&tmp, e))?;
        fs::rename(&tmp, path).map_err(|e| Error::io(path, e))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}
