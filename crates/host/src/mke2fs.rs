//! The `mke2fs -d` fallback ext4 backend (`ext4.backend = "mke2fs"`).
//!
//! Runs `mke2fs -t ext4 -d DIR` from e2fsprogs (≥ 1.43) into a temporary file of the
//! partition size next to the output, applies the spec's `[[partition.entry]]` overrides
//! with one `debugfs -w -f CMDS` run, then copies the data (holes skipped) into the sink.
//! Geometry, UUID, hash seed, RAID hints and features come from the same [`Ext4Plan`] as
//! the native writer; times are pinned with `E2FSPROGS_FAKE_TIME` and `SOURCE_DATE_EPOCH`,
//! and afterwards every inode's times are set as the native writer sets them (one more
//! debugfs run): mke2fs 1.47 copies atime and ctime from the host and stamps symlinks with
//! its own clock, so a `touch` or a read of a source would change the image otherwise.

use std::fs::{self, File};
use std::io::{Read, Write};

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use blockwise_ext4::Ext4Profile;
use blockwise_geometry::{BlockSink, ContentRef, Ext4Plan, Guid};
use blockwise_image::{EntryKind, EntrySpec};

/// Errors of the mke2fs backend.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Mke2fsError {
    /// A tool of e2fsprogs is not installed.
    #[error("{tool} not found: the mke2fs backend needs e2fsprogs ≥ 1.43 (install the package e2fsprogs, or use backend = \"native\")")]
    Missing {
        /// `mke2fs` or `debugfs`.
        tool: &'static str,
    },
    /// mke2fs is older than 1.43 (no `-d`).
    #[error("mke2fs {found} is too old: the mke2fs backend needs e2fsprogs ≥ 1.43 for -d (upgrade the package e2fsprogs, or use backend = \"native\")")]
    TooOld {
        /// The version found.
        found: String,
    },
    /// A tool ran and failed.
    #[error("{tool} failed ({status}): {stderr}")]
    Failed {
        /// Which tool.
        tool: &'static str,
        /// Exit status.
        status: String,
        /// What it printed on stderr (trimmed).
        stderr: String,
    },
    /// A spec entry the mke2fs backend cannot apply.
    #[error("{path}: {why} with backend = \"mke2fs\" (use backend = \"native\")")]
    Refused {
        /// The entry path.
        path: String,
        /// Why.
        why: &'static str,
    },
    /// The plan lacks a value the backend needs.
    #[error("the ext4 plan has no {what}")]
    Plan {
        /// Which value.
        what: &'static str,
    },
    /// Temporary file I/O failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// Copying into the image failed.
    #[error("writing the mke2fs result into the image at byte {offset} failed: {message}")]
    Sink {
        /// Partition offset.
        offset: u64,
        /// The sink's error.
        message: String,
    },
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> Mke2fsError + '_ {
    move |source| Mke2fsError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// `.blockwise-mke2fs-PID-START-OFFSET.img`: the temp filesystem of one partition.
const TEMP_PREFIX: &str = ".blockwise-mke2fs-";

/// Removes the temporary files when dropped. The mke2fs result stays alive in
/// [`Built`](crate::Built) until the image is written: its data is referenced, not copied.
#[derive(Debug, Default)]
pub(crate) struct TempFiles(pub(crate) Vec<PathBuf>);

impl Drop for TempFiles {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = fs::remove_file(p);
        }
    }
}

/// Parses `mke2fs 1.47.0 (5-Feb-2023)` into `(1, 47)`.
fn parse_version(text: &str) -> Option<(u32, u32, String)> {
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("mke2fs "))?;
    let ver = line
        .trim_start()
        .strip_prefix("mke2fs ")?
        .split_whitespace()
        .next()?;
    let mut it = ver.split('.');
    let major = it.next()?.parse().ok()?;
    let minor = it
        .next()?
        .trim_end_matches(|c: char| !c.is_ascii_digit())
        .parse()
        .ok()?;
    Some((major, minor, ver.to_string()))
}

