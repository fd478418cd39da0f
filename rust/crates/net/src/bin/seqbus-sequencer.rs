//! `seqbus-sequencer CONFIG`: runs the sequencer (and, when configured, the in-process
//! replayer) until SIGINT or SIGTERM.

use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

fn main() -> ExitCode {
    let Some(path) = std::env::args_os().nth(1) else {
        eprintln!("usage: seqbus-sequencer CONFIG.toml");
        return ExitCode::from(2);
    };
    let cfg = match seqbus_net::Config::from_path(path.as_ref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("seqbus-sequencer: {e}");
            return ExitCode::from(2);
        }
    };
    seqbus_net::log_to_stderr("seqbus-sequencer", log::LevelFilter::Info);
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        if let Err(e) = signal_hook::flag::register(sig, stop.clone()) {
            eprintln!("seqbus-sequencer: cannot handle signal {sig}: {e}");
            return ExitCode::FAILURE;
        }
    }
    match seqbus_net::run_sequencer(&cfg, stop) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("seqbus-sequencer: {e}");
            ExitCode::FAILURE
        }
    }
}
