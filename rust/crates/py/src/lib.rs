//! `seqbus._core`: the Python binding of the seqbus Rust core. It only converts values and
//! releases the GIL around blocking calls; the behaviour lives in the core crates.

use pyo3::prelude::*;

mod batch;
mod client;
mod errors;
mod filter;
mod journal;
mod sim;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<batch::Cursor>()?;
    m.add_class::<client::NodeClient>()?;
    m.add_class::<client::Sequencer>()?;
    m.add_class::<client::Replayer>()?;
    m.add_class::<client::Dispatcher>()?;
    m.add_class::<sim::SimBus>()?;
    m.add_class::<filter::PyTopicFilter>()?;
    m.add_function(wrap_pyfunction!(client::check_config, m)?)?;
    m.add_function(wrap_pyfunction!(client::status_endpoints, m)?)?;
    m.add_function(wrap_pyfunction!(journal::verify_journal, m)?)?;
    m.add_function(wrap_pyfunction!(journal::repair_journal, m)?)?;
    m.add_function(wrap_pyfunction!(batch::walk_batch, m)?)?;
    m.add("TIME_GRID_NS", filter::TIME_GRID_NS)?;
    m.add("BUS_SCHEMA_ID", filter::BUS_SCHEMA_ID)?;
    m.add(
        "ADMIN_COMMAND_TEMPLATE_ID",
        filter::ADMIN_COMMAND_TEMPLATE_ID,
    )?;
    m.add("ADMIN_REPLY_TEMPLATE_ID", filter::ADMIN_REPLY_TEMPLATE_ID)?;
    m.add("STOP_END", batch::STOP_END)?;
    m.add("STOP_RECORD", batch::STOP_RECORD)?;
    m.add("STOP_TIMER", batch::STOP_TIMER)?;
    m.add("STOP_UNKNOWN", batch::STOP_UNKNOWN)?;
    seqbus_archive::python::register(m)?;
    Ok(())
}
