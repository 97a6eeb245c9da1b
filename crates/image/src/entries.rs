//! `[[partition.entry]]` overrides applied to a [`Tree`]: ownership, modes, xattrs and the
//! special files a build without root cannot take from disk. Pure: the bindings and the
//! browser build apply entries the same way as the CLI.

use std::collections::BTreeMap;

use blockwise_geometry::{Meta, NodeId, NodeKind, Tree};

use crate::spec::{EntryKind, EntrySpec, SpecError};
use crate::Error;

/// The file an entry's overrides land on: a hard-linked file is one inode whatever name
/// the entry uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Target {
    /// All names with this link id.
    Link(u64),
    /// A node without hard links.
    Node(NodeId),
}

fn target_of(tree: &Tree, id: NodeId) -> Target {
    match tree.nodes.get(id).map(|n| &n.kind) {
        Some(NodeKind::File { link: Some(l), .. }) => Target::Link(*l),
        _ => Target::Node(id),
    }
}

/// Every node `target` names (all hard links of a file, or the one node).
fn nodes_of(tree: &Tree, target: Target) -> Vec<NodeId> {
    match target {
        Target::Node(id) => vec![id],
        Target::Link(l) => tree
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| matches!(n.kind, NodeKind::File { link: Some(x), .. } if x == l))
            .map(|(id, _)| id)
            .collect(),
    }
}

/// One value an entry sets, for the agreement check.
struct Setting {
    /// The entry key (`mode`, `uid`, `gid`, `xattrs`).
    key: &'static str,
    /// What it sets, in words (`mode`, `attribute "user.x"`).
    what: String,
    /// The value, to compare.
    value: Vec<u8>,
    /// The value as the user reads it.
    shown: String,
}

fn settings(en: &EntrySpec) -> Vec<Setting> {
    let mut out = Vec::new();
    let mut num = |key: &'static str, v: Option<u32>, shown: fn(u32) -> String| {
        if let Some(v) = v {
            out.push(Setting {
                key,
                what: key.to_string(),
                value: v.to_le_bytes().to_vec(),
                shown: shown(v),
            });
        }
    };
    num("mode", en.mode, |m| format!("{m:04o}"));
    num("uid", en.uid, |u| u.to_string());
    num("gid", en.gid, |g| g.to_string());
    for (name, value) in &en.xattrs {
        out.push(Setting {
            key: "xattrs",
            what: format!("attribute {name:?}"),
            value: value.clone(),
            shown: format!("a {}-byte value", value.len()),
        });
    }
    out
}

