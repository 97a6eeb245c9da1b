//! Mount points and `exclude` (issue 32): one root filesystem tree split into the
//! partitions mounted inside it (`mount = "/boot/firmware"`), and paths left out by globs.
//! Pure: the CLI, Python and the page cut their trees with the same code.
//!
//! Both work on the scanned [`Tree`]s, before the `[[partition.entry]]` overrides, so entries
//! name paths inside their own partition. A tree is cut by keeping a set of its nodes in
//! their scan order: the result is the tree a scan of the cut directory would give (parents
//! come before children, children stay sorted), so a single rootfs split by mount points
//! builds the same bytes as the same files staged into one directory per partition.

use blockwise_geometry::{NodeId, NodeKind, Tree};

use crate::{Spec, SpecError};

/// The tree of the nodes of `tree` for which `keep` is true, in their order, with `root`
/// as the new root (`keep[root]` must be true and every kept node's parent kept, but the
/// root's). Dropped directories' children are dropped with them by the caller's `keep`.
fn cut(tree: &Tree, keep: &[bool], root: NodeId) -> Tree {
    let mut new_id: Vec<Option<NodeId>> = vec![None; tree.nodes.len()];
    let mut next = 0usize;
    // The root first, then the others in scan order (a root's index is below its
    // descendants' anyway: a parent is always added before its children).
    for (i, k) in keep.iter().enumerate() {
        if *k && i >= root {
            if let Some(slot) = new_id.get_mut(i) {
                *slot = Some(next);
                next += 1;
            }
        }
    }
    let mut nodes = Vec::with_capacity(next);
    for (i, node) in tree.nodes.iter().enumerate() {
        if new_id.get(i).copied().flatten().is_none() {
            continue;
        }
        let mut n = node.clone();
        n.parent = if i == root {
            0
        } else {
            new_id.get(node.parent).copied().flatten().unwrap_or(0)
        };
        if i == root {
            n.name = blockwise_geometry::Name::default();
        }
        if let NodeKind::Dir { children } = &mut n.kind {
            *children = children
                .iter()
                .filter_map(|c| new_id.get(*c).copied().flatten())
                .collect();
        }
        nodes.push(n);
    }
    Tree { nodes }
}

/// Marks `id` and everything below it in `mark` with `value`.
fn mark_subtree(tree: &Tree, id: NodeId, mark: &mut [bool], value: bool) {
    let mut stack = vec![id];
    while let Some(n) = stack.pop() {
        if let Some(m) = mark.get_mut(n) {
            *m = value;
        }
        if let Some(children) = tree.children(n) {
            stack.extend_from_slice(children);
        }
    }
}

/// Whether `pattern` matches `path` (both `/`-separated, no leading `/`): `*` and `?` within
/// one name, `**` as a whole component for any number of components (zero too).
pub fn glob_match(pattern: &str, path: &str) -> bool {
    let pat: Vec<&str> = pattern.split('/').filter(|c| !c.is_empty()).collect();
    let comps: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
    match_components(&pat, &comps)
}

fn match_components(pat: &[&str], comps: &[&str]) -> bool {
    // Iterative over `**` with backtracking on one star: linear in practice, bounded by
    // pattern length × path length.
    let (mut p, mut c) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    loop {
        match (pat.get(p), comps.get(c)) {
            (Some(&"**"), _) => {
                star = Some((p, c));
                p += 1;
            }
            (Some(pp), Some(cc)) if match_name(pp.as_bytes(), cc.as_bytes()) => {
                p += 1;
                c += 1;
            }
            (None, None) => return true,
            _ => match star {
                Some((sp, sc)) if sc < comps.len() => {
                    star = Some((sp, sc + 1));
                    p = sp + 1;
                    c = sc + 1;
                }
                _ => return false,
            },
        }
    }
}

/// `*` (any run within the name), `?` (one byte), anything else literally.
fn match_name(pat: &[u8], name: &[u8]) -> bool {
    let (mut p, mut n) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    loop {
        match (pat.get(p), name.get(n)) {
            (Some(b'*'), _) => {
                star = Some((p, n));
                p += 1;
            }
            (Some(b'?'), Some(_)) => {
                p += 1;
                n += 1;
            }
            (Some(a), Some(b)) if a == b => {
                p += 1;
                n += 1;
            }
            (None, None) => return true,
            _ => match star {
                Some((sp, sn)) if sn < name.len() => {
                    star = Some((sp, sn + 1));
                    p = sp + 1;
                    n = sn + 1;
                }
                _ => return false,
            },
        }
    }
}

/// Leaves out of `tree` every node whose path matches one of `patterns` (with what is
/// below it); the root stays.
pub(crate) fn exclude(tree: &Tree, patterns: &[String]) -> Tree {
    let mut keep = vec![true; tree.nodes.len()];
    // Parents before children: a dropped directory drops its subtree at once.
    for id in 1..tree.nodes.len() {
        if !keep.get(id).copied().unwrap_or(false) {
            continue;
        }
        let path = tree.path(id);
        if patterns.iter().any(|g| glob_match(g, &path)) {
            mark_subtree(tree, id, &mut keep, false);
        }
    }
    cut(tree, &keep, 0)
}

