//! Cutting a stall into segments: reaching each safepoint it overlaps (its TTSP), at each one
//! (its operation running), and outside any (a hiccup of the meter thread alone).
//!
//! Invariant: the segments are in time order, do not overlap, and lie within the stall; each
//! one's bounds are clipped to it.

use crate::evidence::StallEvidence;
use crate::report::SafepointView;

/// Which part of a stall a segment is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SegmentKind {
    /// Reaching safepoint `i` (its TTSP).
    Reaching(usize),
    /// At safepoint `i`: its operation running.
    At(usize),
    /// Outside any safepoint: a hiccup of the meter thread alone.
    Outside,
}

/// One segment of a stall, with what the threads did in it.
pub struct Segment {
    pub kind: SegmentKind,
    pub start_ns: u64,
    pub end_ns: u64,
    /// The samples that fell inside it, rebuilt (empty when none did).
    pub evidence: StallEvidence,
}

impl Segment {
    pub fn len_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }
}

/// The stall cut into segments, in time order, covering [start, end]: reaching each safepoint,
/// at it, and outside any. Each segment's bounds are clipped to the stall.
pub fn segments(
    start: u64,
    end: u64,
    safepoints: &[SafepointView],
) -> Vec<(SegmentKind, u64, u64)> {
    let mut out = Vec::new();
    let mut at = start;
    for (i, sp) in safepoints.iter().enumerate() {
        // A safepoint that begins after the stall's end (a record placed late) ends nothing.
        let s = sp.start_mono_ns.max(at).min(end);
        let reached = sp.start_mono_ns.saturating_add(sp.ttsp_ns).clamp(s, end);
        let done = sp.start_mono_ns.saturating_add(sp.total_ns).clamp(reached, end);
        if s > at && s <= end {
            out.push((SegmentKind::Outside, at, s.min(end)));
        }
        if reached > s {
            out.push((SegmentKind::Reaching(i), s, reached));
        }
        if done > reached {
            out.push((SegmentKind::At(i), reached, done));
        }
        at = at.max(done);
    }
    if at < end {
        out.push((SegmentKind::Outside, at, end));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sp(start: u64, ttsp: u64, total: u64) -> SafepointView {
        SafepointView {
            op: "x".into(),
            ttsp_ns: ttsp,
            at_safepoint_ns: total - ttsp,
            total_ns: total,
            start_mono_ns: start,
            threads_total: None,
            threads_running: None,
            timeout_culprits: Vec::new(),
            unfinished: false,
        }
    }

    #[test]
    fn a_stall_is_cut_into_outside_reaching_and_at_each_safepoint() {
        use SegmentKind::*;
        let got = segments(100, 200, &[sp(120, 30, 50)]);
        assert_eq!(
            got,
            [(Outside, 100, 120), (Reaching(0), 120, 150), (At(0), 150, 170), (Outside, 170, 200)]
        );
    }

    #[test]
    fn a_safepoint_past_the_end_or_overflowing_is_clipped_not_a_panic() {
        use SegmentKind::*;
        assert_eq!(segments(100, 200, &[sp(300, 10, 20)]), [(Outside, 100, 200)]);
        assert_eq!(
            segments(100, 200, &[sp(150, u64::MAX, u64::MAX)]),
            [(Outside, 100, 150), (Reaching(0), 150, 200)]
        );
    }
}
