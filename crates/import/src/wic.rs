//! wic kickstarts: `part` (alias `partition`) and `bootloader` lines.
//!
//! Sizes follow wic's rules (`partition.py`, `plugins/source/*.py`, `direct.py`): `--size`,
//! `--fixed-size` and `--extra-space` in MiB unless suffixed (k/K, M, G), `--align` in KiB,
//! `--offset` in KiB (or `s` sectors); a partition filled from a directory (`--source rootfs`,
//! `bootimg-partition`, `bootimg-efi`) is sized from that directory's `du` (apparent size
//! for FAT), plus `--extra-space` (default 10 MiB, or 16 MiB for `bootimg-efi`) or up to
//! `--size`, times `--overhead-factor` (default 1.3). Placement: one sector (MBR) or 34 (GPT)
//! for the table, one more for the EBR before each logical partition, then up to `--align`.

use crate::emit::{self, tsize, tstr, Entry, Out, Placed};
use crate::{size_text, Diag, Host, ImportError, Imported, Options};
use blockwise_geometry::display_str;

/// Lines longer than this, or more lines than [`MAX_LINES`], are refused.
const MAX_LINE: usize = 64 << 10;
const MAX_LINES: usize = 100_000;

/// Where Debian's syslinux-common puts `mbr.bin` and `gptmbr.bin` (`--contents syslinux=DIR`
/// overrides it).
const SYSLINUX_DIR: &str = "/usr/lib/syslinux/mbr";

/// wic's `BOOTDD_EXTRA_SPACE`: the least free space bootimg-pcbios leaves, in KiB.
const BOOTDD_EXTRA_KIB: u64 = 16 * 1024;

fn is_pcbios(source: Option<&str>) -> bool {
    source == Some("bootimg-pcbios")
}

/// Why wic's hybrid MBR is not imported.
const WIC_HYBRID: &str = "blockwise's hybrid MBR (mbr-type) is genimage's layout (mirrored entries first, then 0xEE over the primary GPT); wic's gpt-hybrid layout has not been compared with it, so import does not claim to reproduce it: write mbr-type in the spec by hand";

/// One kickstart line, split like Python's `shlex.split`.
pub(crate) fn split(line: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut have = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '#' if !have => break,
            c if c.is_whitespace() => {
                if have {
                    out.push(core::mem::take(&mut cur));
                    have = false;
                }
            }
            '\'' => {
                have = true;
                loop {
                    match chars.next() {
                        None => return Err("a quote (') is never closed".into()),
                        Some('\'') => break,
                        Some(d) => cur.push(d),
                    }
                }
            }
            '"' => {
                have = true;
                loop {
                    match chars.next() {
                        None => return Err("a quote (\") is never closed".into()),
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(d @ ('"' | '\\' | '$' | '`')) => cur.push(d),
                            Some(d) => {
                                cur.push('\\');
                                cur.push(d);
                            }
                            None => return Err("a quote (\") is never closed".into()),
                        },
                        Some(d) => cur.push(d),
                    }
                }
            }
            '\\' => {
                have = true;
                if let Some(d) = chars.next() {
                    cur.push(d);
                }
            }
            c => {
                have = true;
                cur.push(c);
            }
        }
    }
    if have {
        out.push(cur);
    }
    Ok(out)
}

/// wic's `sizetype(default)`: a number with an optional k/K, M or G suffix (and `s` for
/// sectors where allowed), in KiB.
pub fn parse_kib(s: &str, default_mib: bool, sectors: bool) -> Result<u64, String> {
    let bad = || {
        format!(
            "{:?} is not a size (a number with an optional K, M or G{})",
            display_str(s),
            if sectors { " or s" } else { "" }
        )
    };
    let t = s.trim();
    let (num, unit) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (t.get(..i).unwrap_or_default(), Some(c)),
        _ => (t, None),
    };
    let n: u64 = num.parse().map_err(|_| bad())?;
    let kib = match unit {
        None if default_mib => n.checked_mul(1024),
        None => Some(n),
        Some('k' | 'K') => Some(n),
        Some('M') => n.checked_mul(1024),
        Some('G') => n.checked_mul(1024 * 1024),
        Some('s' | 'S') if sectors => {
            if n % 2 != 0 {
                return Err(format!(
                    "{:?} is not a whole KiB (an odd number of sectors)",
                    display_str(s)
                ));
            }
            n.checked_div(2)
        }
        _ => return Err(bad()),
    };
    kib.ok_or_else(|| format!("{:?} is too large", display_str(s)))
}

