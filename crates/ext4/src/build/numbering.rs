//! Inode numbers: root 2, lost+found 11, the rest in depth-first name order; hard links
//! share one number.

use std::collections::{BTreeMap, BTreeSet};

use blockwise_geometry::{NodeId, NodeKind, Tree};

use super::LOST_FOUND;
use crate::raw::ROOT_INO;

/// Counts inodes a tree needs (reserved + lost+found + one per distinct node).
pub(super) fn inodes_needed(tree: &Tree) -> u64 {
    let mut links = BTreeSet::new();
    let mut n = u64::from(LOST_FOUND); // the reserved inodes 1..=10 and lost+found
    for (id, node) in tree.nodes.iter().enumerate() {
        if id == 0 {
            continue;
        }
        if id != 0
            && node.parent == 0
            && node.name == b"lost+found"
            && matches!(node.kind, NodeKind::Dir { .. })
        {
            continue;
        }
        if let NodeKind::File { link: Some(l), .. } = node.kind {
            if !links.insert(l) {
                continue;
            }
        }
        n += 1;
    }
    n
}

/// The inode number of every node of a tree.
pub(super) struct Numbering {
    /// Inode number per node id.
    pub ino_of: Vec<u32>,
    /// Link count of hard-linked files (absent: 1).
    pub nlinks: BTreeMap<u32, u32>,
    /// Node ids in depth-first name order, the root first.
    pub order: Vec<NodeId>,
    /// The tree's own `/lost+found` directory.
    pub lf_node: Option<NodeId>,
    /// The root has an entry named lost+found that is not a directory: no lost+found then.
    pub lf_other: bool,
    /// Highest inode number used.
    pub last_ino: u32,
}

impl Numbering {
    /// Numbers the nodes of `tree`.
    pub fn new(tree: &Tree) -> Numbering {
        let mut ino_of: Vec<u32> = vec![0; tree.nodes.len()];
        let mut link_ino: BTreeMap<u64, u32> = BTreeMap::new();
        let mut nlinks: BTreeMap<u32, u32> = BTreeMap::new();
        ino_of[0] = ROOT_INO;
        let lf_node = tree
            .child(0, "lost+found")
            .filter(|&c| tree.children(c).is_some());
        if let Some(lf) = lf_node {
            ino_of[lf] = LOST_FOUND;
        }
        let lf_other = lf_node.is_none() && tree.child(0, "lost+found").is_some();
        let mut next = if lf_other { LOST_FOUND } else { LOST_FOUND + 1 };
        let mut order: Vec<NodeId> = Vec::with_capacity(tree.nodes.len());
        let mut stack: Vec<NodeId> = vec![0];
        while let Some(id) = stack.pop() {
            order.push(id);
            if let Some(ch) = tree.children(id) {
                for &c in ch.iter().rev() {
                    stack.push(c);
                }
            }
        }
        for &id in &order {
            if id == 0 || Some(id) == lf_node {
                continue;
            }
            if let NodeKind::File { link: Some(l), .. } = tree.nodes[id].kind {
                if let Some(&i) = link_ino.get(&l) {
                    ino_of[id] = i;
                    *nlinks.entry(i).or_insert(1) += 1;
                    continue;
                }
                link_ino.insert(l, next);
            }
            ino_of[id] = next;
            next += 1;
        }
        Numbering {
            ino_of,
            nlinks,
            order,
            lf_node,
            lf_other,
            last_ino: next - 1,
        }
    }

    /// The writer creates lost+found itself (the tree has none, nor anything so named).
    pub fn adds_lost_found(&self) -> bool {
        self.lf_node.is_none() && !self.lf_other
    }
}
