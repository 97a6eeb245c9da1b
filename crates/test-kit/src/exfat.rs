//! exFAT oracles: `fsck.exfat -n` and read-only FUSE mounts with `mount.exfat-fuse`.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::loopdev::LoopDevice;
use crate::tools::{assert_success, output_text, run};

/// Runs `fsck.exfat -n` (read-only, answers no) on `image` and asserts it is clean; returns
/// its output.
pub fn fsck_exfat_clean(image: &Path) -> String {
    fsck_exfat_clean_except(image, &[])
}

/// [`fsck_exfat_clean`], ignoring complaints (lines) that contain one of `known`: what an
/// older fsck.exfat reports of a valid structure it does not know (exfatprogs 1.2.0 offers
/// to delete the volume GUID entry, type 0xA0).
pub fn fsck_exfat_clean_except(image: &Path, known: &[&str]) -> String {
    let o = run(
        "fsck.exfat",
        &["-n".as_ref(), "-v".as_ref(), image.as_os_str()],
    );
    let text = output_text(&o);
    let bad = text.lines().any(|l| {
        (l.contains("corrupt") || l.contains("ERROR")) && !known.iter().any(|k| l.contains(k))
    });
    assert!(
        o.status.success() && !bad,
        "fsck.exfat -n {}: {}\n{text}",
        image.display(),
        o.status
    );
    text
}

/// What a read-only mount shows of one entry: `None` for a directory, else the bytes; with
/// its mtime (seconds) and whether it is writable.
pub type Mounted = BTreeMap<String, (Option<Vec<u8>>, i64, bool)>;

/// Attaches the `len` bytes of `image` at `offset` to a read-only loop device, mounts them
/// with `mount.exfat-fuse -o ro` on `mnt`, runs `f` on the mount point, then unmounts and
/// detaches, also when `f` panics.
pub fn with_exfat_fuse(image: &Path, offset: u64, len: u64, mnt: &Path, f: impl FnOnce(&Path)) {
    let o = run(
        "losetup",
        &[
            "-f".to_string(),
            "--show".into(),
            "-r".into(),
            "--offset".into(),
            offset.to_string(),
            "--sizelimit".into(),
            len.to_string(),
            image.display().to_string(),
        ],
    );
    assert_success(&o, "losetup --offset");
    let dev = LoopDevice::adopt(String::from_utf8_lossy(&o.stdout).trim());
    std::fs::create_dir_all(mnt).expect("create mount point");
    let m = run(
        "mount.exfat-fuse",
        &[
            "-o".as_ref(),
            "ro".as_ref(),
            dev.path().as_os_str(),
            mnt.as_os_str(),
        ],
    );
    let result = if m.status.success() {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(mnt)));
        let u = run("umount", &[mnt]);
        assert_success(&u, "umount");
        r
    } else {
        Ok(())
    };
    drop(dev);
    assert_success(&m, "mount.exfat-fuse -o ro");
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}

/// Every file and directory under `root` (paths from `/`), with contents, mtimes and the
/// owner-write bit.
pub fn mounted_files(root: &Path) -> Mounted {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).expect("read_dir") {
            let e = e.expect("dir entry");
            let p = e.path();
            let md = std::fs::symlink_metadata(&p).expect("metadata");
            let rel = format!(
                "/{}",
                p.strip_prefix(root).expect("under root").to_string_lossy()
            );
            let writable = md.mode() & 0o200 != 0;
            if md.is_dir() {
                out.insert(rel, (None, md.mtime(), writable));
                stack.push(p);
            } else {
                out.insert(
                    rel,
                    (Some(std::fs::read(&p).expect("read")), md.mtime(), writable),
                );
            }
        }
    }
    out
}
