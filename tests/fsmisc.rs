//! F2FS partitions (issue 29 item 3), GPT attributes and A/B slots (issue 28 items 4 and 5),
//! and `verify` of the formats it recognises by their headers (issue 28 item 6), each checked
//! against the tools that made or read them:
//!
//! - F2FS built by blockwise (mkfs.f2fs + sload.f2fs): `fsck.f2fs --dry-run -f` clean, the
//!   tree listed by `fsck.f2fs -t` and every file dumped by `dump.f2fs -i` equal to the source
//!   (bytes, mode, time), the superblock (`dump.f2fs -d 1`) with sections of one erase block
//!   and the main area on the erase block from the disk start, two builds byte-identical;
//! - plan and verify against mkfs.f2fs with `-s`, `-z`, `-a` and several sizes: the plan's
//!   arithmetic gives mkfs.f2fs's layout (or refuses where mkfs.f2fs does), and verify reads
//!   what `dump.f2fs -d 1` and `blkid` print, field by field;
//! - GPT attributes as `sgdisk -i` shows them; slots on their own erase blocks, paired by
//!   verify as the plan pairs them;
//! - btrfs, XFS, NTFS, ISO 9660, LUKS1/2, swap and F2FS made by their tools: kind, label,
//!   UUID and size as blkid and the tools give them, bare and inside a partition.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use blockwise_test_kit::{
    assert_same_json, assert_success, blkid, blockwise, command, have, output_text, run, tempdir,
    write_file,
};
use serde_json::Value;

const MIB: u64 = 1 << 20;

fn s(p: &Path) -> &str {
    p.to_str().expect("utf8 path")
}

fn json_of(o: &std::process::Output, what: &str) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{what}: {e}: {}", output_text(o)))
}

/// `blockwise plan SPEC --json`, asserting success.
fn plan_json(spec: &Path) -> Value {
    let o = blockwise!().run(["plan", s(spec), "--json"]);
    assert_success(&o, "blockwise plan");
    json_of(&o, "plan --json")
}

/// `blockwise verify IMAGE --json --erase-block E [EXTRA]`, with its exit code.
fn verify_json(img: &Path, e: u64, extra: &[&str]) -> (Value, i32) {
    let eb = e.to_string();
    let mut args = vec!["verify", s(img), "--json", "--erase-block", &eb];
    args.extend_from_slice(extra);
    let o = blockwise!().run(&args);
    (json_of(&o, "verify --json"), o.status.code().unwrap_or(-1))
}

/// Copies `size` bytes at `start` of `img` into a new sparse file `out` (holes stay holes).
fn extract(img: &Path, start: u64, size: u64, out: &Path) {
    let mut src = File::open(img).expect("open image");
    let mut dst = File::create(out).expect("create partition file");
    dst.set_len(size).expect("size partition file");
    src.seek(SeekFrom::Start(start)).expect("seek");
    let mut buf = vec![0u8; 1 << 20];
    let mut done = 0u64;
    while done < size {
        let n = buf
            .len()
            .min(usize::try_from(size - done).unwrap_or(buf.len()));
        src.read_exact(&mut buf[..n]).expect("read image");
        if buf[..n].iter().any(|&b| b != 0) {
            dst.seek(SeekFrom::Start(done)).expect("seek out");
            dst.write_all(&buf[..n]).expect("write out");
        }
        done += n as u64;
    }
}

fn sparse(dir: &Path, name: &str, size: u64) -> PathBuf {
    let p = dir.join(name);
    File::create(&p)
        .and_then(|f| f.set_len(size))
        .expect("sparse file");
    p
}

/// `dump.f2fs -d 1`: the superblock fields (`name → value`), and `volum_name` as `label`.
fn dump_superblock(part: &Path) -> BTreeMap<String, String> {
    let o = run("dump.f2fs", &["-d", "1", s(part)]);
    assert_success(&o, "dump.f2fs -d 1");
    let text = output_text(&o);
    let mut m = BTreeMap::new();
    for line in text.lines() {
        let Some((name, rest)) = line.split_once(char::is_whitespace) else {
            continue;
        };
        let rest = rest.trim();
        if name == "volum_name" {
            let v = rest.trim_start_matches('[').trim_end_matches(']');
            m.insert("label".into(), v.to_string());
        } else if let Some(v) = rest
            .strip_prefix('[')
            .and_then(|r| r.split(':').nth(1))
            .map(|r| r.trim().trim_end_matches(']').trim())
        {
            m.entry(name.to_string()).or_insert_with(|| v.to_string());
        }
    }
    m
}

fn field(m: &BTreeMap<String, String>, k: &str) -> u64 {
    m.get(k)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("dump.f2fs printed no {k}: {m:?}"))
}

/// `fsck.f2fs --dry-run -f`: asserts a clean volume.
fn fsck_f2fs_clean(part: &Path) {
    let o = run("fsck.f2fs", &["--dry-run", "-f", s(part)]);
    let text = output_text(&o);
    assert!(
        o.status.success() && !text.contains("[Fail]") && !text.contains("[FIX]"),
        "fsck.f2fs --dry-run -f {}: {text}",
        part.display()
    );
}

/// `fsck.f2fs --dry-run -t`: every path in the volume with its inode number.
fn f2fs_tree(part: &Path) -> Vec<(String, u32)> {
    let o = run("fsck.f2fs", &["--dry-run", "-t", s(part)]);
    assert_success(&o, "fsck.f2fs -t");
    let mut stack: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for line in output_text(&o).lines() {
        let Some(at) = line.find("|-- ") else {
            continue;
        };
        let depth = at / 4;
        let rest = &line[at + 4..];
        let Some((name, ino)) = rest.split_once(" <ino = 0x") else {
            continue;
        };
        let ino = u32::from_str_radix(ino.split('>').next().unwrap_or(""), 16).expect("ino");
        stack.truncate(depth);
        stack.push(name.to_string());
        out.push((format!("/{}", stack.join("/")), ino));
    }
    out
}

/// `dump.f2fs -i INO`: the inode's fields, and its data (regular files and symlinks) dumped
/// into `work/lost_found/`.
fn dump_inode(part: &Path, ino: u32, work: &Path) -> (BTreeMap<String, u64>, Option<Vec<u8>>) {
    let _ = fs::remove_dir_all(work.join("lost_found"));
    fs::create_dir_all(work).expect("work dir");
    let mut child = command("dump.f2fs")
        .args(["-i", &format!("0x{ino:x}"), s(part)])
        .current_dir(work)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("dump.f2fs");
    // dump.f2fs asks before it dumps a file's data, not for other inodes: when it exits
    // without reading, the answer meets a closed pipe (EPIPE), which is not a failure.
    let _ = child.stdin.take().expect("stdin").write_all(b"y\n");
    let o = child.wait_with_output().expect("dump.f2fs output");
    let mut m = BTreeMap::new();
    for line in output_text(&o).lines() {
        let Some((name, rest)) = line.split_once(char::is_whitespace) else {
            continue;
        };
        if let Some(v) = rest
            .trim()
            .strip_prefix('[')
            .and_then(|r| r.split(':').nth(1))
            .and_then(|r| r.trim().trim_end_matches(']').trim().parse().ok())
        {
            m.entry(name.to_string()).or_insert(v);
        }
    }
    let data = fs::read_dir(work.join("lost_found"))
        .ok()
        .and_then(|mut d| d.next())
        .and_then(|e| e.ok())
        .and_then(|e| fs::read(e.path()).ok());
    (m, data)
}

