//! Where the BPF program finds a target process: `tslots`, an array indexed by the low bits of
//! the tgid, whose entry names the one target holding that index; other targets with the same
//! low bits spill into the hash `targets`, and the entry's SPILL bit says so. An array entry is
//! one cache line and no helper call for every switch on the machine, where a hash lookup costs
//! three lines (see the program's `target_of`). This module decides what to write to both maps
//! when a target's value changes, so that the program's lookup always finds what the loader
//! holds.
use std::collections::HashMap;

/// Entries in `tslots` (the program's TSLOTS).
pub(crate) const SLOTS: u32 = 1 << 16;
/// The entry's bit saying that other targets with its index are in `targets`.
pub(crate) const SPILL: u32 = 1 << 31;

pub(crate) fn slot_of(tgid: u32) -> u32 {
    tgid & (SLOTS - 1)
}

/// What to write once a target's value changed, in this order: `spilled` into the hash, the
/// array's entry at `slot` (tgid 0: empty), then `unspilled` out of the hash.
#[derive(Debug, PartialEq)]
pub(crate) struct Writes {
    pub slot: u32,
    pub entry: [u32; 2],
    pub spilled: Vec<(u32, u32)>,
    pub unspilled: Vec<u32>,
}

/// Which target holds each index of the array.
#[derive(Default)]
pub(crate) struct Slots {
    owner: HashMap<u32, u32>,
}

impl Slots {
    /// `tgid`'s value changed; `values` holds every target's value now (a value of 0, or no
    /// entry: not a target). A target that holds its index keeps it while it stays one.
    pub(crate) fn set(&mut self, tgid: u32, values: &HashMap<u32, u32>) -> Writes {
        let slot = slot_of(tgid);
        let mut group: Vec<u32> = values
            .iter()
            .filter(|&(&t, &v)| v != 0 && slot_of(t) == slot)
            .map(|(&t, _)| t)
            .collect();
        group.sort_unstable();
        let before = self.owner.get(&slot).copied();
        let owner = before.filter(|o| group.contains(o)).or(group.first().copied());
        match owner {
            Some(o) => self.owner.insert(slot, o),
            None => self.owner.remove(&slot),
        };
        let spill = if group.len() > 1 { SPILL } else { 0 };
        let entry = owner.map_or([0, 0], |o| [o, values[&o] | spill]);
        let spilled =
            group.iter().filter(|&&t| Some(t) != owner).map(|&t| (t, values[&t])).collect();
        // Out of the hash: a process no longer a target, and one that now holds the index.
        let mut unspilled = Vec::new();
        if !group.contains(&tgid) {
            unspilled.push(tgid);
        }
        if let Some(o) = owner
            && owner != before
        {
            unspilled.push(o);
        }
        Writes { slot, entry, spilled, unspilled }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The program's `target_of`, over the two maps as the writes left them.
    fn lookup(array: &HashMap<u32, [u32; 2]>, hash: &HashMap<u32, u32>, tgid: u32) -> u32 {
        let Some(&[t, v]) = array.get(&slot_of(tgid)) else { return 0 };
        if tgid == 0 {
            0
        } else if t == tgid {
            v & !SPILL
        } else if v & SPILL == 0 {
            0
        } else {
            hash.get(&tgid).copied().unwrap_or(0)
        }
    }

    proptest! {
        /// Targets added, changed and removed in any order, many sharing an index: the program's
        /// lookup finds each process's value, and the hash holds only targets that spilled.
        #[test]
        fn every_process_is_found_with_its_value(
            ops in prop::collection::vec((0u32..6, 1u32..4, 0u32..4), 1..60)
        ) {
            let mut slots = Slots::default();
            let mut values: HashMap<u32, u32> = HashMap::new();
            let mut array: HashMap<u32, [u32; 2]> = HashMap::new();
            let mut hash: HashMap<u32, u32> = HashMap::new();
            for (which, high, value) in ops {
                // Six bases, each times 1 to 3: for each multiplier, three share one index
                // and two another.
                let tgid = [7 + SLOTS, 7 + 2 * SLOTS, 7 + 3 * SLOTS, 9 + SLOTS, 9, 11][which as usize] * high;
                values.insert(tgid, value);
                let w = slots.set(tgid, &values);
                for (t, v) in &w.spilled {
                    hash.insert(*t, *v);
                }
                array.insert(w.slot, w.entry);
                for t in &w.unspilled {
                    hash.remove(t);
                }
                for (&t, &v) in &values {
                    prop_assert_eq!(lookup(&array, &hash, t), v, "tgid {}", t);
                }
                for &t in hash.keys() {
                    prop_assert!(values.get(&t).is_some_and(|&v| v != 0));
                    prop_assert_ne!(array[&slot_of(t)][0], t);
                }
            }
        }
    }

    #[test]
    fn a_target_keeps_its_index_while_others_come_and_go() {
        let mut slots = Slots::default();
        let mut values = HashMap::from([(5, 1)]);
        assert_eq!(slots.set(5, &values).entry, [5, 1]);
        values.insert(5 + SLOTS, 2);
        let w = slots.set(5 + SLOTS, &values);
        assert_eq!(w.entry, [5, 1 | SPILL]);
        assert_eq!(w.spilled, vec![(5 + SLOTS, 2)]);
        values.insert(5, 0);
        let w = slots.set(5, &values);
        assert_eq!(w.entry, [5 + SLOTS, 2]);
        assert_eq!(w.unspilled, vec![5, 5 + SLOTS]);
        values.insert(5 + SLOTS, 0);
        assert_eq!(slots.set(5 + SLOTS, &values).entry, [0, 0]);
    }
}
