//! A/B slots: `slots = ["a", "b"]` on a partition lays it out once per slot (same size, same
//! contents, each copy on its own erase blocks), its GPT name and filesystem label suffixed
//! `_a`, `_b` (`system_a`, `system_b`, as Android and RAUC/systemd-sysupdate setups name them).
//!
//! The planner expands slots itself, so every copy keeps the spec index of the partition it
//! came from (errors name the key the user wrote; the image builder fills every copy from
//! the same spec entry) and carries its slot in [`PartitionPlan::slot`]. `verify` cannot see
//! the spec: [`infer_slots`] pairs partitions by their names (or filesystem labels) instead,
//! and [`slot_groups`] lists the pairs for plan and verify alike, so both report the same.
//!
//! A partition that refers to another one by its spec name (a dm-verity hash partition's
//! `of = "system"`) refers to the copy of the same slot: [`Plan::slot_copy`] finds it.
//!
//! [`Plan::slot_copy`]: crate::Plan::slot_copy

use serde::Serialize;

use crate::layout::{LayoutError, PartKey, PartitionLayout, TableKind};
use crate::plan::PartitionPlan;

/// Most slots one partition may have.
pub const MAX_SLOTS: usize = 8;
/// Longest slot name.
pub const MAX_SLOT_NAME: usize = 8;

/// `base` with `_slot` appended (unchanged without a slot).
#[must_use]
pub fn with_suffix(base: &str, slot: Option<&str>) -> String {
    match slot {
        Some(s) => format!("{base}_{s}"),
        None => base.to_string(),
    }
}

/// The copies of a partition: `[None]` when it has no slots, else `Some(slot)` for each.
pub fn each(slots: &[String]) -> impl Iterator<Item = Option<&str>> {
    let none = slots.is_empty().then_some(None);
    none.into_iter()
        .chain(slots.iter().map(|s| Some(s.as_str())))
}

/// Whether `s` can be a slot name: 1–8 ASCII letters or digits.
#[must_use]
pub fn is_slot_name(s: &str) -> bool {
    (1..=MAX_SLOT_NAME).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// Checks the `slots` of the partition at 0-based index `i`.
pub(crate) fn validate(i: usize, p: &PartitionLayout, table: TableKind) -> Result<(), LayoutError> {
    if p.slots.is_empty() {
        return Ok(());
    }
    let err = |k: PartKey, r: String| Err(LayoutError::part(i, k, r));
    if p.slots.len() < 2 {
        return err(
            PartKey::Slots,
            "give at least two slots, like [\"a\", \"b\"] (one slot is just the partition)".into(),
        );
    }
    if p.slots.len() > MAX_SLOTS {
        return err(
            PartKey::Slots,
            format!("at most {MAX_SLOTS} slots, found {}", p.slots.len()),
        );
    }
    for (k, s) in p.slots.iter().enumerate() {
        if !is_slot_name(s) {
            return err(
                PartKey::Slots,
                format!("{s:?}: a slot name is 1 to {MAX_SLOT_NAME} ASCII letters or digits, like \"a\""),
            );
        }
        if p.slots.iter().take(k).any(|o| o.eq_ignore_ascii_case(s)) {
            return err(PartKey::Slots, format!("{s:?} is listed twice"));
        }
    }
    if table == TableKind::None {
        return err(
            PartKey::Slots,
            "table = \"none\" makes one bare filesystem; slots need a partition table".into(),
        );
    }
    if p.name.is_none() && p.label.is_none() {
        return err(
            PartKey::Slots,
            "slots suffix the partition's name or label (system_a, system_b): give name or label"
                .into(),
        );
    }
    if p.uuid.is_some() {
        return err(
            PartKey::Uuid,
            "pins one partition GUID, but slots make several partitions; leave it out (each slot's GUID derives from image.seed)".into(),
        );
    }
    if p.size == crate::layout::SizeSpec::Fill {
        return err(
            PartKey::Size,
            "\"fill\" cannot be split between slots: give every slot's size, like \"2GiB\"".into(),
        );
    }
    Ok(())
}

/// One member of a [`SlotGroup`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SlotMember {
    /// The slot (`a`, `b`, …).
    pub slot: String,
    /// Its partition number (0 when it is not in the table).
    pub index: u32,
    /// Its start, bytes.
    pub start_bytes: u64,
}

