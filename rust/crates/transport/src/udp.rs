//! UDP: sockets (unicast, multicast), batched sends (`sendmmsg`) and receives (`recvmmsg`),
//! and the stream over them — MoldUDP64 packets multicast to a group or sent to each
//! subscriber ([`UdpPublisher`]) and read by a node or a dispatcher ([`UdpFeed`]).

use std::io;
use std::mem::MaybeUninit;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::{AsRawFd, RawFd};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use crate::stream::{Feed, Publisher, Received};

/// A non-blocking UDP socket bound to `addr` with a receive buffer of `rcvbuf` bytes.
pub fn bind(addr: SocketAddr, rcvbuf: usize) -> io::Result<Socket> {
    let s = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    set_rcvbuf(&s, rcvbuf);
    s.set_nonblocking(true)?;
    s.bind(&addr.into())?;
    Ok(s)
}

/// Asks for `bytes` of receive buffer, beyond `rmem_max` when privileged (SO_RCVBUFFORCE).
fn set_rcvbuf(s: &Socket, bytes: usize) {
    let v = bytes.min(i32::MAX as usize) as libc::c_int;
    // SAFETY: setsockopt with a valid fd and a pointer to a c_int of the given size.
    let forced = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            &v as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if forced != 0 {
        let _ = s.set_recv_buffer_size(bytes);
    }
}

/// Asks for `bytes` of send buffer, beyond `wmem_max` when privileged (SO_SNDBUFFORCE).
pub fn set_sndbuf(s: &Socket, bytes: usize) {
    let v = bytes.min(i32::MAX as usize) as libc::c_int;
    // SAFETY: setsockopt with a valid fd and a pointer to a c_int of the given size.
    let forced = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDBUFFORCE,
            &v as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if forced != 0 {
        let _ = s.set_send_buffer_size(bytes);
    }
}

/// Sends one datagram on a non-blocking socket, waiting (at most `patience`) while its send
/// buffer is full. Ok(false) when it could not be sent in time or the peer is unreachable
/// (the protocol above retries).
pub fn send_patiently(
    s: &Socket,
    d: &[u8],
    to: &SockAddr,
    patience: std::time::Duration,
) -> io::Result<bool> {
    let end = std::time::Instant::now() + patience;
    loop {
        match s.send_to(d, to) {
            Ok(_) => return Ok(true),
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if std::time::Instant::now() >= end {
                    return Ok(false);
                }
                let mut p = libc::pollfd {
                    fd: s.as_raw_fd(),
                    events: libc::POLLOUT,
                    revents: 0,
                };
                // SAFETY: one valid pollfd for the duration of the call.
                unsafe { libc::poll(&mut p, 1, 1) };
            }
            Err(e) => return Err(e),
        }
    }
}

/// A non-blocking socket receiving the multicast `group` on interface `iface`.
pub fn multicast_receiver(
    group: SocketAddrV4,
    iface: Ipv4Addr,
    rcvbuf: usize,
) -> io::Result<Socket> {
    let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    s.set_reuse_address(true)?;
    s.set_reuse_port(true)?;
    set_rcvbuf(&s, rcvbuf);
    s.set_nonblocking(true)?;
    s.bind(&SocketAddr::V4(group).into())?;
    s.join_multicast_v4(group.ip(), &iface)?;
    Ok(s)
}

/// A socket sending multicast out of `iface` (looped back to local receivers).
pub fn multicast_sender(iface: Ipv4Addr, ttl: u32) -> io::Result<Socket> {
    multicast_sender_at(SocketAddrV4::new(iface, 0), iface, ttl)
}

/// [`multicast_sender`] whose packets come from `from` (a cluster member's `publish`
/// address, by which nodes fence a deposed leader).
pub fn multicast_sender_at(from: SocketAddrV4, iface: Ipv4Addr, ttl: u32) -> io::Result<Socket> {
    let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    s.bind(&SocketAddr::V4(from).into())?;
    s.set_multicast_if_v4(&iface)?;
    s.set_multicast_loop_v4(true)?;
    s.set_multicast_ttl_v4(ttl)?;
    set_sndbuf(&s, 8 << 20);
    Ok(s)
}

