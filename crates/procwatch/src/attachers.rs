//! Who is talking to a JVM through its attach listener right now (`jcmd`, `jmap`, `jstack`,
//! jattach, async-profiler, a monitoring agent): the connections the JVM accepted on its
//! `/tmp/.java_pid<N>` socket, each one's peer socket (the kernel's `sock_diag` netlink
//! interface, as `ss -xp` asks it), and the process holding that peer (its descriptors in
//! `/proc`). So a heap dump asked for with `jcmd 4242 GC.heap_dump` is laid at the door of that
//! `jcmd`, its user and its parent, not of the JVM's "Attach Listener" thread.
//!
//! Invariant: only read: `/proc` and one netlink socket of our own, made in the JVM's network
//! namespace when it has its own (root only). A connection that closed meanwhile is left out.

use crate::process::ProcessInfo;
use std::io;

/// One connection the JVM accepted on its attach socket, and who is at the other end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachClient {
    /// The JVM's end (the accepted socket's inode).
    pub inode: u64,
    /// The client's end.
    pub peer_inode: u64,
    /// The process holding the client's end; `None` when none could be found (it closed, or it
    /// is another user's and we may not look at its descriptors).
    pub process: Option<ProcessInfo>,
}

/// What the tool asked for, in its own words, from its command line: `jcmd 4242 GC.heap_dump
/// /tmp/h.hprof` gives `GC.heap_dump /tmp/h.hprof`; `jmap -dump:file=h <pid>` gives
/// `-dump:file=h`; `jstack <pid>` gives `Thread.print` (what jstack asks for); anything else its
/// arguments as they are.
pub fn asked(cmdline: &[String], jvm_pids: &[i32]) -> String {
    let tool =
        cmdline.first().map(|a| a.rsplit('/').next().unwrap_or(a).to_string()).unwrap_or_default();
    // A java launcher running a tool's class (`java … sun.tools.jcmd.JCmd 42 VM.flags`).
    let mut args: Vec<&str> = cmdline.iter().skip(1).map(String::as_str).collect();
    let mut tool = tool.as_str();
    if let Some(i) = args.iter().position(|a| a.starts_with("sun.tools.") || a.starts_with("jdk."))
    {
        tool = match args[i] {
            a if a.ends_with(".JCmd") => "jcmd",
            a if a.ends_with(".JStack") => "jstack",
            a if a.ends_with(".JMap") => "jmap",
            a if a.ends_with(".JInfo") => "jinfo",
            _ => tool,
        };
        args.drain(..=i);
    }
    let is_pid = |a: &&str| a.parse::<i32>().is_ok_and(|p| jvm_pids.contains(&p));
    let rest: Vec<&str> =
        args.iter().copied().filter(|a| !is_pid(a) && !a.starts_with("-J")).collect();
    match tool {
        "jstack" => {
            let opts: Vec<&str> = rest.iter().copied().filter(|a| a.starts_with('-')).collect();
            if opts.is_empty() {
                "Thread.print".into()
            } else {
                format!("Thread.print {}", opts.join(" "))
            }
        }
        _ => rest.join(" "),
    }
}

/// The attach sockets' accepted connections among `/proc/<pid>/net/unix`'s lines, by inode: a
/// connected socket bound to a `.java_pid` path.
pub fn accepted(net_unix: &str) -> Vec<u64> {
    net_unix
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            // Num RefCount Protocol Flags Type St Inode Path
            let (st, inode, path) = (f.get(5)?, f.get(6)?, f.get(7)?);
            let name = path.rsplit('/').next()?;
            (*st == "03" && name.starts_with(".java_pid")).then(|| inode.parse().ok())?
        })
        .collect()
}

/// The socket inodes among a process's descriptors.
pub fn socket_inodes(pid: i32) -> Vec<u64> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return vec![] };
    dir.flatten()
        .filter_map(|e| {
            let l = std::fs::read_link(e.path()).ok()?;
            l.to_str()?.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()
        })
        .collect()
}

/// The process (other than `except`) holding socket `inode`, by a look through every process's
/// descriptors.
pub fn holder_of(inode: u64, except: i32) -> Option<i32> {
    crate::jvms::pids()
        .into_iter()
        .filter(|p| *p != except)
        .find(|p| socket_inodes(*p).contains(&inode))
}

/// Everyone connected to the attach listener of JVM `pid` now.
pub fn clients(pid: i32) -> io::Result<Vec<AttachClient>> {
    let net = std::fs::read_to_string(format!("/proc/{pid}/net/unix"))?;
    let held = socket_inodes(pid);
    let ours: Vec<u64> = accepted(&net).into_iter().filter(|i| held.contains(i)).collect();
    if ours.is_empty() {
        return Ok(vec![]);
    }
    let diag = Diag::in_netns_of(pid)?;
    let mut out = Vec::new();
    for inode in ours {
        let Some(peer) = diag.peer(inode)? else { continue };
        let process = holder_of(peer, pid).and_then(crate::process::describe);
        out.push(AttachClient { inode, peer_inode: peer, process });
    }
    Ok(out)
}

