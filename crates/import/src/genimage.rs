//! genimage configs: the `hdimage` image (MBR, GPT or none) with its partitions, the
//! partition images it names (files from the input path, or `ext4`/`vfat` images defined in
//! the same config), and `config { gpt-shortcuts … }`.
//!
//! Placement follows genimage 16's rules (`image-hd.c`): the table's end, then each
//! partition at its `offset` or the next multiple of its `align` (the image's `align`, default
//! one sector), an EBR's `align` before each logical partition, sizes rounded up to `align`
//! when taken from the image file. Those positions are compared with blockwise's plan.

use crate::confuse::{self, Files, Loc, Node, Value};
use crate::emit::{self, tsize, tstr, Entry, Out, Placed};
use crate::{size_text, Diag, Host, ImportError, Imported, Options};
use blockwise_geometry::display_str;

const GPT_ARRAY: u64 = 32 * 512;

/// Imports a genimage config.
pub fn import(
    name: &str,
    text: &str,
    host: &dyn Host,
    options: &Options,
) -> Result<Imported, ImportError> {
    let mut files = Files::default();
    let nodes = confuse::parse(name, text, host, &mut files)?;
    let mut cx = Cx {
        files,
        errs: Vec::new(),
        shortcuts: Vec::new(),
    };
    let mut images: Vec<(&str, Loc, &[Node])> = Vec::new();
    let mut input_path = options.input_path.clone();
    let mut root_path = options.root_path.clone();
    for n in &nodes {
        match (n.key.as_str(), &n.value) {
            ("image", Value::Section { title, body }) => {
                let Some(t) = title else {
                    cx.err(
                        n.loc,
                        Some("image"),
                        "needs a name (image NAME { … })".into(),
                    );
                    continue;
                };
                images.push((t.as_str(), n.loc, body.as_slice()));
            }
            ("config", Value::Section { body, .. }) => {
                for c in body {
                    match (c.key.as_str(), &c.value) {
                        ("gpt-shortcuts", Value::Section { body, .. }) => {
                            for s in body {
                                if let Value::Scalar(v) = &s.value {
                                    cx.shortcuts.push((s.key.clone(), v.clone()));
                                }
                            }
                        }
                        ("inputpath", Value::Scalar(v)) if input_path.is_none() => {
                            input_path = Some(v.clone());
                        }
                        ("rootpath", Value::Scalar(v)) if root_path.is_none() => {
                            root_path = Some(v.clone());
                        }
                        // Output paths, tool commands, log levels: nothing for a spec.
                        _ => {}
                    }
                }
            }
            ("flash", Value::Section { .. }) => {}
            (k, _) => cx.err(
                n.loc,
                Some(k),
                "is not a top-level genimage option (image, flash, config, include)".into(),
            ),
        }
    }
    let input = input_path.unwrap_or_else(|| "input".into());
    let root = root_path.unwrap_or_else(|| "root".into());
    let top = cx.files.names.first().cloned().unwrap_or_default();
    let hd: Vec<_> = images
        .iter()
        .filter(|(_, _, b)| b.iter().any(|n| n.key == "hdimage"))
        .collect();
    let chosen = match &options.image {
        Some(want) => images.iter().find(|(t, _, _)| t == want).ok_or_else(|| {
            let names: Vec<String> = images
                .iter()
                .map(|(t, _, _)| format!("{:?}", display_str(t)))
                .collect();
            Diag {
                at: top.clone(),
                option: Some("image".into()),
                message: format!(
                    "has no image {:?}; it defines {}",
                    display_str(want),
                    if names.is_empty() {
                        "none".into()
                    } else {
                        names.join(", ")
                    }
                ),
            }
        })?,
        None => match hd.as_slice() {
            [one] => *one,
            [] => match images.as_slice() {
                [one] => one,
                _ => {
                    return Err(Diag {
                        at: top.clone(),
                        option: None,
                        message: if images.is_empty() {
                            "defines no image".into()
                        } else {
                            format!(
                                "defines no hdimage and {} images; choose one with --image NAME",
                                images.len()
                            )
                        },
                    }
                    .into())
                }
            },
            many => {
                let names: Vec<String> = many
                    .iter()
                    .map(|(t, _, _)| format!("{:?}", display_str(t)))
                    .collect();
                return Err(Diag {
                    at: top.clone(),
                    option: None,
                    message: format!(
                        "defines {} disk images ({}); choose one with --image NAME",
                        many.len(),
                        names.join(", ")
                    ),
                }
                .into());
            }
        },
    };
    let (title, loc, body) = *chosen;
    let ctx = Ctx {
        images: &images,
        input: &input,
        root: &root,
        host,
    };
    let out = if body.iter().any(|n| n.key == "hdimage") {
        cx.hdimage(title, loc, body, &ctx)
    } else {
        cx.bare(title, loc, body, &ctx)
    };
    if !cx.errs.is_empty() {
        return Err(ImportError { diags: cx.errs });
    }
    let mut out = out;
    out.header.insert(
        0,
        format!("blockwise spec imported from genimage config {top} (image {title:?})"),
    );
    out.header.insert(
        1,
        format!("partition images are read from {input}/ and contents from {root}/, relative to this file"),
    );
    emit::finish(out, host, &top)
}

struct Ctx<'a> {
    images: &'a [(&'a str, Loc, &'a [Node])],
    input: &'a str,
    root: &'a str,
    host: &'a dyn Host,
}

struct Cx {
    files: Files,
    errs: Vec<Diag>,
    shortcuts: Vec<(String, String)>,
}

/// A partition as the config gives it.
#[derive(Default)]
struct Part<'a> {
    name: &'a str,
    loc: Loc,
    offset: Option<u64>,
    size: Option<u64>,
    align: Option<u64>,
    mbr_type: Option<u8>,
    gpt_type: Option<(String, Loc)>,
    uuid: Option<String>,
    bootable: bool,
    attributes: Vec<&'static str>,
    image: Option<&'a str>,
    autoresize: bool,
    in_table: bool,
    forced_primary: Option<Loc>,
    imageoffset: u64,
}

fn scalar(n: &Node) -> Option<&str> {
    match &n.value {
        Value::Scalar(s) => Some(s),
        _ => None,
    }
}

