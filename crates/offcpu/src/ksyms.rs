//! Kernel addresses to function names, from `/proc/kallsyms` (which shows real addresses only to
//! root or CAP_SYSLOG: the same privilege the BPF program needs).
//!
//! Invariant: an address no symbol covers is shown as hex, never given a wrong name.

/// The kernel's text symbols, sorted by address.
pub struct Ksyms {
    syms: Vec<(u64, String)>,
}

impl Ksyms {
    /// Reads `/proc/kallsyms`. Fails when it hides the addresses (all zero).
    pub fn load() -> Result<Ksyms, String> {
        let text = std::fs::read_to_string("/proc/kallsyms")
            .map_err(|e| format!("/proc/kallsyms: {e}"))?;
        let k = Ksyms::parse(&text);
        if k.syms.is_empty() {
            return Err("/proc/kallsyms shows no addresses (kptr_restrict): run as root to name kernel stacks".into());
        }
        Ok(k)
    }

    /// Parses kallsyms text (`ffffffff81000000 T _stext [module]`); text symbols only.
    pub fn parse(text: &str) -> Ksyms {
        let mut syms: Vec<(u64, String)> = text
            .lines()
            .filter_map(|l| {
                let mut it = l.split_whitespace();
                let addr = u64::from_str_radix(it.next()?, 16).ok()?;
                let kind = it.next()?;
                let name = it.next()?;
                (addr != 0 && matches!(kind, "T" | "t" | "W" | "w"))
                    .then(|| (addr, name.to_string()))
            })
            .collect();
        syms.sort_unstable();
        syms.dedup_by_key(|s| s.0);
        Ksyms { syms }
    }

    /// The function that holds `addr`, or the address in hex.
    pub fn name(&self, addr: u64) -> String {
        match self.syms.partition_point(|s| s.0 <= addr) {
            0 => format!("{addr:#x}"),
            i => self.syms[i - 1].1.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_function_holding_an_address_and_hex_below_the_first() {
        let k = Ksyms::parse(
            "ffffffff81000000 T _stext\nffffffff81000100 t schedule\nffffffff81000200 D data\nnot a line\n0000000000000000 T hidden\n",
        );
        assert_eq!(k.name(0xffffffff81000150), "schedule");
        assert_eq!(k.name(0xffffffff81000000), "_stext");
        assert_eq!(k.name(0x10), "0x10");
        // A data symbol does not name text.
        assert_eq!(k.name(0xffffffff81000250), "schedule");
    }

    proptest::proptest! {
        #[test]
        fn any_text_parses_without_panic(s in "\\PC*", a in proptest::num::u64::ANY) {
            let _ = Ksyms::parse(&s).name(a);
        }
    }
}
