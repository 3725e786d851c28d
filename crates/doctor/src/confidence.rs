//! One confidence policy for every source of evidence (issue 55): the `/proc` samples, the
//! kernel's waits (BPF), a flight recording's events and the logs. The sources differ in which
//! evidence they have, not in the rule that grades it ([docs/causes/unknown.md](../../docs/causes/unknown.md)
//! says how it reads):
//!
//! - **high**: the cause covers at least [`HIGH_SHARE`] of the stall (most of it) with
//!   [`Strength::Direct`] evidence: evidence of the cause's own kind, measured through the stall
//!   (the thread's samples in the cause's state, its kernel wait with the stack that names what
//!   it waited for, the JVM's own timing of the operation that held it);
//! - **medium**: at least [`MEDIUM_SHARE`], or most of it with [`Strength::Indirect`] evidence
//!   (consistent with the cause, but another cause would look the same from this source: a
//!   collection's length seen from a flight recording, which has no kernel view);
//! - **low**: less than that.
//!
//! A finding may only go down from what its share and strength give (a rule that knows more says
//! so), never up: a confident wrong answer is worse than `unknown`.

use crate::report::Confidence;

/// A cause covering at least this share of the stall, with direct evidence, is named with high
/// confidence.
pub const HIGH_SHARE: f64 = 2.0 / 3.0;
/// At least this share: medium; below it, low.
pub const MEDIUM_SHARE: f64 = 1.0 / 3.0;

/// How strongly the evidence ties a cause to the stall (see the module's notes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strength {
    /// Of the cause's own kind, measured through the stall.
    Direct,
    /// Consistent with the cause, which another would also explain from this source.
    Indirect,
}

impl From<bool> for Strength {
    /// `true`: direct.
    fn from(direct: bool) -> Strength {
        if direct { Strength::Direct } else { Strength::Indirect }
    }
}

/// The confidence of a cause covering `share` of its stall with evidence of `strength`.
pub fn grade(share: f64, strength: Strength) -> Confidence {
    if share >= HIGH_SHARE && strength == Strength::Direct {
        Confidence::High
    } else if share >= MEDIUM_SHARE {
        Confidence::Medium
    } else {
        Confidence::Low
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn high_needs_most_of_the_stall_and_direct_evidence() {
        assert_eq!(grade(1.0, Strength::Direct), Confidence::High);
        assert_eq!(grade(HIGH_SHARE, Strength::Direct), Confidence::High);
        assert_eq!(grade(0.66, Strength::Direct), Confidence::Medium);
        assert_eq!(grade(1.0, Strength::Indirect), Confidence::Medium);
        assert_eq!(grade(MEDIUM_SHARE, Strength::Indirect), Confidence::Medium);
        assert_eq!(grade(0.3, Strength::Direct), Confidence::Low);
        assert_eq!(grade(f64::NAN, Strength::Direct), Confidence::Low);
    }

    proptest::proptest! {
        #[test]
        fn more_share_or_stronger_evidence_never_lowers_it(a in 0.0f64..1.0, b in 0.0f64..1.0) {
            let (lo, hi) = (a.min(b), a.max(b));
            for s in [Strength::Direct, Strength::Indirect] {
                proptest::prop_assert!(grade(lo, s) <= grade(hi, s));
            }
            proptest::prop_assert!(grade(a, Strength::Indirect) <= grade(a, Strength::Direct));
            // High only for most of the stall (the rule in docs/causes/unknown.md).
            if grade(a, Strength::Direct) == Confidence::High {
                proptest::prop_assert!(a > 0.5);
            }
        }
    }
}