/// For a config whose partitions have explicit offsets: the largest power of two from
/// 4 KiB to 4 MiB that divides every in-table partition's explicit offset and size; `None`
/// when there is no explicit offset or they are not even on 4 KiB.
fn explicit_grain(parts: &[Part<'_>]) -> Option<u64> {
    let tabled = || parts.iter().filter(|p| p.in_table);
    if !tabled().any(|p| p.offset.is_some_and(|o| o > 0)) {
        return None;
    }
    let grain = tabled()
        .flat_map(|p| [p.offset.filter(|&o| o > 0), p.size.filter(|&s| s > 0)])
        .flatten()
        .map(|v| 1u64 << v.trailing_zeros().min(22))
        .min()?;
    (grain >= 4096).then_some(grain)
}

/// genimage's `strtoul_suffix`: a C integer (`0x…` hex, `0…` octal) then `k`/`K`, `M`, `G`
/// (binary) or `s` (512-byte sectors); with `percent`, a trailing `%` is returned as such.
pub fn parse_size(s: &str, percent: bool) -> Result<(u64, bool), String> {
    let t = s.trim();
    let (digits, radix, rest) =
        if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
            let end = h.find(|c: char| !c.is_ascii_hexdigit()).unwrap_or(h.len());
            let (d, r) = h.split_at(end);
            (d, 16, r)
        } else if t.starts_with('0')
            && t.len() > 1
            && t.as_bytes().get(1).is_some_and(u8::is_ascii_digit)
        {
            let end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
            let (d, r) = t.split_at(end);
            (d, 8, r)
        } else {
            let end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
            let (d, r) = t.split_at(end);
            (d, 10, r)
        };
    if digits.is_empty() {
        return Err(format!(
            "{:?} is not a size (a number with k, M, G or s)",
            display_str(s)
        ));
    }
    let v = u64::from_str_radix(digits, radix).map_err(|_| {
        format!(
            "{:?} is not a size (a number with k, M, G or s)",
            display_str(s)
        )
    })?;
    let (mul, pct) = match rest {
        "" => (1u64, false),
        "k" | "K" => (1 << 10, false),
        "M" => (1 << 20, false),
        "G" => (1 << 30, false),
        "s" => (512, false),
        "%" if percent => (1, true),
        _ => {
            return Err(format!(
                "{:?}: {:?} is not a size suffix genimage knows (k, K, M, G, s)",
                display_str(s),
                display_str(rest)
            ))
        }
    };
    let v = v
        .checked_mul(mul)
        .ok_or_else(|| format!("{:?} is too large", display_str(s)))?;
    Ok((v, pct))
}

/// libconfuse's booleans.
fn parse_bool(s: &str) -> Option<bool> {
    match s.to_ascii_lowercase().as_str() {
        "true" | "yes" | "on" | "1" => Some(true),
        "false" | "no" | "off" | "0" => Some(false),
        _ => None,
    }
}

/// libconfuse's integers (`strtol` base 0).
fn parse_int(s: &str) -> Option<i64> {
    let t = s.trim();
    let (neg, t) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let v = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        i64::from_str_radix(h, 16).ok()?
    } else if t.len() > 1 && t.starts_with('0') {
        i64::from_str_radix(t.get(1..)?, 8).ok()?
    } else {
        t.parse::<i64>().ok()?
    };
    if neg {
        v.checked_neg()
    } else {
        Some(v)
    }
}

fn is_uuid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| {
            if matches!(i, 8 | 13 | 18 | 23) {
                *c == b'-'
            } else {
                c.is_ascii_hexdigit()
            }
        })
}

/// genimage's GPT type shortcuts (the common ones; the Discoverable Partitions names are
/// passed through to blockwise, which knows them by the same spelling where it does).
const SHORTCUTS: &[(&str, &str)] = &[
    ("L", "0fc63daf-8483-4772-8e79-3d69d8477de4"),
    ("linux", "0fc63daf-8483-4772-8e79-3d69d8477de4"),
    ("linux-generic", "0fc63daf-8483-4772-8e79-3d69d8477de4"),
    ("S", "0657fd6d-a4ab-43c4-84e5-0933c84b4f4f"),
    ("swap", "0657fd6d-a4ab-43c4-84e5-0933c84b4f4f"),
    ("H", "933ac7e1-2eb4-4f13-b844-0e14e2aef915"),
    ("home", "933ac7e1-2eb4-4f13-b844-0e14e2aef915"),
    ("U", "c12a7328-f81f-11d2-ba4b-00a0c93ec93b"),
    ("uefi", "c12a7328-f81f-11d2-ba4b-00a0c93ec93b"),
    ("esp", "c12a7328-f81f-11d2-ba4b-00a0c93ec93b"),
    ("R", "a19d880f-05fc-4d3b-a006-743f0f84911e"),
    ("raid", "a19d880f-05fc-4d3b-a006-743f0f84911e"),
    ("V", "e6d6d379-f507-44c2-a23c-238f2a3df928"),
    ("lvm", "e6d6d379-f507-44c2-a23c-238f2a3df928"),
    ("F", "ebd0a0a2-b9e5-4433-87c0-68b6b72699c7"),
    ("fat32", "ebd0a0a2-b9e5-4433-87c0-68b6b72699c7"),
    ("barebox-state", "4778ed65-bf42-45fa-9c5b-287a1dc4aab1"),
    ("barebox-env", "6c3737f2-07f8-45d1-ad45-15d260aab24d"),
    ("linux-reserved", "8da63339-0007-60c0-c436-083ac8230908"),
    ("u-boot-env", "3de21764-95bd-54bd-a5c3-4abe786f38a8"),
    ("xbootldr", "bc13c2ff-59e6-4262-a352-b275fd6f7172"),
    ("srv", "3b8f8425-20e0-4f3b-907f-1a25a76f98e8"),
    ("var", "4d21b016-b534-45c2-a9fb-5c16e091fd2d"),
    ("tmp", "7ec6f557-3bc5-4aca-b293-16ef5df639d1"),
    ("user-home", "773f91ef-66d4-49b5-bd83-d683bf40ad16"),
    ("root-arm", "69dad710-2ce4-4e3c-b16c-21a1d49abed3"),
    ("root-arm64", "b921b045-1df0-41c3-af44-4c6f280d3fae"),
    ("root-x86", "44479540-f297-41b2-9af7-d131d5f0458a"),
    ("root-x86-64", "4f68bce3-e8cd-4db1-96e7-fbcaf984b709"),
    ("root-riscv64", "72ec70a6-cf74-40e6-bd49-4bda08e8f224"),
    ("usr-arm", "7d0359a3-02b3-4f0a-865c-654403e70625"),
    ("usr-arm64", "b0e01050-ee5f-4390-949a-9101b17104e9"),
    ("usr-x86-64", "8484680c-9521-48c6-9c11-b0720656f69e"),
    ("usr-riscv64", "beaec34b-8442-439b-a40b-984381ed097d"),
    ("root-arm64-verity", "df3300ce-d69f-4c92-978c-9bfb0f38d820"),
    ("root-x86-64-verity", "2c7357ed-ebd2-46d9-aec1-23d437ec2bf5"),
    (
        "usr-loongarch64-verity-sig",
        "b024f315-d330-444c-8461-44bbde524e99",
    ),
];

