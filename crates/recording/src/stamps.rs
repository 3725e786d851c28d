//! Where a recording's line belongs, read from its text without parsing it: the stall and the
//! time in its top-level keys (every writer puts `stall` and `t` there). The reader skips the
//! lines no reading keeps by them; the writer stamps what it keeps in memory with them.

/// The top-level head of a JSON line: its text before its first nested object or array (every
/// writer puts `stall` and `t` there), at most 160 bytes.
fn head(line: &str) -> &[u8] {
    let head = &line.as_bytes()[..line.len().min(160)];
    let end =
        head.iter().skip(1).position(|b| *b == b'{' || *b == b'[').map_or(head.len(), |p| p + 1);
    &head[..end]
}

/// The unsigned number after `key` (`"stall":`) in `head`, where the key opens a field (after
/// `{` or `,`). None without one, or past `u64`.
fn number_at(head: &[u8], key: &[u8]) -> Option<u64> {
    let mut from = 0;
    while let Some(p) = head[from..].windows(key.len()).position(|w| w == key) {
        let at = from + p;
        from = at + 1;
        if at == 0 || !matches!(head[at - 1], b'{' | b',') {
            continue;
        }
        let digits = &head[at + key.len()..];
        let n = digits.iter().take_while(|b| b.is_ascii_digit()).count();
        if n == 0 || n > 19 {
            return None;
        }
        return std::str::from_utf8(&digits[..n]).ok()?.parse().ok();
    }
    None
}

/// The stall a line of a per-stall file belongs to: the number of its top-level `"stall"` key.
/// None for a line without one.
pub fn stall_of_line(line: &str) -> Option<u32> {
    number_at(head(line), b"\"stall\":").and_then(|n| u32::try_from(n).ok())
}

/// The time (`"t"`, CLOCK_MONOTONIC ns) of a line, from its top-level key.
pub fn t_of_line(line: &str) -> Option<u64> {
    number_at(head(line), b"\"t\":")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_s_stall_is_its_top_level_key() {
        assert_eq!(
            stall_of_line(r#"{"t":79925608961588,"stall":12,"full":true,"threads":[]}"#),
            Some(12)
        );
        assert_eq!(stall_of_line(r#"{"stall":13,"events":[{"stall":2}]}"#), Some(13));
        assert_eq!(stall_of_line(r#"{"t":1,"stall":0,"baseline":true}"#), Some(0));
        assert_eq!(stall_of_line(r#"{"seen":"note","t":5,"stall":7,"note":"x"}"#), Some(7));
        // Inside a nested object or array it is another thing's.
        assert_eq!(stall_of_line(r#"{"t":1,"threads":[{"stall":3}]}"#), None);
        assert_eq!(stall_of_line(r#"{"t":1,"x":{"stall":3}}"#), None);
        assert_eq!(stall_of_line(r#"{"event":"detach","t":3}"#), None);
        assert_eq!(stall_of_line(r#"{"stall":-1}"#), None);
        assert_eq!(stall_of_line(r#"{"stall":99999999999}"#), None);
        assert_eq!(stall_of_line(""), None);
        assert_eq!(stall_of_line("\"stall\":"), None);
        assert_eq!(stall_of_line(r#"{"stall":4294967296}"#), None, "past u32");
    }
}
