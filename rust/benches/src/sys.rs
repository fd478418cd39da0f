//! What the benchmark asks of the host: its own network namespace's loopback brought up
//! without the `ip` command, the CPUs it may run on, and the CPU clocks of its threads.

use std::io;

/// `struct ifreq` as `SIOCGIFFLAGS`/`SIOCSIFFLAGS` read and write it: the interface's name and
/// its flags (the rest of the 40-byte union unused).
#[repr(C)]
struct IfreqFlags {
    name: [libc::c_char; libc::IFNAMSIZ],
    flags: libc::c_short,
    _rest: [u8; 22],
}

/// Brings `lo` up (`ip link set lo up` without the `ip` command): a fresh network namespace
/// has its loopback down. Nothing is done when it is already up.
pub fn loopback_up() -> io::Result<()> {
    // SAFETY: a plain socket(2); its fd is closed below on every path
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut req = IfreqFlags {
        name: [0; libc::IFNAMSIZ],
        flags: 0,
        _rest: [0; 22],
    };
    for (d, s) in req.name.iter_mut().zip(b"lo") {
        *d = *s as libc::c_char;
    }
    // SAFETY: `req` is a valid `struct ifreq` (name NUL-terminated, 40 bytes) for both calls
    let result = unsafe {
        if libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut req) < 0 {
            Err(io::Error::last_os_error())
        } else if req.flags & libc::IFF_UP as libc::c_short != 0 {
            Ok(())
        } else {
            req.flags |= libc::IFF_UP as libc::c_short;
            if libc::ioctl(fd, libc::SIOCSIFFLAGS, &req) < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(())
            }
        }
    };
    // SAFETY: `fd` is ours and open
    unsafe { libc::close(fd) };
    result
}

/// The CPUs this process may run on (`sched_getaffinity`), ascending.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is an empty set; sched_getaffinity fills it
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// `0-3,6` for `[0, 1, 2, 3, 6]`.
pub fn cpu_list(cpus: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    out.join(",")
}

/// The host's load average (the first three fields of `/proc/loadavg`).
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// This thread's id (`gettid`).
pub fn gettid() -> i64 {
    // SAFETY: gettid has no arguments and cannot fail
    unsafe { libc::syscall(libc::SYS_gettid) }
}

/// A thread of this process: its id, its name (`comm`) and its CPU time so far, ns (the
/// first field of its `schedstat`: the same clock as `CLOCK_THREAD_CPUTIME_ID`).
#[derive(Debug, Clone)]
pub struct Task {
    pub tid: i64,
    pub comm: String,
    pub cpu_ns: u64,
}

/// Every live thread of this process.
pub fn tasks() -> Vec<Task> {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|t| {
            let tid = t.file_name().to_str()?.parse().ok()?;
            let comm = std::fs::read_to_string(t.path().join("comm")).ok()?;
            let cpu_ns = std::fs::read_to_string(t.path().join("schedstat"))
                .ok()?
                .split_whitespace()
                .next()?
                .parse()
                .ok()?;
            Some(Task {
                tid,
                comm: comm.trim_end().to_string(),
                cpu_ns,
            })
        })
        .collect()
}

/// The CPU each thread alive at both `before` and `after` spent between them, ns; threads
/// that ended in between are missing (their time cannot be read any more).
pub fn spent(before: &[Task], after: &[Task]) -> Vec<Task> {
    after
        .iter()
        .map(|a| {
            let b = before
                .iter()
                .find(|b| b.tid == a.tid)
                .map_or(0, |b| b.cpu_ns);
            Task {
                tid: a.tid,
                comm: a.comm.clone(),
                cpu_ns: a.cpu_ns.saturating_sub(b),
            }
        })
        .collect()
}