/// The index of the partition `mount` is cut from: the one with the longest `mount` that is
/// a proper prefix of it, else the root (`mount = "/"`, or the one partition with
/// `contents` and no `mount`).
fn parent_of(spec: &Spec, index: usize, mount: &str) -> Option<usize> {
    let under = |m: &str| {
        let m = m.trim_end_matches('/');
        m.is_empty() || mount.starts_with(&format!("{m}/"))
    };
    let best = spec
        .partitions
        .iter()
        .enumerate()
        .filter(|(i, p)| *i != index && p.mount.as_deref().is_some_and(under))
        .max_by_key(|(_, p)| {
            p.mount
                .as_deref()
                .map_or(0, |m| m.trim_end_matches('/').len())
        })
        .map(|(i, _)| i);
    best.or_else(|| {
        let roots: Vec<usize> = spec
            .partitions
            .iter()
            .enumerate()
            .filter(|(i, p)| *i != index && p.mount.is_none() && p.contents.is_some())
            .map(|(i, _)| i)
            .collect();
        (roots.len() == 1).then(|| roots.first().copied()).flatten()
    })
}

/// Splits the scanned `trees` (spec order; `None` for partitions without one) by the
/// partitions' `mount` points, then applies each partition's `exclude`. Mount points are
/// taken shallowest first, so `/boot` is cut from `/` before `/boot/firmware` from `/boot`.
pub fn split_mounts(spec: &Spec, trees: &mut [Option<Tree>]) -> Result<(), SpecError> {
    let key = |i: usize, k: &str| format!("partition[{}].{k}", i + 1);
    // mke2fs -d and sload.f2fs copy the directory themselves: they cannot leave a mount
    // point empty or a path out.
    let external = |i: usize| {
        spec.partitions.get(i).is_some_and(|p| {
            p.fs == blockwise_geometry::FsKind::F2fs
                || (p.fs.is_ext() && p.ext4.backend == blockwise_ext4::Ext4Backend::Mke2fs)
        })
    };
    for (i, p) in spec.partitions.iter().enumerate() {
        if (p.mount.is_some() || !p.exclude.is_empty()) && external(i) {
            let k = if p.mount.is_some() {
                "mount"
            } else {
                "exclude"
            };
            return Err(SpecError::new(
                key(i, k),
                "ext4.backend = \"mke2fs\" copies contents whole (mke2fs -d): mount points and exclude need the native writer",
            ));
        }
    }
    let mut order: Vec<(usize, String)> = spec
        .partitions
        .iter()
        .enumerate()
        .filter_map(|(i, p)| p.mount.clone().map(|m| (i, m)))
        .filter(|(_, m)| !m.trim_end_matches('/').is_empty())
        .collect();
    order.sort_by_key(|(i, m)| (m.matches('/').count(), *i));
    for (i, mount) in order {
        let mount = mount.trim_end_matches('/').to_string();
        let Some(parent) = parent_of(spec, i, &mount) else {
            return Err(SpecError::new(
                key(i, "mount"),
                format!("{mount:?}: no partition holds it: give one partition mount = \"/\" (or contents and no mount), or give this one contents"),
            ));
        };
        if external(parent) {
            return Err(SpecError::new(
                key(i, "mount"),
                format!("{mount:?}: partition[{}] is filled by a tool that copies its contents whole (mke2fs -d, sload.f2fs) and cannot leave the mount point empty; use a native writer there (ext4.backend = \"native\")", parent + 1),
            ));
        }
        let parent_mount = spec
            .partitions
            .get(parent)
            .and_then(|p| p.mount.as_deref())
            .unwrap_or("")
            .trim_end_matches('/');
        let inner = mount.get(parent_mount.len()..).unwrap_or("");
        let Some(Some(ptree)) = trees.get(parent) else {
            return Err(SpecError::new(
                key(i, "mount"),
                format!("{mount:?}: partition[{}] is mounted above it but has no files (FAT, exFAT or ext4 with contents)", parent + 1),
            ));
        };
        let at = ptree.lookup(inner).filter(|&id| {
            matches!(
                ptree.nodes.get(id).map(|n| &n.kind),
                Some(NodeKind::Dir { .. })
            )
        });
        let Some(at) = at else {
            return Err(SpecError::new(
                key(i, "mount"),
                format!("{mount:?} is not a directory in partition[{}]'s contents: the mount point must exist there", parent + 1),
            ));
        };
        let own_contents = spec.partitions.get(i).is_some_and(|p| p.contents.is_some());
        let sub = {
            let mut keep = vec![false; ptree.nodes.len()];
            mark_subtree(ptree, at, &mut keep, true);
            cut(ptree, &keep, at)
        };
        let emptied = {
            let mut keep = vec![true; ptree.nodes.len()];
            mark_subtree(ptree, at, &mut keep, false);
            if let Some(k) = keep.get_mut(at) {
                *k = true;
            }
            cut(ptree, &keep, 0)
        };
        if let Some(slot) = trees.get_mut(parent) {
            *slot = Some(emptied);
        }
        if !own_contents {
            if let Some(slot) = trees.get_mut(i) {
                *slot = Some(sub);
            }
        }
    }
    for (i, p) in spec.partitions.iter().enumerate() {
        if p.exclude.is_empty() {
            continue;
        }
        if let Some(Some(t)) = trees.get_mut(i) {
            *t = exclude(t, &p.exclude);
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use blockwise_geometry::Meta;

    fn file(t: &mut Tree, parent: NodeId, name: &str, content: u64) -> NodeId {
        file_linked(t, parent, name, content, None)
    }

    /// A one-byte file of content `content` (hard-link group `link`), for this crate's tests.
    pub(crate) fn file_linked(
        t: &mut Tree,
        parent: NodeId,
        name: &str,
        content: u64,
        link: Option<u64>,
    ) -> NodeId {
        t.add(
            parent,
            name,
            NodeKind::File {
                size: 1,
                content,
                data_ranges: None,
                link,
            },
            Meta::default(),
        )
        .unwrap()
    }

    /// An empty directory, for this crate's tests.
    pub(crate) fn dir(t: &mut Tree, parent: NodeId, name: &str) -> NodeId {
        t.add(
            parent,
            name,
            NodeKind::Dir {
                children: Vec::new(),
            },
            Meta::default(),
        )
        .unwrap()
    }

    #[test]
    fn globs() {
        assert!(glob_match("var/cache/**", "var/cache/apt/x.deb"));
        assert!(glob_match("var/cache/**", "var/cache"));
        assert!(glob_match("**/*.pyc", "usr/lib/a.pyc"));
        assert!(glob_match("**/*.pyc", "a.pyc"));
        assert!(!glob_match("**/*.pyc", "a.py"));
        assert!(glob_match(
            "/etc/ssh/ssh_host_*",
            "etc/ssh/ssh_host_rsa_key"
        ));
        assert!(!glob_match("etc/*", "etc/a/b"));
        assert!(glob_match("etc/?", "etc/a"));
        assert!(!glob_match("etc/?", "etc/ab"));
        assert!(glob_match("**", "anything/at/all"));
        assert!(glob_match("a/**/z", "a/z"));
        assert!(glob_match("a/**/z", "a/b/c/z"));
        assert!(!glob_match("a/**/z", "a/b/c/y"));
        assert!(glob_match("*a*b*", "xxaxxbxx"));
    }

    /// Cutting `boot/firmware` out of a tree gives the tree of `boot/firmware` alone (as a
    /// scan of that directory would add it) and the tree with an empty mount point.
    #[test]
    fn cut_keeps_scan_order() {
        let mut t = Tree::default();
        let boot = dir(&mut t, 0, "boot");
        let fw = dir(&mut t, boot, "firmware");
        file(&mut t, 0, "a", 1);
        file(&mut t, fw, "config.txt", 2);
        let ov = dir(&mut t, fw, "overlays");
        file(&mut t, ov, "x.dtbo", 3);
        file(&mut t, boot, "vmlinuz", 4);

        let mut keep = vec![false; t.nodes.len()];
        mark_subtree(&t, fw, &mut keep, true);
        let sub = cut(&t, &keep, fw);
        let mut want = Tree::default();
        file(&mut want, 0, "config.txt", 2);
        let wov = dir(&mut want, 0, "overlays");
        file(&mut want, wov, "x.dtbo", 3);
        // Same nodes, same order, same parents (the root's meta is the cut directory's).
        assert_eq!(sub.nodes.len(), want.nodes.len());
        for (a, b) in sub.nodes.iter().zip(&want.nodes) {
            assert_eq!((&a.name, a.parent, &a.kind), (&b.name, b.parent, &b.kind));
        }

        let mut keep = vec![true; t.nodes.len()];
        mark_subtree(&t, fw, &mut keep, false);
        keep[fw] = true;
        let rest = cut(&t, &keep, 0);
        assert_eq!(
            rest.lookup("/boot/firmware").and_then(|i| rest.children(i)),
            Some(&[][..])
        );
        assert!(rest.lookup("/boot/vmlinuz").is_some() && rest.lookup("/a").is_some());
        assert_eq!(rest.nodes.len(), 5);
    }

    #[test]
    fn exclude_drops_subtrees() {
        let mut t = Tree::default();
        let var = dir(&mut t, 0, "var");
        let cache = dir(&mut t, var, "cache");
        file(&mut t, cache, "big", 1);
        file(&mut t, var, "keep", 2);
        file(&mut t, 0, "x.pyc", 3);
        let e = exclude(&t, &["var/cache".into(), "**/*.pyc".into()]);
        assert!(e.lookup("/var/keep").is_some());
        assert!(e.lookup("/var/cache").is_none() && e.lookup("/x.pyc").is_none());
        assert_eq!(e.nodes.len(), 3);
    }
}