fn run(tool: &'static str, cmd: &mut Command) -> Result<Output, Mke2fsError> {
    let out = cmd.output().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            Mke2fsError::Missing { tool }
        } else {
            Mke2fsError::Failed {
                tool,
                status: e.to_string(),
                stderr: String::new(),
            }
        }
    })?;
    if !out.status.success() {
        return Err(Mke2fsError::Failed {
            tool,
            status: out.status.to_string(),
            stderr: blockwise_geometry::display_str(String::from_utf8_lossy(&out.stderr).trim()),
        });
    }
    Ok(out)
}

/// Checks that mke2fs exists and is ≥ 1.43.
fn check_version() -> Result<(), Mke2fsError> {
    let out = Command::new("mke2fs").arg("-V").output().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            Mke2fsError::Missing { tool: "mke2fs" }
        } else {
            Mke2fsError::Failed {
                tool: "mke2fs",
                status: e.to_string(),
                stderr: String::new(),
            }
        }
    })?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    match parse_version(&text) {
        Some((maj, min, _)) if (maj, min) >= (1, 43) => Ok(()),
        Some((_, _, found)) => Err(Mke2fsError::TooOld { found }),
        None => Err(Mke2fsError::TooOld {
            found: text.trim().to_string(),
        }),
    }
}

/// The `mke2fs` arguments for this plan (without the device and block count).
fn mke2fs_args(
    req: &blockwise_ext4::Ext4Request,
    plan: &Ext4Plan,
) -> Result<Vec<String>, Mke2fsError> {
    let o = &req.options;
    let uuid = plan
        .uuid
        .clone()
        .ok_or(Mke2fsError::Plan { what: "UUID" })?;
    let hash_seed = Guid::derive(req.seed, "ext4-hash-seed", 0)
        .to_string()
        .to_lowercase();
    let mut features = vec!["none".to_string()];
    features.extend(plan.features.iter().cloned());
    // Pass the user's edits too: mke2fs knows features the native writer does not.
    for f in &o.features {
        let f = f.trim();
        let f = f
            .strip_prefix('-')
            .map_or_else(|| f.to_string(), |r| format!("^{r}"));
        features.push(f.strip_prefix('+').unwrap_or(&f).to_string());
    }
    let mut args = vec![
        "-q".to_string(),
        "-F".into(),
        "-t".into(),
        "ext4".into(),
        "-b".into(),
        plan.block_bytes.to_string(),
        "-I".into(),
        o.inode_size.to_string(),
        "-N".into(),
        plan.inodes.to_string(),
        "-m".into(),
        o.reserved_percent.to_string(),
        "-U".into(),
        uuid,
        "-E".into(),
        format!(
            "stride={},stripe_width={},hash_seed={hash_seed},lazy_itable_init=0,root_owner=0:0",
            plan.stride, plan.stripe_width
        ),
        "-O".into(),
        features.join(","),
    ];
    if let Some(l) = &req.label {
        args.push("-L".into());
        args.push(l.clone());
    }
    if plan.features.iter().any(|f| f == "has_journal") {
        let mut j = Vec::new();
        if let Some(bytes) = o.journal_size {
            j.push(format!("size={}", bytes.div_ceil(1 << 20)));
        }
        // Ask for the journal where the native writer puts it (on the erase block where
        // the filesystem has room); mke2fs takes the next free blocks when those are taken,
        // and the plan reads back where it went (predict_layout).
        let bs = u64::from(plan.block_bytes);
        if let Some(at) = plan
            .journal_start_bytes
            .and_then(|a| a.checked_sub(req.partition_start_bytes))
            .filter(|_| bs != 0)
        {
            j.push(format!("location={}", at / bs));
        }
        if !j.is_empty() {
            args.push("-J".into());
            args.push(j.join(","));
        }
    }
    // The compat profile is expressed by the feature list already.
    let _ = o.profile == Ext4Profile::Compat;
    Ok(args)
}

