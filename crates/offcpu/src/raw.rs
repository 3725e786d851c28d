//! The BPF program's record (`struct offcpu_event` in `bpf/offcpu.bpf.c`) as plain data.
//!
//! Invariant: a record of the wrong size is refused (None), never read past its end.

/// Frames per stack in the record (`MAX_FRAMES`).
pub const MAX_FRAMES: usize = 32;
const COMM: usize = 16;
/// The record's size: 4 u64, 6 u32, 2 u16, 1 u32 (`instead_us`), 3 comms, 2 stacks.
pub const SIZE: usize = 4 * 8 + 6 * 4 + 2 * 2 + 4 + 3 * COMM + 2 * MAX_FRAMES * 8;

/// One wait as the program recorded it: kernel addresses, not yet named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawWait {
    pub start: u64,
    pub end: Option<u64>,
    pub woken: Option<u64>,
    /// `prev_state` at the switch (the tracepoint's encoding).
    pub state: i64,
    pub tid: i32,
    pub tgid: i32,
    pub cpu: u32,
    pub comm: String,
    pub frames: Vec<u64>,
    pub waker: Option<RawWaker>,
    /// Preempted: who held its CPU longest while it waited (at first, who took it).
    pub instead: Option<(i32, String)>,
    /// How long `instead` held it (None: it had not left the CPU when the wait ended).
    pub instead_ns: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawWaker {
    pub tid: i32,
    pub tgid: i32,
    pub comm: String,
    pub frames: Vec<u64>,
}

/// Reads the program's records field by field, in their layout's order (the caller checks the
/// length first: a read past the end panics).
pub(crate) struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(b: &'a [u8]) -> Cursor<'a> {
        Cursor { b, at: 0 }
    }
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let mut v = [0u8; N];
        v.copy_from_slice(&self.b[self.at..self.at + N]);
        self.at += N;
        v
    }
    pub(crate) fn u64(&mut self) -> u64 {
        u64::from_ne_bytes(self.take())
    }
    pub(crate) fn u32(&mut self) -> u32 {
        u32::from_ne_bytes(self.take())
    }
    fn u16(&mut self) -> u16 {
        u16::from_ne_bytes(self.take())
    }
    pub(crate) fn comm(&mut self) -> String {
        let b: [u8; COMM] = self.take();
        let n = b.iter().position(|&c| c == 0).unwrap_or(COMM);
        String::from_utf8_lossy(&b[..n]).into_owned()
    }
    fn frames(&mut self, n: u16) -> Vec<u64> {
        let all: Vec<u64> = (0..MAX_FRAMES).map(|_| self.u64()).collect();
        all.into_iter().take((n as usize).min(MAX_FRAMES)).collect()
    }
}

/// The fields a record and an entry share, in their order (after the times and the state):
/// who, the waker, who ran instead, the CPU, the frame counts and the three names.
struct Body {
    tid: i32,
    tgid: i32,
    waker_tid: i32,
    waker_tgid: i32,
    instead_tid: i32,
    cpu: u32,
    nframes: u16,
    waker_nframes: u16,
    instead_us: u32,
    comm: String,
    waker_comm: String,
    instead_comm: String,
}

impl Body {
    fn read(c: &mut Cursor) -> Body {
        let (tid, tgid) = (c.u32() as i32, c.u32() as i32);
        let (waker_tid, waker_tgid) = (c.u32() as i32, c.u32() as i32);
        let (instead_tid, cpu) = (c.u32() as i32, c.u32());
        let (nframes, waker_nframes, instead_us) = (c.u16(), c.u16(), c.u32());
        let (comm, waker_comm, instead_comm) = (c.comm(), c.comm(), c.comm());
        Body {
            tid,
            tgid,
            waker_tid,
            waker_tgid,
            instead_tid,
            cpu,
            nframes,
            waker_nframes,
            instead_us,
            comm,
            waker_comm,
            instead_comm,
        }
    }