/// A source tree: nested directories, a 3 MB file, an empty one, a private one, a symlink.
fn source_tree(root: &Path) {
    fs::create_dir_all(root.join("etc/ssh")).unwrap();
    fs::create_dir_all(root.join("usr/lib/deep/er")).unwrap();
    fs::write(root.join("etc/hostname"), b"board\n").unwrap();
    fs::write(root.join("etc/empty"), b"").unwrap();
    fs::write(root.join("etc/ssh/key"), b"private\n").unwrap();
    fs::set_permissions(root.join("etc/ssh/key"), fs::Permissions::from_mode(0o600)).unwrap();
    let big: Vec<u8> = blockwise_test_kit::bytes(3_000_001, 29);
    fs::write(root.join("usr/lib/deep/er/blob.bin"), &big).unwrap();
    std::os::unix::fs::symlink("../etc/hostname", root.join("usr/hostname")).unwrap();
}

/// Every path of the source tree (as `/a/b`) with its metadata.
fn source_paths(root: &Path) -> Vec<(String, fs::Metadata)> {
    let mut out = Vec::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let md = fs::symlink_metadata(e.path()).unwrap();
            let rel = e
                .path()
                .strip_prefix(root)
                .unwrap()
                .to_str()
                .unwrap()
                .to_string();
            if md.is_dir() {
                todo.push(e.path());
            }
            out.push((format!("/{rel}"), md));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn f2fs_spec(e: u64, contents: &Path, with_time: bool) -> String {
    format!(
        r#"
[image]
erase-block = {e}
table = "gpt"
seed = 29
{time}

[[partition]]
name = "boot"
fs = "fat32"
size = "300MiB"
label = "BOOT"

[[partition]]
name = "root"
fs = "f2fs"
size = "{size}MiB"
label = "rootfs"
contents = "{c}"
"#,
        time = if with_time {
            "timestamp = 1700000000"
        } else {
            ""
        },
        size = if e >= 8 * MIB { 512 } else { 256 },
        c = contents.display()
    )
}

/// The partition of `plan` (JSON) with GPT name `name`: (start, size, filesystem).
fn part_named<'a>(plan: &'a Value, name: &str) -> &'a Value {
    plan["partitions"]
        .as_array()
        .expect("partitions")
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no partition {name} in {plan:#}"))
}

#[test]
fn f2fs_partitions_are_clean_aligned_identical_and_read_back() {
    for t in ["mkfs.f2fs", "sload.f2fs", "fsck.f2fs", "dump.f2fs", "blkid"] {
        if !have(t) {
            return;
        }
    }
    let dir = tempdir!();
    let src = dir.path().join("src");
    source_tree(&src);
    for e in [MIB, 4 * MIB, 8 * MIB] {
        let spec = write_file(
            dir.path(),
            &format!("f2fs-{e}.toml"),
            &f2fs_spec(e, &src, true),
        );
        let img = dir.path().join(format!("f2fs-{e}.img"));
        let o = blockwise!().build_with(&spec, &img, ["--json"]);
        let built = json_of(&o, "build --json");
        let planned = plan_json(&spec);
        assert_eq!(planned["partitions"], built["partitions"], "plan = build");
        let (report, code) = verify_json(&img, e, &["--strict"]);
        assert_eq!(code, 0, "verify --strict: {report:#}");
        assert_eq!(report["aligned"], true);
        assert_same_json(
            &built["partitions"],
            &report["partitions"],
            "plan vs verify",
        );
        let p = part_named(&report, "root");
        let f = &p["filesystem"];
        assert_eq!(f["kind"], "f2fs");
        let start = p["start_bytes"].as_u64().unwrap();
        let size = p["size_bytes"].as_u64().unwrap();
        assert_eq!(f["section_bytes"].as_u64(), Some(e.max(2 * MIB)), "E={e}");

        // The superblock as dump.f2fs prints it.
        let part = dir.path().join(format!("root-{e}.img"));
        extract(&img, start, size, &part);
        let sb = dump_superblock(&part);
        let seg = 2 * MIB;
        assert_eq!(
            field(&sb, "segs_per_sec") * seg,
            e.max(seg),
            "section = erase block"
        );
        let main = start + field(&sb, "main_blkaddr") * 4096;
        let seg0 = start + field(&sb, "segment0_blkaddr") * 4096;
        assert_eq!(main % e, 0, "main area at {main} from the disk start");
        assert_eq!(seg0 % e, 0, "segment0 at {seg0} from the disk start");
        assert_eq!(f["main_start_bytes"].as_u64(), Some(main));
        assert_eq!(f["segment0_start_bytes"].as_u64(), Some(seg0));
        assert_eq!(f["blocks"].as_u64(), Some(field(&sb, "block_count")));
        assert_eq!(f["segments"].as_u64(), Some(field(&sb, "segment_count")));
        assert_eq!(
            f["main_segments"].as_u64(),
            Some(field(&sb, "segment_count_main"))
        );
        assert_eq!(sb.get("label").map(String::as_str), Some("rootfs"));
        let id = blkid(&img, start);
        assert!(id.contains("TYPE=f2fs"), "{id}");
        assert!(id.contains("LABEL=rootfs"), "{id}");
        assert!(
            id.contains(&format!("UUID={}", f["uuid"].as_str().unwrap())),
            "{id} vs {f}"
        );

        fsck_f2fs_clean(&part);

        // The tree and every file, byte for byte, with modes and the fixed time.
        let listed = f2fs_tree(&part);
        let want = source_paths(&src);
        let listed_paths: Vec<&str> = listed.iter().map(|(p, _)| p.as_str()).collect();
        let want_paths: Vec<&str> = want.iter().map(|(p, _)| p.as_str()).collect();
        let mut sorted = listed_paths.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, want_paths, "fsck.f2fs -t lists the source tree");
        let work = dir.path().join("dump");
        for (path, md) in &want {
            let ino = listed.iter().find(|(p, _)| p == path).map(|x| x.1).unwrap();
            let (inode, data) = dump_inode(&part, ino, &work);
            assert_eq!(
                inode.get("i_mode").copied(),
                Some(u64::from(md.mode() & 0o177777)),
                "{path}: mode"
            );
            assert_eq!(inode.get("i_uid").copied(), Some(0), "{path}: owner");
            assert_eq!(
                inode.get("i_mtime").copied(),
                Some(1_700_000_000),
                "{path}: mtime"
            );
            if md.is_file() {
                let real = fs::read(src.join(&path[1..])).unwrap();
                assert_eq!(data.as_deref(), Some(&real[..]), "{path}: content");
            } else if md.file_type().is_symlink() {
                let target = fs::read_link(src.join(&path[1..])).unwrap();
                assert_eq!(
                    data.as_deref(),
                    Some(target.as_os_str().as_encoded_bytes()),
                    "{path}: target"
                );
            }
        }

        // Two builds, a while apart, with a source file touched: the same bytes.
        std::thread::sleep(std::time::Duration::from_millis(1100));
        let f = src.join("etc/hostname");
        fs::write(&f, fs::read(&f).unwrap()).unwrap();
        let again = dir.path().join(format!("again-{e}.img"));
        blockwise!().build(&spec, &again);
        assert!(
            fs::read(&img).unwrap() == fs::read(&again).unwrap(),
            "two builds differ (E = {e})"
        );
        for f in [&img, &again, &part] {
            let _ = fs::remove_file(f);
        }
    }
}

