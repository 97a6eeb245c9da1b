//! Loop devices (root only: check [`have_loop`](crate::have_loop) first) and read-only kernel
//! mounts through them.

use std::path::{Path, PathBuf};

use crate::tools::{assert_success, run};

/// An image file attached to a loop device; detached on drop (best effort) or by
/// [`LoopDevice::detach`] (asserted).
#[derive(Debug)]
pub struct LoopDevice {
    dev: Option<PathBuf>,
}

impl LoopDevice {
    /// Attaches `image` to the first free loop device (`losetup -f --show`), read-only when
    /// `read_only`, with logical sectors of `sector_bytes` when given (`-b`).
    pub fn attach(image: &Path, read_only: bool, sector_bytes: Option<u32>) -> Self {
        let mut args = vec!["-f".to_string(), "--show".to_string()];
        if read_only {
            args.push("-r".into());
        }
        if let Some(b) = sector_bytes {
            args.extend(["-b".into(), b.to_string()]);
        }
        args.push(image.display().to_string());
        let o = run("losetup", &args);
        assert_success(&o, &format!("losetup {}", args.join(" ")));
        let dev = String::from_utf8_lossy(&o.stdout).trim().to_string();
        LoopDevice {
            dev: Some(PathBuf::from(dev)),
        }
    }

    /// Takes over a device attached elsewhere (detached on drop).
    pub fn adopt(dev: &str) -> Self {
        LoopDevice {
            dev: Some(PathBuf::from(dev)),
        }
    }

    /// The device node, e.g. `/dev/loop3`.
    pub fn path(&self) -> &Path {
        self.dev.as_deref().unwrap_or(Path::new(""))
    }

    /// Detaches the device, asserting that `losetup -d` succeeds.
    pub fn detach(mut self) {
        if let Some(dev) = self.dev.take() {
            assert_success(
                &run("losetup", &["-d".as_ref(), dev.as_os_str()]),
                "losetup -d",
            );
        }
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        if let Some(dev) = self.dev.take() {
            let _ = run("losetup", &["-d".as_ref(), dev.as_os_str()]);
        }
    }
}

/// Mounts `image` read-only as `fstype` on `mnt` (created when missing) through a loop device,
/// runs `f` on the mount point, then unmounts and detaches, also when `f` panics (the panic
/// goes on afterwards). Asserts that the mount succeeded.
pub fn with_kernel_mount(image: &Path, fstype: &str, mnt: &Path, f: impl FnOnce(&Path)) {
    let dev = LoopDevice::attach(image, true, None);
    std::fs::create_dir_all(mnt).expect("create mount point");
    let m = run(
        "mount",
        &[
            "-t".as_ref(),
            fstype.as_ref(),
            "-o".as_ref(),
            "ro".as_ref(),
            dev.path().as_os_str(),
            mnt.as_os_str(),
        ],
    );
    let result = if m.status.success() {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(mnt)));
        let _ = run("umount", &[mnt]);
        r
    } else {
        Ok(())
    };
    drop(dev);
    assert!(
        m.status.success(),
        "mount -t {fstype} {}: {}",
        image.display(),
        String::from_utf8_lossy(&m.stderr)
    );
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}
