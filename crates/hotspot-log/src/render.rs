//! Prints lines the way HotSpot does, through the format strings in [`crate::formats`]: for
//! tests (render, parse, compare), synthetic fixtures of JDKs not on the machine, and
//! benchmark input.
//!
//! Invariant: only the C `printf` conversions HotSpot's safepoint code uses are supported
//! (`%s %d %ld %f` with flags `-`, width and precision); anything else is an error, not a guess.

/// One `printf` argument.
#[derive(Debug, Clone, Copy)]
pub enum Arg<'a> {
    Str(&'a str),
    Int(i64),
    Float(f64),
}

/// C `printf` for the subset HotSpot's safepoint logging uses.
pub fn printf(fmt: &str, args: &[Arg<'_>]) -> Result<String, String> {
    let mut out = String::with_capacity(fmt.len() + 32);
    let mut args = args.iter();
    let mut chars = fmt.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        if chars.peek() == Some(&'%') {
            chars.next();
            out.push('%');
            continue;
        }
        let mut left = false;
        if chars.peek() == Some(&'-') {
            left = true;
            chars.next();
        }
        let mut width = 0usize;
        while let Some(d) = chars.peek().and_then(|c| c.to_digit(10)) {
            width = width * 10 + d as usize;
            chars.next();
        }
        let mut precision = None;
        if chars.peek() == Some(&'.') {
            chars.next();
            let mut p = 0usize;
            while let Some(d) = chars.peek().and_then(|c| c.to_digit(10)) {
                p = p * 10 + d as usize;
                chars.next();
            }
            precision = Some(p);
        }
        while chars.peek() == Some(&'l') {
            chars.next();
        }
        let conv = chars.next().ok_or("format ends inside a conversion")?;
        let arg = args.next().ok_or_else(|| format!("too few arguments for %{conv}"))?;
        let text = match (conv, arg) {
            ('s', Arg::Str(s)) => s.to_string(),
            ('d', Arg::Int(i)) => i.to_string(),
            ('f', Arg::Float(f)) => format!("{:.*}", precision.unwrap_or(6), f),
            (c, a) => return Err(format!("%{c} cannot print {a:?}")),
        };
        let pad = width.saturating_sub(text.chars().count());
        if left {
            out.push_str(&text);
            out.extend(std::iter::repeat_n(' ', pad));
        } else {
            out.extend(std::iter::repeat_n(' ', pad));
            out.push_str(&text);
        }
    }
    if args.next().is_some() {
        return Err("too many arguments".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_conversions() {
        let s = printf(
            "%3.7f|%-6s|%8d|%ld|%.3f|%%",
            &[
                Arg::Float(0.0001794),
                Arg::Str("ab"),
                Arg::Int(42),
                Arg::Int(-7),
                Arg::Float(4.1445),
            ],
        )
        .unwrap();
        assert_eq!(s, "0.0001794|ab    |      42|-7|4.144|%");
        assert!(printf("%d", &[]).is_err());
        assert!(printf("%x", &[Arg::Int(1)]).is_err());
    }
}