/// Receives one datagram without blocking: `Ok(None)` when none is waiting.
pub fn try_recv(s: &Socket, buf: &mut [u8]) -> io::Result<Option<(usize, SockAddr)>> {
    // SAFETY: MaybeUninit<u8> has the layout of u8; recv_from only writes initialised bytes.
    let ubuf = unsafe { &mut *(buf as *mut [u8] as *mut [MaybeUninit<u8>]) };
    match s.recv_from(ubuf) {
        Ok((n, from)) => Ok(Some((n, from))),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(None),
        // an ICMP port unreachable from an earlier send to a closed port
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Ok(None),
        Err(e) => Err(e),
    }
}

/// Datagrams waiting to be sent, back to back in one buffer.
#[derive(Debug, Default)]
pub struct Outbox {
    buf: Vec<u8>,
    ends: Vec<usize>,
}

impl Outbox {
    pub fn push(&mut self, d: &[u8]) {
        self.buf.extend_from_slice(d);
        self.ends.push(self.buf.len());
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn clear(&mut self) {
        self.buf.clear();
        self.ends.clear();
    }

    /// The datagrams, in order.
    pub fn datagrams(&self) -> impl Iterator<Item = &[u8]> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(self.ends.iter().copied())
            .map(|(a, b)| &self.buf[a..b])
    }

    /// Sends every datagram to `dest` with as few `sendmmsg` calls as possible, then clears.
    /// A full socket buffer is waited out; other errors are returned.
    pub fn send_to(&mut self, s: &Socket, dest: &SockAddr) -> io::Result<()> {
        self.send_via(s, Some(dest))
    }

    /// [`Outbox::send_to`] on a connected socket, to its peer: the kernel uses the route the
    /// socket keeps, where each `sendto` looks one up (and, for multicast, allocates it anew).
    pub fn send_connected(&mut self, s: &Socket) -> io::Result<()> {
        self.send_via(s, None)
    }

    fn send_via(&mut self, s: &Socket, dest: Option<&SockAddr>) -> io::Result<()> {
        if self.ends.len() == 1 {
            // one datagram (the latency case): a plain send, no header arrays to build
            loop {
                let sent = match dest {
                    Some(dest) => s.send_to(&self.buf, dest),
                    None => s.send(&self.buf),
                };
                match sent {
                    Ok(_) => break,
                    Err(e) => match e.kind() {
                        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => {
                            std::thread::yield_now()
                        }
                        io::ErrorKind::ConnectionRefused => {}
                        _ => {
                            self.clear();
                            return Err(e);
                        }
                    },
                }
            }
            self.clear();
            return Ok(());
        }
        let mut iov: Vec<libc::iovec> = Vec::with_capacity(self.ends.len());
        let mut start = 0;
        for &end in &self.ends {
            iov.push(libc::iovec {
                iov_base: self.buf[start..].as_ptr() as *mut libc::c_void,
                iov_len: end - start,
            });
            start = end;
        }
        let mut msgs: Vec<libc::mmsghdr> = iov
            .iter_mut()
            .map(|v| {
                // SAFETY: an all-zero mmsghdr is a valid empty header.
                let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
                if let Some(dest) = dest {
                    h.msg_hdr.msg_name = dest.as_ptr() as *mut libc::c_void;
                    h.msg_hdr.msg_namelen = dest.len();
                }
                h.msg_hdr.msg_iov = v as *mut libc::iovec;
                h.msg_hdr.msg_iovlen = 1;
                h
            })
            .collect();
        let mut done = 0;
        while done < msgs.len() {
            let batch = (msgs.len() - done).min(1024);
            // SAFETY: msgs[done..done+batch] are valid headers pointing at live buffers.
            let n = unsafe {
                libc::sendmmsg(
                    s.as_raw_fd(),
                    msgs[done..].as_mut_ptr(),
                    batch as libc::c_uint,
                    0,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => {
                        std::thread::yield_now();
                        continue;
                    }
                    io::ErrorKind::ConnectionRefused => continue,
                    _ => {
                        self.clear();
                        return Err(e);
                    }
                }
            }
            done += n as usize;
        }
        self.clear();
        Ok(())
    }

