//! `files = [...]`: several sources mapped into one filesystem (genimage's vfat `files` and
//! `file NAME { image = … }`), beside or instead of `contents`.
//!
//! ```toml
//! files = ["u-boot.bin", "dtbs/", { source = "Image", dest = "/boot/Image" }]
//! ```
//!
//! A string puts the file or directory at the root under its own name (`"dtbs/"` becomes
//! `/dtbs`, `"rpi-firmware/start4.elf"` becomes `/start4.elf`: genimage's `files`); a table
//! puts `source` at `dest`, an absolute path inside the filesystem whose missing parent
//! directories are created. A directory is copied with everything in it and merges with a
//! directory already there. Two sources (or a source and `contents`) giving the same path a
//! file are an error naming `partition[N].files[K]`, and so is a `dest` that is relative,
//! climbs out with `..`, or names a file's child.
//!
//! The host scans each source into a [`Tree`] and [`graft`]s it here, after mount points
//! and `exclude` have cut `contents` and before `[[partition.entry]]` overrides apply, so
//! entries can name grafted paths.

use core::fmt;

use blockwise_geometry::{display_str, FsKind, Meta, NodeId, NodeKind, Tree};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;

use crate::spec::PartitionSpec;

/// One item of `files`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileSpec {
    /// The file or directory to copy, relative to the spec file.
    pub source: String,
    /// Where it goes inside the filesystem (absolute); `None` = `/` + the source's name.
    pub dest: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileTable {
    source: String,
    #[serde(default)]
    dest: Option<String>,
}

impl<'de> Deserialize<'de> for FileSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = FileSpec;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a path like \"u-boot.bin\" or a table like { source = \"Image\", dest = \"/boot/Image\" }")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<FileSpec, E> {
                Ok(FileSpec {
                    source: s.to_string(),
                    dest: None,
                })
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<FileSpec, A::Error> {
                let t = FileTable::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(FileSpec {
                    source: t.source,
                    dest: t.dest,
                })
            }
        }
        d.deserialize_any(V)
    }
}

impl FileSpec {
    /// The destination path components, checked: `dest` (absolute, no `.`/`..`, no empty
    /// name) or the source's last name. Empty = the root (a directory source merged there).
    pub fn dest_components(&self) -> Result<Vec<String>, String> {
        match &self.dest {
            Some(d) => {
                let Some(rest) = d.strip_prefix('/') else {
                    return Err(format!(
                        "dest {:?} must be an absolute path inside the filesystem, starting with \"/\" (like \"/boot/Image\")",
                        display_str(d)
                    ));
                };
                let mut out = Vec::new();
                for c in rest.split('/').filter(|c| !c.is_empty()) {
                    if c == "." || c == ".." || c.contains('\0') {
                        return Err(format!(
                            "dest {:?} leaves the filesystem or names no file ({c:?} is not a file name)",
                            display_str(d)
                        ));
                    }
                    out.push(c.to_string());
                }
                Ok(out)
            }
            None => {
                let name = self
                    .source
                    .trim_end_matches('/')
                    .rsplit('/')
                    .next()
                    .unwrap_or_default();
                if name.is_empty() || name == "." || name == ".." {
                    return Err(format!(
                        "{:?} has no name to put at the root: give {{ source = {:?}, dest = \"/…\" }}",
                        display_str(&self.source),
                        display_str(&self.source)
                    ));
                }
                Ok(vec![name.to_string()])
            }
        }
    }
}