#[test]
fn f2fs_without_a_fixed_time_keeps_the_files_times_and_owners_on_request() {
    for t in ["mkfs.f2fs", "sload.f2fs", "fsck.f2fs", "dump.f2fs"] {
        if !have(t) {
            return;
        }
    }
    let dir = tempdir!();
    let src = dir.path().join("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("old"), b"old\n").unwrap();
    fs::set_permissions(src.join("old"), fs::Permissions::from_mode(0o640)).unwrap();
    let old = File::options().write(true).open(src.join("old")).unwrap();
    old.set_times(
        fs::FileTimes::new()
            .set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_234_567_890)),
    )
    .unwrap();
    drop(old);
    // As root, give the file owners a build must not invent.
    let (uid, gid) = if blockwise_test_kit::is_root() {
        std::os::unix::fs::chown(src.join("old"), Some(1234), Some(5678)).unwrap();
        (1234, 5678)
    } else {
        let md = fs::metadata(src.join("old")).unwrap();
        (md.uid(), md.gid())
    };
    // One partition from the tree with its owners, one without contents (mkfs.f2fs alone).
    let spec = write_file(
        dir.path(),
        "t.toml",
        &format!(
            "[image]\ntable = \"gpt\"\n[[partition]]\nfs = \"f2fs\"\nsize = \"128MiB\"\ncontents = \"{}\"\nf2fs = {{ preserve-owners = true }}\n[[partition]]\nfs = \"f2fs\"\nsize = \"128MiB\"\nlabel = \"empty\"\n",
            src.display()
        ),
    );
    let img = dir.path().join("t.img");
    let o = Command::new(blockwise!().path())
        .args(["build", s(&spec), "-o", s(&img), "--json"])
        .env_remove("SOURCE_DATE_EPOCH")
        .output()
        .unwrap();
    assert_success(&o, "build");
    let built = json_of(&o, "build --json");
    let parts = built["partitions"].as_array().unwrap();
    let part = |i: usize, name: &str| {
        let p = &parts[i];
        let f = dir.path().join(name);
        extract(
            &img,
            p["start_bytes"].as_u64().unwrap(),
            p["size_bytes"].as_u64().unwrap(),
            &f,
        );
        f
    };
    let (full, empty) = (part(0, "full.img"), part(1, "empty.img"));
    fsck_f2fs_clean(&full);
    fsck_f2fs_clean(&empty);
    assert!(f2fs_tree(&empty).is_empty());
    assert_eq!(
        dump_superblock(&empty).get("label").map(String::as_str),
        Some("empty")
    );
    let listed = f2fs_tree(&full);
    let ino = listed.iter().find(|(p, _)| p == "/old").unwrap().1;
    let (inode, data) = dump_inode(&full, ino, &dir.path().join("dump"));
    assert_eq!(inode.get("i_mtime").copied(), Some(1_234_567_890));
    assert_eq!(inode.get("i_mode").copied(), Some(0o100640));
    assert_eq!(inode.get("i_uid").copied(), Some(u64::from(uid)));
    assert_eq!(inode.get("i_gid").copied(), Some(u64::from(gid)));
    assert_eq!(data.as_deref(), Some(&b"old\n"[..]));
}