    /// Sends every datagram to each of `dests`, then clears.
    pub fn send_to_all(&mut self, s: &Socket, dests: &[SockAddr]) -> io::Result<()> {
        if dests.len() == 1 {
            return self.send_to(s, &dests[0]);
        }
        let buf = std::mem::take(&mut self.buf);
        let ends = std::mem::take(&mut self.ends);
        for d in dests {
            self.buf.clone_from(&buf);
            self.ends.clone_from(&ends);
            self.send_to(s, d)?;
        }
        Ok(())
    }
}

/// Datagrams received with one `recvmmsg` call: `slots` buffers of `slot_len` bytes.
/// A datagram longer than its slot is dropped (counted in [`RecvBatch::truncated`]).
pub struct RecvBatch {
    buf: Vec<u8>,
    slot_len: usize,
    addrs: Vec<libc::sockaddr_storage>,
    iov: Vec<libc::iovec>,
    /// Headers pointing into `buf`, `addrs` and `iov` (heap memory: stable when moved).
    msgs: Vec<libc::mmsghdr>,
    count: usize,
    /// Datagrams came back to back: `recvmmsg`; otherwise one `recvmsg`, which costs less
    /// when datagrams arrive one at a time (a `recvmmsg` that got one tries for a second).
    batching: bool,
    /// The previous call received something.
    busy: bool,
    /// Datagrams dropped because they did not fit their slot.
    pub truncated: u64,
}

impl std::fmt::Debug for RecvBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvBatch")
            .field("slots", &self.msgs.len())
            .field("slot_len", &self.slot_len)
            .field("count", &self.count)
            .finish()
    }
}

// SAFETY: the raw pointers point into heap buffers owned by the batch itself.
unsafe impl Send for RecvBatch {}
// SAFETY: shared access only reads.
unsafe impl Sync for RecvBatch {}

impl RecvBatch {
    pub fn new(slots: usize, slot_len: usize) -> RecvBatch {
        let slots = slots.max(1);
        let mut b = RecvBatch {
            buf: vec![0u8; slots * slot_len],
            slot_len,
            // SAFETY: an all-zero sockaddr_storage is a valid (unspecified) address.
            addrs: vec![unsafe { std::mem::zeroed() }; slots],
            iov: Vec::with_capacity(slots),
            msgs: Vec::with_capacity(slots),
            count: 0,
            batching: false,
            busy: false,
            truncated: 0,
        };
        for i in 0..slots {
            b.iov.push(libc::iovec {
                iov_base: b.buf[i * slot_len..].as_mut_ptr() as *mut libc::c_void,
                iov_len: slot_len,
            });
        }
        for i in 0..slots {
            // SAFETY: an all-zero mmsghdr is a valid empty header.
            let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
            h.msg_hdr.msg_name = &mut b.addrs[i] as *mut _ as *mut libc::c_void;
            h.msg_hdr.msg_iov = &mut b.iov[i] as *mut libc::iovec;
            h.msg_hdr.msg_iovlen = 1;
            b.msgs.push(h);
        }
        b
    }