    /// The wait, with its stacks (none for an entry: taken as it is woken).
    fn wait(self, times: [u64; 3], state: i64, stacks: [Vec<u64>; 2]) -> RawWait {
        let [start, end, woken] = times;
        let [frames, waker_frames] = stacks;
        RawWait {
            start,
            end: (end != 0).then_some(end),
            woken: (woken != 0).then_some(woken),
            state,
            tid: self.tid,
            tgid: self.tgid,
            cpu: self.cpu,
            comm: self.comm,
            frames,
            waker: (woken != 0).then_some(RawWaker {
                tid: self.waker_tid,
                tgid: self.waker_tgid,
                comm: self.waker_comm,
                frames: waker_frames,
            }),
            instead: (self.instead_tid != 0 || !self.instead_comm.is_empty())
                .then_some((self.instead_tid, self.instead_comm)),
            instead_ns: (self.instead_us != 0).then_some(self.instead_us as u64 * 1000),
        }
    }
}

/// Reads one record; None if it is not one (wrong size).
pub fn parse_event(b: &[u8]) -> Option<RawWait> {
    if b.len() != SIZE {
        return None;
    }
    let mut c = Cursor::new(b);
    let (start, end, woken, state) = (c.u64(), c.u64(), c.u64(), c.u64() as i64);
    let body = Body::read(&mut c);
    let frames = c.frames(body.nframes);
    let waker_frames = c.frames(body.waker_nframes);
    Some(body.wait([start, end, woken], state, [frames, waker_frames]))
}

/// The size of a thread's entry while it waits (`struct off_entry`): 3 u64, 6 u32, 2 u16, 1
/// u32, 3 comms, the u64 `on` (read by entries.rs alone), 16 bytes spare (to 128: two whole
/// cache lines).
pub const ENTRY_SIZE: usize = 3 * 8 + 6 * 4 + 2 * 2 + 4 + 3 * COMM + 8 + 16;

/// Reads a thread's entry (its wait going on: no end, no stacks yet); None if it is not one
/// (wrong size).
pub fn parse_entry(b: &[u8]) -> Option<RawWait> {
    if b.len() != ENTRY_SIZE {
        return None;
    }
    let mut c = Cursor::new(b);
    let (start, woken, state) = (c.u64(), c.u64(), c.u64() as i64);
    Some(Body::read(&mut c).wait([start, 0, woken], state, [Vec::new(), Vec::new()]))
}