/// A `NETLINK_SOCK_DIAG` socket, in a given network namespace.
struct Diag {
    fd: std::os::fd::OwnedFd,
}

const SOCK_DIAG_BY_FAMILY: u16 = 20;
const UDIAG_SHOW_PEER: u32 = 4;
const UNIX_DIAG_PEER: u16 = 2;
const NLMSG_ERROR: u16 = 2;

impl Diag {
    fn open() -> io::Result<Diag> {
        use std::os::fd::FromRawFd;
        // SAFETY: plain socket creation; the descriptor is owned below.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
                libc::NETLINK_SOCK_DIAG,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a descriptor just made, owned by nobody else.
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        let tv = libc::timeval { tv_sec: 1, tv_usec: 0 };
        // SAFETY: a timeval of the right size for SO_RCVTIMEO.
        unsafe {
            libc::setsockopt(
                std::os::fd::AsRawFd::as_raw_fd(&fd),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                &tv as *const libc::timeval as *const libc::c_void,
                std::mem::size_of::<libc::timeval>() as u32,
            )
        };
        Ok(Diag { fd })
    }

    /// A diag socket that sees `pid`'s sockets: made in its network namespace when that is not
    /// ours (on a thread of its own, which enters it and ends; the socket stays there).
    fn in_netns_of(pid: i32) -> io::Result<Diag> {
        let ns = |p: &str| std::fs::metadata(p).map(|m| std::os::unix::fs::MetadataExt::ino(&m));
        if ns("/proc/self/ns/net")? == ns(&format!("/proc/{pid}/ns/net"))? {
            return Diag::open();
        }
        let path = format!("/proc/{pid}/ns/net");
        std::thread::spawn(move || -> io::Result<Diag> {
            let f = std::fs::File::open(&path)?;
            // SAFETY: setns on this short-lived thread only, with a namespace descriptor.
            if unsafe { libc::setns(std::os::fd::AsRawFd::as_raw_fd(&f), libc::CLONE_NEWNET) } != 0
            {
                return Err(io::Error::last_os_error());
            }
            Diag::open()
        })
        .join()
        .map_err(|_| io::Error::other("the thread entering the JVM's network namespace failed"))?
    }