    /// Receives what is waiting (at most one slot each) without blocking; returns how many
    /// datagrams the batch now holds (0: none was waiting). Replaces what it held.
    pub fn recv(&mut self, s: &Socket) -> io::Result<usize> {
        // only the headers this call can fill are made ready (a spinning reader calls this
        // again and again on an empty socket)
        let ready = if self.batching { self.msgs.len() } else { 1 };
        for h in &mut self.msgs[..ready] {
            h.msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as _;
            h.msg_hdr.msg_flags = 0;
        }
        self.count = 0;
        let n = if self.batching {
            // SAFETY: msgs holds valid headers pointing at live buffers of the batch.
            unsafe {
                libc::recvmmsg(
                    s.as_raw_fd(),
                    self.msgs.as_mut_ptr(),
                    self.msgs.len() as libc::c_uint,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                )
            }
        } else {
            // One datagram: `recvfrom`, which the kernel serves without copying in and
            // checking a message header as `recvmsg` does (the cost of every empty look of
            // a spinning reader). MSG_TRUNC makes it return a longer datagram's real length.
            let h = &mut self.msgs[0];
            // SAFETY: the slot and the address storage are live buffers of the batch, of the
            // lengths given.
            let len = unsafe {
                libc::recvfrom(
                    s.as_raw_fd(),
                    self.buf.as_mut_ptr() as *mut libc::c_void,
                    self.slot_len,
                    libc::MSG_DONTWAIT | libc::MSG_TRUNC,
                    h.msg_hdr.msg_name as *mut libc::sockaddr,
                    &mut h.msg_hdr.msg_namelen,
                )
            };
            if len >= 0 {
                let len = len as usize;
                if len > self.slot_len {
                    h.msg_hdr.msg_flags = libc::MSG_TRUNC;
                }
                h.msg_len = len.min(self.slot_len) as libc::c_uint;
                1
            } else {
                -1
            }
        };
        // batch while datagrams keep coming back to back
        self.batching = if self.batching {
            n > 1
        } else {
            n > 0 && self.busy
        };
        self.busy = n > 0;
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock
                | io::ErrorKind::Interrupted
                // an ICMP port unreachable from an earlier send to a closed port
                | io::ErrorKind::ConnectionRefused => Ok(0),
                _ => Err(e),
            };
        }
        self.count = n as usize;
        self.truncated += self.msgs[..self.count]
            .iter()
            .filter(|m| m.msg_hdr.msg_flags & libc::MSG_TRUNC != 0)
            .count() as u64;
        Ok(self.count)
    }

    /// Datagrams held.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Datagram `i` (`i < len()`), or None when it was truncated.
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        let m = &self.msgs[i];
        if m.msg_hdr.msg_flags & libc::MSG_TRUNC != 0 {
            return None;
        }
        let at = i * self.slot_len;
        Some(&self.buf[at..at + (m.msg_len as usize).min(self.slot_len)])
    }

    /// The sender of datagram `i`.
    pub fn from(&self, i: usize) -> SockAddr {
        // SAFETY: the kernel wrote a socket address of `msg_namelen` bytes into the storage.
        unsafe { SockAddr::new(self.addrs[i], self.msgs[i].msg_hdr.msg_namelen) }
    }
}

/// Sends `datagrams` to `to` with `sendmmsg`, waiting (at most `patience` in all) while the
/// send buffer is full. Returns how many were sent: the rest could not be sent in time or the
/// peer is unreachable (the protocol above retries).
pub fn send_all_patiently(
    s: &Socket,
    datagrams: &Outbox,
    to: &SockAddr,
    patience: std::time::Duration,
) -> io::Result<usize> {
    if datagrams.len() == 1 {
        let d = datagrams.datagrams().next().expect("one");
        return send_patiently(s, d, to, patience).map(usize::from);
    }
    let mut iov: Vec<libc::iovec> = datagrams
        .datagrams()
        .map(|d| libc::iovec {
            iov_base: d.as_ptr() as *mut libc::c_void,
            iov_len: d.len(),
        })
        .collect();
    let mut msgs: Vec<libc::mmsghdr> = iov
        .iter_mut()
        .map(|v| {
            // SAFETY: an all-zero mmsghdr is a valid empty header.
            let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
            h.msg_hdr.msg_name = to.as_ptr() as *mut libc::c_void;
            h.msg_hdr.msg_namelen = to.len();
            h.msg_hdr.msg_iov = v as *mut libc::iovec;
            h.msg_hdr.msg_iovlen = 1;
            h
        })
        .collect();
    let mut end: Option<std::time::Instant> = None;
    let mut done = 0;
    while done < msgs.len() {
        let batch = (msgs.len() - done).min(1024);
        // SAFETY: msgs[done..done+batch] are valid headers pointing at live buffers.
        let n = unsafe {
            libc::sendmmsg(
                s.as_raw_fd(),
                msgs[done..].as_mut_ptr(),
                batch as libc::c_uint,
                0,
            )
        };
        if n > 0 {
            done += n as usize;
            continue;
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::Interrupted => {}
            // one datagram refused (ICMP from an earlier send): skip it, the protocol retries
            io::ErrorKind::ConnectionRefused => done += 1,
            io::ErrorKind::WouldBlock => {
                let end = *end.get_or_insert_with(|| std::time::Instant::now() + patience);
                if std::time::Instant::now() >= end {
                    return Ok(done);
                }
                let mut p = libc::pollfd {
                    fd: s.as_raw_fd(),
                    events: libc::POLLOUT,
                    revents: 0,
                };
                // SAFETY: one valid pollfd for the duration of the call.
                unsafe { libc::poll(&mut p, 1, 1) };
            }
            _ => return Err(e),
        }
    }
    Ok(done)
}

