//! The Rust core's log records (`log` crate: the roles' and node clients' events, `seqbus-net`)
//! into Python's `logging` through `pyo3-log`: target `seqbus::node` becomes the logger
//! `seqbus.node`, so they reach whatever handlers the application configured for the
//! `seqbus` hierarchy, at the levels it set (checked on every record: the records are events,
//! a few per second at most).

use std::sync::atomic::{AtomicBool, Ordering};

use log::{LevelFilter, Log, Metadata, Record};
use pyo3::prelude::*;

/// Records go to Python until the interpreter begins to exit (`log_to_python(False)`, from an
/// `atexit` handler of `seqbus.node`): a Rust thread still running then must not wait for a
/// GIL that is going away.
static TO_PYTHON: AtomicBool = AtomicBool::new(true);

struct ToPython(pyo3_log::Logger);

impl Log for ToPython {
    fn enabled(&self, m: &Metadata<'_>) -> bool {
        TO_PYTHON.load(Ordering::Relaxed) && self.0.enabled(m)
    }

    fn log(&self, r: &Record<'_>) {
        if TO_PYTHON.load(Ordering::Relaxed) {
            self.0.log(r);
        }
    }

    fn flush(&self) {}
}

/// Installs the bridge: the `seqbus` targets from debug level up, other crates' warnings and
/// errors (Python's logger levels filter further). Another logger installed first keeps its
/// place.
pub fn install(py: Python<'_>) -> PyResult<()> {
    let logger = pyo3_log::Logger::new(py, pyo3_log::Caching::Loggers)?
        .filter(LevelFilter::Warn)
        .filter_target("seqbus".to_owned(), LevelFilter::Debug);
    if log::set_boxed_logger(Box::new(ToPython(logger))).is_ok() {
        log::set_max_level(LevelFilter::Debug);
    }
    Ok(())
}

/// Whether the core's log records go to Python `logging` (on from the import; `seqbus.node`
/// turns it off when the interpreter exits).
#[pyfunction]
pub fn log_to_python(on: bool) {
    TO_PYTHON.store(on, Ordering::Relaxed);
}
