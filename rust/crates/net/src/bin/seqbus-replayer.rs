//! `seqbus-replayer CONFIG`: runs a standalone replayer (`[replayer]` of the configuration)
//! until SIGINT or SIGTERM.

use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

fn main() -> ExitCode {
    let Some(path) = std::env::args_os().nth(1) else {
        eprintln!("usage: seqbus-replayer CONFIG.toml");
        return ExitCode::from(2);
    };
    let cfg = match seqbus_net::Config::from_path(path.as_ref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("seqbus-replayer: {e}");
            return ExitCode::from(2);
        }
    };
    seqbus_net::log_to_stderr("seqbus-replayer", log::LevelFilter::Info);
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        if let Err(e) = signal_hook::flag::register(sig, stop.clone()) {
            eprintln!("seqbus-replayer: cannot handle signal {sig}: {e}");
            return ExitCode::FAILURE;
        }
    }
    match seqbus_net::run_replayer(&cfg, stop) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("seqbus-replayer: {e}");
            ExitCode::FAILURE
        }
    }
}