/// Applies `[[partition.entry]]` overrides and creates the special files they declare.
///
/// Overrides apply to the file, whichever name the entry uses: an entry for one name of a
/// hard-linked file sets the mode, owner and attributes of every name (one inode on ext4, as
/// the mke2fs backend's debugfs does). Two entries that set the same field of one file (by
/// the same path or through a hard link) to different values are an error naming both keys.
pub fn apply_entries(
    tree: &mut Tree,
    entries: &[EntrySpec],
    key: &str,
    timestamp: i64,
) -> Result<(), Error> {
    // (file, field) → (entry index, value, value as shown, the entry's path): who set what
    // first.
    #[allow(clippy::type_complexity, reason = "a local bookkeeping map")]
    let mut set: BTreeMap<(Target, String), (usize, Vec<u8>, String, &str)> = BTreeMap::new();
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
                            target: en.target.clone().unwrap_or_default().into_bytes(),
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
        let target = target_of(tree, id);
        for st in settings(en) {
            match set.get(&(target, st.what.clone())) {
                Some((k, first, first_shown, first_path)) if *first != st.value => {
                    let first_key = format!("{key}.entry[{}].{}", k + 1, st.key);
                    let same = if *first_path == en.path.as_str() {
                        en.path.clone()
                    } else if matches!(target, Target::Link(_)) {
                        format!("{} (a hard link to {first_path}, one file)", en.path)
                    } else {
                        format!("{} (the same file as {first_path})", en.path)
                    };
                    return Err(SpecError::new(
                        ek(st.key),
                        format!(
                            "{first_key} sets the {} of {same} to {first_shown}, this entry to {}; entries for one file must agree (drop one)",
                            st.what, st.shown
                        ),
                    )
                    .into());
                }
                Some(_) => {}
                None => {
                    set.insert((target, st.what), (j, st.value, st.shown, en.path.as_str()));
                }
            }
        }
        for nid in nodes_of(tree, target) {
            let Some(node) = tree.nodes.get_mut(nid) else {
                continue;
            };
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `/t/a` and `/t/b`: one file (link 7); `/c`: another.
    fn linked() -> Tree {
        let mut t = Tree::new(Meta {
            mode: 0o755,
            ..Meta::default()
        });
        let dir = t
            .add(0, "t", NodeKind::Dir { children: vec![] }, Meta::default())
            .unwrap();
        let file = |link| NodeKind::File {
            size: 3,
            content: 0,
            data_ranges: None,
            link,
        };
        let meta = Meta {
            mode: 0o644,
            ..Meta::default()
        };
        t.add(dir, "a", file(Some(7)), meta.clone()).unwrap();
        t.add(dir, "b", file(Some(7)), meta.clone()).unwrap();
        t.add(0, "c", file(None), meta).unwrap();
        t
    }

    fn entry(path: &str, mode: Option<u32>, uid: Option<u32>) -> EntrySpec {
        EntrySpec {
            path: path.into(),
            mode,
            uid,
            ..EntrySpec::default()
        }
    }

    fn meta_of(t: &Tree, path: &str) -> (u32, u32) {
        let n = &t.nodes[t.lookup(path).unwrap()];
        (n.meta.mode, n.meta.uid)
    }

    /// r26: an entry applies to the file, whichever hard-link name it uses.
    #[test]
    fn r26_entries_apply_to_every_hard_link() {
        let mut t = linked();
        apply_entries(
            &mut t,
            &[entry("/t/b", Some(0), Some(70_000))],
            "partition[1]",
            0,
        )
        .unwrap();
        assert_eq!(meta_of(&t, "/t/a"), (0, 70_000));
        assert_eq!(meta_of(&t, "/t/b"), (0, 70_000));
        assert_eq!(meta_of(&t, "/c"), (0o644, 0));
        // Entries that agree, or set different fields, are fine.
        let mut t = linked();
        let ok = [
            entry("/t/a", Some(0o600), None),
            entry("/t/b", Some(0o600), Some(5)),
            entry("/t/a", None, Some(5)),
        ];
        apply_entries(&mut t, &ok, "partition[1]", 0).unwrap();
        assert_eq!(meta_of(&t, "/t/b"), (0o600, 5));
    }

    /// r26: two entries for one file that disagree are an error naming both keys.
    #[test]
    fn r26_entries_that_disagree_name_both_keys() {
        for (entries, key, words) in [
            (
                vec![entry("/t/a", Some(0o600), None), entry("/t/b", Some(0o644), None)],
                "partition[2].entry[2].mode",
                "partition[2].entry[1].mode sets the mode of /t/b (a hard link to /t/a, one file) to 0600, this entry to 0644",
            ),
            (
                vec![entry("/c", None, Some(1)), entry("/x", None, None), entry("/c/", None, Some(2))],
                "partition[2].entry[3].uid",
                "partition[2].entry[1].uid sets the uid of /c/ (the same file as /c) to 1, this entry to 2",
            ),
            (
                vec![entry("/c", None, Some(1)), entry("/c", None, Some(2))],
                "partition[2].entry[2].uid",
                "sets the uid of /c to 1",
            ),
        ] {
            let mut t = linked();
            let mut es = entries;
            // `/x` is created (a file).
            if let Some(e) = es.iter_mut().find(|e| e.path == "/x") {
                e.kind = EntryKind::File;
            }
            let err = apply_entries(&mut t, &es, "partition[2]", 0).unwrap_err();
            let Error::Spec(e) = err else { panic!("{err}") };
            assert_eq!(e.key, key, "{e}");
            assert!(e.reason.contains(words), "{e}");
        }
        let mut t = linked();
        let mut a = entry("/t/a", None, None);
        a.xattrs = vec![("user.k".into(), b"1".to_vec())];
        let mut b = entry("/t/b", None, None);
        b.xattrs = vec![("user.k".into(), b"22".to_vec())];
        let err = apply_entries(&mut t, &[a, b], "partition[1]", 0).unwrap_err();
        assert!(
            err.to_string().contains("partition[1].entry[2].xattrs: partition[1].entry[1].xattrs sets the attribute \"user.k\""),
            "{err}"
        );
    }
}