    /// The peer of unix socket `inode`, if it has one.
    fn peer(&self, inode: u64) -> io::Result<Option<u64>> {
        use std::os::fd::AsRawFd;
        let mut req = [0u8; 16 + 24];
        let len = req.len() as u32;
        req[0..4].copy_from_slice(&len.to_ne_bytes());
        req[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        req[6..8].copy_from_slice(&(libc::NLM_F_REQUEST as u16).to_ne_bytes());
        req[8..12].copy_from_slice(&(inode as u32).to_ne_bytes());
        // struct unix_diag_req: family, protocol, pad, states, ino, show, cookie[2].
        let b = &mut req[16..];
        b[0] = libc::AF_UNIX as u8;
        b[4..8].copy_from_slice(&u32::MAX.to_ne_bytes());
        b[8..12].copy_from_slice(&(inode as u32).to_ne_bytes());
        b[12..16].copy_from_slice(&UDIAG_SHOW_PEER.to_ne_bytes());
        b[16..24].copy_from_slice(&[0xff; 8]);
        // SAFETY: sending our own buffer to the kernel (sockaddr 0: the kernel).
        let sent = unsafe {
            let mut to: libc::sockaddr_nl = std::mem::zeroed();
            to.nl_family = libc::AF_NETLINK as u16;
            libc::sendto(
                self.fd.as_raw_fd(),
                req.as_ptr() as *const libc::c_void,
                req.len(),
                0,
                &to as *const libc::sockaddr_nl as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_nl>() as u32,
            )
        };
        if sent < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut buf = [0u8; 8192];
        // SAFETY: receiving into our own buffer, of its length.
        let n = unsafe {
            libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr() as *mut libc::c_void, buf.len(), 0)
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(parse_peer(&buf[..n as usize]))
    }
}

/// The peer inode in a `sock_diag` answer about one unix socket (none: an error answer, a socket
/// without a peer, or a damaged message).
pub fn parse_peer(msg: &[u8]) -> Option<u64> {
    let u16_at = |at: usize| msg.get(at..at + 2).map(|b| u16::from_ne_bytes([b[0], b[1]]));
    let u32_at = |at: usize| {
        msg.get(at..at + 4).map(|b| u32::from_ne_bytes(b.try_into().unwrap_or_default()))
    };
    let len = (u32_at(0)? as usize).min(msg.len());
    if u16_at(4)? == NLMSG_ERROR {
        return None;
    }
    // After the 16-byte header, the 16-byte unix_diag_msg, then attributes (4-byte aligned).
    let mut at = 32;
    while at + 4 <= len {
        let (alen, kind) = (u16_at(at)? as usize, u16_at(at + 2)?);
        if alen < 4 {
            return None;
        }
        if kind == UNIX_DIAG_PEER && alen >= 8 {
            return u32_at(at + 4).map(u64::from);
        }
        at += (alen + 3) & !3;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(s: &str) -> Vec<String> {
        s.split(' ').map(String::from).collect()
    }

    #[test]
    fn what_a_tool_asked_is_said_in_its_own_words() {
        let pids = [4242];
        assert_eq!(
            asked(&line("/usr/bin/jcmd 4242 GC.heap_dump /tmp/h.hprof"), &pids),
            "GC.heap_dump /tmp/h.hprof"
        );
        assert_eq!(asked(&line("jstack 4242"), &pids), "Thread.print");
        assert_eq!(asked(&line("jstack -l 4242"), &pids), "Thread.print -l");
        assert_eq!(
            asked(&line("jmap -dump:live,file=h.hprof 4242"), &pids),
            "-dump:live,file=h.hprof"
        );
        assert_eq!(
            asked(
                &line(
                    "/opt/jdk/bin/java -Xshare:auto -J-Dx=y sun.tools.jcmd.JCmd 4242 Thread.print"
                ),
                &pids
            ),
            "Thread.print"
        );
        assert_eq!(asked(&line("asprof -d 5 4242"), &pids), "-d 5");
        assert_eq!(asked(&[], &pids), "");
    }

    #[test]
    fn accepted_attach_connections_are_read_from_net_unix() {
        let net = "Num       RefCount Protocol Flags    Type St Inode Path\n\
00000000ce230fe5: 00000003 00000000 00000000 0001 03 18795 /tmp/.java_pid15838.tmp\n\
00000000e9afa531: 00000002 00000000 00010000 0001 01 18793 /tmp/.java_pid15838.tmp\n\
00000000aaaaaaaa: 00000003 00000000 00000000 0001 03 17000 /run/other.sock\n\
00000000bbbbbbbb: 00000003 00000000 00000000 0001 03 17001\n";
        assert_eq!(accepted(net), [18795]);
        assert!(accepted("").is_empty());
    }

    #[test]
    fn a_socket_pair_is_found_from_either_end() {
        use std::os::unix::net::UnixStream;
        let (a, b) = UnixStream::pair().unwrap();
        let me = std::process::id() as i32;
        let ino = |s: &UnixStream| {
            let fd = std::os::fd::AsRawFd::as_raw_fd(s);
            std::fs::read_link(format!("/proc/self/fd/{fd}"))
                .unwrap()
                .to_str()
                .unwrap()
                .trim_start_matches("socket:[")
                .trim_end_matches(']')
                .parse::<u64>()
                .unwrap()
        };
        let (ia, ib) = (ino(&a), ino(&b));
        assert!(socket_inodes(me).contains(&ia));
        let d = Diag::open().unwrap();
        assert_eq!(d.peer(ia).unwrap(), Some(ib));
        assert_eq!(d.peer(ib).unwrap(), Some(ia));
        assert_eq!(d.peer(u32::MAX as u64 - 7).unwrap(), None, "no such socket");
        assert_eq!(holder_of(ib, -1), Some(me));
    }

    #[test]
    fn damaged_diag_answers_give_no_peer() {
        assert_eq!(parse_peer(&[]), None);
        assert_eq!(parse_peer(&[0xff; 40]), None);
        let mut m = vec![0u8; 40];
        m[0..4].copy_from_slice(&40u32.to_ne_bytes());
        m[32..34].copy_from_slice(&8u16.to_ne_bytes());
        m[34..36].copy_from_slice(&UNIX_DIAG_PEER.to_ne_bytes());
        m[36..40].copy_from_slice(&77u32.to_ne_bytes());
        assert_eq!(parse_peer(&m), Some(77));
        m[32..34].copy_from_slice(&0u16.to_ne_bytes());
        assert_eq!(parse_peer(&m), None, "a zero-length attribute ends the walk");
    }

    mod properties {
        use super::super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn any_bytes_are_an_answer_or_none_never_a_panic(b in proptest::collection::vec(any::<u8>(), 0..128)) {
                let _ = parse_peer(&b);
            }

            #[test]
            fn any_net_unix_text_parses_without_a_panic(s in ".{0,300}") {
                let _ = accepted(&s);
            }

            #[test]
            fn any_command_line_is_said_without_a_panic(args in proptest::collection::vec(".{0,12}", 0..6)) {
                let _ = asked(&args, &[1]);
            }
        }
    }
}