/// Why `files` cannot be used on partition `p`, if it cannot: the filesystem has no tree,
/// or an external tool copies `contents` whole.
pub fn files_unsupported(p: &PartitionSpec) -> Option<String> {
    if p.files.is_empty() {
        return None;
    }
    if p.fs == FsKind::F2fs {
        return Some("sload.f2fs copies one contents directory whole: files lists need a filesystem blockwise writes itself".into());
    }
    if !crate::takes_tree(p.fs) {
        return Some(format!(
            "fs = \"{}\" holds no files (fat, exfat, ext2/3/4, squashfs and erofs do){}",
            p.fs.as_str(),
            if p.fs == FsKind::Raw {
                "; a raw partition copies one `source`"
            } else {
                ""
            }
        ));
    }
    let external = (p.fs.is_ext() && p.ext4.backend == blockwise_ext4::Ext4Backend::Mke2fs)
        || (p.fs == FsKind::Squashfs
            && p.squashfs.backend == blockwise_squashfs::SquashfsBackend::Mksquashfs)
        || (p.fs == FsKind::Erofs && p.erofs.backend == blockwise_erofs::ErofsBackend::MkfsErofs);
    external.then(|| {
        "the external backend copies one contents directory whole: files lists need the native writer".to_string()
    })
}

/// Puts node `from` of `sub` (with everything under it, for a directory) at `dest` in
/// `tree`, creating missing parent directories with `dir_meta`. An empty `dest` merges a
/// directory into the root. Hard-link ids of `sub` are moved past those of `tree`, so
/// unrelated scans never share an inode. `Err` says what collides, in the user's words.
pub fn graft(
    tree: &mut Tree,
    dest: &[String],
    sub: &Tree,
    from: NodeId,
    dir_meta: &Meta,
) -> Result<(), String> {
    let link_base = tree
        .nodes
        .iter()
        .filter_map(|n| match n.kind {
            NodeKind::File { link: Some(l), .. } => Some(l.saturating_add(1)),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let mut parent: NodeId = 0;
    let mut path = String::new();
    let (last, parents) = match dest.split_last() {
        Some((l, ps)) => (Some(l), ps),
        None => (None, &[][..]),
    };
    for c in parents {
        path.push('/');
        path.push_str(c);
        parent = match tree.child(parent, c) {
            Some(id) if is_dir(tree, id) => id,
            Some(_) => return Err(format!("{path} is a file, not a directory")),
            None => tree
                .add(
                    parent,
                    c,
                    NodeKind::Dir {
                        children: Vec::new(),
                    },
                    dir_meta.clone(),
                )
                .ok_or_else(|| format!("{path} cannot be created"))?,
        };
    }
    let Some(last) = last else {
        if !is_dir(sub, from) {
            return Err("a file cannot replace the root directory".into());
        }
        return merge_children(tree, 0, "", sub, from, link_base);
    };
    path.push('/');
    path.push_str(last);
    copy_node(tree, parent, last.as_bytes(), &path, sub, from, link_base)
}

fn is_dir(t: &Tree, id: NodeId) -> bool {
    matches!(t.nodes.get(id).map(|n| &n.kind), Some(NodeKind::Dir { .. }))
}

/// Copies `sub`'s node `from` as `name` under `parent`: merged when both are directories.
fn copy_node(
    tree: &mut Tree,
    parent: NodeId,
    name: &[u8],
    path: &str,
    sub: &Tree,
    from: NodeId,
    link_base: u64,
) -> Result<(), String> {
    let node = sub.nodes.get(from).ok_or("source node missing")?;
    if let Some(existing) = tree.child(parent, name) {
        if is_dir(tree, existing) && is_dir(sub, from) {
            return merge_children(tree, existing, path, sub, from, link_base);
        }
        return Err(format!(
            "{} is there already (from contents or an earlier item of files)",
            display_str(path)
        ));
    }
    let kind = match &node.kind {
        NodeKind::Dir { .. } => NodeKind::Dir {
            children: Vec::new(),
        },
        NodeKind::File {
            size,
            content,
            data_ranges,
            link,
        } => NodeKind::File {
            size: *size,
            content: *content,
            data_ranges: data_ranges.clone(),
            link: link.map(|l| l.saturating_add(link_base)),
        },
        other => other.clone(),
    };
    let id = tree
        .add(parent, name, kind, node.meta.clone())
        .ok_or_else(|| format!("{} cannot be created", display_str(path)))?;
    if is_dir(sub, from) {
        merge_children(tree, id, path, sub, from, link_base)?;
    }
    Ok(())
}

/// Copies the children of `sub`'s directory `from` into `tree`'s directory `into`.
fn merge_children(
    tree: &mut Tree,
    into: NodeId,
    path: &str,
    sub: &Tree,
    from: NodeId,
    link_base: u64,
) -> Result<(), String> {
    let children: Vec<NodeId> = sub.children(from).unwrap_or_default().to_vec();
    for c in children {
        let Some(n) = sub.nodes.get(c) else { continue };
        let child_path = format!("{path}/{}", blockwise_geometry::display_bytes(&n.name));
        copy_node(tree, into, &n.name, &child_path, sub, c, link_base)?;
    }
    Ok(())
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;

    use crate::mounts::tests::{dir, file_linked as file};

    fn spec(source: &str, dest: Option<&str>) -> FileSpec {
        FileSpec {
            source: source.into(),
            dest: dest.map(str::to_string),
        }
    }

    #[test]
    fn destinations() {
        assert_eq!(spec("a/b.elf", None).dest_components().unwrap(), ["b.elf"]);
        assert_eq!(spec("dtbs/", None).dest_components().unwrap(), ["dtbs"]);
        assert_eq!(
            spec("x", Some("/boot//Image")).dest_components().unwrap(),
            ["boot", "Image"]
        );
        assert!(spec("x", Some("/")).dest_components().unwrap().is_empty());
        assert!(spec("x", Some("boot/x"))
            .dest_components()
            .unwrap_err()
            .contains("absolute"));
        assert!(spec("x", Some("/a/../../etc"))
            .dest_components()
            .unwrap_err()
            .contains("leaves the filesystem"));
        assert!(spec("..", None)
            .dest_components()
            .unwrap_err()
            .contains("no name"));
    }

    #[test]
    fn grafts_merge_and_collide() {
        let mut t = Tree::new(Meta::default());
        let boot = dir(&mut t, 0, "boot");
        file(&mut t, boot, "config.txt", 1, Some(0));
        // A directory source with a hard link pair, merged into /boot.
        let mut s = Tree::new(Meta::default());
        let o = dir(&mut s, 0, "overlays");
        file(&mut s, o, "a.dtbo", 2, Some(0));
        file(&mut s, 0, "b.dtb", 2, Some(0));
        graft(&mut t, &["boot".into()], &s, 0, &Meta::default()).unwrap();
        let a = t.lookup("/boot/overlays/a.dtbo").unwrap();
        let b = t.lookup("/boot/b.dtb").unwrap();
        let link = |id: NodeId| match t.nodes[id].kind {
            NodeKind::File { link, .. } => link,
            _ => None,
        };
        assert_eq!(link(a), Some(1));
        assert_eq!(link(b), Some(1));
        assert_eq!(link(t.lookup("/boot/config.txt").unwrap()), Some(0));
        // A single file at a new path: parents created.
        let mut f = Tree::new(Meta::default());
        let k = file(&mut f, 0, "Image", 3, None);
        graft(
            &mut t,
            &["a".into(), "b".into(), "Image".into()],
            &f,
            k,
            &Meta::default(),
        )
        .unwrap();
        assert!(t.lookup("/a/b/Image").is_some());
        // Collisions.
        let e = graft(
            &mut t,
            &["boot".into(), "config.txt".into()],
            &f,
            k,
            &Meta::default(),
        )
        .unwrap_err();
        assert!(e.contains("/boot/config.txt is there already"), "{e}");
        let e = graft(
            &mut t,
            &["boot".into(), "config.txt".into(), "x".into()],
            &f,
            k,
            &Meta::default(),
        )
        .unwrap_err();
        assert!(e.contains("/boot/config.txt is a file"), "{e}");
        let e = graft(&mut t, &[], &f, k, &Meta::default()).unwrap_err();
        assert!(e.contains("root"), "{e}");
        let e = graft(&mut t, &["boot".into()], &s, 0, &Meta::default()).unwrap_err();
        assert!(e.contains("/boot/b.dtb is there already"), "{e}");
    }
}
