//! Prefix tests on short byte strings, eight bytes at a time and inlined: on lines a few hundred
//! bytes long, a call to libc's `memcmp` per test cost more than the test (a tenth of the time
//! `logs` took on a JDK 8 log, whose every line is tested against a needle and two phrases).

/// Whether `hay` starts with `n`.
#[inline(always)]
pub(crate) fn has_prefix(hay: &[u8], n: &[u8]) -> bool {
    if hay.len() < n.len() {
        return false;
    }
    let word = |s: &[u8], at: usize| u64::from_le_bytes(s[at..at + 8].try_into().expect("8 bytes"));
    let mut diff = 0u64;
    let mut i = 0;
    while i + 8 <= n.len() {
        diff |= word(hay, i) ^ word(n, i);
        i += 8;
    }
    if i < n.len() {
        if n.len() >= 8 {
            // The last eight bytes, overlapping the words already compared.
            let j = n.len() - 8;
            diff |= word(hay, j) ^ word(n, j);
        } else {
            for k in i..n.len() {
                diff |= u64::from(hay[k] ^ n[k]);
            }
        }
    }
    diff == 0
}

/// `hay` without its prefix `n`, if it has it.
#[inline(always)]
pub(crate) fn strip_prefix<'a>(hay: &'a [u8], n: &[u8]) -> Option<&'a [u8]> {
    has_prefix(hay, n).then(|| &hay[n.len()..])
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The same answer as the standard library's, for any pair of short strings.
        #[test]
        fn as_the_standard_prefix_test(hay in proptest::collection::vec(0u8..4, 0..40), n in proptest::collection::vec(0u8..4, 0..40)) {
            proptest::prop_assert_eq!(has_prefix(&hay, &n), hay.starts_with(&n));
            proptest::prop_assert_eq!(strip_prefix(&hay, &n), hay.strip_prefix(&n[..]));
        }
    }
}