/// Partitions that are slots of one another: `system_a`, `system_b`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SlotGroup {
    /// The name without the slot suffix (`system`).
    pub name: String,
    /// The members in disk order.
    pub partitions: Vec<SlotMember>,
}

/// The name that carries a partition's slot suffix: the GPT name, else the filesystem label.
fn slotted_name(p: &PartitionPlan) -> Option<&str> {
    p.name
        .as_deref()
        .filter(|n| !n.is_empty())
        .or_else(|| p.filesystem.as_ref().and_then(crate::FsPlan::label))
}

/// Splits `system_a` into `("system", "a")` when the suffix can be a slot name.
#[must_use]
pub fn split_slot(name: &str) -> Option<(&str, &str)> {
    let (base, slot) = name.rsplit_once('_')?;
    (!base.is_empty() && is_slot_name(slot)).then_some((base, slot))
}

/// The slot groups of a partition list: partitions with a [`PartitionPlan::slot`], grouped
/// by the name (or label) they carry without its suffix, in disk order. What `plan` and
/// `verify` list under `slots`.
#[must_use]
pub fn slot_groups(parts: &[PartitionPlan]) -> Vec<SlotGroup> {
    let mut groups: Vec<SlotGroup> = Vec::new();
    let mut sorted: Vec<&PartitionPlan> = parts.iter().filter(|p| p.slot.is_some()).collect();
    sorted.sort_by_key(|p| p.start_bytes);
    for p in sorted {
        let Some(slot) = &p.slot else { continue };
        let base = slotted_name(p)
            .and_then(split_slot)
            .map_or_else(String::new, |(b, _)| b.to_string());
        let member = SlotMember {
            slot: slot.clone(),
            index: p.index,
            start_bytes: p.start_bytes,
        };
        match groups.iter_mut().find(|g| g.name == base) {
            Some(g) => g.partitions.push(member),
            None => groups.push(SlotGroup {
                name: base,
                partitions: vec![member],
            }),
        }
    }
    groups
}

/// Marks the partitions of `parts` that are slots of one another, from what a disk shows:
/// at least two partitions whose names (GPT) or filesystem labels are `BASE_SLOT` with the
/// same `BASE`, different slots, and the same size and type. Used by `verify`; a plan has
/// its slots from the spec, and the two agree on every layout blockwise builds with a GPT
/// or labelled filesystems.
pub fn infer_slots(parts: &mut [PartitionPlan]) {
    let keys: Vec<Option<(String, String)>> = parts
        .iter()
        .map(|p| {
            slotted_name(p)
                .and_then(split_slot)
                .map(|(b, s)| (b.to_string(), s.to_string()))
        })
        .collect();
    for (i, key) in keys.iter().enumerate() {
        let Some((base, slot)) = key else { continue };
        let Some(me) = parts.get(i) else { continue };
        let sibling = keys.iter().enumerate().any(|(j, k)| {
            j != i
                && k.as_ref().is_some_and(|(b, s)| b == base && s != slot)
                && parts
                    .get(j)
                    .is_some_and(|o| o.size_bytes == me.size_bytes && o.type_ == me.type_)
        });
        if sibling {
            if let Some(p) = parts.get_mut(i) {
                p.slot = Some(slot.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffixes_split_back() {
        assert_eq!(split_slot("system_a"), Some(("system", "a")));
        assert_eq!(split_slot("my_root_b2"), Some(("my_root", "b2")));
        assert_eq!(split_slot("_empty"), None);
        assert_eq!(split_slot("root_"), None);
        assert_eq!(split_slot("rootfs"), None);
        assert_eq!(with_suffix("boot", Some("b")), "boot_b");
        let v: Vec<_> = each(&[]).collect();
        assert_eq!(v, [None]);
        let s = vec!["a".to_string(), "b".to_string()];
        let v: Vec<_> = each(&s).collect();
        assert_eq!(v, [Some("a"), Some("b")]);
    }
}