/// `--overhead-factor` as a fraction (numerator, denominator), at least 1.
fn parse_factor(s: &str) -> Result<(u64, u64), String> {
    let bad = || {
        format!(
            "{:?} is not a number of at least 1 (like 1.3)",
            display_str(s)
        )
    };
    let (int, frac) = s.trim().split_once('.').unwrap_or((s.trim(), ""));
    if frac.len() > 6
        || !int.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
        || int.is_empty()
    {
        return Err(bad());
    }
    let den = 10u64
        .checked_pow(u32::try_from(frac.len()).map_err(|_| bad())?)
        .ok_or_else(bad)?;
    let i: u64 = int.parse().map_err(|_| bad())?;
    let f: u64 = if frac.is_empty() {
        0
    } else {
        frac.parse().map_err(|_| bad())?
    };
    let num = i
        .checked_mul(den)
        .and_then(|v| v.checked_add(f))
        .ok_or_else(bad)?;
    if num < den {
        return Err(bad());
    }
    Ok((num, den))
}

#[derive(Default)]
struct Part {
    line: u32,
    mount: Option<String>,
    fstype: Option<String>,
    label: Option<String>,
    part_name: Option<String>,
    part_type: Option<String>,
    system_id: Option<String>,
    uuid: Option<String>,
    fsuuid: Option<String>,
    size: Option<u64>,
    fixed: Option<u64>,
    extra: Option<u64>,
    factor: Option<(u64, u64)>,
    align: Option<u64>,
    offset: Option<u64>,
    source: Option<String>,
    sourceparams: Option<String>,
    rootfs_dir: Option<String>,
    active: bool,
    no_table: bool,
    hidden: bool,
    ondisk: Option<String>,
    notes: Vec<String>,
}

struct Cx<'a> {
    name: &'a str,
    errs: Vec<Diag>,
}

impl Cx<'_> {
    fn err(&mut self, line: u32, option: Option<&str>, message: String) {
        self.errs.push(Diag {
            at: format!("{}:{line}", self.name),
            option: option.map(display_str),
            message,
        });
    }
    fn at(&self, line: u32) -> String {
        format!("{}:{line}", self.name)
    }
}

/// Options that take a value (everything else is a flag).
const VALUED: &[&str] = &[
    "--align",
    "--offset",
    "--extra-space",
    "--fsoptions",
    "--fspassno",
    "--fstype",
    "--mkfs-extraopts",
    "--label",
    "--ondisk",
    "--ondrive",
    "--overhead-factor",
    "--part-name",
    "--part-type",
    "--rootfs-dir",
    "--type",
    "--size",
    "--fixed-size",
    "--source",
    "--sourceparams",
    "--system-id",
    "--uuid",
    "--fsuuid",
    "--change-directory",
    "--exclude-path",
    "--include-path",
    "--append",
    "--configfile",
    "--ptable",
    "--timeout",
    "--diskid",
];

/// Splits `--opt=value`, `--opt value` and flags.
/// Positional words, then `(option, value)` pairs.
type Split = (Vec<String>, Vec<(String, Option<String>)>);

fn split_options(words: &[String]) -> Result<Split, String> {
    let mut positional = Vec::new();
    let mut opts = Vec::new();
    let mut it = words.iter();
    while let Some(w) = it.next() {
        if let Some(stripped) = w.strip_prefix("--") {
            let (name, inline) = match stripped.split_once('=') {
                Some((n, v)) => (format!("--{n}"), Some(v.to_string())),
                None => (w.clone(), None),
            };
            if VALUED.contains(&name.as_str()) {
                let v = match inline {
                    Some(v) => v,
                    None => it
                        .next()
                        .cloned()
                        .ok_or_else(|| format!("{} needs a value", display_str(&name)))?,
                };
                opts.push((name, Some(v)));
            } else {
                if inline.is_some() {
                    return Err(format!("{} takes no value", display_str(&name)));
                }
                opts.push((name, None));
            }
        } else {
            positional.push(w.clone());
        }
    }
    Ok((positional, opts))
}