/// Quotes a path or value for a debugfs command line.
fn dq(s: &str) -> Result<String, Mke2fsError> {
    if s.contains('"') || s.contains('\n') {
        return Err(Mke2fsError::Refused {
            path: s.to_string(),
            why: "names with '\"' or newlines cannot be passed to debugfs",
        });
    }
    Ok(format!("\"{s}\""))
}

/// The file type bits of an existing entry, from the contents directory.
fn type_bits(contents: Option<&Path>, path: &str) -> Option<u32> {
    use std::os::unix::fs::FileTypeExt;
    let md = fs::symlink_metadata(contents?.join(path.trim_start_matches('/'))).ok()?;
    let t = md.file_type();
    Some(if t.is_dir() {
        0o040000
    } else if t.is_symlink() {
        0o120000
    } else if t.is_char_device() {
        0o020000
    } else if t.is_block_device() {
        0o060000
    } else if t.is_fifo() {
        0o010000
    } else if t.is_socket() {
        0o140000
    } else {
        0o100000
    })
}

/// debugfs commands for the spec entries. Value files for xattrs go to `tmp`.
fn entry_commands(
    entries: &[EntrySpec],
    contents: Option<&Path>,
    timestamp: i64,
    work: &Path,
    tag: &str,
    tmp: &mut TempFiles,
) -> Result<String, Mke2fsError> {
    let mut cmds = String::new();
    let mut created_dirs: Vec<String> = Vec::new();
    for (j, e) in entries.iter().enumerate() {
        let p = dq(&e.path)?;
        let exists = contents.is_some_and(|c| {
            c.join(e.path.trim_start_matches('/'))
                .symlink_metadata()
                .is_ok()
        });
        let mut created = false;
        if !exists {
            // Missing parents, as the native tree builder does (root-owned 0755).
            let mut acc = String::new();
            let comps: Vec<&str> = e.path.split('/').filter(|c| !c.is_empty()).collect();
            for comp in comps.iter().take(comps.len().saturating_sub(1)) {
                acc.push('/');
                acc.push_str(comp);
                let on_host =
                    contents.is_some_and(|c| c.join(acc.trim_start_matches('/')).exists());
                if !on_host && !created_dirs.contains(&acc) {
                    let q = dq(&acc)?;
                    cmds.push_str(&format!("mkdir {q}\nsif {q} mode 040755\n"));
                    for f in ["mtime", "atime", "ctime", "crtime"] {
                        cmds.push_str(&format!("sif {q} {f} @{timestamp}\n"));
                    }
                    created_dirs.push(acc.clone());
                }
            }
            created = true;
            // mknod and write link the name into the current directory verbatim.
            let (parent, base) = e.path.rsplit_once('/').unwrap_or(("", e.path.as_str()));
            let parent = if parent.is_empty() { "/" } else { parent };
            let (pq, bq) = (dq(parent)?, dq(base)?);
            let dev = |c: char| -> String {
                format!(
                    "cd {pq}\nmknod {bq} {c} {} {}\ncd /\n",
                    e.major.unwrap_or(0),
                    e.minor.unwrap_or(0)
                )
            };
            match e.kind {
                EntryKind::Existing => {
                    return Err(Mke2fsError::Refused {
                        path: e.path.clone(),
                        why: "the entry is not in contents and has no kind",
                    })
                }
                EntryKind::File => cmds.push_str(&format!("cd {pq}\nwrite /dev/null {bq}\ncd /\n")),
                EntryKind::Dir => {
                    cmds.push_str(&format!("mkdir {p}\n"));
                    created_dirs.push(e.path.clone());
                }
                EntryKind::Symlink => {
                    let t = e.target.clone().unwrap_or_default();
                    cmds.push_str(&format!("symlink {p} {}\n", dq(&t)?));
                }
                EntryKind::Char => cmds.push_str(&dev('c')),
                EntryKind::Block => cmds.push_str(&dev('b')),
                EntryKind::Fifo => cmds.push_str(&format!("cd {pq}\nmknod {bq} p\ncd /\n")),
                EntryKind::Socket => {
                    return Err(Mke2fsError::Refused {
                        path: e.path.clone(),
                        why: "debugfs cannot create sockets",
                    })
                }
            }
        }
        let (ty, default_perm) = match e.kind {
            EntryKind::File => (0o100000, 0o644),
            EntryKind::Dir => (0o040000, 0o755),
            EntryKind::Symlink => (0o120000, 0o777),
            EntryKind::Char => (0o020000, 0o600),
            EntryKind::Block => (0o060000, 0o600),
            EntryKind::Fifo => (0o010000, 0o644),
            EntryKind::Socket => (0o140000, 0o755),
            EntryKind::Existing => (type_bits(contents, &e.path).unwrap_or(0o100000), 0o644),
        };
        let perm = e.mode.or(if created { Some(default_perm) } else { None });
        if let Some(m) = perm {
            cmds.push_str(&format!("sif {p} mode 0{:o}\n", ty | (m & 0o7777)));
        }
        if e.uid.is_some() || created {
            cmds.push_str(&format!("sif {p} uid {}\n", e.uid.unwrap_or(0)));
        }
        if e.gid.is_some() || created {
            cmds.push_str(&format!("sif {p} gid {}\n", e.gid.unwrap_or(0)));
        }
        if created {
            for f in ["mtime", "atime", "ctime", "crtime"] {
                cmds.push_str(&format!("sif {p} {f} @{timestamp}\n"));
            }
        }
        for (k, (name, value)) in e.xattrs.iter().enumerate() {
            let vf = work.join(format!(".blockwise-xattr-{tag}-{j}-{k}"));
            fs::write(&vf, value).map_err(io_err(&vf))?;
            let vfs = vf.to_string_lossy().into_owned();
            tmp.0.push(vf);
            cmds.push_str(&format!("ea_set -f {} {p} {}\n", dq(&vfs)?, dq(name)?));
        }
    }
    Ok(cmds)
}