/// The state letter of a `sched_switch` `prev_state`, as the tracepoint prints it: `R` for a
/// thread that left runnable (preempted, or yielding), else the lowest state bit.
pub fn state_letter(state: i64) -> char {
    const LETTERS: [char; 8] = ['S', 'D', 'T', 't', 'X', 'Z', 'P', 'I'];
    let s = state & 0xff;
    if s == 0 {
        return 'R';
    }
    LETTERS[s.trailing_zeros() as usize]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(nframes: u16, woken: u64) -> Vec<u8> {
        let mut b = Vec::new();
        for v in [10u64, 20, woken, 2] {
            b.extend(v.to_ne_bytes());
        }
        for v in [7u32, 5, 9, 9, 0, 1] {
            b.extend(v.to_ne_bytes());
        }
        b.extend(nframes.to_ne_bytes());
        b.extend(1u16.to_ne_bytes());
        b.extend(0u32.to_ne_bytes());
        for s in ["java", "kworker/0:1", ""] {
            let mut c = [0u8; COMM];
            c[..s.len()].copy_from_slice(s.as_bytes());
            b.extend(c);
        }
        for i in 0..2 * MAX_FRAMES as u64 {
            b.extend((0xffff_0000 + i).to_ne_bytes());
        }
        b
    }

    #[test]
    fn reads_a_record_as_the_program_writes_it() {
        let r = parse_event(&record(3, 15)).unwrap();
        assert_eq!(
            (r.start, r.end, r.woken, r.tid, r.tgid, r.cpu),
            (10, Some(20), Some(15), 7, 5, 1)
        );
        assert_eq!(state_letter(r.state), 'D');
        assert_eq!(r.comm, "java");
        assert_eq!(r.frames, vec![0xffff_0000, 0xffff_0001, 0xffff_0002]);
        let w = r.waker.unwrap();
        assert_eq!((w.tid, w.comm.as_str(), w.frames.len()), (9, "kworker/0:1", 1));
        assert_eq!(w.frames[0], 0xffff_0000 + MAX_FRAMES as u64);
        assert_eq!(r.instead, None);
        // Never woken (preempted): no waker; a frame count past the array is capped.
        let r = parse_event(&record(999, 0)).unwrap();
        assert!(r.waker.is_none());
        assert_eq!(r.frames.len(), MAX_FRAMES);
    }

    #[test]
    fn a_preempted_wait_names_who_held_its_cpu_longest_and_for_how_long() {
        let mut b = record(0, 0);
        b[24..32].copy_from_slice(&0x100i64.to_ne_bytes());
        b[48..52].copy_from_slice(&42u32.to_ne_bytes());
        b[60..64].copy_from_slice(&2_500u32.to_ne_bytes());
        b[96..96 + 7].copy_from_slice(b"cpu-hog");
        let r = parse_event(&b).unwrap();
        assert_eq!(state_letter(r.state), 'R');
        assert_eq!((r.instead, r.instead_ns), (Some((42, "cpu-hog".into())), Some(2_500_000)));
        // Back before the one that took its CPU left it: named, for no time yet.
        b[60..64].copy_from_slice(&0u32.to_ne_bytes());
        assert_eq!(parse_event(&b).unwrap().instead_ns, None);
    }

    #[test]
    fn reads_an_entry_as_the_program_keeps_it() {
        let mut b = Vec::new();
        for v in [10u64, 15, 2] {
            b.extend(v.to_ne_bytes());
        }
        for v in [7u32, 5, 9, 9, 0, 1] {
            b.extend(v.to_ne_bytes());
        }
        b.extend([0u8; 8]);
        for s in ["java", "kworker/0:1", ""] {
            let mut c = [0u8; COMM];
            c[..s.len()].copy_from_slice(s.as_bytes());
            b.extend(c);
        }
        b.extend([0xffu8; 24]);
        assert_eq!(b.len(), ENTRY_SIZE);
        let r = parse_entry(&b).unwrap();
        assert_eq!((r.start, r.end, r.woken, r.tid, r.tgid, r.cpu), (10, None, Some(15), 7, 5, 1));
        assert_eq!((state_letter(r.state), r.comm.as_str()), ('D', "java"));
        assert_eq!(r.waker.map(|w| (w.tid, w.comm)), Some((9, "kworker/0:1".into())));
        assert_eq!(parse_entry(&b[1..]), None);
    }

    #[test]
    fn states_read_as_the_tracepoint_prints_them() {
        assert_eq!(state_letter(0), 'R');
        assert_eq!(state_letter(0x100), 'R');
        assert_eq!(state_letter(1), 'S');
        assert_eq!(state_letter(2), 'D');
        assert_eq!(state_letter(4), 'T');
        assert_eq!(state_letter(8), 't');
        assert_eq!(state_letter(0x80), 'I');
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_read_without_panic(b in proptest::collection::vec(proptest::num::u8::ANY, 0..SIZE + 8)) {
            let _ = parse_event(&b);
            let _ = parse_entry(&b);
        }
        #[test]
        fn any_entry_sized_bytes_read(b in proptest::collection::vec(proptest::num::u8::ANY, ENTRY_SIZE..=ENTRY_SIZE)) {
            proptest::prop_assert!(parse_entry(&b).is_some());
        }
        #[test]
        fn any_record_sized_bytes_read(b in proptest::collection::vec(proptest::num::u8::ANY, SIZE..=SIZE), s in proptest::num::i64::ANY) {
            proptest::prop_assert!(parse_event(&b).is_some());
            let _ = state_letter(s);
        }
    }
}