/// Imports a wic kickstart.
#[allow(clippy::too_many_lines)]
pub fn import(
    name: &str,
    text: &str,
    host: &dyn Host,
    options: &Options,
) -> Result<Imported, ImportError> {
    let mut cx = Cx {
        name,
        errs: Vec::new(),
    };
    if text.len() > crate::confuse::MAX_INPUT {
        return Err(Diag {
            at: name.to_string(),
            option: None,
            message: "is larger than 4 MiB".into(),
        }
        .into());
    }
    let mut parts: Vec<Part> = Vec::new();
    let mut ptable = "msdos".to_string();
    let mut ptable_line = 0u32;
    let mut header_notes = Vec::new();
    // `bootloader --configfile`: (value, line), for bootimg-pcbios's syslinux.cfg.
    let mut configfile: Option<(String, u32)> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = u32::try_from(i.saturating_add(1)).unwrap_or(u32::MAX);
        if i >= MAX_LINES {
            cx.err(line, None, format!("more than {MAX_LINES} lines"));
            break;
        }
        if raw.len() > MAX_LINE {
            cx.err(line, None, "the line is longer than 64 KiB".into());
            continue;
        }
        let words = match split(raw) {
            Ok(w) => w,
            Err(m) => {
                cx.err(line, None, m);
                continue;
            }
        };
        let Some((cmd, rest)) = words.split_first() else {
            continue;
        };
        let (pos, opts) = match split_options(rest) {
            Ok(x) => x,
            Err(m) => {
                cx.err(line, Some(cmd), m);
                continue;
            }
        };
        match cmd.as_str() {
            "part" | "partition" => {
                let mut p = Part {
                    line,
                    ..Part::default()
                };
                match pos.as_slice() {
                    [] => {}
                    [m] => p.mount = Some(m.clone()),
                    [_, extra, ..] => cx.err(
                        line,
                        Some(cmd),
                        format!("{:?}: a part line has one mount point", display_str(extra)),
                    ),
                }
                for (k, v) in opts {
                    let v = v.unwrap_or_default();
                    let kib = |cx: &mut Cx<'_>, mib: bool, s: bool| match parse_kib(&v, mib, s) {
                        Ok(x) => Some(x),
                        Err(m) => {
                            cx.err(line, Some(&k), m);
                            None
                        }
                    };
                    match k.as_str() {
                        "--size" => p.size = kib(&mut cx, true, false),
                        "--fixed-size" => p.fixed = kib(&mut cx, true, false),
                        "--extra-space" => p.extra = kib(&mut cx, true, false),
                        "--offset" => p.offset = kib(&mut cx, false, true),
                        "--align" => match v.parse::<u64>() {
                            Ok(a) => p.align = Some(a),
                            Err(_) => cx.err(line, Some(&k), format!("{:?} is not a number of KiB", display_str(&v))),
                        },
                        "--overhead-factor" => match parse_factor(&v) {
                            Ok(f) => p.factor = Some(f),
                            Err(m) => cx.err(line, Some(&k), m),
                        },
                        "--fstype" => p.fstype = Some(v),
                        "--label" => p.label = Some(v),
                        "--part-name" => p.part_name = Some(v),
                        "--part-type" => p.part_type = Some(v),
                        "--system-id" => p.system_id = Some(v),
                        "--uuid" => p.uuid = Some(v),
                        "--fsuuid" => p.fsuuid = Some(v),
                        "--source" => p.source = Some(v),
                        "--sourceparams" => p.sourceparams = Some(v),
                        "--rootfs-dir" => p.rootfs_dir = Some(v),
                        "--active" => p.active = true,
                        "--no-table" => p.no_table = true,
                        "--hidden" => p.hidden = true,
                        "--ondisk" | "--ondrive" => p.ondisk = Some(v),
                        "--use-uuid" | "--use-label" | "--no-fstab-update" | "--fsoptions" | "--fspassno" => p.notes.push(format!(
                            "{}: {k}: wic edits /etc/fstab in the rootfs; blockwise copies the rootfs as it is",
                            cx.at(line)
                        )),
                        "--type" if v == "primary" => {}
                        "--type" => cx.err(line, Some(&k), format!("{:?}: blockwise decides primary and logical itself (1-3 primary, the rest logical when there are more than four)", display_str(&v))),
                        "--mkfs-extraopts" => cx.err(line, Some(&k), format!("blockwise runs no mkfs, so {:?} cannot be passed on; say it with the partition's fat/ext4 keys", display_str(&v))),
                        "--exclude-path" | "--include-path" | "--change-directory" => cx.err(line, Some(&k), "blockwise copies one directory as it is; stage the tree you want first".into()),
                        "--mbr" => cx.err(line, Some(&k), WIC_HYBRID.into()),
                        other => cx.err(line, Some(other), "is not a part option wic knows".into()),
                    }
                }
                parts.push(p);
            }
            "bootloader" => {
                if !pos.is_empty() {
                    cx.err(line, Some("bootloader"), "takes only options".into());
                }
                for (k, v) in opts {
                    let v = v.unwrap_or_default();
                    match k.as_str() {
                        "--ptable" => {
                            ptable = v;
                            ptable_line = line;
                        }
                        "--configfile" => configfile = Some((v, line)),
                        "--append" | "--timeout" | "--source" => header_notes.push(format!(
                            "{}: bootloader {k}: wic writes it into the bootloader's configuration; blockwise installs no bootloader: put its files into the boot partition's directory",
                            cx.at(line)
                        )),
                        "--diskid" => header_notes.push(format!("{}: bootloader --diskid: set image.disk-id instead", cx.at(line))),
                        other => cx.err(line, Some(other), "is not a bootloader option wic knows".into()),
                    }
                }
            }
            "include" => cx.err(
                line,
                Some("include"),
                "blockwise imports one kickstart; paste the included lines in".into(),
            ),
            other => cx.err(
                line,
                Some(other),
                "is not a kickstart command wic knows (part, partition, bootloader, include)"
                    .into(),
            ),
        }
    }
    if let Some((_, line)) = &configfile {
        if !parts.iter().any(|p| is_pcbios(p.source.as_deref())) {
            header_notes.push(format!(
                "{}: bootloader --configfile: wic writes it into the bootloader's configuration; blockwise installs a bootloader only for bootimg-pcbios: put its files into the boot partition's directory",
                cx.at(*line)
            ));
        }
    }
    let table = match ptable.as_str() {
        "msdos" => "mbr",
        "gpt" => "gpt",
        "gpt-hybrid" => {
            cx.err(
                ptable_line,
                Some("--ptable"),
                format!("gpt-hybrid: {WIC_HYBRID}"),
            );
            "gpt"
        }
        other => {
            cx.err(
                ptable_line,
                Some("--ptable"),
                format!("{:?} is not msdos, gpt or gpt-hybrid", display_str(other)),
            );
            "mbr"
        }
    };
    let disks: Vec<&str> = parts.iter().filter_map(|p| p.ondisk.as_deref()).collect();
    if let Some(first) = disks.first() {
        if let Some(p) = parts
            .iter()
            .find(|p| p.ondisk.as_deref().is_some_and(|d| d != *first))
        {
            let l = p.line;
            cx.err(l, Some("--ondisk"), format!("partitions on more than one disk ({:?} and {:?}): blockwise builds one image; import each disk's lines separately", display_str(first), display_str(p.ondisk.as_deref().unwrap_or_default())));
        }
    }
    if parts.is_empty() {
        cx.err(1, None, "has no part lines".into());
    }
    let mut out = Out {
        tool: "wic",
        ..Out::default()
    };
    out.header
        .push(format!("blockwise spec imported from wic kickstart {name}"));
    out.image_notes = header_notes;
    out.image.push(("table".into(), tstr(table)));
    // The erase block: the largest --align blockwise accepts.
    let eb = parts
        .iter()
        .filter_map(|p| p.align.and_then(|a| a.checked_mul(1024)))
        .filter(|a| a.is_power_of_two() && (4096..=(256 << 20)).contains(a))
        .max();
    match eb {
        Some(e) => out.image.push(("erase-block".into(), tsize(e))),
        None => out.image_notes.push(
            "no --align that is an erase block blockwise accepts (a power of two from 4 KiB to 256 MiB): blockwise aligns to its default 4 MiB".into(),
        ),
    }
    for p in &parts {
        if let Some(a) = p.align.and_then(|a| a.checked_mul(1024)) {
            if Some(a) != eb {
                out.image_notes.push(format!(
                    "{}: --align {} KiB: blockwise aligns every partition to the one erase block ({})",
                    cx.at(p.line),
                    a / 1024,
                    eb.map_or("4 MiB".into(), size_text)
                ));
            }
        }
    }
    // wic's layout, in 512-byte sectors.
    let real = parts.iter().filter(|p| !p.no_table).count();
    let mut offset: u64 = 0;
    let mut realpart = 0usize;
    for (n, p) in parts.iter().enumerate() {
        let mut e = Entry {
            name: p
                .mount
                .clone()
                .or_else(|| p.label.clone())
                .unwrap_or_else(|| format!("part {}", n.saturating_add(1))),
            at: cx.at(p.line),
            ..Entry::default()
        };
        e.comments.extend(p.notes.iter().cloned());
        if let Some(m) = &p.mount {
            e.note(format!("{}: mount point {m}", cx.at(p.line)));
        }
        let source = p.source.as_deref();
        let fstype = p.fstype.clone().or_else(|| match source {
            Some(
                "bootimg-efi" | "bootimg-partition" | "bootimg-pcbios" | "bootimg-biosplusefi",
            ) => Some("vfat".into()),
            _ => None,
        });
        let fs = match fstype.as_deref() {
            Some("vfat" | "msdos") => "fat",
            Some("ext4") => "ext4",
            Some("ext3") => "ext3",
            Some("ext2") => "ext2",
            Some("swap") => "swap",
            Some("none") | None => {
                if source == Some("rawcopy") {
                    "raw"
                } else {
                    "none"
                }
            }
            Some(t) => {
                cx.err(
                    p.line,
                    Some("--fstype"),
                    format!(
                        "{:?}: blockwise does not build this filesystem",
                        display_str(t)
                    ),
                );
                "none"
            }
        };
        e.key("fs", tstr(fs));
        if let Some(l) = &p.label {
            e.key("label", tstr(l));
        }
        if let Some(n) = &p.part_name {
            if table == "gpt" {
                e.key("name", tstr(n));
            }
        }
        // Content and size (KiB).
        let factor = p.factor.unwrap_or((13, 10));
        let mut size_kib: Option<u64> = None;
        let from_dir = |cx: &mut Cx<'_>, keys: &[&str], what: &str| -> Option<String> {
            let d = options.contents_for(keys).map(str::to_string);
            if d.is_none() {
                cx.err(
                    p.line,
                    Some("--source"),
                    format!(
                        "{what}: wic fills this partition from a directory and sizes it from its content by wic's rule, which import reproduces from the directory: `blockwise import KICKSTART --contents {}=DIR > spec.toml`",
                        keys.first().copied().unwrap_or("/")
                    ),
                );
            }
            d
        };
        match source {
            None => {
                size_kib = p.fixed.or(p.size);
                if size_kib.is_none() {
                    cx.err(p.line, Some("--size"), "a partition without --source needs --size or --fixed-size (wic refuses it too)".into());
                }
            }
            Some(src @ ("rootfs" | "bootimg-partition" | "bootimg-efi")) => {
                let mount = p.mount.as_deref().unwrap_or("/");
                let mut keys: Vec<&str> = Vec::new();
                if let Some(r) = p.rootfs_dir.as_deref() {
                    keys.push(r);
                }
                keys.push(mount);
                if src == "rootfs" {
                    keys.push("rootfs");
                }
                let what = format!("--source {src}");
                if src != "rootfs" {
                    e.note(format!(
                        "{}: --source {src}: wic stages the boot files (IMAGE_BOOT_FILES, the kernel{}) itself; blockwise copies the directory given as it is: stage them there",
                        cx.at(p.line),
                        if src == "bootimg-efi" { ", the EFI loader" } else { "" }
                    ));
                }
                if let Some(dir) = from_dir(&mut cx, &keys, &what) {
                    e.key("contents", tstr(&dir));
                    if src != "bootimg-efi" && p.fixed.is_some() {
                        size_kib = p.fixed;
                    } else {
                        let apparent = fs == "fat";
                        match host.dir_usage_kib(&dir, apparent) {
                            None => cx.err(p.line, Some("--source"), format!("{:?} cannot be read", display_str(&dir))),
                            Some(du) => {
                                let req = p.size.unwrap_or(0);
                                let kib = if src == "bootimg-efi" {
                                    let extra = req.saturating_sub(du).max(16 * 1024);
                                    let b = du.saturating_add(extra);
                                    p.fixed.map_or(b, |f| b.max(f))
                                } else {
                                    let extra = req.saturating_sub(du).max(p.extra.unwrap_or(10 * 1024));
                                    du.saturating_add(extra)
                                        .saturating_mul(factor.0)
                                        .checked_div(factor.1)
                                        .unwrap_or(0)
                                };
                                e.note(format!(
                                    "{}: size from the content as wic computes it: du {} {dir} = {du} KiB, {} KiB in all; written out so that the table is wic's (size = \"auto\" would size it by the filesystem's own overhead instead)",
                                    cx.at(p.line),
                                    if apparent { "-bks" } else { "-ks" },
                                    kib
                                ));
                                size_kib = Some(kib);
                            }
                        }
                    }
                }
            }
            Some("rawcopy") => {
                let file = p.sourceparams.as_deref().and_then(|sp| {
                    sp.split(',').find_map(|kv| kv.strip_prefix("file=")).map(str::to_string)
                });
                match file {
                    None => cx.err(p.line, Some("--sourceparams"), "rawcopy needs file=NAME".into()),
                    Some(f) => {
                        let path = options.contents_for(&["rawcopy"]).map_or(f.clone(), |d| format!("{d}/{f}"));
                        match host.file_size(&path) {
                            None => cx.err(p.line, Some("--sourceparams"), format!("{:?} does not exist (give its directory with --contents rawcopy=DIR)", display_str(&path))),
                            Some(len) => {
                                let k = len.div_ceil(1024);
                                size_kib = Some(p.fixed.unwrap_or_else(|| p.size.unwrap_or(0).max(k)));
                            }
                        }
                        e.key("source", tstr(&path));
                    }
                }
            }
            Some("bootimg-pcbios") => {
                if let Some(t) = p.fstype.as_deref().filter(|t| !matches!(*t, "vfat" | "msdos")) {
                    cx.err(p.line, Some("--fstype"), format!("{:?} with bootimg-pcbios: syslinux boots from the FAT wic makes; blockwise imports the syslinux loader only", display_str(t)));
                }
                let keys: Vec<&str> = p.rootfs_dir.as_deref().into_iter().chain([p.mount.as_deref().unwrap_or("/boot")]).collect();
                if let Some(sp) = p.sourceparams.as_deref().filter(|sp| sp.contains("loader-bios=") && !sp.contains("loader-bios=syslinux")) {
                    cx.err(p.line, Some("--sourceparams"), format!("{:?}: blockwise installs syslinux only (fat.bootloader = \"syslinux\")", display_str(sp)));
                }
                let cfg = configfile.as_ref().and_then(|(c, _)| match host.file_size(c) {
                    Some(n) => Some((c.clone(), n)),
                    None => {
                        cx.err(configfile.as_ref().map_or(p.line, |(_, l)| *l), Some("--configfile"), format!("{:?} does not exist next to the kickstart (wic looks it up there and in its canned-wks directories): copy it there", display_str(c)));
                        None
                    }
                });
                let syslinux = options.contents_for(&["syslinux"]).unwrap_or(SYSLINUX_DIR);
                let mbr = format!("{syslinux}/{}", if table == "gpt" { "gptmbr.bin" } else { "mbr.bin" });
                if host.file_size(&mbr).is_none() {
                    cx.err(p.line, Some("--source"), format!("bootimg-pcbios: {:?} does not exist: wic writes syslinux's MBR boot code from it; install the Debian package syslinux-common or give its directory with --contents syslinux=DIR", display_str(&mbr)));
                }
                // One boot code for the disk, however many bootimg-pcbios partitions.
                if !out.image.iter().any(|(k, _)| k == "boot-code") {
                    out.image.push(("boot-code".into(), tstr(&mbr)));
                }
                e.note(format!(
                    "{}: --source bootimg-pcbios: wic stages the kernel ({}), ldlinux.sys and syslinux's .c32 modules and makes syslinux.cfg (from --configfile, else from --append/--timeout); blockwise copies the directory given as it is (stage the kernel and the .c32 modules syslinux.cfg loads there), adds syslinux.cfg from --configfile, and the syslinux installer adds ldlinux.sys and ldlinux.c32 (fat.bootloader); image.boot-code is syslinux's {}",
                    cx.at(p.line),
                    if cfg.is_some() { "named in syslinux.cfg" } else { "KERNEL_IMAGETYPE" },
                    if table == "gpt" { "gptmbr.bin" } else { "mbr.bin" }
                ));
                if cfg.is_none() && configfile.is_none() {
                    e.note(format!("{}: no bootloader --configfile: wic writes a syslinux.cfg from --append and --timeout; blockwise does not: put syslinux.cfg into the directory", cx.at(p.line)));
                }
                if p.label.is_none() {
                    e.key("label", tstr("boot"));
                }
                if let Some(dir) = from_dir(&mut cx, &keys, "--source bootimg-pcbios") {
                    e.key("contents", tstr(&dir));
                    if let Some((c, _)) = &cfg {
                        e.key("files", format!("[{{ source = {}, dest = \"/syslinux.cfg\" }}]", tstr(c)));
                    }
                    e.key("fat.bootloader", tstr("syslinux"));
                    if p.fixed.is_some() {
                        size_kib = p.fixed;
                    } else {
                        match host.dir_usage_kib(&dir, true) {
                            None => cx.err(p.line, Some("--source"), format!("{:?} cannot be read", display_str(&dir))),
                            Some(du) => {
                                let cfg_kib = cfg.as_ref().map_or(0, |(_, n)| n.div_ceil(1024));
                                let blocks = du.saturating_add(cfg_kib);
                                let extra = p.size.unwrap_or(0).saturating_sub(blocks).max(BOOTDD_EXTRA_KIB);
                                let kib = blocks.saturating_add(extra);
                                e.note(format!(
                                    "{}: size as wic's bootimg-pcbios computes it: du -bks {dir} = {du} KiB{}, plus {extra} KiB (--size, at least 16 MiB), {kib} KiB in all (wic's du also counts the ldlinux.sys and .c32 files it copies in)",
                                    cx.at(p.line),
                                    if cfg_kib > 0 { format!(" and {cfg_kib} KiB of syslinux.cfg") } else { String::new() }
                                ));
                                size_kib = Some(kib);
                            }
                        }
                    }
                }
            }
            Some("bootimg-biosplusefi") => cx.err(
                p.line,
                Some("--source"),
                "bootimg-biosplusefi: one FAT partition booting both BIOS (syslinux) and EFI is not imported; split it into a bootimg-pcbios and a bootimg-efi partition, or write the spec by hand (fat.bootloader, image.boot-code, files)".into(),
            ),
            Some(other) => cx.err(p.line, Some("--source"), format!("{:?}: blockwise has no equivalent of this wic plugin", display_str(other))),
        }
        if fs == "none" && source.is_none() && p.fstype.is_none() {
            e.note(format!(
                "{}: no --fstype: the partition is left empty",
                cx.at(p.line)
            ));
        }
        let size_sec = size_kib.unwrap_or(0).saturating_mul(2);
        if let Some(k) = size_kib {
            e.key("size", tsize(k.saturating_mul(1024)));
        }
        // Types and IDs.
        if let Some(t) = &p.part_type {
            if table == "gpt" {
                e.key("type", tstr(t));
            } else {
                cx.err(
                    p.line,
                    Some("--part-type"),
                    "is for GPT; wic refuses it with msdos too (use --system-id)".into(),
                );
            }
        }
        if let Some(t) = &p.system_id {
            if table == "mbr" {
                e.key("type", tstr(t));
            } else {
                cx.err(
                    p.line,
                    Some("--system-id"),
                    "is an MBR type byte; with GPT use --part-type".into(),
                );
            }
        }
        if let Some(u) = &p.uuid {
            if table == "gpt" {
                e.key("uuid", tstr(u));
            } else {
                e.note(format!("{}: --uuid: an MBR partition's PARTUUID is DISKID-NN; pin image.disk-id instead", cx.at(p.line)));
            }
        }
        if let Some(u) = &p.fsuuid {
            match fs {
                "fat" => e.key("volume-id", tstr(u)),
                "ext4" | "swap" => e.key("fs-uuid", tstr(u)),
                _ => {}
            }
        }
        if p.active {
            e.key("bootable", "true".into());
        }
        if p.hidden {
            if table == "gpt" {
                e.key("attributes", "[\"hidden\"]".into());
            } else {
                cx.err(p.line, Some("--hidden"), "is a GPT attribute".into());
            }
        }
        if p.no_table {
            e.key("in-partition-table", "false".into());
        }
        // wic's placement.
        if n == 0 {
            offset = if table == "gpt" { 34 } else { 1 };
        }
        if !p.no_table {
            realpart = realpart.saturating_add(1);
        }
        if let Some(o) = p.offset {
            let s = o.saturating_mul(2);
            if s < offset {
                cx.err(
                    p.line,
                    Some("--offset"),
                    format!(
                        "{} KiB overlaps the partition before it (wic refuses it too)",
                        o
                    ),
                );
            }
            offset = s;
            e.key("start", tsize(o.saturating_mul(1024)));
        }
        if table == "mbr" && realpart > 3 && real > 4 {
            offset = offset.saturating_add(1);
        }
        if let Some(a) = p.align.filter(|a| *a > 0) {
            let a = a.saturating_mul(2);
            let r = offset.checked_rem(a).unwrap_or(0);
            if r != 0 {
                offset = offset.saturating_add(a.saturating_sub(r));
            }
        }
        if !p.no_table {
            e.placed = Some(Placed {
                start: offset.saturating_mul(512),
                size: size_sec.saturating_mul(512),
            });
        }
        offset = offset.saturating_add(size_sec);
        out.partitions.push(e);
    }
    if !cx.errs.is_empty() {
        return Err(ImportError { diags: cx.errs });
    }
    emit::finish(out, host, name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_wics() {
        assert_eq!(parse_kib("20", true, false), Ok(20 * 1024));
        assert_eq!(parse_kib("4096", false, false), Ok(4096));
        assert_eq!(parse_kib("1G", true, false), Ok(1 << 20));
        assert_eq!(parse_kib("64s", false, true), Ok(32));
        assert!(parse_kib("64s", true, false).is_err());
        assert!(parse_kib("1MiB", true, false).is_err());
        assert_eq!(parse_factor("1.3"), Ok((13, 10)));
        assert!(parse_factor("0.5").is_err());
    }

    #[test]
    fn lines_split_like_shlex() {
        assert_eq!(
            split(r#"part / --append="a b" x'y z' # c"#).unwrap_or_default(),
            ["part", "/", "--append=a b", "xy z"]
        );
        assert!(split("part \"x").is_err());
    }
}
