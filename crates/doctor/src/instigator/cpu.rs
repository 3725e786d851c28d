//! Who took the CPUs while the JVM's threads waited for one.

use super::*;

/// The processes that took the CPUs while the stall lasted, when others took enough of them.
pub fn cpu_neighbours(inp: &WhoInputs) -> Option<Instigator> {
    let (from, to, cpus, others_ns, takers, counted) = inp.lines.iter().find_map(|w| match w {
        Who::CpuUse { from, to, cpus, others_ns, takers, counted, .. } => {
            Some((*from, *to, *cpus, *others_ns, takers, counted.as_str()))
        }
        _ => None,
    })?;
    let capacity = (to.saturating_sub(from) as f64 * cpus.max(1) as f64).max(1.0);
    let share = others_ns as f64 / capacity;
    if share < NEIGHBOURS_MIN_SHARE || takers.is_empty() {
        return None;
    }
    let processes: Vec<CpuShare> = takers
        .iter()
        .take(MAX_PROCESSES)
        .map(|t| CpuShare {
            pid: t.pid,
            name: t.comm.clone(),
            command: Some(t.named.cmdline.join(" ")).filter(|c| !c.is_empty()),
            cgroup: Some(t.named.cgroup.clone()).filter(|c| !c.is_empty()),
            container: t.named.container.clone(),
            user: t.named.user.clone(),
            cpu_ns: t.cpu_ns + t.children_ns,
            share: ((t.cpu_ns + t.children_ns) as f64 / capacity).min(1.0),
        })
        .collect();
    // Grouped by cgroup: one group taking most of it is the one to act on.
    let mut by_group: BTreeMap<&str, u64> = BTreeMap::new();
    for t in takers {
        *by_group.entry(t.named.cgroup.as_str()).or_default() += t.cpu_ns + t.children_ns;
    }
    let group = by_group
        .iter()
        .max_by_key(|(_, ns)| **ns)
        .filter(|(g, ns)| !g.is_empty() && **g != "/" && **ns as f64 >= 0.6 * others_ns as f64)
        .map(|(g, _)| g.to_string());
    let top = &processes[0];
    // In words, those that took a visible part; the JSON has them all.
    let listed: Vec<String> = processes
        .iter()
        .filter(|p| p.share >= LISTED_MIN_SHARE || p.pid == processes[0].pid)
        .map(|p| {
            let cmd = p
                .command
                .as_ref()
                .filter(|c| c.as_str() != p.name)
                .map(|c| format!(": {}", shorten(&program_named(c), 60)))
                .unwrap_or_default();
            // Where it runs: its pod and container where known, else its cgroup.
            let cg = match (&p.container, &p.cgroup) {
                (Some(c), _) => format!(", {c}"),
                (None, Some(c)) if c != "/" => format!(", cgroup {c}"),
                _ => String::new(),
            };
            format!("{} (pid {}{cg}{cmd}) {:.0}%", p.name, p.pid, p.share * 100.0)
        })
        .collect();
    // The group named by its container (a pod's), where all of its takers share one.
    let group_container = group.as_deref().and_then(|g| {
        let mut of_group =
            takers.iter().filter(|t| t.named.cgroup == g).map(|t| &t.named.container);
        let first = of_group.next()?.as_ref()?;
        of_group.all(|c| c.as_ref() == Some(first)).then(|| first.clone())
    });
    let name = group_container.or_else(|| group.clone()).unwrap_or_else(|| top.name.clone());
    let keep = match &group {
        Some(g) => format!(
            "the cgroup {g}: cpu.idle=1 on it (cgroup v2) or a lower cpu.weight / cpu.shares"
        ),
        None if listed.len() == 1 => format!(
            "{}: run it at a lower weight (in a cgroup with cpu.idle=1, at nice 19, or SCHED_IDLE)",
            top.name
        ),
        None => format!(
            "{} and the others: run them at a lower weight (in a cgroup with cpu.idle=1, at nice 19, or SCHED_IDLE)",
            top.name
        ),
    };
    let (whose, fix) = if inp.not_a_jvm {
        (
            "its",
            format!(
                "keep them out of its way: {keep}; or give it CPUs of its own (a cpuset), or raise its latency-critical threads (a higher weight or nice value, SCHED_FIFO)"
            ),
        )
    } else {
        (
            "the JVM's",
            format!(
                "keep them out of the JVM's way: {keep}; or give the JVM CPUs of its own (a cpuset); else raise its threads while it reaches each safepoint (stallscope run --boost fifo:1)"
            ),
        )
    };
    Some(Instigator {
        did: format!(
            "other processes took {:.0}% of the {cpus} CPUs while {whose} threads waited for one: {}",
            share * 100.0,
            listed.join(", ")
        ),
        pid: Some(top.pid),
        command: top.command.clone(),
        user: top.user.clone(),
        cgroup: group.or_else(|| top.cgroup.clone()),
        container: top.container.clone(),
        processes,
        source: if counted == "bpf" {
            "every process's CPU time, counted by the kernel's scheduler switches (BPF, to the ns; ended children at their parent), from the stall's first look to its end".into()
        } else {
            "every process's CPU time (/proc/PID/stat, in 10 ms ticks; ended children at their parent) from the stall's first look to its end".into()
        },
        fix,
        ..blank(InstigatorKind::CpuNeighbours, name)
    })
}