/// The sequencer's side of the stream over UDP: every packet multicast to the group, or sent
/// to each subscriber (`udp-unicast`).
#[derive(Debug)]
pub struct UdpPublisher {
    socket: Socket,
    dests: Vec<SockAddr>,
    /// The socket is connected to its one destination (the group).
    connected: bool,
}

impl UdpPublisher {
    /// Multicasts to `group` out of `iface`; packets come from `from` when given (a cluster
    /// member's `publish` address, by which nodes fence a deposed leader).
    pub fn multicast(
        group: SocketAddrV4,
        iface: Ipv4Addr,
        ttl: u32,
        from: Option<SocketAddrV4>,
    ) -> io::Result<UdpPublisher> {
        let socket = multicast_sender_at(from.unwrap_or(SocketAddrV4::new(iface, 0)), iface, ttl)?;
        // connected to the group: every packet takes the route the socket holds, where an
        // unconnected sendto to a multicast address allocates and frees a route per packet
        // (measured: docs/benchmarks.md, "Rust core"); the socket sends only
        let group: SockAddr = SocketAddr::V4(group).into();
        socket.connect(&group)?;
        Ok(UdpPublisher {
            socket,
            dests: vec![group],
            connected: true,
        })
    }

    /// Sends to every address of `subscribers`, from `at`.
    pub fn unicast(at: SocketAddr, subscribers: &[SocketAddr]) -> io::Result<UdpPublisher> {
        let socket = bind(at, 1 << 20)?;
        socket.set_nonblocking(false)?;
        set_sndbuf(&socket, 8 << 20);
        Ok(UdpPublisher {
            socket,
            dests: subscribers.iter().map(|&a| a.into()).collect(),
            connected: false,
        })
    }
}

impl Publisher for UdpPublisher {
    fn publish(&mut self, _now_ns: u64, packets: &mut Outbox) -> io::Result<()> {
        if self.connected {
            return packets.send_connected(&self.socket);
        }
        packets.send_to_all(&self.socket, &self.dests)
    }
}

/// Datagrams one `recvmmsg` of a feed takes.
const FEED_SLOTS: usize = 32;

/// A node's or a dispatcher's side of the stream over UDP: a socket joined to the multicast
/// group, or bound to the node's own `udp-unicast` address. Datagrams are received in batches
/// (`recvmmsg`) and handed out one by one as asked, so a node takes no more than it can
/// deliver at once.
#[derive(Debug)]
pub struct UdpFeed {
    socket: Socket,
    rx: RecvBatch,
    at: usize,
}

impl UdpFeed {
    /// Joins `group` on `iface` (SO_REUSEADDR/SO_REUSEPORT: every reader of the host gets
    /// every packet).
    pub fn multicast(group: SocketAddrV4, iface: Ipv4Addr, rcvbuf: usize) -> io::Result<UdpFeed> {
        Ok(UdpFeed::on(multicast_receiver(group, iface, rcvbuf)?))
    }