/// Where mke2fs put the filesystem in the image file `img` (the partition alone), read back
/// with the verifier: the plan's geometry with the journal, the first inode table, the
/// inode count and the features as mke2fs laid them out (absolute offsets for a partition
/// at `req.partition_start_bytes`), and its `aligned` by the planner's rule. `planned`
/// gives the notes.
fn read_layout(
    img: &Path,
    req: &blockwise_ext4::Ext4Request,
    planned: &Ext4Plan,
) -> Result<Ext4Plan, Mke2fsError> {
    use blockwise_geometry::{FsPlan, SectorSize};
    let src = crate::FileSource::open(img).map_err(|e| Mke2fsError::Io {
        path: img.to_path_buf(),
        source: std::io::Error::other(e.to_string()),
    })?;
    let opts = blockwise_verify::Options::new("mke2fs")
        .erase_block(req.erase_block_bytes)
        .sector_size(Some(SectorSize::S512))
        .scan_gaps(false);
    let report = blockwise_verify::verify(&src, &opts).map_err(|e| Mke2fsError::Io {
        path: img.to_path_buf(),
        source: std::io::Error::other(e.to_string()),
    })?;
    let Some(FsPlan::Ext4(mut x)) = report
        .partitions
        .into_iter()
        .next()
        .and_then(|p| p.filesystem)
    else {
        return Err(Mke2fsError::Plan {
            what: "ext4 filesystem in the mke2fs result",
        });
    };
    let start = req.partition_start_bytes;
    x.journal_start_bytes = x.journal_start_bytes.map(|j| j + start);
    x.inode_table_start_bytes = x.inode_table_start_bytes.map(|i| i + start);
    x.aligned = x.alignment_holds(start, req.erase_block_bytes);
    let mut notes: Vec<String> = planned
        .notes
        .iter()
        .filter(|n| !n.starts_with("backend = mke2fs"))
        .cloned()
        .collect();
    notes.insert(
        0,
        format!(
            "backend = mke2fs: geometry, UUID, hash seed, RAID hints, features and the journal's place are passed to mke2fs, which lays out the rest itself; this plan reads back where it put them (journal at {}, first inode table at {}{}).",
            x.journal_start_bytes.map_or_else(|| "-".to_string(), |j| format!("{j} B")),
            x.inode_table_start_bytes.map_or_else(|| "-".to_string(), |i| format!("{i} B")),
            match (x.journal_start_bytes, planned.journal_start_bytes) {
                (Some(got), Some(asked)) if got != asked => format!(
                    "; the journal was asked for at {asked} B, where mke2fs had put metadata"
                ),
                _ => String::new(),
            }
        ),
    );
    x.notes = notes;
    Ok(x)
}

