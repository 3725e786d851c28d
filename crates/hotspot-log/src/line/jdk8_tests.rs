//! The fast path for JDK 8's pause line (`crate::fastpath`) against the general reading.

use super::{Classified, Outcome, classify_general};
use crate::fastpath::Jdk8Pauses;

fn jdk8_stopped(line: &[u8]) -> Option<Classified<'static>> {
    Jdk8Pauses::default().read(line).map(Into::into)
}

#[test]
fn the_common_line_reads_as_the_general_reading_does() {
    for l in [
        "2023-11-14T22:13:20.013+0000: 0.013: Total time for which application threads were stopped: 0.7268193 seconds, Stopping threads took: 0.7239284 seconds",
        "2016-02-29T23:59:60.999-0530: 123456789.5: Total time for which application threads were stopped: 999999999.1 seconds, Stopping threads took: 0.000000001 seconds",
    ] {
        let fast = jdk8_stopped(l.as_bytes()).expect(l);
        assert_eq!(Outcome::Known(fast), classify_general(l.as_bytes()), "{l}");
    }
}

#[test]
fn anything_off_the_layout_is_left_to_the_general_reading() {
    for l in [
        "2023-11-14T22:13:20.013+00:00: 0.013: Total time for which application threads were stopped: 0.7268193 seconds, Stopping threads took: 0.7239284 seconds",
        "0.013: Total time for which application threads were stopped: 0.7268193 seconds, Stopping threads took: 0.7239284 seconds",
        "2023-11-14T22:13:20.013+0000: 0.013: Total time for which application threads were stopped: 0.7268193 seconds",
        "2023-11-14T22:13:20.013+0000: 0.013: Total time for which application threads were stopped: 0,7268193 seconds, Stopping threads took: 0,7239284 seconds",
        "2023-11-14T22:13:20.013+0000: 0.013: Total time for which application threads were stopped: 0.7268193 seconds, Stopping threads took: 0.7239284 seconds ",
        "2023-11-14T22:13:20.013+0000: 0.013: Total time for which application threads were stopped: 1234567890.7268193 seconds, Stopping threads took: 0.7239284 seconds",
        "2023-13-14T22:13:20.013+0000: 0.013: Total time for which application threads were stopped: 0.7268193 seconds, Stopping threads took: 0.7239284 seconds",
    ] {
        assert_eq!(jdk8_stopped(l.as_bytes()), None, "{l}");
    }
}

/// Pieces of the line, each most often right and otherwise off in one of the ways a log
/// can be, so that whole lines come both right and off.
fn pieces() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    let digits = || {
        prop_oneof![
            12 => "[0-9]{1,9}",
            6 => "[0-9]{7}",
            1 => "[0-9]{7}[0-9/:;]",
            1 => "[0-9]{0,14}",
            1 => "[0-9]{9,12}",
        ]
    };
    let num = move || {
        (digits(), digits(), prop_oneof![19 => Just('.'), 1 => Just(',')])
            .prop_map(|(i, f, sep)| format!("{i}{sep}{f}"))
    };
    (
        (1900u32..2200, 0u32..14, 1u32..33, 0u32..25, 0u32..61, 0u32..62),
        (prop_oneof![9 => "[0-9]{3}", 1 => "[0-9]{0,5}"], prop_oneof![6 => Just("+"), 2 => Just("-"), 1 => Just("Z"), 1 => Just(" ")]),
        (0u32..30, 0u32..70, prop_oneof![9 => Just(false), 1 => Just(true)]),
        (num(), num(), num()),
        prop_oneof![16 => Just(""), 1 => Just(" "), 1 => Just("\r"), 1 => Just(" seconds"), 1 => Just("x")],
        0usize..10,
    )
        .prop_map(|((y, mo, d, h, mi, se), (ms, sign), (oh, om, colon), (up, total, ttsp), tail, cut)| {
            let off = if colon { format!("{oh:02}:{om:02}") } else { format!("{oh:02}{om:02}") };
            let mut l = format!(
                "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{se:02}.{ms}{sign}{off}: {up}: Total time for which application threads were stopped: {total} seconds, Stopping threads took: {ttsp} seconds{tail}"
            );
            // Sometimes the line is cut short, anywhere.
            if cut == 0 {
                let at = l.len() * (1 + y as usize % 9) / 10;
                l.truncate(at);
            }
            l
        })
}

/// The generator makes lines the fast path takes, and lines it leaves.
#[test]
fn the_generator_makes_both_kinds_of_line() {
    use proptest::strategy::{Strategy, ValueTree};
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let taken = (0..2000)
        .filter(|_| {
            jdk8_stopped(pieces().new_tree(&mut runner).unwrap().current().as_bytes()).is_some()
        })
        .count();
    assert!((300..1800).contains(&taken), "{taken} of 2000 taken");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 20000, ..proptest::prelude::ProptestConfig::default() })]
    /// Whatever the fast path reads, the general reading reads the same.
    #[test]
    fn the_fast_path_never_differs_from_the_general_reading(l in pieces()) {
        let fast = jdk8_stopped(l.as_bytes());
        if let Some(fast) = fast {
            proptest::prop_assert_eq!(Outcome::Known(fast), classify_general(l.as_bytes()));
        }
    }

    /// A line read where it starts, with whatever follows it, ends where its newline is,
    /// and reads as the line alone.
    #[test]
    fn a_line_read_in_place_ends_at_its_newline(l in pieces(), end in proptest::sample::select(vec!["", "\n", "\r\n", "\r", "\rx", " ", "x", "\n\n2023"]), next in pieces()) {
        let hay = format!("{l}{end}{next}");
        if let Some((c, le)) = Jdk8Pauses::default().read_line(hay.as_bytes()) {
            let text = &hay.as_bytes()[..le];
            let line = text.strip_suffix(b"\r").unwrap_or(text);
            proptest::prop_assert_eq!(jdk8_stopped(line), Some(c.into()));
            let after = &hay.as_bytes()[le..];
            proptest::prop_assert!(after.is_empty() || after[0] == b'\n', "{:?}", hay);
            proptest::prop_assert!(!text.contains(&b'\n'));
        }
    }

    /// Read in a run through one reader, which keeps the last minute, each line still reads
    /// as the general reading reads it.
    #[test]
    fn a_run_of_lines_reads_as_each_line_alone(lines in proptest::collection::vec(pieces(), 1..12), again in proptest::collection::vec(0usize..12, 0..12)) {
        let mut pauses = Jdk8Pauses::default();
        let order = (0..lines.len()).chain(again.into_iter().map(|i| i % lines.len()));
        for i in order {
            let l = lines[i].as_bytes();
            match pauses.read(l) {
                Some(fast) => proptest::prop_assert_eq!(Outcome::Known(fast.into()), classify_general(l)),
                None => proptest::prop_assert_eq!(jdk8_stopped(l), None),
            }
        }
    }
}