    /// Receives what the sequencer sends to `listen` (one of `downstream.subscribers`).
    pub fn unicast(listen: SocketAddr, rcvbuf: usize) -> io::Result<UdpFeed> {
        Ok(UdpFeed::on(bind(listen, rcvbuf)?))
    }

    fn on(socket: Socket) -> UdpFeed {
        UdpFeed {
            socket,
            rx: RecvBatch::new(FEED_SLOTS, 65_536),
            at: 0,
        }
    }
}

impl Feed for UdpFeed {
    fn read(
        &mut self,
        _now_ns: u64,
        max: usize,
        f: &mut dyn FnMut(Received<'_>),
    ) -> io::Result<usize> {
        let mut n = 0;
        while n < max {
            if self.at >= self.rx.len() {
                self.at = 0;
                if self.rx.recv(&self.socket)? == 0 {
                    break;
                }
            }
            let i = self.at;
            self.at += 1;
            n += 1;
            f(Received {
                data: self.rx.get(i),
                from: self.rx.from(i).as_socket(),
            });
        }
        Ok(n)
    }

    fn fd(&self) -> Option<RawFd> {
        Some(self.socket.as_raw_fd())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> (Socket, Socket, SockAddr) {
        let rx = bind("127.0.0.1:0".parse().unwrap(), 1 << 20).unwrap();
        let tx = bind("127.0.0.1:0".parse().unwrap(), 1 << 20).unwrap();
        let to = rx.local_addr().unwrap();
        (rx, tx, to)
    }

    /// Whether one datagram comes by `recvfrom` or several by `recvmmsg`, each is whole, from
    /// its sender, and one longer than its slot is dropped and counted.
    #[test]
    fn recv_batch_reads_single_and_back_to_back_datagrams_and_counts_truncated() {
        let (rx, tx, to) = pair();
        let from = tx.local_addr().unwrap();
        let mut b = RecvBatch::new(4, 16);
        assert_eq!(b.recv(&rx).unwrap(), 0);
        tx.send_to(b"one", &to).unwrap();
        assert_eq!(b.recv(&rx).unwrap(), 1);
        assert_eq!(b.get(0), Some(&b"one"[..]));
        assert_eq!(b.from(0).as_socket(), from.as_socket());
        // a datagram longer than the slot, alone
        tx.send_to(&[9u8; 40], &to).unwrap();
        assert_eq!(b.recv(&rx).unwrap(), 1);
        assert_eq!(b.get(0), None);
        assert_eq!(b.truncated, 1);
        // back to back: the batch switches to recvmmsg (it was busy last time)
        for d in [&b"a"[..], &[7u8; 17][..], &b"bc"[..]] {
            tx.send_to(d, &to).unwrap();
        }
        let mut seen = Vec::new();
        for _ in 0..4 {
            let n = b.recv(&rx).unwrap();
            for i in 0..n {
                seen.push(b.get(i).map(<[u8]>::to_vec));
                assert_eq!(b.from(i).as_socket(), from.as_socket());
            }
        }
        assert_eq!(seen, vec![Some(b"a".to_vec()), None, Some(b"bc".to_vec())]);
        assert_eq!(b.truncated, 2);
    }

    /// An outbox sends through a connected socket to its peer, one datagram or several.
    #[test]
    fn connected_outbox_sends_one_and_many() {
        let (rx, tx, to) = pair();
        tx.connect(&to).unwrap();
        let mut out = Outbox::default();
        out.push(b"x");
        out.send_connected(&tx).unwrap();
        out.push(b"y");
        out.push(b"zz");
        out.send_connected(&tx).unwrap();
        assert!(out.is_empty());
        let mut b = RecvBatch::new(4, 16);
        let mut seen = Vec::new();
        for _ in 0..100 {
            let n = b.recv(&rx).unwrap();
            seen.extend((0..n).map(|i| b.get(i).unwrap().to_vec()));
            if seen.len() == 3 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(seen, vec![b"x".to_vec(), b"y".to_vec(), b"zz".to_vec()]);
    }
}