/// The mke2fs backend's plan of one partition: mke2fs run with the build's arguments but
/// without `-d` (the layout does not depend on the files: mke2fs creates the journal before
/// it copies them) and with lazily initialised inode tables, on a sparse scratch file in
/// `dir`, and [`read_layout`] of the result. `plan` and `build` agree because both read
/// what this mke2fs does with these arguments.
pub(crate) fn predict_layout(
    req: &blockwise_ext4::Ext4Request,
    plan: &Ext4Plan,
    dir: &Path,
) -> Result<Ext4Plan, Mke2fsError> {
    check_version()?;
    // Named like the build's temp file (a dry run killed midway is removed by the next
    // run), unique among threads, created new.
    crate::output::remove_stale_in(dir, TEMP_PREFIX, ".img");
    let img = dir.join(format!("{TEMP_PREFIX}{}.img", crate::output::unique_tag()));
    let tmp = TempFiles(vec![img.clone()]);
    {
        let f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&img)
            .map_err(io_err(&img))?;
        f.set_len(req.partition_size_bytes).map_err(io_err(&img))?;
    }
    let ts = req.timestamp.max(0).to_string();
    // Inode tables and the journal left unzeroed (the layout is the same): a dry run of a
    // 64 GiB partition then writes a few MiB of metadata, not 1 GiB of journal into the
    // (often RAM-backed) temp directory.
    let mut args = mke2fs_args(req, plan)?;
    for a in &mut args {
        if a.contains("lazy_itable_init=0") {
            *a = a.replace(
                "lazy_itable_init=0",
                "lazy_itable_init=1,lazy_journal_init=1",
            );
        }
    }
    let mut cmd = Command::new("mke2fs");
    cmd.args(args).arg(&img).arg(plan.blocks.to_string());
    cmd.env("E2FSPROGS_FAKE_TIME", &ts)
        .env("SOURCE_DATE_EPOCH", &ts);
    cmd.env_remove("MKE2FS_SYNC");
    run("mke2fs", &mut cmd)?;
    let x = read_layout(&img, req, plan);
    drop(tmp);
    x
}

/// Runs the debugfs commands in `cmds` on `img` (read-write, clock pinned to `ts`). debugfs
/// reports a failed command on stderr but still exits 0: any such line is an error.
fn run_debugfs(cmds: &Path, img: &Path, ts: &str) -> Result<(), Mke2fsError> {
    let mut d = Command::new("debugfs");
    d.arg("-w").arg("-f").arg(cmds).arg(img);
    d.env("E2FSPROGS_FAKE_TIME", ts)
        .env("SOURCE_DATE_EPOCH", ts);
    let out = run("debugfs", &mut d)?;
    let errors: Vec<&str> = std::str::from_utf8(&out.stderr)
        .unwrap_or("")
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("debugfs "))
        .collect();
    if !errors.is_empty() {
        return Err(Mke2fsError::Failed {
            tool: "debugfs",
            status: "command error".into(),
            stderr: errors.join("; "),
        });
    }
    Ok(())
}

/// Reads `len` bytes at `off` of `f`.
fn read_exact_at(f: &File, path: &Path, off: u64, len: usize) -> Result<Vec<u8>, Mke2fsError> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; len];
    f.read_exact_at(&mut buf, off).map_err(io_err(path))?;
    Ok(buf)
}

/// An inode time as the kernel reads it: the low 32 bits signed, plus the two epoch bits of
/// its `_extra` word.
fn decode_time(lo: u32, extra: u32) -> i64 {
    i64::from(lo as i32) + (i64::from(extra & 3) << 32)
}