#[test]
fn f2fs_entries_set_modes_and_owners_of_the_tree() {
    for t in ["mkfs.f2fs", "sload.f2fs", "fsck.f2fs", "dump.f2fs"] {
        if !have(t) {
            return;
        }
    }
    let dir = tempdir!();
    let src = dir.path().join("src");
    source_tree(&src);
    let spec = |entries: &str| {
        format!(
            "[image]\ntable = \"none\"\ntimestamp = 5\n[[partition]]\nfs = \"f2fs\"\nsize = \"128MiB\"\ncontents = \"{}\"\n{entries}",
            src.display()
        )
    };
    let img = blockwise!().build_spec(
        dir.path(),
        "entries",
        &spec(
            "[[partition.entry]]\npath = \"/etc/ssh/key\"\nmode = \"0400\"\nuid = 0\ngid = 42\n\
             [[partition.entry]]\npath = \"/usr/lib\"\nkind = \"dir\"\nmode = \"0700\"\nuid = 1000\ngid = 1000\n\
             [[partition.entry]]\npath = \"/usr/hostname\"\nuid = 7\n\
             [[partition.entry]]\npath = \"/usr/lib/deep/er/blob.bin\"\nmode = \"4755\"\n",
        ),
    );
    fsck_f2fs_clean(&img);
    let listed = f2fs_tree(&img);
    let work = dir.path().join("dump");
    for (path, mode, uid, gid) in [
        ("/etc/ssh/key", 0o100400, 0, 42),
        ("/usr/lib", 0o040700, 1000, 1000),
        ("/usr/hostname", 0o120777, 7, 0),
        ("/usr/lib/deep/er/blob.bin", 0o104755, 0, 0),
        ("/etc/hostname", 0o100644, 0, 0),
    ] {
        let ino = listed.iter().find(|(p, _)| p == path).unwrap().1;
        let (inode, _) = dump_inode(&img, ino, &work);
        assert_eq!(inode.get("i_mode").copied(), Some(mode), "{path}: mode");
        assert_eq!(inode.get("i_uid").copied(), Some(uid), "{path}: uid");
        assert_eq!(inode.get("i_gid").copied(), Some(gid), "{path}: gid");
    }
    // What sload.f2fs cannot make is refused, naming the entry; nothing is left behind.
    for (entries, key) in [
        ("[[partition.entry]]\npath = \"/etc/new\"\nkind = \"file\"\n", "partition[1].entry[1].path"),
        ("[[partition.entry]]\npath = \"/etc/hostname\"\nmode = \"0600\"\n[[partition.entry]]\npath = \"/dev/null\"\nkind = \"char\"\nmajor = 1\nminor = 3\n", "partition[1].entry[2].kind"),
        ("[[partition.entry]]\npath = \"/etc\"\nxattrs = { \"user.a\" = \"b\" }\n", "partition[1].entry[1].xattrs"),
    ] {
        let p = write_file(dir.path(), "bad.toml", &spec(entries));
        let out = dir.path().join("bad.img");
        let o = blockwise!().try_build(&p, &out);
        assert_eq!(o.status.code(), Some(2), "{}", output_text(&o));
        assert!(output_text(&o).contains(key), "{entries}: {}", output_text(&o));
        assert!(!out.exists());
    }
    let leftovers: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with(".blockwise"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn f2fs_plan_and_verify_agree_with_mkfs_f2fs_and_dump_f2fs() {
    for t in ["mkfs.f2fs", "dump.f2fs", "blkid"] {
        if !have(t) {
            return;
        }
    }
    let dir = tempdir!();
    let mut compared = 0;
    let mut refused = 0;
    for size_mib in [40u64, 100, 130, 300, 1030, 4100] {
        for (seg, zone) in [(1u32, 1u32), (2, 1), (4, 1), (2, 2), (1, 4), (8, 1)] {
            for heap in ["0", "1"] {
                let img = sparse(dir.path(), "m.img", size_mib * MIB);
                let label = format!("L{size_mib}s{seg}z{zone}");
                let uuid = format!("{:08x}-1111-4222-8333-{:012x}", size_mib, seg * 10 + zone);
                let mk = run(
                    "mkfs.f2fs",
                    &[
                        "-q",
                        "-f",
                        "-a",
                        heap,
                        "-s",
                        &seg.to_string(),
                        "-z",
                        &zone.to_string(),
                        "-l",
                        &label,
                        "-U",
                        &uuid,
                        s(&img),
                    ],
                );
                // The plan of the same request: a bare F2FS of this size.
                let spec = write_file(
                    dir.path(),
                    "m.toml",
                    &format!(
                        "[image]\ntable = \"none\"\nerase-block = \"4MiB\"\n[[partition]]\nfs = \"f2fs\"\nsize = \"{size_mib}MiB\"\nlabel = \"{label}\"\nfs-uuid = \"{uuid}\"\nf2fs = {{ segments-per-section = {seg}, sections-per-zone = {zone} }}\n"
                    ),
                );
                let po = blockwise!().run(["plan", s(&spec), "--json"]);
                if !mk.status.success() {
                    assert!(
                        !po.status.success(),
                        "mkfs.f2fs refuses {size_mib} MiB -s {seg} -z {zone}, the plan does not: {}",
                        output_text(&po)
                    );
                    assert!(
                        output_text(&po).contains("partition[1].size"),
                        "{}",
                        output_text(&po)
                    );
                    refused += 1;
                    continue;
                }
                assert_success(&po, &format!("plan {size_mib} MiB -s {seg} -z {zone}"));
                let planned = json_of(&po, "plan");
                let pf = &planned["partitions"][0]["filesystem"];
                let sb = dump_superblock(&img);
                let (report, _) = verify_json(&img, 4 * MIB, &[]);
                let vf = &report["partitions"][0]["filesystem"];
                let what = format!("{size_mib} MiB -s {seg} -z {zone} -a {heap}");
                for (json, dump) in [
                    ("blocks", "block_count"),
                    ("segments_per_section", "segs_per_sec"),
                    ("sections_per_zone", "secs_per_zone"),
                    ("segments", "segment_count"),
                    ("main_segments", "segment_count_main"),
                ] {
                    let d = field(&sb, dump);
                    assert_eq!(vf[json].as_u64(), Some(d), "{what}: verify {json}");
                    assert_eq!(pf[json].as_u64(), Some(d), "{what}: plan {json}");
                }
                for (json, dump) in [
                    ("segment0_start_bytes", "segment0_blkaddr"),
                    ("main_start_bytes", "main_blkaddr"),
                ] {
                    let d = field(&sb, dump) * 4096;
                    assert_eq!(vf[json].as_u64(), Some(d), "{what}: verify {json}");
                    assert_eq!(pf[json].as_u64(), Some(d), "{what}: plan {json}");
                }
                assert_eq!(vf["label"].as_str(), sb.get("label").map(String::as_str));
                let id = blkid(&img, 0);
                assert!(id.contains(&format!("UUID={uuid}")), "{id}");
                assert_eq!(vf["uuid"].as_str(), Some(uuid.as_str()), "{what}");
                assert_eq!(vf["label"].as_str(), Some(label.as_str()), "{what}");
                // The verdict follows the same rule as the plan.
                assert_eq!(vf["aligned"], pf["aligned"], "{what}");
                compared += 1;
            }
        }
    }
    assert!(
        compared >= 40 && refused >= 4,
        "{compared} compared, {refused} refused"
    );
}

/// Issue 29: the smallest F2FS partitions. mkfs.f2fs makes volumes in which sload.f2fs
/// cannot store one file (it takes an empty segment only while more than the reserved
/// segments + 1 are free, and moves its six logs at the end). A sweep over sizes in 2 MiB
/// steps around the threshold, for 1, 2, 4 and 8 segments per section (one zone per
/// section, as plan chooses), including sizes between whole sections (where mkfs.f2fs
/// reserves more): every size plan accepts builds with a small tree and fsck.f2fs finds it
/// clean; every size it refuses names the smallest size, and mkfs.f2fs or sload.f2fs
/// fails on it with the same tree.
#[test]
fn r29_f2fs_sizes_plan_accepts_build_and_the_refused_ones_fail() {
    for t in ["mkfs.f2fs", "sload.f2fs", "fsck.f2fs"] {
        if !have(t) {
            return;
        }
    }
    let dir = tempdir!();
    let tree = dir.path().join("tree");
    fs::create_dir_all(tree.join("sub")).expect("tree");
    fs::write(tree.join("sub/data"), vec![7u8; 9000]).expect("file");
    fs::write(tree.join("small"), b"x").expect("file");
    let (mut built, mut refused) = (0, 0);
    // (segments per section, first and last size in MiB): the windows hold the threshold
    // f2fs-tools 1.15 showed (64, 92, 136 and 240 MiB) and sizes above it that fail again.
    for (seg, from, to) in [
        (1u32, 52u64, 68u64),
        (2, 80, 112),
        (4, 128, 168),
        (8, 236, 262),
    ] {
        for mib in (from..=to).step_by(2) {
            let what = format!("{mib} MiB -s {seg}");
            let spec = write_file(
                dir.path(),
                "f.toml",
                &format!(
                    "[image]\ntable = \"none\"\nerase-block = \"2MiB\"\ntimestamp = 1\n[[partition]]\nfs = \"f2fs\"\nsize = \"{mib}MiB\"\ncontents = \"tree\"\nf2fs = {{ segments-per-section = {seg} }}\n"
                ),
            );
            let img = dir.path().join("f.img");
            let _ = fs::remove_file(&img);
            let po = blockwise!().run(["plan", s(&spec)]);
            if po.status.success() {
                assert_success(&blockwise!().try_build(&spec, &img), &what);
                fsck_f2fs_clean(&img);
                built += 1;
                continue;
            }
            let text = output_text(&po);
            assert!(
                text.contains("partition[1].size") && text.contains("it needs at least"),
                "{what}: {text}"
            );
            // The tools on the same request: mkfs.f2fs refuses, or sload.f2fs fails.
            let raw = sparse(dir.path(), "raw.img", mib * MIB);
            let mk = run(
                "mkfs.f2fs",
                &[
                    "-q",
                    "-f",
                    "-r",
                    "-t",
                    "0",
                    "-s",
                    &seg.to_string(),
                    "-z",
                    "1",
                    s(&raw),
                ],
            );
            if mk.status.success() {
                let sl = run("sload.f2fs", &["-f", s(&tree), s(&raw)]);
                assert!(
                    !sl.status.success(),
                    "{what}: plan refuses ({text}), but sload.f2fs stored the tree"
                );
            }
            refused += 1;
        }
    }
    assert!(
        built >= 18 && refused >= 30,
        "{built} built, {refused} refused"
    );
}

/// A tree larger than the F2FS partition is refused by the build with the sizes to change
/// (not sload.f2fs's assertion), and leaves neither the output nor a temp file behind.
#[test]
fn r29_f2fs_contents_that_do_not_fit_are_a_clear_error() {
    for t in ["mkfs.f2fs", "sload.f2fs"] {
        if !have(t) {
            return;
        }
    }
    let dir = tempdir!();
    let tree = dir.path().join("tree");
    fs::create_dir_all(&tree).expect("tree");
    // 80 MiB of distinct bytes in a 96 MiB partition.
    for k in 0..5u8 {
        let block: Vec<u8> = (0..MIB).map(|i| (i as u8) ^ k).collect();
        let mut f = File::create(tree.join(format!("f{k}"))).expect("file");
        for j in 0..16u8 {
            let mut b = block.clone();
            b[0] = j;
            f.write_all(&b).expect("write");
        }
    }
    let spec = write_file(
        dir.path(),
        "f.toml",
        "[image]\ntable = \"none\"\nerase-block = \"2MiB\"\n[[partition]]\nfs = \"f2fs\"\nsize = \"96MiB\"\ncontents = \"tree\"\n",
    );
    let out = dir.path().join("out").join("f.img");
    fs::create_dir_all(out.parent().expect("dir")).expect("out dir");
    let o = blockwise!().try_build(&spec, &out);
    let text = output_text(&o);
    assert_eq!(o.status.code(), Some(2), "{text}");
    assert!(
        text.contains("partition[1].size: the contents (80 MiB in files) do not fit")
            && text.contains("make the partition larger"),
        "{text}"
    );
    assert!(
        !text.contains("panicked") && !text.contains("ASSERT"),
        "{text}"
    );
    let left: Vec<_> = fs::read_dir(out.parent().expect("dir"))
        .expect("list")
        .chain(fs::read_dir(dir.path()).expect("list"))
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.') || n.ends_with(".img"))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// mkfs.f2fs or sload.f2fs failing for any other reason (here stand-ins on PATH that print
/// an error and exit 1, or die of a signal) is an error naming the partition, the tool and
/// what it printed; the build leaves neither the output nor its temp filesystem.
#[test]
fn r29_f2fs_tool_failures_are_clear_and_leave_nothing() {
    use std::os::unix::fs::PermissionsExt as _;
    if !have("mkfs.f2fs") {
        return;
    }
    let dir = tempdir!();
    let bin = dir.path().join("bin");
    let tree = dir.path().join("tree");
    fs::create_dir_all(&bin).expect("bin");
    fs::create_dir_all(&tree).expect("tree");
    fs::write(tree.join("a"), b"a").expect("file");
    let spec = write_file(
        dir.path(),
        "f.toml",
        "[image]\ntable = \"none\"\nerase-block = \"2MiB\"\n[[partition]]\nfs = \"f2fs\"\nsize = \"128MiB\"\ncontents = \"tree\"\n",
    );
    let real_mkfs = command("sh")
        .args(["-c", "command -v mkfs.f2fs || echo /usr/sbin/mkfs.f2fs"])
        .output()
        .expect("sh");
    let real_mkfs = String::from_utf8_lossy(&real_mkfs.stdout)
        .trim()
        .to_string();
    for (tool, script, want) in [
        (
            "mkfs.f2fs",
            "#!/bin/sh\necho 'Error: Device size is not sufficient for F2FS volume'\nexit 1\n"
                .to_string(),
            "partition[1]: mkfs.f2fs failed (exit status: 1): Error: Device size is not sufficient",
        ),
        (
            "sload.f2fs",
            "#!/bin/sh\necho 'Info: loading'\nkill -SEGV $$\n".to_string(),
            "partition[1]: sload.f2fs failed (signal: 11",
        ),
    ] {
        let _ = fs::remove_file(bin.join("mkfs.f2fs"));
        let _ = fs::remove_file(bin.join("sload.f2fs"));
        if tool == "sload.f2fs" {
            // The real mkfs.f2fs, a failing sload.f2fs.
            let wrapper = format!("#!/bin/sh\nexec {real_mkfs} \"$@\"\n");
            fs::write(bin.join("mkfs.f2fs"), wrapper).expect("wrapper");
            fs::set_permissions(bin.join("mkfs.f2fs"), fs::Permissions::from_mode(0o755))
                .expect("chmod");
        }
        fs::write(bin.join(tool), script).expect("script");
        fs::set_permissions(bin.join(tool), fs::Permissions::from_mode(0o755)).expect("chmod");
        let out_dir = dir.path().join("out");
        fs::create_dir_all(&out_dir).expect("out");
        let out = out_dir.join("f.img");
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let o = Command::new(blockwise!().path())
            .args(["build", s(&spec), "-o", s(&out), "-q"])
            .env("PATH", path)
            .output()
            .expect("blockwise");
        let text = output_text(&o);
        assert_eq!(o.status.code(), Some(2), "{tool}: {text}");
        assert!(text.contains(want), "{tool}: {text}");
        assert!(!text.contains("panicked"), "{text}");
        let left: Vec<_> = fs::read_dir(&out_dir)
            .expect("list")
            .filter_map(Result::ok)
            .map(|e| e.file_name())
            .collect();
        assert!(left.is_empty(), "{tool}: left behind {left:?}");
    }
}

/// `sgdisk -i N IMAGE`: the attribute flags as hex.
fn sgdisk_attributes(img: &Path, n: u32) -> String {
    let o = run("sgdisk", &["-i", &n.to_string(), s(img)]);
    assert_success(&o, "sgdisk -i");
    output_text(&o)
        .lines()
        .find_map(|l| l.strip_prefix("Attribute flags: "))
        .unwrap_or_else(|| panic!("no attribute flags: {}", output_text(&o)))
        .trim()
        .to_string()
}

#[test]
fn gpt_attributes_reach_the_table_and_mbr_refuses_them() {
    if !have("sgdisk") {
        return;
    }
    let dir = tempdir!();
    let spec = r#"
[image]
erase-block = "4MiB"
table = "gpt"

[[partition]]
name = "esp"
fs = "none"
size = "8MiB"
attributes = ["required", "no-block-io"]

[[partition]]
name = "root"
fs = "none"
size = "8MiB"
bootable = true
attributes = ["read-only", "no-auto", 50]

[[partition]]
name = "var"
fs = "none"
size = "8MiB"
attributes = ["grow-file-system", "hidden", "legacy-bios-bootable"]

[[partition]]
name = "plain"
fs = "none"
size = "8MiB"
"#;
    let img = blockwise!().build_spec(dir.path(), "attrs", spec);
    assert_eq!(sgdisk_attributes(&img, 1), "0000000000000003");
    assert_eq!(sgdisk_attributes(&img, 2), "9004000000000004");
    assert_eq!(sgdisk_attributes(&img, 3), "4800000000000004");
    assert_eq!(sgdisk_attributes(&img, 4), "0000000000000000");
    let planned = plan_json(&dir.path().join("attrs.toml"));
    let (report, code) = verify_json(&img, 4 * MIB, &[]);
    assert_eq!(code, 0, "{report:#}");
    for (i, want) in [
        (0, serde_json::json!(["required", "no-block-io"])),
        (1, serde_json::json!([50, "read-only", "no-auto"])),
        (2, serde_json::json!(["grow-file-system", "hidden"])),
    ] {
        assert_eq!(report["partitions"][i]["attributes"], want, "verify {i}");
        assert_eq!(planned["partitions"][i]["attributes"], want, "plan {i}");
    }
    assert_eq!(report["partitions"][2]["bootable"], true);
    assert!(report["partitions"][3].get("attributes").is_none());

    // MBR: refused, naming the key; unknown or reserved bits too.
    for (text, key, why) in [
        ("[image]\ntable = \"mbr\"\n[[partition]]\nfs = \"none\"\nsize = \"8MiB\"\nattributes = [\"read-only\"]\n", "partition[1].attributes", "only GPT"),
        ("[image]\ntable = \"mbr\"\n[[partition]]\nfs = \"none\"\nsize = \"8MiB\"\nattributes = [\"legacy-bios-bootable\"]\n", "partition[1].attributes", "only GPT"),
        ("[image]\ntable = \"gpt\"\n[[partition]]\nfs = \"none\"\nsize = \"8MiB\"\nattributes = [\"readonly\"]\n", "partition[1].attributes", "is not a GPT attribute"),
        ("[image]\ntable = \"gpt\"\n[[partition]]\nfs = \"none\"\nsize = \"8MiB\"\nattributes = [7]\n", "partition[1].attributes", "reserved by the UEFI"),
    ] {
        let spec = write_file(dir.path(), "bad.toml", text);
        let o = blockwise!().run(["plan", s(&spec)]);
        assert_eq!(o.status.code(), Some(2), "{}", output_text(&o));
        let msg = output_text(&o);
        assert!(msg.contains(key) && msg.contains(why), "{text}: {msg}");
    }
}

/// Asserts that no erase block holds bytes of two of `parts` (JSON partitions).
fn no_shared_erase_block(parts: &[&Value], e: u64) {
    let mut spans: Vec<(u64, u64)> = parts
        .iter()
        .map(|p| {
            let start = p["start_bytes"].as_u64().unwrap();
            let end = start + p["size_bytes"].as_u64().unwrap();
            assert_eq!(start % e, 0, "{p}: starts off the erase block");
            (start / e, (end - 1) / e)
        })
        .collect();
    spans.sort_unstable();
    for w in spans.windows(2) {
        assert!(w[0].1 < w[1].0, "erase blocks {w:?} shared");
    }
}

#[test]
fn ab_slots_are_pairs_on_their_own_erase_blocks() {
    for t in ["sgdisk", "blkid", "fsck.erofs", "fsck.fat"] {
        if !have(t) {
            return;
        }
    }
    let dir = tempdir!();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/ab-slots.toml");
    let img = dir.path().join("ab.img");
    let o = blockwise!().build_with(&example, &img, ["--json"]);
    let built = json_of(&o, "build --json");
    let e = built["erase_block_bytes"].as_u64().unwrap();
    assert_eq!(e, 8 * MIB);
    let (report, code) = verify_json(&img, e, &[]);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(
        report["slots"], built["slots"],
        "verify pairs the slots as the plan does"
    );
    assert_same_json(&built["partitions"], &report["partitions"], "ab");
    let groups = report["slots"].as_array().unwrap();
    let names: Vec<&str> = groups.iter().map(|g| g["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["boot", "system", "system-verity"]);
    for g in groups {
        let slots: Vec<&str> = g["partitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["slot"].as_str().unwrap())
            .collect();
        assert_eq!(slots, ["a", "b"]);
    }
    let all: Vec<&Value> = report["partitions"].as_array().unwrap().iter().collect();
    no_shared_erase_block(&all, e);
    let by_name = |n: &str| {
        *all.iter()
            .find(|p| p["name"] == n)
            .unwrap_or_else(|| panic!("no {n}"))
    };
    for (a, b) in [("boot_a", "boot_b"), ("system_a", "system_b")] {
        let (pa, pb) = (by_name(a), by_name(b));
        assert_eq!(pa["size_bytes"], pb["size_bytes"]);
        assert_eq!(pa["slot"], "a");
        assert_eq!(pb["slot"], "b");
        assert_eq!(pa["filesystem"]["label"], a);
        assert_eq!(pb["filesystem"]["label"], b);
    }
    // The attributes sgdisk shows: read-only on both system slots, grow on data.
    let index = |n: &str| by_name(n)["index"].as_u64().unwrap() as u32;
    assert_eq!(
        sgdisk_attributes(&img, index("system_a")),
        "1000000000000000"
    );
    assert_eq!(
        sgdisk_attributes(&img, index("system_b")),
        "1000000000000000"
    );
    assert_eq!(sgdisk_attributes(&img, index("data")), "0800000000000000");
    assert_eq!(sgdisk_attributes(&img, index("boot_a")), "0000000000000000");
    // Same contents, own identities: each slot's filesystem (EROFS) is clean and has its own
    // label and UUID (tests/rofs.rs mounts them and checks their dm-verity trees).
    let mut uuids = Vec::new();
    for n in ["system_a", "system_b"] {
        let p = by_name(n);
        let start = p["start_bytes"].as_u64().unwrap();
        let part = dir.path().join(format!("{n}.img"));
        extract(&img, start, p["size_bytes"].as_u64().unwrap(), &part);
        assert_success(&run("fsck.erofs", &[s(&part)]), "fsck.erofs");
        assert_eq!(p["filesystem"]["kind"], "erofs");
        let id = blkid(&img, start);
        assert!(id.contains(&format!("LABEL={n}")), "{id}");
        uuids.push(
            id.lines()
                .find(|l| l.starts_with("UUID="))
                .unwrap()
                .to_string(),
        );
    }
    assert_ne!(uuids[0], uuids[1], "slots share a filesystem UUID");
    for n in ["boot_a", "boot_b"] {
        let id = blkid(&img, by_name(n)["start_bytes"].as_u64().unwrap());
        assert!(id.contains(&format!("LABEL={n}")), "{id}");
    }

    // The systemd-sysupdate example: the placeholder is a hole of the root's type and size.
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/sysupdate.toml");
    let img = dir.path().join("sysupdate.img");
    blockwise!().build(&example, &img);
    let (report, code) = verify_json(&img, e, &[]);
    assert_eq!(code, 0, "{report:#}");
    let empty = report["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "_empty")
        .expect("_empty");
    let root = report["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "example_1.0")
        .expect("root");
    assert_eq!(empty["type"], root["type"]);
    assert_eq!(empty["size_bytes"], root["size_bytes"]);
    assert!(empty["filesystem"].is_null(), "{empty}");
    assert!(report.get("slots").is_none(), "no slots in {report:#}");
}

#[test]
fn slots_on_an_mbr_disk_pair_by_label_and_refuse_pinned_ids() {
    let dir = tempdir!();
    let spec = r#"
[image]
erase-block = "4MiB"
table = "mbr"
timestamp = 1

[[partition]]
fs = "fat16"
size = "32MiB"
label = "BOOT"
slots = ["a", "b"]

[[partition]]
fs = "none"
size = "8MiB"
name = "scratch"
slots = ["x", "y"]
"#;
    let spec_path = write_file(dir.path(), "mbr.toml", spec);
    let img = dir.path().join("mbr.img");
    let o = blockwise!().build_with(&spec_path, &img, ["--json"]);
    let built = json_of(&o, "build");
    let notes = built["notes"].to_string();
    assert!(notes.contains("partition[2].slots"), "{notes}");
    let (report, code) = verify_json(&img, 4 * MIB, &[]);
    assert_eq!(code, 0, "{report:#}");
    let groups = report["slots"].as_array().expect("slots");
    assert_eq!(groups.len(), 1, "{groups:?}");
    assert_eq!(groups[0]["name"], "BOOT");
    assert_eq!(report["slots"][0], built["slots"][0]);
    for (text, key) in [
        ("[[partition]]\nfs = \"ext4\"\nsize = \"8MiB\"\nlabel = \"r\"\nslots = [\"a\", \"b\"]\nfs-uuid = \"5d8a2c4e-3f61-4b7a-9c0e-2a1b3c4d5e6f\"\n", "partition[1].fs-uuid"),
        ("[image]\ntable = \"gpt\"\n[[partition]]\nfs = \"none\"\nsize = \"8MiB\"\nname = \"r\"\nslots = [\"a\", \"b\"]\nuuid = \"5d8a2c4e-3f61-4b7a-9c0e-2a1b3c4d5e6f\"\n", "partition[1].uuid"),
        ("[[partition]]\nfs = \"none\"\nsize = \"8MiB\"\nslots = [\"a\", \"b\"]\n", "partition[1].slots"),
        ("[[partition]]\nfs = \"none\"\nsize = \"8MiB\"\nname = \"r\"\nslots = [\"a\"]\n", "partition[1].slots"),
        ("[[partition]]\nfs = \"none\"\nsize = \"8MiB\"\nname = \"r\"\nslots = [\"a\", \"a\"]\n", "partition[1].slots"),
        ("[[partition]]\nfs = \"none\"\nsize = \"8MiB\"\nname = \"r\"\nslots = [\"a-1\", \"b\"]\n", "partition[1].slots"),
        ("[image]\nsize = \"1GiB\"\n[[partition]]\nfs = \"none\"\nsize = \"fill\"\nname = \"r\"\nslots = [\"a\", \"b\"]\n", "partition[1].size"),
        ("[[partition]]\nfs = \"fat16\"\nsize = \"32MiB\"\nlabel = \"ELEVENCHARS\"\nslots = [\"a\", \"b\"]\n", "partition[1].label"),
    ] {
        let p = write_file(dir.path(), "bad.toml", text);
        let o = blockwise!().run(["plan", s(&p)]);
        assert_eq!(o.status.code(), Some(2), "{text}: {}", output_text(&o));
        assert!(output_text(&o).contains(key), "{text}: {}", output_text(&o));
    }
}

/// One image made by a foreign tool: (file, kind, label, uuid, size in bytes if the header
/// gives one, LUKS payload offset).
struct Foreign {
    file: PathBuf,
    kind: &'static str,
    label: Option<&'static str>,
    uuid: String,
    size: Option<u64>,
    payload: Option<u64>,
}

fn sh(script: &str, dir: &Path) {
    let o = Command::new("sh")
        .args(["-c", script])
        .current_dir(dir)
        .output()
        .expect("sh");
    assert_success(&o, script);
}

/// The images the tools make, with what the tools say about them.
fn foreign_images(dir: &Path) -> Vec<Foreign> {
    let mut out = Vec::new();
    let tool_text = |tool: &str, args: &[&str]| {
        let o = run(tool, args);
        assert_success(&o, tool);
        output_text(&o)
    };
    if have("mkfs.btrfs") {
        let f = sparse(dir, "btrfs.img", 300 * MIB);
        sh(
            "mkfs.btrfs -q -f -L BTR -U 11111111-2222-4333-8444-555555555555 btrfs.img",
            dir,
        );
        let dump = tool_text("btrfs", &["inspect-internal", "dump-super", s(&f)]);
        let dev_total = dump
            .lines()
            .skip_while(|l| !l.starts_with("dev_item."))
            .find_map(|l| l.strip_prefix("dev_item.total_bytes"))
            .and_then(|v| v.trim().parse().ok());
        out.push(Foreign {
            file: f,
            kind: "btrfs",
            label: Some("BTR"),
            uuid: "11111111-2222-4333-8444-555555555555".into(),
            size: dev_total,
            payload: None,
        });
    }
    if have("mkfs.xfs") && have("xfs_db") {
        let f = sparse(dir, "xfs.img", 1 << 30);
        sh("mkfs.xfs -q -f -L XFSL -m uuid=22222222-2222-4333-8444-555555555555 -d su=64k,sw=4 xfs.img", dir);
        let t = tool_text(
            "xfs_db",
            &["-r", "-c", "sb 0", "-c", "p dblocks blocksize", s(&f)],
        );
        let val = |k: &str| -> u64 {
            t.lines()
                .find_map(|l| l.strip_prefix(&format!("{k} = ")))
                .and_then(|v| v.trim().parse().ok())
                .expect("xfs_db value")
        };
        out.push(Foreign {
            file: f,
            kind: "xfs",
            label: Some("XFSL"),
            uuid: "22222222-2222-4333-8444-555555555555".into(),
            size: Some(val("dblocks") * val("blocksize")),
            payload: None,
        });
    }
    if have("mkfs.ntfs") {
        let f = sparse(dir, "ntfs.img", 64 * MIB);
        sh("mkfs.ntfs -q -F -f -L NtfsLabel ntfs.img", dir);
        let id = blkid(&f, 0);
        let uuid = id
            .lines()
            .find_map(|l| l.strip_prefix("UUID="))
            .expect("ntfs uuid")
            .to_string();
        // mkntfs gives the volume every sector but the last (the backup boot sector).
        out.push(Foreign {
            file: f,
            kind: "ntfs",
            label: Some("NtfsLabel"),
            uuid,
            size: Some(64 * MIB - 512),
            payload: None,
        });
    }
    if have("genisoimage") && have("isoinfo") {
        fs::create_dir_all(dir.join("iso")).unwrap();
        fs::write(dir.join("iso/readme.txt"), b"an iso\n").unwrap();
        sh("genisoimage -quiet -J -V MyIsoLabel -o iso.img iso", dir);
        let f = dir.join("iso.img");
        let t = tool_text("isoinfo", &["-d", "-i", s(&f)]);
        let blocks: u64 = t
            .lines()
            .find_map(|l| l.strip_prefix("Volume size is: "))
            .and_then(|v| v.trim().parse().ok())
            .expect("iso size");
        let id = blkid(&f, 0);
        let uuid = id
            .lines()
            .find_map(|l| l.strip_prefix("UUID="))
            .expect("iso uuid")
            .to_string();
        out.push(Foreign {
            file: f,
            kind: "iso9660",
            label: Some("MyIsoLabel"),
            uuid,
            size: Some(blocks * 2048),
            payload: None,
        });
    }
    if have("cryptsetup") {
        fs::write(dir.join("key"), b"not a secret").unwrap();
        for (v, label) in [("luks1", None), ("luks2", Some("LuksLabel"))] {
            let f = sparse(dir, &format!("{v}.img"), 32 * MIB);
            let uuid = format!("3333333{}-2222-4333-8444-555555555555", &v[4..]);
            let label_arg = label.map(|l| format!("--label {l}")).unwrap_or_default();
            sh(&format!("cryptsetup luksFormat -q --type {v} --pbkdf pbkdf2 --pbkdf-force-iterations 1000 --key-file key --uuid {uuid} {label_arg} {v}.img"), dir);
            let t = tool_text("cryptsetup", &["luksDump", s(&f)]);
            let payload = if v == "luks1" {
                t.lines()
                    .find_map(|l| l.strip_prefix("Payload offset:"))
                    .and_then(|x| x.trim().parse::<u64>().ok())
                    .map(|x| x * 512)
            } else {
                t.lines()
                    .skip_while(|l| !l.starts_with("Data segments:"))
                    .find_map(|l| l.trim().strip_prefix("offset:"))
                    .and_then(|x| x.split_whitespace().next()?.parse().ok())
            };
            assert!(payload.is_some(), "{t}");
            out.push(Foreign {
                file: f,
                kind: "luks",
                label,
                uuid,
                size: None,
                payload,
            });
        }
    }
    if have("mkswap") {
        let f = sparse(dir, "swap.img", 64 * MIB);
        sh(
            "mkswap -q -L SWP -U 55555555-2222-4333-8444-555555555555 swap.img",
            dir,
        );
        out.push(Foreign {
            file: f,
            kind: "swap",
            label: Some("SWP"),
            uuid: "55555555-2222-4333-8444-555555555555".into(),
            size: Some(64 * MIB),
            payload: None,
        });
    }
    if have("mkfs.f2fs") {
        let f = sparse(dir, "f2fs.img", 64 * MIB);
        sh(
            "mkfs.f2fs -q -f -l F2L -U 66666666-2222-4333-8444-555555555555 f2fs.img",
            dir,
        );
        out.push(Foreign {
            file: f,
            kind: "f2fs",
            label: Some("F2L"),
            uuid: "66666666-2222-4333-8444-555555555555".into(),
            size: Some(64 * MIB),
            payload: None,
        });
    }
    out
}

fn check_found(fs: &Value, f: &Foreign, base: u64, what: &str) {
    assert_eq!(fs["kind"], f.kind, "{what}: {fs}");
    assert_eq!(fs["label"].as_str(), f.label, "{what}: label");
    assert_eq!(fs["uuid"].as_str(), Some(f.uuid.as_str()), "{what}: uuid");
    if f.kind == "f2fs" {
        assert_eq!(
            fs["blocks"].as_u64().map(|b| b * 4096),
            f.size,
            "{what}: size"
        );
    } else {
        assert_eq!(fs["size_bytes"].as_u64(), f.size, "{what}: size");
    }
    assert_eq!(
        fs["data_start_bytes"].as_u64(),
        f.payload.map(|p| p + base),
        "{what}: payload"
    );
}

#[test]
fn verify_names_what_other_tools_made() {
    if !have("blkid") {
        return;
    }
    let dir = tempdir!();
    let images = foreign_images(dir.path());
    let e = 4 * MIB;
    for f in &images {
        let what = f.file.file_name().unwrap().to_str().unwrap().to_string();
        // blkid agrees with what the tool was told.
        let id = blkid(&f.file, 0);
        assert!(id.contains(&format!("UUID={}", f.uuid)), "{what}: {id}");
        // Bare.
        let (report, code) = verify_json(&f.file, e, &[]);
        assert!(code == 0 || f.kind == "f2fs", "{what}: {report:#}");
        let p = &report["partitions"][0];
        check_found(&p["filesystem"], f, 0, &what);
        if f.kind != "f2fs" {
            assert!(
                p["filesystem"]["aligned"].is_null(),
                "{what}: internals not checked"
            );
            let codes: Vec<&str> = report["findings"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x["code"].as_str().unwrap())
                .collect();
            assert!(codes.contains(&"not-checked"), "{what}: {codes:?}");
        }
        // Inside a GPT partition (copied in as raw bytes), on the erase block.
        let spec = write_file(
            dir.path(),
            "in.toml",
            &format!("[image]\ntable = \"gpt\"\nerase-block = {e}\n[[partition]]\nfs = \"raw\"\nsource = \"{}\"\n", f.file.display()),
        );
        let img = dir.path().join("in.img");
        blockwise!().build(&spec, &img);
        let (report, _) = verify_json(&img, e, &[]);
        let p = &report["partitions"][0];
        check_found(
            &p["filesystem"],
            f,
            p["start_bytes"].as_u64().unwrap(),
            &format!("{what} in a partition"),
        );
        let _ = fs::remove_file(&img);
    }
    let kinds: Vec<&str> = images.iter().map(|f| f.kind).collect();
    if blockwise_test_kit::oracles_required() {
        for k in ["btrfs", "xfs", "ntfs", "iso9660", "luks", "swap", "f2fs"] {
            assert!(kinds.contains(&k), "{k} not tested");
        }
    }

    // A filesystem larger than what holds it: an error naming both sizes.
    if let Some(x) = images.iter().find(|f| f.kind == "xfs") {
        let cut = dir.path().join("cut.img");
        fs::copy(&x.file, &cut).unwrap();
        File::options()
            .write(true)
            .open(&cut)
            .unwrap()
            .set_len(512 * MIB)
            .unwrap();
        let (report, code) = verify_json(&cut, e, &[]);
        assert_eq!(code, 1, "{report:#}");
        assert!(
            report["findings"]
                .to_string()
                .contains("fs-larger-than-partition"),
            "{report:#}"
        );
    }
    // A header whose fields are impossible: an error, never a panic or a silent pass.
    if let Some(n) = images.iter().find(|f| f.kind == "ntfs") {
        let bad = dir.path().join("bad-ntfs.img");
        fs::copy(&n.file, &bad).unwrap();
        let f = File::options().write(true).open(&bad).unwrap();
        std::os::unix::fs::FileExt::write_all_at(&f, &[3], 0x0d).unwrap();
        let (report, code) = verify_json(&bad, e, &[]);
        assert_eq!(code, 1, "{report:#}");
        assert!(
            report["findings"].to_string().contains("fs-header-invalid"),
            "{report:#}"
        );
    }
}

/// A partition holding a format verify only recognises keeps `verify --strict` from saying
/// "aligned": the partition is not checked, a `not-checked` error, exit 1.
#[test]
fn strict_verify_never_calls_unchecked_internals_aligned() {
    if !have("mkswap") {
        return;
    }
    let dir = tempdir!();
    let images = foreign_images(dir.path());
    for f in images.iter().filter(|f| f.kind != "f2fs") {
        let spec = write_file(
            dir.path(),
            "in.toml",
            &format!(
                "[image]\ntable = \"gpt\"\n[[partition]]\nfs = \"raw\"\nsource = \"{}\"\n",
                f.file.display()
            ),
        );
        let img = dir.path().join("in.img");
        blockwise!().build(&spec, &img);
        let (report, code) = verify_json(&img, 4 * MIB, &["--strict"]);
        assert_ne!(report["aligned"], true, "{}: {report:#}", f.kind);
        assert_eq!(code, 1, "{}: {report:#}", f.kind);
        assert_eq!(
            report["partitions"][0]["checked"], false,
            "{}: {report:#}",
            f.kind
        );
        assert!(
            report["findings"].to_string().contains("not-checked"),
            "{}: {report:#}",
            f.kind
        );
        let o = blockwise!().run(["verify", s(&img), "--strict"]);
        assert!(
            !output_text(&o).contains("verdict: aligned"),
            "{}: {}",
            f.kind,
            output_text(&o)
        );
    }
}