fn round_up(v: u64, a: u64) -> Option<u64> {
    if a <= 1 {
        return Some(v);
    }
    let r = v.checked_rem(a)?;
    if r == 0 {
        Some(v)
    } else {
        v.checked_add(a.checked_sub(r)?)
    }
}

/// `YYYYMMDDhhmmss` (genimage's `fs-timestamp`, UTC) as seconds since 1970.
fn parse_timestamp(s: &str) -> Option<i64> {
    if s.len() != 14 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n = |a: usize, b: usize| s.get(a..b).and_then(|x| x.parse::<i64>().ok());
    let (y, m, d) = (n(0, 4)?, n(4, 6)?, n(6, 8)?);
    let (hh, mm, ss) = (n(8, 10)?, n(10, 12)?, n(12, 14)?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    // Days from civil (Howard Hinnant's algorithm), all in i64 with checked steps.
    let y = if m <= 2 { y.checked_sub(1)? } else { y };
    let era = y.checked_div(400)?;
    let yoe = y.checked_sub(era.checked_mul(400)?)?;
    let mp = if m > 2 {
        m.checked_sub(3)?
    } else {
        m.checked_add(9)?
    };
    let doy = mp
        .checked_mul(153)?
        .checked_add(2)?
        .checked_div(5)?
        .checked_add(d)?
        .checked_sub(1)?;
    let doe = yoe
        .checked_mul(365)?
        .checked_add(yoe.checked_div(4)?)?
        .checked_sub(yoe.checked_div(100)?)?
        .checked_add(doy)?;
    let days = era
        .checked_mul(146_097)?
        .checked_add(doe)?
        .checked_sub(719_468)?;
    days.checked_mul(86_400)?
        .checked_add(hh.checked_mul(3600)?)?
        .checked_add(mm.checked_mul(60)?)?
        .checked_add(ss)
}

impl Cx {
    fn err(&mut self, loc: Loc, option: Option<&str>, message: String) {
        self.errs.push(Diag::at(&self.files, loc, option, message));
    }

    fn at(&self, loc: Loc) -> String {
        self.files.at(loc)
    }

    fn size_of(&mut self, n: &Node) -> Option<u64> {
        let s = scalar(n)?;
        match parse_size(s, false) {
            Ok((v, _)) => Some(v),
            Err(m) => {
                self.err(n.loc, Some(&n.key), m);
                None
            }
        }
    }

    fn bool_of(&mut self, n: &Node) -> bool {
        let Some(s) = scalar(n) else {
            self.err(n.loc, Some(&n.key), "takes true or false".into());
            return false;
        };
        parse_bool(s).unwrap_or_else(|| {
            self.err(
                n.loc,
                Some(&n.key),
                format!("{:?} is not true or false", display_str(s)),
            );
            false
        })
    }

    fn shortcut(&self, s: &str) -> Option<String> {
        if is_uuid(s) {
            return Some(s.to_ascii_lowercase());
        }
        self.shortcuts
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(s))
            .map(|(_, v)| v.to_ascii_lowercase())
            .or_else(|| {
                SHORTCUTS
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(s))
                    .map(|(_, v)| (*v).to_string())
            })
    }

    /// A filesystem image defined in the config, as partition keys (fs, size, label, contents).
    fn fs_image(
        &mut self,
        e: &mut Entry,
        at: Loc,
        body: &[Node],
        ctx: &Ctx<'_>,
        out: &mut Out,
    ) -> Option<u64> {
        let mut size = None;
        let mut contents: Option<String> = None;
        let mut mountpoint: Option<String> = None;
        let mut empty = false;
        let mut fs: Option<(&str, &Node)> = None;
        for n in body {
            match n.key.as_str() {
                "size" => {
                    if let Some(s) = scalar(n) {
                        match parse_size(s, true) {
                            Ok((_, true)) => self.err(
                                n.loc,
                                Some("size"),
                                "a size in percent of the contents: genimage's rule, which blockwise does not reproduce (its size = \"auto+N%\" leaves N% of the contents free after the filesystem's own overhead); give the size, or write size = \"auto+N%\" in the spec".into(),
                            ),
                            Ok((v, false)) => size = Some(v),
                            Err(m) => self.err(n.loc, Some("size"), m),
                        }
                    }
                }
                "srcpath" => contents = scalar(n).map(str::to_string),
                "mountpoint" => mountpoint = scalar(n).map(str::to_string),
                "empty" => empty = self.bool_of(n),
                "name" | "temporary" => {}
                "exec-pre" | "exec-post" => self.err(
                    n.loc,
                    Some(&n.key),
                    "blockwise runs no commands while building; run it before `blockwise build`"
                        .into(),
                ),
                "ext4" | "ext2" | "ext3" | "vfat" | "squashfs" | "erofs" | "f2fs" | "btrfs"
                | "cpio" | "cramfs" | "custom" | "file" | "fip" | "fit" | "flash" | "iso"
                | "jffs2" | "qemu" | "rauc" | "tar" | "ubi" | "ubifs" | "verity" | "mdraid"
                | "android-sparse" => fs = Some((n.key.as_str(), n)),
                k => self.err(
                    n.loc,
                    Some(k),
                    "is not an image option genimage knows".into(),
                ),
            }
        }
        let Some((kind, node)) = fs else {
            self.err(
                at,
                Some("image"),
                "the image it names has no type section".into(),
            );
            return None;
        };
        let Value::Section { body: opts, .. } = &node.value else {
            self.err(node.loc, Some(kind), "must be a section".into());
            return None;
        };
        match kind {
            "ext4" | "ext2" | "ext3" => e.key("fs", tstr(kind)),
            "vfat" => e.key("fs", tstr("fat")),
            other => {
                self.err(
                    node.loc,
                    Some(other),
                    format!("blockwise does not build {other} images: build it with genimage and name the file, which becomes fs = \"raw\""),
                );
                return None;
            }
        }
        let mut features: Option<String> = None;
        // `files` items of a vfat image (genimage's `files` and `file NAME { image }`).
        let mut files: Vec<String> = Vec::new();
        // `partition.ext4` keys from `features` and mke2fs `extraargs`.
        let mut ext4: Vec<(String, String)> = Vec::new();
        let is_ext = matches!(kind, "ext2" | "ext3" | "ext4");
        for o in opts {
            let v = scalar(o).unwrap_or_default();
            let kind = if is_ext { "ext4" } else { kind };
            match (kind, o.key.as_str()) {
                (_, "label") => e.key("label", tstr(v)),
                ("ext4", "fs-timestamp") => match parse_timestamp(v) {
                    Some(t) => {
                        if !out.image.iter().any(|(k, _)| k == "timestamp") {
                            out.image.push(("timestamp".into(), t.to_string()));
                        }
                    }
                    None => self.err(o.loc, Some("fs-timestamp"), format!("{:?} is not YYYYMMDDhhmmss", display_str(v))),
                },
                ("ext4", "use-mke2fs") => {
                    if parse_bool(v) == Some(true) {
                        e.note(format!("{}: use-mke2fs: blockwise writes ext4 itself (ext4.backend = \"mke2fs\" runs mke2fs -d instead)", self.at(o.loc)));
                    }
                }
                ("ext4", "features") => features = Some(v.to_string()),
                (_, "extraargs") if v.trim().is_empty() => {}
                ("vfat", "extraargs") => self.vfat_args(o.loc, v, e),
                ("ext4", "extraargs") => self.mke2fs_args(o.loc, v, e, &mut ext4, &mut features),
                (_, "extraargs") => self.err(
                    o.loc,
                    Some("extraargs"),
                    format!("blockwise runs no mkfs, so {:?} cannot be passed on; say it with the partition's {} keys", display_str(v), if kind == "vfat" { "fat" } else { "ext4" }),
                ),
                ("ext4", "mke2fs-conf") => self.err(o.loc, Some("mke2fs-conf"), "blockwise reads no mke2fs.conf; say it with ext4.* keys".into()),
                ("vfat", "files") => match &o.value {
                    Value::List(items) => {
                        for it in items {
                            self.vfat_file(o.loc, "files", it, None, ctx, &mut files);
                        }
                    }
                    Value::Scalar(it) => self.vfat_file(o.loc, "files", it, None, ctx, &mut files),
                    Value::Section { .. } => self.err(o.loc, Some("files"), "must be a list like {\"a\", \"b\"}".into()),
                },
                ("vfat", "file") => match &o.value {
                    Value::Section { title: Some(name), body } => {
                        let image = body.iter().find(|n| n.key == "image").and_then(scalar);
                        for n in body.iter().filter(|n| n.key != "image") {
                            self.err(n.loc, Some(&n.key), "is not a vfat file option genimage knows (only image)".into());
                        }
                        match image {
                            Some(img) => self.vfat_file(o.loc, "file", img, Some(name), ctx, &mut files),
                            None => self.err(o.loc, Some("file"), format!("file {:?} names no image", display_str(name))),
                        }
                    }
                    _ => self.err(o.loc, Some("file"), "must be a section like file NAME { image = \"…\" }".into()),
                },
                (_, k) => self.err(o.loc, Some(k), format!("is not a {kind} option blockwise can express")),
            }
        }
        if let Some(f) = features {
            let list: Vec<String> = f
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(tstr)
                .collect();
            ext4.push(("features".into(), format!("[{}]", list.join(", "))));
        }
        // genimage runs mke2fs, whose mke2fs.conf makes 1 KiB blocks under 512 MiB ("small",
        // "floppy"); blockwise's default is 4 KiB.
        if is_ext
            && size.is_some_and(|s| s < 512 << 20)
            && !ext4.iter().any(|(k, _)| k == "block-size")
        {
            ext4.insert(0, ("block-size".into(), "1024".into()));
        }
        if !ext4.is_empty() {
            let kv: Vec<String> = ext4.iter().map(|(k, v)| format!("{k} = {v}")).collect();
            e.key("ext4", format!("{{ {} }}", kv.join(", ")));
        }
        if !files.is_empty() {
            e.key("files", format!("[{}]", files.join(", ")));
            e.note(format!("{}: genimage copies only the listed files into this vfat (no root path), as this spec does", self.at(node.loc)));
        }
        // genimage fills a vfat with `files` from them alone, without the root path.
        if !empty && files.is_empty() {
            let dir = match (contents, mountpoint) {
                (Some(c), _) => c,
                (None, Some(m)) => format!("{}/{}", ctx.root, m.trim_start_matches('/')),
                (None, None) => ctx.root.to_string(),
            };
            e.key("contents", tstr(&dir));
        }
        if size.is_none() {
            self.err(
                at,
                Some("size"),
                "the filesystem image has no size: give one (or write size = \"auto\" in the spec: blockwise then sizes it from its contents)"
                    .into(),
            );
        }
        size
    }

    /// One vfat `files` item or `file NAME { image = … }`: a file or directory of the input
    /// path, as a `files` entry (at the root under its own name, or at `/NAME`). An image
    /// the config builds is refused: blockwise builds partitions, not files inside them.
    fn vfat_file(
        &mut self,
        loc: Loc,
        key: &str,
        image: &str,
        name: Option<&str>,
        ctx: &Ctx<'_>,
        files: &mut Vec<String>,
    ) {
        if ctx.images.iter().any(|(t, _, _)| *t == image) {
            self.err(
                loc,
                Some(key),
                format!("{:?} is an image this config builds; blockwise builds filesystems as partitions, not as files inside another one: build it first and name the file", display_str(image)),
            );
            return;
        }
        let path = format!("{}/{}", ctx.input, image.trim_start_matches('/'));
        if ctx.host.file_size(&path).is_none() && ctx.host.dir_usage_kib(&path, true).is_none() {
            self.err(
                loc,
                Some(key),
                format!(
                    "{:?} does not exist (give the directory with --inputpath)",
                    display_str(&path)
                ),
            );
            return;
        }
        files.push(match name {
            Some(n) => format!(
                "{{ source = {}, dest = {} }}",
                tstr(&path),
                tstr(&format!("/{}", n.trim_start_matches('/')))
            ),
            None => tstr(&path),
        });
    }

    /// mkfs.vfat arguments blockwise has keys for: `-n LABEL`, `-F 12|16|32`; anything
    /// else is an error naming it.
    fn vfat_args(&mut self, loc: Loc, args: &str, e: &mut Entry) {
        let words = match crate::wic::split(args) {
            Ok(w) => w,
            Err(m) => {
                self.err(loc, Some("extraargs"), m);
                return;
            }
        };
        let mut it = words.iter();
        while let Some(w) = it.next() {
            match w.as_str() {
                "-n" => match it.next() {
                    Some(l) => e.key("label", tstr(l)),
                    None => self.err(loc, Some("extraargs"), "-n needs a label".into()),
                },
                "-F" => match it.next().map(String::as_str) {
                    Some(b @ ("12" | "16" | "32")) => {
                        if let Some(k) = e.keys.iter_mut().find(|(k, _)| k == "fs") {
                            k.1 = tstr(&format!("fat{b}"));
                        }
                    }
                    other => self.err(loc, Some("extraargs"), format!("-F {:?}: not 12, 16 or 32", display_str(other.unwrap_or_default()))),
                },
                other => self.err(
                    loc,
                    Some("extraargs"),
                    format!("blockwise runs no mkfs.vfat, so {:?} cannot be passed on; say it with the partition's fat keys (only -n and -F are translated)", display_str(other)),
                ),
            }
        }
    }

    /// mke2fs arguments blockwise has keys for: `-i` (inode-ratio), `-N` (inodes), `-I`
    /// (inode-size), `-b` (block-size), `-m` (reserved-percent), `-L` (label), `-U`
    /// (fs-uuid), `-O` (features, added to `features`); anything else is an error naming it.
    fn mke2fs_args(
        &mut self,
        loc: Loc,
        args: &str,
        e: &mut Entry,
        ext4: &mut Vec<(String, String)>,
        features: &mut Option<String>,
    ) {
        let words = match crate::wic::split(args) {
            Ok(w) => w,
            Err(m) => {
                self.err(loc, Some("extraargs"), m);
                return;
            }
        };
        let mut it = words.iter();
        while let Some(w) = it.next() {
            // `-i 8192` or `-i8192`.
            let (flag, inline) = match (w.get(..2), w.get(2..)) {
                (Some(f), Some(rest)) if f.starts_with('-') && !rest.is_empty() && f != "--" => {
                    (f, Some(rest.to_string()))
                }
                _ => (w.as_str(), None),
            };
            let key = match flag {
                "-i" => "inode-ratio",
                "-N" => "inodes",
                "-I" => "inode-size",
                "-b" => "block-size",
                "-m" => "reserved-percent",
                "-L" => "label",
                "-U" => "fs-uuid",
                "-O" => "features",
                other => {
                    self.err(
                        loc,
                        Some("extraargs"),
                        format!("blockwise runs no mke2fs, so {:?} cannot be passed on; say it with the partition's ext4 keys (-i, -N, -I, -b, -m, -L, -U and -O are translated)", display_str(other)),
                    );
                    continue;
                }
            };
            let Some(val) = inline.or_else(|| it.next().cloned()) else {
                self.err(loc, Some("extraargs"), format!("{flag} needs a value"));
                continue;
            };
            match key {
                "label" | "fs-uuid" => e.key(key, tstr(&val)),
                "features" => {
                    *features = Some(match features.take() {
                        Some(f) => format!("{f},{val}"),
                        None => val,
                    });
                }
                _ => match val.parse::<u64>() {
                    Ok(n) => ext4.push((key.to_string(), n.to_string())),
                    Err(_) => self.err(
                        loc,
                        Some("extraargs"),
                        format!("{flag} {:?}: not a number", display_str(&val)),
                    ),
                },
            }
        }
    }

    /// A config without a table: the image itself is the filesystem (`table = "none"`).
    fn bare(&mut self, title: &str, loc: Loc, body: &[Node], ctx: &Ctx<'_>) -> Out {
        let mut out = Out {
            tool: "genimage",
            ..Out::default()
        };
        out.image.push(("table".into(), tstr("none")));
        let mut e = Entry {
            name: title.to_string(),
            at: self.at(loc),
            ..Entry::default()
        };
        if let Some(size) = self.fs_image(&mut e, loc, body, ctx, &mut out) {
            out.image.push(("size".into(), tsize(size)));
            e.key("size", tstr("fill"));
        }
        out.partitions.push(e);
        out
    }

    #[allow(clippy::too_many_lines)]
    fn hdimage(&mut self, title: &str, loc: Loc, body: &[Node], ctx: &Ctx<'_>) -> Out {
        let mut out = Out {
            tool: "genimage",
            ..Out::default()
        };
        let _ = title;
        let mut image_size: Option<u64> = None;
        let mut parts: Vec<Part<'_>> = Vec::new();
        let mut hd: &[Node] = &[];
        let mut hd_loc = loc;
        for n in body {
            match n.key.as_str() {
                "hdimage" => {
                    if let Value::Section { body, .. } = &n.value {
                        hd = body;
                        hd_loc = n.loc;
                    }
                }
                "size" => {
                    if let Some(s) = scalar(n) {
                        match parse_size(s, true) {
                            Ok((_, true)) => self.err(
                                n.loc,
                                Some("size"),
                                "a disk image cannot be sized in percent".into(),
                            ),
                            Ok((v, false)) => image_size = Some(v),
                            Err(m) => self.err(n.loc, Some("size"), m),
                        }
                    }
                }
                "partition" => {
                    let Value::Section { title, body } = &n.value else {
                        self.err(n.loc, Some("partition"), "must be a section".into());
                        continue;
                    };
                    let p = self.partition(title.as_deref().unwrap_or(""), n.loc, body);
                    parts.push(p);
                }
                "name" | "temporary" | "mountpoint" | "srcpath" | "empty" => {}
                "exec-pre" | "exec-post" => self.err(
                    n.loc,
                    Some(&n.key),
                    "blockwise runs no commands while building; run it before `blockwise build`"
                        .into(),
                ),
                "flashtype" => self.err(
                    n.loc,
                    Some("flashtype"),
                    "blockwise builds disk images, not raw flash images".into(),
                ),
                k => self.err(
                    n.loc,
                    Some(k),
                    "is not an image option genimage knows".into(),
                ),
            }
        }
        // The hdimage section.
        let mut table = "mbr".to_string();
        let mut align: Option<u64> = None;
        let mut disk_sig: Option<(String, Loc)> = None;
        let mut disk_uuid: Option<(String, Loc)> = None;
        let mut ext_index: Option<(i64, Loc)> = None;
        let mut fill = false;
        for n in hd {
            let v = scalar(n).unwrap_or_default();
            match n.key.as_str() {
                "partition-table-type" => table = v.to_ascii_lowercase(),
                "partition-table" => {
                    table = if self.bool_of(n) {
                        "mbr".into()
                    } else {
                        "none".into()
                    };
                }
                "gpt" => {
                    table = if self.bool_of(n) {
                        "gpt".into()
                    } else {
                        "mbr".into()
                    }
                }
                "align" => align = self.size_of(n),
                "disk-signature" => disk_sig = Some((v.to_string(), n.loc)),
                "disk-uuid" => disk_uuid = Some((v.to_string(), n.loc)),
                "extended-partition" => match parse_int(v) {
                    Some(i) => ext_index = Some((i, n.loc)),
                    None => self.err(
                        n.loc,
                        Some("extended-partition"),
                        format!("{:?} is not a number", display_str(v)),
                    ),
                },
                "gpt-location" => {
                    if let Some(l) = self.size_of(n) {
                        if l != 1024 {
                            self.err(n.loc, Some("gpt-location"), format!("blockwise keeps the GPT entries at LBA 2 (1 KiB), right after the header; it cannot move them to {}", size_text(l)));
                        }
                    }
                }
                "gpt-no-backup" => {
                    if self.bool_of(n) {
                        out.image_notes.push(format!(
                            "{}: gpt-no-backup: blockwise always writes the backup GPT at the end of the disk (the UEFI specification requires it); the partition table is the same",
                            self.at(n.loc)
                        ));
                    }
                }
                "fill" => fill = self.bool_of(n),
                k => self.err(
                    n.loc,
                    Some(k),
                    "is not an hdimage option genimage knows".into(),
                ),
            }
        }
        let kind = match table.as_str() {
            "mbr" | "dos" => "mbr",
            "gpt" => "gpt",
            "none" => "none",
            // GPT, and the partitions with a partition-type get mbr-type (below).
            "hybrid" => "gpt",
            other => {
                self.err(
                    hd_loc,
                    Some("partition-table-type"),
                    format!(
                        "{:?} is not mbr, dos, gpt, hybrid or none",
                        display_str(other)
                    ),
                );
                "mbr"
            }
        };
        let hybrid = table == "hybrid";
        let hd_align = align
            .filter(|a| *a != 0)
            .unwrap_or(if kind == "none" { 1 } else { 512 });
        if kind != "none" && hd_align % 512 != 0 {
            self.err(
                hd_loc,
                Some("align"),
                format!("{hd_align} is not a multiple of 512 bytes (genimage refuses it too)"),
            );
        }
        out.image.push(("table".into(), tstr(kind)));
        if hd_align.is_power_of_two() && (4096..=(256 << 20)).contains(&hd_align) {
            out.image.push(("erase-block".into(), tsize(hd_align)));
        } else if let Some(e) = explicit_grain(&parts) {
            // Explicit offsets at blockwise's 4 MiB would overlap once sizes round up: the
            // coarsest power of two every explicit offset and size sits on keeps them.
            out.image.push(("erase-block".into(), tsize(e)));
            out.image_notes.push(format!(
                "{}: genimage aligns partitions to {}; that is no erase block blockwise accepts (a power of two from 4 KiB to 256 MiB), so the erase block is {}, the coarsest boundary every explicit offset and size of the config sits on",
                self.at(hd_loc),
                size_text(hd_align),
                size_text(e)
            ));
        } else {
            out.image_notes.push(format!(
                "{}: genimage aligns partitions to {}; that is no erase block blockwise accepts (a power of two from 4 KiB to 256 MiB), so blockwise aligns to its default 4 MiB",
                self.at(hd_loc),
                size_text(hd_align)
            ));
        }
        if let Some(s) = image_size {
            out.image.push(("size".into(), tsize(s)));
        }
        if !fill {
            out.image_notes.push(format!(
                "{}: fill = false: genimage ends the file after the last data; blockwise's image always has its full size (holes where nothing is written)",
                self.at(hd_loc)
            ));
        }
        match disk_sig {
            Some((s, l)) if hybrid && s != "random" && parse_int(&s) != Some(0) => {
                self.err(
                    l,
                    Some("disk-signature"),
                    "blockwise writes disk signature 0 in a hybrid MBR (genimage's default); another one cannot be expressed".into(),
                );
            }
            Some(_) if hybrid => {}
            Some((s, l)) if kind != "mbr" && s != "random" => {
                self.err(
                    l,
                    Some("disk-signature"),
                    "is only valid for mbr and hybrid partition-table-type".into(),
                );
            }
            Some((s, l)) if s == "random" => out.image_notes.push(format!(
                "{}: disk-signature = random: blockwise derives the disk id from image.seed",
                self.at(l)
            )),
            Some((s, l)) => match parse_int(&s).and_then(|v| u32::try_from(v).ok()) {
                Some(v) => out
                    .image
                    .push(("disk-id".into(), tstr(&format!("0x{v:08x}")))),
                None => self.err(
                    l,
                    Some("disk-signature"),
                    format!("{:?} is not a 32-bit number", display_str(&s)),
                ),
            },
            None if kind == "mbr" => {
                // genimage writes 0 without a disk-signature; blockwise derives one.
                out.image_notes.push("genimage writes disk signature 0 when none is given; blockwise derives one from image.seed".into());
            }
            None => {}
        }
        if let Some((u, l)) = disk_uuid {
            if kind != "gpt" {
                self.err(
                    l,
                    Some("disk-uuid"),
                    "is only valid for gpt and hybrid partition-table-type".into(),
                );
            } else if !is_uuid(&u) {
                self.err(
                    l,
                    Some("disk-uuid"),
                    format!("{:?} is not a UUID", display_str(&u)),
                );
            } else {
                out.image
                    .push(("disk-id".into(), tstr(&u.to_ascii_lowercase())));
            }
        }
        // Which partitions are logical (genimage's setup_logical_partitions).
        let in_table_count = parts
            .iter()
            .filter(|p| p.in_table && kind != "none")
            .count();
        let ext = match ext_index {
            Some((0, _)) | None => {
                if kind == "mbr" && in_table_count > 4 {
                    4
                } else {
                    0
                }
            }
            Some((i, l)) => {
                let i = usize::try_from(i).unwrap_or(usize::MAX);
                if kind != "mbr" || i > 4 {
                    if i > 4 {
                        self.err(
                            l,
                            Some("extended-partition"),
                            format!("{i} is more than 4 (genimage refuses it too)"),
                        );
                    }
                    0
                } else if i == 4 && in_table_count > 4 {
                    4
                } else {
                    out.image.push(("extended-partition".into(), i.to_string()));
                    i
                }
            }
        };
        for p in &parts {
            if let Some(l) = p.forced_primary {
                if kind != "mbr" || ext == 0 {
                    self.err(l, Some("forced-primary"), format!("partition {:?}: there is no extended partition to keep it out of (genimage refuses it too)", display_str(p.name)));
                }
            }
        }
        // Placement by genimage's rules, and the spec entries.
        let mut now: u64 = match kind {
            "none" => 0,
            "gpt" => 1024 + GPT_ARRAY,
            _ => 512,
        };
        let mut count = 0usize;
        let mut mirrored = 0usize;
        let mut ext_placed: Option<crate::emit::Placed> = None;
        for p in &parts {
            let in_table = p.in_table && kind != "none";
            let mut e = Entry {
                name: p.name.to_string(),
                at: self.at(p.loc),
                ..Entry::default()
            };
            let palign = p
                .align
                .filter(|a| *a != 0)
                .unwrap_or(if in_table || kind == "none" {
                    hd_align
                } else {
                    1
                });
            if in_table && palign.checked_rem(hd_align).is_some_and(|r| r != 0) {
                self.err(
                    p.loc,
                    Some("align"),
                    format!(
                        "partition {:?}: {} is not a multiple of the image's align {}",
                        display_str(p.name),
                        size_text(palign),
                        size_text(hd_align)
                    ),
                );
            }
            let mut logical = false;
            if in_table {
                count = count.saturating_add(1);
                if ext != 0 && count >= ext && p.forced_primary.is_some() {
                    e.key("primary", "true".into());
                } else if ext != 0 && count >= ext {
                    logical = true;
                    if count == ext {
                        now = round_up(now, hd_align).unwrap_or(now);
                    }
                    now = now.saturating_add(hd_align);
                    now = round_up(now, palign).unwrap_or(now);
                }
            }
            // The data: a file from the input path, or an image the config defines.
            let mut data: Option<u64> = None;
            let mut fs_size = None;
            if let Some(img) = p.image {
                let defined = ctx.images.iter().find(|(t, _, _)| *t == img);
                let file_sec = defined.and_then(|(_, _, b)| b.iter().find(|n| n.key == "file"));
                if let Some(fnode) = file_sec {
                    // genimage's `file` image: a file from the input path, maybe renamed.
                    let mut fname = img.to_string();
                    if let Value::Section { body: fb, .. } = &fnode.value {
                        for o in fb {
                            match o.key.as_str() {
                                "name" => fname = scalar(o).unwrap_or(img).to_string(),
                                "holes" => e.note(format!(
                                    "{}: holes: genimage lets other parts of the disk overlap these ranges of the file; blockwise copies the whole file and lets nothing overlap it",
                                    self.at(o.loc)
                                )),
                                "copy" => {}
                                k => self.err(o.loc, Some(k), "is not a file option blockwise can express".into()),
                            }
                        }
                    }
                    let path = format!("{}/{}", ctx.input, fname);
                    data = ctx.host.file_size(&path);
                    if data.is_none() {
                        self.err(
                            p.loc,
                            Some("image"),
                            format!(
                                "{:?} does not exist (give the directory with --inputpath)",
                                display_str(&path)
                            ),
                        );
                    }
                    e.key("fs", tstr("raw"));
                    e.key("source", tstr(&path));
                } else if let Some((_, _, ibody)) = defined {
                    if ibody.iter().any(|n| n.key == "hdimage") {
                        self.err(
                            p.loc,
                            Some("image"),
                            format!(
                                "{:?} is a disk image; blockwise cannot nest one in a partition",
                                display_str(img)
                            ),
                        );
                    } else {
                        fs_size = self.fs_image(&mut e, p.loc, ibody, ctx, &mut out);
                        data = fs_size;
                    }
                } else {
                    let path = format!("{}/{}", ctx.input, img);
                    data = ctx.host.file_size(&path);
                    if data.is_none() {
                        self.err(
                            p.loc,
                            Some("image"),
                            format!(
                                "{:?} does not exist (give the directory with --inputpath)",
                                display_str(&path)
                            ),
                        );
                    }
                    e.key("fs", tstr("raw"));
                    e.key("source", tstr(&path));
                }
            } else {
                e.key("fs", tstr("none"));
            }
            if p.imageoffset != 0 {
                self.err(
                    p.loc,
                    Some("imageoffset"),
                    "blockwise copies a partition image from its first byte; cut the file first"
                        .into(),
                );
            }
            let data_len = data.map(|d| d.saturating_sub(p.imageoffset));
            let offset = match p.offset {
                Some(o) => o,
                None if in_table || kind == "none" => round_up(now, palign).unwrap_or(now),
                None => 0,
            };
            let size = if p.autoresize {
                image_size.map(|s| {
                    let mut left = s.saturating_sub(offset);
                    if kind == "gpt" {
                        left = left.saturating_sub(GPT_ARRAY + 512);
                    }
                    left.checked_div(palign).unwrap_or(0).saturating_mul(palign)
                })
            } else {
                match (p.size, data_len) {
                    (Some(s), _) => Some(s),
                    (None, Some(d)) if in_table => round_up(d, palign),
                    (None, d) => d,
                }
            };
            let size = size.unwrap_or(0);
            if p.autoresize && image_size.is_none() {
                self.err(
                    p.loc,
                    Some("autoresize"),
                    "needs the image's size (genimage refuses it too)".into(),
                );
            }
            if size == 0 && !p.autoresize {
                self.err(p.loc, Some("size"), format!("partition {:?}: has no size and no image to take it from (genimage refuses it too)", display_str(p.name)));
            }
            if let (Some(s), Some(d)) = (p.size, data_len) {
                if d > s {
                    self.err(
                        p.loc,
                        Some("size"),
                        format!(
                            "partition {:?}: {} is smaller than its image ({})",
                            display_str(p.name),
                            size_text(s),
                            size_text(d)
                        ),
                    );
                }
            }
            now = now.max(offset.saturating_add(size));
            if logical {
                // genimage 16: the extended partition starts one `align` before the first
                // logical partition and ends with the last one.
                let start = ext_placed.map_or(offset.saturating_sub(hd_align), |x| x.start);
                ext_placed = Some(crate::emit::Placed {
                    start,
                    size: offset.saturating_add(size).saturating_sub(start),
                });
            }
            if !in_table {
                if p.image.is_none() {
                    out.image_notes.push(format!(
                        "{}: partition {:?} only reserves {} at {} outside the table; blockwise writes nothing there",
                        self.at(p.loc),
                        p.name,
                        size_text(size),
                        size_text(offset)
                    ));
                    continue;
                }
                if fs_size.is_some() {
                    self.err(p.loc, Some("in-partition-table"), "a filesystem outside the table: blockwise places only raw files outside it ([[raw]])".into());
                    continue;
                }
                let mut r = Entry {
                    name: p.name.to_string(),
                    at: self.at(p.loc),
                    comments: e.comments.clone(),
                    ..Entry::default()
                };
                if let Some((_, src)) = e.keys.iter().find(|(k, _)| k == "source") {
                    r.key("source", src.clone());
                }
                r.key("offset", tsize(offset));
                if let Some(s) = p.size {
                    r.key("size", tsize(s));
                }
                out.raws.push(r);
                continue;
            }
            if kind == "gpt" {
                e.keys.insert(0, ("name".into(), tstr(p.name)));
            }
            if p.autoresize {
                e.key("size", tstr("fill"));
            } else if let Some(s) = p.size.or(fs_size) {
                e.key("size", tsize(s));
            } else if p.image.is_some() && ctx.images.iter().all(|(t, _, _)| Some(*t) != p.image) {
                // Raw file: blockwise takes its size and rounds up like genimage does.
            }
            if p.offset.is_some() {
                e.key("start", tsize(offset));
            }
            match kind {
                "gpt" => {
                    let t = match &p.gpt_type {
                        Some((t, l)) => match self.shortcut(t) {
                            Some(g) => Some(g),
                            None => {
                                self.err(*l, Some("partition-type-uuid"), format!("partition {:?}: {:?} is not a UUID or a type shortcut genimage knows", display_str(p.name), display_str(t)));
                                None
                            }
                        },
                        None => self.shortcut("L"),
                    };
                    if let Some(t) = t {
                        e.key("type", tstr(&t));
                    }
                    if let Some(u) = &p.uuid {
                        if is_uuid(u) {
                            e.key("uuid", tstr(&u.to_ascii_lowercase()));
                        } else {
                            self.err(
                                p.loc,
                                Some("partition-uuid"),
                                format!(
                                    "partition {:?}: {:?} is not a UUID",
                                    display_str(p.name),
                                    display_str(u)
                                ),
                            );
                        }
                    }
                    match p.mbr_type {
                        Some(t) if hybrid && in_table => {
                            e.key("mbr-type", tstr(&format!("0x{t:02x}")));
                            mirrored = mirrored.saturating_add(1);
                            if mirrored > 3 {
                                self.err(p.loc, Some("partition-type"), format!("partition {:?}: hybrid MBR partitions ({mirrored}) exceed the maximum of 3 (genimage refuses it too)", display_str(p.name)));
                            }
                        }
                        Some(_) if hybrid => {}
                        Some(_) => self.err(p.loc, Some("partition-type"), format!("partition {:?}: is only valid for mbr and hybrid partition-table-type", display_str(p.name))),
                        None => {}
                    }
                    if !p.attributes.is_empty() {
                        let list: Vec<String> = p.attributes.iter().map(|a| tstr(a)).collect();
                        e.key("attributes", format!("[{}]", list.join(", ")));
                    }
                }
                _ => {
                    if p.gpt_type.is_some() {
                        self.err(p.loc, Some("partition-type-uuid"), format!("partition {:?}: is only valid for gpt and hybrid partition-table-type", display_str(p.name)));
                    }
                    if p.uuid.is_some() {
                        self.err(p.loc, Some("partition-uuid"), format!("partition {:?}: is only valid for gpt and hybrid partition-table-type", display_str(p.name)));
                    }
                    match p.mbr_type {
                        Some(t) => e.key("type", tstr(&format!("0x{t:02x}"))),
                        None => e.note(format!("{}: partition {:?} has no partition-type: genimage writes type 0 (empty), blockwise the type of its content", self.at(p.loc), p.name)),
                    }
                    if !p.attributes.is_empty() {
                        e.note(format!("{}: read-only, hidden and no-automount are GPT attributes; with MBR genimage ignores them and so does this spec", self.at(p.loc)));
                    }
                }
            }
            if p.bootable {
                e.key("bootable", "true".into());
            }
            e.placed = Some(Placed {
                start: offset,
                size,
            });
            out.partitions.push(e);
        }
        out.extended = ext_placed;
        out
    }

    fn partition<'a>(&mut self, name: &'a str, loc: Loc, body: &'a [Node]) -> Part<'a> {
        let mut p = Part {
            name,
            loc,
            in_table: true,
            ..Part::default()
        };
        for n in body {
            let v = scalar(n).unwrap_or_default();
            match n.key.as_str() {
                "offset" => p.offset = self.size_of(n),
                "size" => p.size = self.size_of(n),
                "align" => p.align = self.size_of(n),
                "imageoffset" => p.imageoffset = self.size_of(n).unwrap_or(0),
                "partition-type" => match parse_int(v).and_then(|i| u8::try_from(i).ok()) {
                    Some(0) => {}
                    Some(t) => p.mbr_type = Some(t),
                    None => self.err(
                        n.loc,
                        Some("partition-type"),
                        format!("{:?} is not a byte (0x00-0xff)", display_str(v)),
                    ),
                },
                "partition-type-uuid" => p.gpt_type = Some((v.to_string(), n.loc)),
                "partition-uuid" => p.uuid = Some(v.to_string()),
                "bootable" => p.bootable = self.bool_of(n),
                "forced-primary" => {
                    if self.bool_of(n) {
                        p.forced_primary = Some(n.loc);
                    }
                }
                "read-only" => {
                    if self.bool_of(n) {
                        p.attributes.push("read-only");
                    }
                }
                "hidden" => {
                    if self.bool_of(n) {
                        p.attributes.push("hidden");
                    }
                }
                "no-automount" => {
                    if self.bool_of(n) {
                        p.attributes.push("no-auto");
                    }
                }
                "fill" | "sparse" => {
                    let _ = self.bool_of(n);
                }
                "image" => p.image = scalar(n),
                "holes" => self.err(
                    n.loc,
                    Some("holes"),
                    "blockwise copies the whole file; it has no hole list".into(),
                ),
                "autoresize" => p.autoresize = self.bool_of(n),
                "in-partition-table" => p.in_table = self.bool_of(n),
                k => self.err(
                    n.loc,
                    Some(k),
                    "is not a partition option genimage knows".into(),
                ),
            }
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_follow_strtoul_suffix() {
        assert_eq!(parse_size("1M", false), Ok((1 << 20, false)));
        assert_eq!(parse_size("4k", false), Ok((4096, false)));
        assert_eq!(parse_size("33s", false), Ok((33 * 512, false)));
        assert_eq!(parse_size("0x10", false), Ok((16, false)));
        assert_eq!(parse_size("010", false), Ok((8, false)));
        assert_eq!(parse_size("50%", true), Ok((50, true)));
        assert!(parse_size("50%", false).is_err());
        assert!(parse_size("1MiB", false).is_err());
        assert!(parse_size("", false).is_err());
        assert!(parse_size("99999999999999999999G", false).is_err());
    }

    #[test]
    fn timestamps_are_utc() {
        assert_eq!(parse_timestamp("20000101000000"), Some(946_684_800));
        assert_eq!(parse_timestamp("19700101000000"), Some(0));
        assert_eq!(parse_timestamp("2000010100000"), None);
    }
}
