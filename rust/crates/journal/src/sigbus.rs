//! A write into a mapped segment that someone else made shorter (a tool that truncated the
//! live file) faults with SIGBUS: the process cannot go on, but it should say why. While a
//! segment is mapped, its address range and path are registered here; a SIGBUS inside a
//! registered range writes one line naming the file to stderr, then the signal takes its
//! course (the handler installed before this one, or the default: the process ends by SIGBUS).
//! Anything else is handed to the previous handler untouched.

use std::mem::MaybeUninit;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use std::sync::Once;

/// Mappings watched at once (one per open journal: a sequencer, a following replayer and a
/// bridge in one process are three); past this, a mapping goes unwatched.
const SLOTS: usize = 16;

static START: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
static END: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
static MESSAGE: [AtomicPtr<u8>; SLOTS] = [const { AtomicPtr::new(std::ptr::null_mut()) }; SLOTS];
static MESSAGE_LEN: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
static TAKEN: [AtomicBool; SLOTS] = [const { AtomicBool::new(false) }; SLOTS];

static INSTALL: Once = Once::new();
/// The disposition of SIGBUS before ours, written once before ours is installed.
static mut PREVIOUS: MaybeUninit<libc::sigaction> = MaybeUninit::uninit();

/// A registered mapping; dropping it ends the watch.
#[derive(Debug)]
pub(crate) struct Watch {
    slot: usize,
    /// The line the handler writes, owned here: the handler reads it through [`MESSAGE`].
    _message: Box<[u8]>,
}

impl Drop for Watch {
    fn drop(&mut self) {
        START[self.slot].store(0, Ordering::SeqCst);
        END[self.slot].store(0, Ordering::SeqCst);
        MESSAGE_LEN[self.slot].store(0, Ordering::SeqCst);
        MESSAGE[self.slot].store(std::ptr::null_mut(), Ordering::SeqCst);
        TAKEN[self.slot].store(false, Ordering::SeqCst);
    }
}

/// Watches `[ptr, ptr + len)`, the mapping of segment `path`; None when every slot is taken
/// or the handler could not be installed (the mapping works the same, unwatched).
pub(crate) fn watch(ptr: *mut u8, len: usize, path: &Path) -> Option<Watch> {
    if !install() {
        return None;
    }
    let slot = (0..SLOTS).find(|&i| {
        TAKEN[i]
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    })?;
    let mut message: Box<[u8]> = format!(
        "seqbus journal: SIGBUS writing {}: the segment was cut short under this process \
         (truncated by another one?); it stops here\n",
        path.display()
    )
    .into_bytes()
    .into_boxed_slice();
    MESSAGE[slot].store(message.as_mut_ptr(), Ordering::SeqCst);
    MESSAGE_LEN[slot].store(message.len(), Ordering::SeqCst);
    START[slot].store(ptr as usize, Ordering::SeqCst);
    END[slot].store(ptr as usize + len, Ordering::SeqCst);
    Some(Watch {
        slot,
        _message: message,
    })
}

fn install() -> bool {
    static OK: AtomicBool = AtomicBool::new(false);
    INSTALL.call_once(|| {
        // SAFETY: sigaction with a zeroed struct and an extern "C" handler; PREVIOUS is
        // written here, before the handler that reads it is installed, and never again.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_sigbus as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO;
            libc::sigemptyset(&mut action.sa_mask);
            let previous = &raw mut PREVIOUS;
            if libc::sigaction(libc::SIGBUS, std::ptr::null(), (*previous).as_mut_ptr()) != 0 {
                return;
            }
            if libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut()) == 0 {
                OK.store(true, Ordering::SeqCst);
            }
        }
    });
    OK.load(Ordering::SeqCst)
}

extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // only async-signal-safe work: atomic loads, write(2), sigaction(2)
    // SAFETY: the kernel passes a valid siginfo_t for an SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    for i in 0..SLOTS {
        let (start, end) = (
            START[i].load(Ordering::SeqCst),
            END[i].load(Ordering::SeqCst),
        );
        if start <= addr && addr < end {
            let (p, n) = (
                MESSAGE[i].load(Ordering::SeqCst),
                MESSAGE_LEN[i].load(Ordering::SeqCst),
            );
            if !p.is_null() {
                // SAFETY: p..p+n is the Watch's message, alive while its range is registered.
                unsafe { libc::write(2, p.cast(), n) };
            }
            break;
        }
    }
    // SAFETY: PREVIOUS was written before this handler was installed.
    let previous: &libc::sigaction = unsafe { &*(&raw const PREVIOUS).cast::<libc::sigaction>() };
    let handler = previous.sa_sigaction;
    if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
        // back to the default: the faulting access runs again and the process ends by SIGBUS
        // SAFETY: restoring the previous (default) disposition.
        unsafe { libc::sigaction(libc::SIGBUS, previous, std::ptr::null_mut()) };
        if handler == libc::SIG_IGN {
            // an ignored SIGBUS from a fault cannot be ignored: end as the default would
            // SAFETY: a plain default disposition.
            unsafe { libc::signal(libc::SIGBUS, libc::SIG_DFL) };
        }
    } else if previous.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: a handler installed with SA_SIGINFO takes these three arguments.
        let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { std::mem::transmute(handler) };
        f(sig, info, ctx);
    } else {
        // SAFETY: a plain handler takes the signal number.
        let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(handler) };
        f(sig);
    }
}