/// The debugfs commands that give every inode of the ext4 filesystem in `img` the times the
/// native writer gives it: atime, ctime, mtime and crtime all equal to the mtime, clamped to
/// `clamp` when set (then with 0 nanoseconds). Only inodes that differ get commands; raw
/// `_lo`/`_extra` fields are set, so dates past 2038 and before 1970 come out exact.
fn time_commands(img: &Path, clamp: Option<i64>) -> Result<String, Mke2fsError> {
    use blockwise_ext4::raw::{
        GroupDesc64Raw, GroupFlags, InodeRaw, SuperblockRaw, GOOD_OLD_INODE_SIZE, SUPERBLOCK_OFFSET,
    };
    use zerocopy::FromBytes;
    let corrupt = |what: &'static str| Mke2fsError::Plan { what };
    let f = File::open(img).map_err(io_err(img))?;
    let raw = read_exact_at(&f, img, SUPERBLOCK_OFFSET, 1024)?;
    let (sb, _) = SuperblockRaw::read_from_prefix(&raw).map_err(|_| corrupt("superblock"))?;
    let bs = 1024u64 << sb.s_log_block_size.get().min(6);
    let ipg = u64::from(sb.s_inodes_per_group.get());
    let isz = u64::from(sb.s_inode_size.get()).max(u64::from(GOOD_OLD_INODE_SIZE));
    let inodes = u64::from(sb.s_inodes_count.get());
    if ipg == 0 || inodes == 0 {
        return Err(corrupt("inode count"));
    }
    let groups = inodes.div_ceil(ipg);
    let desc = if sb.s_feature_incompat.get() & 0x80 != 0 {
        u64::from(sb.s_desc_size.get()).clamp(32, 1024)
    } else {
        32
    };
    let gdt = (u64::from(sb.s_first_data_block.get()) + 1) * bs;
    // mke2fs's own output, but read as bytes all the same: sizes bounded by the file.
    let file_len = f.metadata().map_err(io_err(img))?.len();
    let table_len = groups.saturating_mul(desc);
    if table_len > file_len || ipg > bs.saturating_mul(8) {
        return Err(corrupt("group descriptor table"));
    }
    let table = read_exact_at(&f, img, gdt, usize::try_from(table_len).unwrap_or(0))?;
    let mut cmds = String::new();
    for g in 0..groups {
        let at = usize::try_from(g * desc).unwrap_or(usize::MAX);
        let mut d = [0u8; 64];
        let n = usize::try_from(desc.min(64)).unwrap_or(32);
        d[..n].copy_from_slice(table.get(at..at + n).ok_or(corrupt("group descriptors"))?);
        let (gd, _) =
            GroupDesc64Raw::read_from_prefix(&d).map_err(|_| corrupt("group descriptor"))?;
        if GroupFlags::from_bits_retain(gd.base.bg_flags.get()).contains(GroupFlags::INODE_UNINIT) {
            continue;
        }
        let bitmap = read_exact_at(
            &f,
            img,
            gd.inode_bitmap() * bs,
            usize::try_from(ipg.div_ceil(8)).unwrap_or(0),
        )?;
        for slot in 0..ipg {
            let used = bitmap
                .get(usize::try_from(slot / 8).unwrap_or(usize::MAX))
                .is_some_and(|b| b & (1 << (slot % 8)) != 0);
            if !used {
                continue;
            }
            let ino = g * ipg + slot + 1;
            let rec = read_exact_at(
                &f,
                img,
                gd.inode_table() * bs + slot * isz,
                usize::try_from(isz.min(160)).unwrap_or(128),
            )?;
            let mut full = [0u8; 160];
            full[..rec.len()].copy_from_slice(&rec);
            let (i, _) = InodeRaw::read_from_prefix(&full).map_err(|_| corrupt("inode"))?;
            if i.i_mode.get() == 0 && i.i_links_count.get() == 0 {
                continue;
            }
            // The extra words exist when the record has room for them (i_extra_isize).
            let extra_isize = if isz > u64::from(GOOD_OLD_INODE_SIZE) {
                u64::from(i.i_extra_isize.get())
            } else {
                0
            };
            let has_extra = extra_isize >= 16;
            let mtime_extra = if has_extra { i.i_mtime_extra.get() } else { 0 };
            let mtime = decode_time(i.i_mtime.get(), mtime_extra);
            let (t, extra) = match clamp {
                Some(c) if mtime > c => {
                    let epoch = u32::try_from((c - i64::from(c as i32)) >> 32).unwrap_or(0) & 3;
                    (c, epoch)
                }
                _ => (mtime, mtime_extra),
            };
            let lo = t as u32;
            let mut want: Vec<(&str, u32, u32)> = vec![
                ("atime_lo", i.i_atime.get(), lo),
                ("ctime_lo", i.i_ctime.get(), lo),
                ("mtime_lo", i.i_mtime.get(), lo),
            ];
            if has_extra {
                want.extend([
                    ("atime_extra", i.i_atime_extra.get(), extra),
                    ("ctime_extra", i.i_ctime_extra.get(), extra),
                    ("mtime_extra", i.i_mtime_extra.get(), extra),
                ]);
            }
            if extra_isize >= 20 {
                want.push(("crtime_lo", i.i_crtime.get(), lo));
            }
            if extra_isize >= 24 {
                want.push(("crtime_extra", i.i_crtime_extra.get(), extra));
            }
            for (field, have, value) in want {
                if have != value {
                    cmds.push_str(&format!("sif <{ino}> {field} {value}\n"));
                }
            }
        }
    }
    Ok(cmds)
}

