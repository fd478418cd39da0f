//! `seqbus-dispatcher CONFIG`: runs this host's dispatcher (reads the downstream, writes the
//! shared-memory ring at `shm.path`; docs/transports.md) until SIGINT or SIGTERM.

use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

fn main() -> ExitCode {
    let Some(path) = std::env::args_os().nth(1) else {
        eprintln!("usage: seqbus-dispatcher CONFIG.toml");
        return ExitCode::from(2);
    };
    let cfg = match seqbus_net::Config::from_path(path.as_ref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("seqbus-dispatcher: {e}");
            return ExitCode::from(2);
        }
    };
    seqbus_net::log_to_stderr("seqbus-dispatcher", log::LevelFilter::Info);
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        if let Err(e) = signal_hook::flag::register(sig, stop.clone()) {
            eprintln!("seqbus-dispatcher: cannot handle signal {sig}: {e}");
            return ExitCode::FAILURE;
        }
    }
    match seqbus_net::run_dispatcher(&cfg, stop) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("seqbus-dispatcher: {e}");
            ExitCode::FAILURE
        }
    }
}
