//! Names the code of a thread of a JVM from outside: `code_at PID TID` (its pc and sp from
//! /proc/PID/task/TID/syscall; the thread must be blocked in the kernel).
fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let (pid, tid): (i32, i32) = (a[0].parse().unwrap(), a[1].parse().unwrap());
    let cc = procwatch::codecache::CodeCache::read(pid).unwrap_or_else(|e| panic!("{e}"));
    let sc = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/syscall")).unwrap();
    let (sp, pc) = match procwatch::task::parse_syscall(&sc) {
        procwatch::task::Syscall::NotInSyscall { sp, pc }
        | procwatch::task::Syscall::In { sp, pc, .. } => (sp, pc),
        s => panic!("{s:?}"),
    };
    let mem = procwatch::vmstructs::Memory { pid };
    let mut stack = vec![0u8; 16 << 10];
    let n = mem.read_some(sp, &mut stack).unwrap();
    stack.truncate(n);
    let word = |at: u64| -> Option<u64> {
        let o = at.checked_sub(sp)? as usize;
        stack.get(o..o + 8).map(|b| u64::from_le_bytes(b.try_into().unwrap()))
    };
    for i in 0..(stack.len() / 8) as u64 {
        if let Some(w) = word(sp + i * 8)
            && let Ok(c) = cc.code_at(w, None)
            && !matches!(c, procwatch::codecache::Code::Native)
        {
            println!("  sp+{:#x}: {w:#x} {c:?}", i * 8);
        }
    }
    for c in cc.walk(pc, sp, 0, &word, 32) {
        println!("{c:?}");
    }
}
