//! Helpers shared by the offcpu test binaries.

/// The ids of the BPF objects of `kind` (`prog` or `map`) that process `pid` holds open, from
/// its descriptors' links (`anon_inode:bpf-<kind>`) and fdinfo (`<kind>_id:`).
pub fn bpf_ids(pid: u32, kind: &str) -> Vec<u32> {
    let link = format!("anon_inode:bpf-{kind}");
    let key = format!("{kind}_id:");
    let mut ids = vec![];
    for fd in std::fs::read_dir(format!("/proc/{pid}/fd")).into_iter().flatten().flatten() {
        let ours = std::fs::read_link(fd.path()).is_ok_and(|l| l.to_string_lossy() == link);
        let info = format!("/proc/{pid}/fdinfo/{}", fd.file_name().to_string_lossy());
        if let (true, Ok(text)) = (ours, std::fs::read_to_string(info)) {
            ids.extend(
                text.lines()
                    .filter_map(|l| l.strip_prefix(key.as_str()))
                    .filter_map(|v| v.trim().parse::<u32>().ok()),
            );
        }
    }
    ids
}