/// Builds the partition with `mke2fs -d` in a temp file under `work_dir` and places its
/// non-zero 4 KiB runs in `sink` as references into that file (registered in `content`), so
/// memory stays with the metadata, as in the native writer. The returned guard owns the temp
/// file: keep it until the image has been written. With it comes the geometry mke2fs laid
/// out ([`read_layout`]): the built image's plan.
#[expect(
    clippy::too_many_arguments,
    reason = "the partition's request and plan, its inputs, where to work and the time clamp: one call site"
)]
pub(crate) fn write_with_mke2fs<S: BlockSink + ?Sized>(
    sink: &mut S,
    content: &mut crate::HostContent,
    req: &blockwise_ext4::Ext4Request,
    plan: &Ext4Plan,
    contents_dir: Option<&Path>,
    entries: &[EntrySpec],
    work_dir: &Path,
    clamp: Option<i64>,
) -> Result<(TempFiles, Ext4Plan), Mke2fsError> {
    check_version()?;
    // A build killed while this temp file existed (kill -9, a second Ctrl-C) left it: its
    // name carries the owner's PID and start time, so the next build here removes it. The
    // thread id and a counter make it unique among builds of this process (Python threads),
    // and it is created new (O_EXCL).
    crate::output::remove_stale_in(work_dir, TEMP_PREFIX, ".img");
    let tag = crate::output::unique_tag();
    let img = work_dir.join(format!("{TEMP_PREFIX}{tag}.img"));
    let mut tmp = TempFiles(Vec::new());
    {
        let f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&img)
            .map_err(io_err(&img))?;
        tmp.0.push(img.clone());
        f.set_len(req.partition_size_bytes).map_err(io_err(&img))?;
    }
    let ts = req.timestamp.max(0).to_string();
    let mut cmd = Command::new("mke2fs");
    cmd.args(mke2fs_args(req, plan)?);
    if let Some(d) = contents_dir {
        cmd.arg("-d").arg(d);
    }
    cmd.arg(&img).arg(plan.blocks.to_string());
    cmd.env("E2FSPROGS_FAKE_TIME", &ts)
        .env("SOURCE_DATE_EPOCH", &ts);
    cmd.env_remove("MKE2FS_SYNC");
    run("mke2fs", &mut cmd)?;

    if !entries.is_empty() {
        let cmds = entry_commands(
            entries,
            contents_dir,
            req.timestamp,
            work_dir,
            &tag,
            &mut tmp,
        )?;
        let cf = work_dir.join(format!(".blockwise-debugfs-{tag}.cmds"));
        fs::write(&cf, &cmds).map_err(io_err(&cf))?;
        tmp.0.push(cf.clone());
        run_debugfs(&cf, &img, &ts)?;
    }

    // Every time of every inode, as the native writer sets them: mke2fs -d copies atime and
    // ctime from the host (a read or a chmod changes them) and stamps symlinks, root and
    // lost+found with its own clock.
    let cmds = time_commands(&img, clamp)?;
    if !cmds.is_empty() {
        let cf = work_dir.join(format!(".blockwise-debugfs-times-{tag}.cmds"));
        fs::write(&cf, &cmds).map_err(io_err(&cf))?;
        tmp.0.push(cf.clone());
        run_debugfs(&cf, &img, &ts)?;
    }

    // Reference the result's non-zero 4 KiB runs (all-zero blocks stay holes), reading it
    // once in 1 MiB chunks to find them.
    let mut f = File::open(&img).map_err(io_err(&img))?;
    let md = f.metadata().map_err(io_err(&img))?;
    let id = content.add(img.clone(), &md);
    let mut place = |start: u64, end: u64| -> Result<(), Mke2fsError> {
        let r = ContentRef {
            content: id,
            offset: start,
            len: end - start,
        };
        sink.write_content(start, r, &*content)
            .map_err(|e| Mke2fsError::Sink {
                offset: start,
                message: e.to_string(),
            })
    };
    let mut buf = vec![0u8; 1 << 20];
    let mut off = 0u64;
    let mut run: Option<u64> = None;
    loop {
        let mut filled = 0;
        while filled < buf.len() {
            let n = f.read(&mut buf[filled..]).map_err(io_err(&img))?;
            if n == 0 {
                break;
            }
            filled += n;
        }
        if filled == 0 {
            break;
        }
        for (k, chunk) in buf[..filled].chunks(4096).enumerate() {
            let at = off + (k as u64) * 4096;
            match (chunk.iter().any(|&b| b != 0), run) {
                (true, None) => run = Some(at),
                (false, Some(start)) => {
                    place(start, at)?;
                    run = None;
                }
                _ => {}
            }
        }
        off += filled as u64;
    }
    if let Some(start) = run {
        place(start, off)?;
    }
    let layout = read_layout(&img, req, plan)?;
    // The command files go now; the image file lives on in the returned guard.
    let keep = TempFiles(vec![img]);
    tmp.0.retain(|p| !keep.0.contains(p));
    drop(tmp);
    let _ = std::io::stderr().flush();
    Ok((keep, layout))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(
            parse_version("mke2fs 1.47.0 (5-Feb-2023)\n\tUsing EXT2FS Library version 1.47.0")
                .map(|v| (v.0, v.1)),
            Some((1, 47))
        );
        assert_eq!(
            parse_version("mke2fs 1.42.9 (28-Dec-2013)").map(|v| (v.0, v.1)),
            Some((1, 42))
        );
        assert!(parse_version("bash: mke2fs: not found").is_none());
    }

    #[test]
    fn refuses_sockets_and_quotes() {
        let e = EntrySpec {
            path: "/run/sock".into(),
            kind: EntryKind::Socket,
            ..EntrySpec::default()
        };
        let mut tmp = TempFiles(Vec::new());
        let err =
            entry_commands(&[e], None, 0, Path::new("/nonexistent"), "t", &mut tmp).unwrap_err();
        assert!(err.to_string().contains("sockets"), "{err}");
        let e = EntrySpec {
            path: "/dev/console".into(),
            kind: EntryKind::Char,
            major: Some(5),
            minor: Some(1),
            mode: Some(0o600),
            ..EntrySpec::default()
        };
        let c = entry_commands(&[e], None, 7, Path::new("/nonexistent"), "t", &mut tmp).unwrap();
        assert!(c.contains("cd \"/dev\"\nmknod \"console\" c 5 1"), "{c}");
        assert!(c.contains("sif \"/dev/console\" mode 020600"), "{c}");
        assert!(c.contains("mkdir \"/dev\""), "{c}");
    }
}
