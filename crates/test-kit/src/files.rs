//! Temp dirs, small files, sparse images saved with their holes, trees written out to disk.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::{Path, PathBuf};

use blockwise_geometry::{NodeKind, SparseImage, Tree};

/// A temp dir inside `base` (created when missing), removed on drop. Tests call it through
/// [`tempdir!`](crate::tempdir), which passes the target dir's `tmp/`: disk-backed, unlike a
/// tmpfs `/tmp`, so multi-GiB sparse images and O_DIRECT behave as on a real disk.
pub fn tempdir_in(base: impl AsRef<Path>) -> tempfile::TempDir {
    let base = base.as_ref();
    fs::create_dir_all(base).unwrap_or_else(|e| panic!("create {}: {e}", base.display()));
    tempfile::tempdir_in(base).expect("tempdir")
}

/// Writes `text` to `dir/name` and returns the path.
pub fn write_file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    fs::write(&p, text).unwrap_or_else(|e| panic!("write {}: {e}", p.display()));
    p
}

/// Writes a sparse image to a file of its full size, keeping the holes.
pub fn save(img: &SparseImage, path: &Path) {
    let f = fs::File::create(path).unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
    f.set_len(img.size()).expect("set_len");
    for (offset, data) in img.extents() {
        f.write_all_at(data, offset).expect("write image");
    }
}

/// Writes `tree` under `dir` (created when missing): directories, files with their content
/// and mode, symlinks, and hard links (`link` groups share one inode). Device nodes, fifos and
/// sockets are left out (they need root and are not what `diff -r` compares).
pub fn materialize(tree: &Tree, content: &[Vec<u8>], dir: &Path) {
    fs::create_dir_all(dir).expect("mkdir");
    let mut links: BTreeMap<u64, PathBuf> = BTreeMap::new();
    let mut stack = vec![(0usize, dir.to_path_buf())];
    while let Some((id, path)) = stack.pop() {
        for &c in tree.children(id).unwrap_or_default() {
            let n = &tree.nodes[c];
            let p = path.join(std::ffi::OsStr::from_bytes(&n.name));
            match &n.kind {
                NodeKind::Dir { .. } => {
                    fs::create_dir(&p).expect("mkdir");
                    stack.push((c, p));
                }
                NodeKind::File {
                    content: handle,
                    link,
                    ..
                } => {
                    if let Some(first) = link.and_then(|l| links.get(&l)) {
                        fs::hard_link(first, &p).expect("hard link");
                        continue;
                    }
                    let data = usize::try_from(*handle)
                        .ok()
                        .and_then(|h| content.get(h))
                        .unwrap_or_else(|| panic!("{}: no content {handle}", p.display()));
                    fs::write(&p, data).expect("write");
                    fs::set_permissions(&p, fs::Permissions::from_mode(n.meta.mode))
                        .expect("chmod");
                    if let Some(l) = link {
                        links.insert(*l, p.clone());
                    }
                }
                NodeKind::Symlink { target } => {
                    std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(target), &p)
                        .expect("symlink");
                }
                _ => {}
            }
        }
    }
}

/// Every file of the shared test corpus (`../shared/corpus` beside the checkout whose root
/// manifest dir is `root`), sorted; `None` (after saying SKIP) when there is no corpus, a
/// panic instead under `DISKIMG_REQUIRE_ORACLES=1` (CI must notice losing it).
pub fn corpus_files(root: &Path) -> Option<Vec<PathBuf>> {
    let corpus = root.join("../shared/corpus");
    if !corpus.is_dir() {
        assert!(
            !crate::oracles_required(),
            "the test corpus {} is missing and DISKIMG_REQUIRE_ORACLES=1",
            corpus.display()
        );
        eprintln!("SKIP: no corpus at {}", corpus.display());
        return None;
    }
    let mut files = Vec::new();
    let mut stack = vec![corpus];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).expect("read_dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                files.push(p);
            }
        }
    }
    files.sort();
    Some(files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use blockwise_geometry::{BlockSink, Meta};

    #[test]
    fn save_keeps_size_and_data() {
        let dir = crate::tempdir_in(std::env::temp_dir());
        let mut img = SparseImage::new(1 << 20);
        img.write_at(4096, b"hello").unwrap();
        let p = dir.path().join("x.img");
        save(&img, &p);
        let bytes = fs::read(&p).unwrap();
        assert_eq!(bytes.len(), 1 << 20);
        assert_eq!(&bytes[4096..4101], b"hello");
        assert!(bytes[..4096].iter().all(|&b| b == 0));
    }

    #[test]
    fn materialize_writes_files_links_and_modes() {
        let dir = crate::tempdir_in(std::env::temp_dir());
        let mut t = Tree::default();
        let meta = |mode| Meta {
            mode,
            ..Meta::default()
        };
        let file = |content, link| NodeKind::File {
            size: 1,
            content,
            data_ranges: None,
            link,
        };
        let d = t
            .add(0, "d", NodeKind::Dir { children: vec![] }, meta(0o755))
            .unwrap();
        t.add(d, "a", file(0, Some(7)), meta(0o600)).unwrap();
        t.add(0, "b", file(0, Some(7)), meta(0o600)).unwrap();
        t.add(
            0,
            "s",
            NodeKind::Symlink {
                target: b"d/a".to_vec(),
            },
            meta(0o777),
        )
        .unwrap();
        materialize(&t, &[b"x".to_vec()], dir.path());
        let a = dir.path().join("d/a");
        assert_eq!(fs::read(&a).unwrap(), b"x");
        assert_eq!(
            fs::metadata(&a).unwrap().permissions().mode() & 0o777,
            0o600
        );
        use std::os::unix::fs::MetadataExt;
        assert_eq!(fs::metadata(&a).unwrap().nlink(), 2);
        assert_eq!(
            fs::read_link(dir.path().join("s")).unwrap(),
            Path::new("d/a")
        );
    }
}
