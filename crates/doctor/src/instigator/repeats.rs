//! Instigators that set off more than one stall of a recording, counted.

use super::*;

/// Says of each instigator that set off more than one stall of the recording how many, how long
/// in all, and how often: "the thread dump asked for every 60 s by jstack costs 600 ms each".
pub fn count_repeats(stalls: &mut [crate::report::StallReport]) {
    let mut r = Repeats::default();
    r.add(stalls);
    r.annotate(stalls);
}

/// Who set off how many stalls of a recording, gathered as its stalls are diagnosed (`watch`
/// diagnoses each as it ends): per instigator, the stalls, their time in all, the first and the
/// last start. A thread of the JVM by its id (its name may be known in one stall and not
/// another); a process outside by its name (each jcmd or kill is a new process).
#[derive(Debug, Default)]
pub struct Repeats {
    by: HashMap<(InstigatorKind, String, Option<i32>), Repeat>,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Repeat {
    n: u64,
    total_ns: u64,
    first_ns: u64,
    last_ns: u64,
}

impl Repeats {
    fn key(i: &Instigator) -> (InstigatorKind, String, Option<i32>) {
        match i.kind {
            InstigatorKind::JavaThread
            | InstigatorKind::Jvm
            | InstigatorKind::MemoryMapper
            | InstigatorKind::RemoteJmx => (i.kind, String::new(), i.tid),
            _ => (i.kind, i.name.clone(), None),
        }
    }

    /// Counts `stalls` (in order of time, after those added before).
    pub fn add(&mut self, stalls: &[crate::report::StallReport]) {
        for s in stalls {
            // Once per stall, whatever number of its findings it set off.
            let mut seen = Vec::new();
            for i in s.findings.iter().filter_map(|f| f.instigator.as_ref()) {
                let k = Self::key(i);
                if seen.contains(&k) {
                    continue;
                }
                let r = self.by.entry(k.clone()).or_insert(Repeat {
                    n: 0,
                    total_ns: 0,
                    first_ns: s.start_mono_ns,
                    last_ns: s.start_mono_ns,
                });
                r.n += 1;
                r.total_ns += s.duration_ns;
                r.first_ns = r.first_ns.min(s.start_mono_ns);
                r.last_ns = r.last_ns.max(s.start_mono_ns);
                seen.push(k);
            }
        }
    }

    /// Says in each finding of `stalls` whose instigator set off more than one stall of those
    /// added how many, their time in all, and how often.
    pub fn annotate(&self, stalls: &mut [crate::report::StallReport]) {
        for s in stalls.iter_mut() {
            for f in s.findings.iter_mut() {
                let Some(i) = f.instigator.as_mut() else { continue };
                let Some(r) = self.by.get(&Self::key(i)).filter(|r| r.n > 1) else { continue };
                let every = (r.last_ns - r.first_ns) / (r.n - 1);
                let line = format!(
                    " (the same set off {} stalls of this recording, {} in all, one every {} on average)",
                    r.n,
                    fmt_ns(r.total_ns),
                    fmt_ns(every)
                );
                i.did.push_str(&line);
            }
        }
    }
}
